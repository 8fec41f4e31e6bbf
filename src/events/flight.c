/* The flight recorder. Under `hcguard run`, the launcher names a file in
 * HCGUARD_FLIGHT; the program's hcguard maps it shared and keeps in it what
 * must outlive the process: every thread's event ring (with its exact
 * counters), the call pools' launch counts, the collector's own counts,
 * and where the log and the trace are. The kernel keeps the file's pages
 * however the process ends (SIGKILL included); the launcher, the program's
 * parent, then writes the events still in the rings to the log and the
 * trace and prints a summary of the counts, unless the program finished
 * normally and did so itself.
 *
 * The process that maps it first owns it; the same process after exec
 * starts it afresh (its image before wrote everything out); any other
 * process (a fork child, something the program started) does not use it:
 * a fork child turns its mapping into a private copy at once. */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "events/events.h"

hcg_flight *hcg_g_flight;
static int flight_fd = -1;
static hcg_fileid flight_id; /* the program may close flight_fd (closefrom) */
static size_t flight_bytes;
static size_t pools_bytes; /* the call pools' store, as the caller said */

/* Whether the file at fd is a plain file of this user (not a link to
 * something else: it was opened with O_NOFOLLOW). */
static int ours(int fd)
{
    struct stat st;
    return fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid();
}

static size_t page_up(size_t n)
{
    return (n + 4095) & ~(size_t)4095;
}

static size_t pools_off(void)
{
    return page_up(sizeof(hcg_flight));
}

static size_t rings_off(void)
{
    return page_up(pools_off() + pools_bytes);
}

static void set_up(hcg_flight *f, size_t bytes, size_t ring_bytes, const hcg_config *c)
{
    memset(f, 0, sizeof *f);
    f->bytes = bytes;
    f->ring_bytes = ring_bytes;
    f->pools_off = pools_off();
    f->rings_off = rings_off();
    f->mode = (int32_t)c->mode;
    memcpy(f->log_path, c->log_path, sizeof f->log_path);
    memcpy(f->trace_path, c->trace_path, sizeof f->trace_path);
    memcpy(f->report_path, c->report_path, sizeof f->report_path);
    atomic_store(&f->pid, (int32_t)getpid());
    f->magic = HCG_FLIGHT_MAGIC;
}

/* Whether the file holds the record of another process (read, not
 * mapped: such a file is left exactly as it is, its size included, which
 * the owner's mapping and the launcher's reading depend on). */
static int others(int fd)
{
    uint64_t magic = 0;
    int32_t pid = 0;
    if (pread(fd, &magic, sizeof magic, offsetof(hcg_flight, magic)) != (ssize_t)sizeof magic ||
        pread(fd, &pid, sizeof pid, offsetof(hcg_flight, pid)) != (ssize_t)sizeof pid)
        return 0; /* new (empty): the launcher made it for the first to come */
    return magic == HCG_FLIGHT_MAGIC && pid != 0 && pid != (int32_t)getpid();
}

/* The file made bytes long, and [0, reserve) of it given blocks now: a
 * shared mapping of a hole that the file system cannot fill (a full
 * $TMPDIR, a small tmpfs) raises SIGBUS at the store that touches it, in
 * the program. Never past RLIMIT_FSIZE (its SIGXFSZ would kill the
 * program): 0, or -1 with nothing to use. */
static int make_room(int fd, size_t bytes, size_t reserve)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        (uint64_t)bytes > (uint64_t)rl.rlim_cur)
        return -1;
    sigset_t xfsz, old;
    sigemptyset(&xfsz);
    sigaddset(&xfsz, SIGXFSZ);
    pthread_sigmask(SIG_BLOCK, &xfsz, &old);
    int rc = ftruncate(fd, (off_t)bytes) == 0 && posix_fallocate(fd, 0, (off_t)reserve) == 0
                 ? 0
                 : -1;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

/* Not recording: the lock given back before the descriptor (a fork by
 * another thread meanwhile holds the open file too, and the lock with it:
 * every later process would wait on it). */
static void *give_up(int fd, hcg_flight *f, size_t bytes)
{
    if (f)
        munmap(f, bytes);
    if (fd >= 0) {
        flock(fd, LOCK_UN);
        close(fd);
    }
    return NULL;
}

/* Whether this process is the one the launcher started (its pid, set in
 * HCGUARD_FLIGHT_PID by the launcher's child before its exec; the images
 * it execs keep it): the launcher recovers only that process's record. A
 * process it starts (a helper that uses CUDA and exits, a rank) would
 * otherwise take the record first, and the program, killed, lose its
 * events and summary. Unset: the first to come. */
static int meant_for_me(void)
{
    const char *want = secure_getenv("HCGUARD_FLIGHT_PID");
    if (!want || !want[0])
        return 1;
    char *end;
    long pid = strtol(want, &end, 10);
    return *end == '\0' && pid == (long)getpid();
}

void *hcg_flight_attach(size_t pools_size)
{
    const char *path = secure_getenv("HCGUARD_FLIGHT");
    if (!path || !path[0] || hcg_g_flight || !meant_for_me())
        return NULL;
    int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    /* Every process the program starts inherits HCGUARD_FLIGHT (the ranks
     * of `hcguard run mpirun ...`, a shell's background jobs): several may
     * attach at once. Looking for an owner, sizing, mapping and claiming
     * the file is one step under an exclusive lock, else two processes can
     * both find it new and both record into it (each other's call pools
     * and rings: pointers of one address space followed in another), or
     * one cut it to its size under the other's mapping. */
    while (fd >= 0 && flock(fd, LOCK_EX) != 0 && errno == EINTR)
        ;
    if (fd < 0 || !ours(fd) || others(fd))
        return give_up(fd, NULL, 0);
    pools_bytes = pools_size;
    size_t ring_bytes = hcg_events_ring_bytes();
    size_t bytes = rings_off() + HCG_FLIGHT_MAX_RINGS * ring_bytes;
    hcg_flight *f = MAP_FAILED;
    if (make_room(fd, bytes, rings_off()) == 0)
        f = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (f == MAP_FAILED)
        return give_up(fd, NULL, 0);
    /* A file another process records into is not this one's. */
    int32_t owner = atomic_load(&f->pid);
    if (f->magic == HCG_FLIGHT_MAGIC && owner != 0 && owner != (int32_t)getpid())
        return give_up(fd, f, bytes);
    set_up(f, bytes, ring_bytes, hcg_config_get());
    hcg_output_ids_keep_in(f->out_id);
    hcg_fileid_of(fd, &flight_id);
    flock(fd, LOCK_UN);
    flight_fd = fd;
    flight_bytes = bytes;
    hcg_g_flight = f;
    return (char *)f + f->pools_off;
}

void *hcg_flight_ring(void)
{
    hcg_flight *f = hcg_g_flight;
    if (!f)
        return NULL;
    /* Its blocks given first (two threads may both give those of one
     * slot: harmless), and counted only then: a ring the file system has
     * no room for, or one whose file hcguard no longer holds a descriptor
     * of (the program closed it: the number may be the program's), is the
     * process's own memory, as one past the last. */
    uint32_t i = atomic_load(&f->n_rings);
    do {
        if (i >= HCG_FLIGHT_MAX_RINGS)
            return NULL; /* further rings are the process's own memory */
        off_t at = (off_t)(f->rings_off + (size_t)i * f->ring_bytes);
        if (flight_fd < 0 || !hcg_fileid_is(flight_fd, &flight_id) ||
            posix_fallocate(flight_fd, at, (off_t)f->ring_bytes) != 0)
            return NULL;
    } while (!atomic_compare_exchange_weak(&f->n_rings, &i, i + 1));
    return (char *)f + f->rings_off + (size_t)i * f->ring_bytes;
}

void hcg_flight_finished(int done)
{
    if (hcg_g_flight)
        atomic_store(&hcg_g_flight->finished, done);
}

/* A seqlock of one writer (drains are serialised): odd while written. */
void hcg_flight_note_clock(const hcg_clock_ref_t *ref)
{
    hcg_flight *f = hcg_g_flight;
    if (!f)
        return;
    uint32_t g = atomic_load_explicit(&f->clock_gen, memory_order_relaxed);
    atomic_store_explicit(&f->clock_gen, g + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    f->clock = *ref;
    atomic_store_explicit(&f->clock_gen, g + 2, memory_order_release);
}

int hcg_flight_clock(const hcg_flight *f, hcg_clock_ref_t *ref)
{
    uint32_t g = atomic_load_explicit(&f->clock_gen, memory_order_acquire);
    *ref = f->clock;
    atomic_thread_fence(memory_order_acquire);
    return g != 0 && !(g & 1) && g == atomic_load_explicit(&f->clock_gen, memory_order_relaxed) &&
           ref->ns_per_tick > 0.0 && ref->ns_per_tick < 1e6;
}

/* The record's part in use (header, pools, the rings handed out) copied
 * into anonymous memory at the same address, the rest zero: a private
 * copy made without the file's descriptor. */
static int copy_anonymous(hcg_flight *f)
{
    uint32_t n = atomic_load(&f->n_rings);
    size_t used = page_up(f->rings_off + (n < HCG_FLIGHT_MAX_RINGS ? n : HCG_FLIGHT_MAX_RINGS) *
                                             f->ring_bytes);
    if (used > flight_bytes)
        used = flight_bytes;
    void *tmp = mmap(NULL, used, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (tmp == MAP_FAILED)
        return -1;
    memcpy(tmp, f, used);
    /* Moved over the shared mapping's start (which it unmaps); the tail
     * made anonymous first, while the head is still the record. */
    if ((used < flight_bytes &&
         mmap((char *)f + used, flight_bytes - used, PROT_READ | PROT_WRITE,
              MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED) ||
        mremap(tmp, used, used, MREMAP_MAYMOVE | MREMAP_FIXED, f) == MAP_FAILED) {
        munmap(tmp, used);
        return -1;
    }
    return 0;
}

/* In a fork child, before anything is reset: the same addresses, now a
 * private copy, so that the parent's record is left alone. Mapped from
 * the file while the descriptor is still the record's; the program may
 * have closed it (closefrom) and put a file of its own at its number,
 * which is then neither mapped nor closed. */
void hcg_flight_after_fork(void)
{
    hcg_flight *f = hcg_g_flight;
    if (!f)
        return;
    hcg_g_flight = NULL;
    int ours_still = flight_fd >= 0 && hcg_fileid_is(flight_fd, &flight_id);
    int failed = ours_still ? mmap(f, flight_bytes, PROT_READ | PROT_WRITE,
                                   MAP_PRIVATE | MAP_FIXED, flight_fd, 0) == MAP_FAILED
                            : copy_anonymous(f) != 0;
    if (failed) {
        /* Short of memory only; then stop rather than write into the
         * parent's record. */
        static const char m[] = "==hcguard== cannot copy the flight recorder in a fork child\n";
        (void)!write(2, m, sizeof m - 1);
        _exit(125);
    }
    if (ours_still)
        close(flight_fd);
    flight_fd = -1;
}

const char *hcg_flight_path(const char *field, char out[HCG_PATH_MAX])
{
    memcpy(out, field, HCG_PATH_MAX);
    if (!memchr(out, 0, HCG_PATH_MAX)) {
        hcg_msg("the flight record's file name is not terminated (written over?): ignored");
        return NULL;
    }
    return out[0] ? out : NULL;
}
