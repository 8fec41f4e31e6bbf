/*
 * The event log's reader (src/sinks/jsonl_read.c) as a command, for the
 * end-to-end tests: every record of every log the library wrote must read.
 *
 *   read_log FILE...   prints "read_log: FILE: N lines, H headers"; exit 1
 *                      with the reader's reason if a file does not read
 */
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include "sinks/jsonl_read.h"

static int count_header(const hcg_logrec *r, void *ctx)
{
    if (r->kind == HCG_LOGREC_HEADER)
        ++*(long *)ctx;
    return 0;
}

int main(int argc, char **argv)
{
    int failed = argc < 2;
    for (int i = 1; i < argc; i++) {
        char err[512];
        long headers = 0;
        int fd = open(argv[i], O_RDONLY | O_CLOEXEC);
        long n = fd < 0 ? -1 : hcg_logrec_read_fd(fd, count_header, &headers, err, sizeof err);
        if (fd < 0)
            snprintf(err, sizeof err, "cannot open it");
        else
            close(fd);
        if (n < 0) {
            printf("read_log: %s: %s\n", argv[i], err);
            failed = 1;
        } else {
            printf("read_log: %s: %ld lines, %ld headers\n", argv[i], n, headers);
        }
    }
    return failed;
}
