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
        static char report[HCG_PATH_MAX];
        hcg_report_set_pid(pid);
        if (hcg_flight_path(f->report_path, report))
            hcg_report_continue(report, &f->out_id[HCG_SINK_REPORT]);
        hcg_sinks_recover(f, pid);
        hcg_counts c;
        uint64_t dropped;
        hcg_fn_names_gone();
        hcg_events_recover(f, &c, &dropped);
        hcg_sinks_close();
        if (hcg_config_get()->summary && (hcg_counts_sum(&c, 0, HCG_CNT_N) || f->n_rings))
            hcg_sinks_report_recovered(f, &c, dropped, pid, how);
        *errors = hcg_sinks_errors_of(&c);
        rc = 1;
    }
    munmap((void *)f, (size_t)st.st_size);
    return rc;
}
