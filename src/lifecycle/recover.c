/* The launcher's side of the flight recorder (src/events/flight.c): after
 * the program it ran ended without finishing its record (killed, _exit, a
 * fatal signal), the events left in the record's rings go to the program's
 * log and trace, and its summary is printed from the record's counts. */
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lifecycle/lifecycle.h"

/* A path from the record, copied out whole: the program may have written
 * over its record (a stray write, or a fork child still running), so a
 * path that does not end inside its field is taken as none, rather than
 * read on into the fields after it. */
static const char *record_path(const char *field, char out[HCG_PATH_MAX])
{
    memcpy(out, field, HCG_PATH_MAX);
    if (!memchr(out, 0, HCG_PATH_MAX)) {
        hcg_msg("the flight record's file name is not terminated (written over?): ignored");
        return NULL;
    }
    return out[0] ? out : NULL;
}

int hcg_flight_recover(const char *path, pid_t pid, const char *how, uint64_t *errors)
{
    *errors = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || (size_t)st.st_size < sizeof(hcg_flight)) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    const hcg_flight *f = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (f == MAP_FAILED)
        return -1;
    int rc = 0;
    if (f->magic != HCG_FLIGHT_MAGIC || f->bytes != (uint64_t)st.st_size ||
        f->rings_off + HCG_FLIGHT_MAX_RINGS * f->ring_bytes > f->bytes)
        rc = -1; /* the program never recorded (no hcguard in it, mode off) */
    else if (atomic_load(&f->pid) == (int32_t)pid && !atomic_load(&f->finished)) {
        static char report[HCG_PATH_MAX], log[HCG_PATH_MAX], trace[HCG_PATH_MAX];
        hcg_report_set_pid(pid);
        if (record_path(f->report_path, report))
            hcg_report_continue(report);
        if (record_path(f->log_path, log))
            hcg_jsonl_reopen(log, pid);
        if (record_path(f->trace_path, trace))
            hcg_trace_reopen(trace, pid);
        hcg_counts c;
        uint64_t dropped;
        hcg_fn_names_gone();
        hcg_events_recover(f, &c, &dropped);
        hcg_jsonl_close();
        hcg_trace_close();
        if (hcg_config_get()->summary && (hcg_counts_sum(&c, 0, HCG_CNT_N) || f->n_rings))
            hcg_summary_print_recovered(f, &c, dropped, pid, how);
        *errors = hcg_summary_errors_of(&c);
        rc = 1;
    }
    munmap((void *)f, (size_t)st.st_size);
    return rc;
}
