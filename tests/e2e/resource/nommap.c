/* LD_PRELOAD shim: anonymous mmap of more than NOMMAP_MIN bytes (default
 * 1 MiB) called from libhcguard.so fails with ENOMEM after NOMMAP_SKIP. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
static int seen;
void *mmap(void *a, size_t n, int prot, int flags, int fd, off_t off)
{
    Dl_info di;
    const char *m = getenv("NOMMAP_MIN");
    if ((flags & MAP_ANONYMOUS) && n > (m ? strtoul(m, 0, 0) : (1u << 20)) &&
        dladdr(__builtin_return_address(0), &di) && di.dli_fname && strstr(di.dli_fname, "libhcguard")) {
        const char *s = getenv("NOMMAP_SKIP");
        if (__atomic_fetch_add(&seen, 1, __ATOMIC_SEQ_CST) >= (s ? atoi(s) : 0)) {
            errno = ENOMEM;
            return MAP_FAILED;
        }
    }
    return (void *)syscall(SYS_mmap, a, n, prot, flags, fd, off);
}
