/*
 * The address-space oracle of this process: is [addr, addr + len) mapped,
 * with the permissions a copy needs, and is it device memory?
 *
 * Ranges are classified with the PROCMAP_QUERY ioctl on /proc/self/maps
 * (Linux 6.11+, one system call per VMA), else by parsing /proc/self/maps.
 * Reads of user memory never trust a verdict: they are fault-contained
 * copies (fault.c; nanoseconds when the memory is fine, an error instead
 * of a signal when it is not, whatever happened to it since it was
 * classified), and process_vm_readv only where hcguard's fault handler
 * could not be installed.
 *
 * Each thread keeps the VMAs it learnt in a small cache, so that checking a
 * record of the same buffers again costs no system call. An entry is
 * dropped by any munmap, mremap, mprotect, pkey_mprotect or shmdt made through libc
 * (hcguard wraps them to bump the unmap generation, compared on every use)
 * and is trusted for at most VC_TTL_NS (records found good: RC_TTL_NS): mappings changed past libc's
 * exported functions (glibc's malloc freeing a large block) are noticed
 * once the entry ages out. A verdict that is stale in that window costs
 * no crash: the copy it lets through is fault-contained (copy-faulted).
 *
 * Device memory is asked of the driver only for a range that is not host
 * accessible, to give the better reason. Application threads only (and
 * the uncommon path of the trampoline, where the driver is never asked).
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <sys/uio.h>
#include <unistd.h>

#include "check/check.h"

/* include/uapi/linux/fs.h of Linux 6.11; the installed headers may predate
 * it, so the layout is spelled out here. */
struct hcg_procmap_query {
    uint64_t size;
    uint64_t query_flags;
    uint64_t query_addr;
    uint64_t vma_start;
    uint64_t vma_end;
    uint64_t vma_flags;
    uint64_t vma_page_size;
    uint64_t vma_offset;
    uint64_t inode;
    uint32_t dev_major;
    uint32_t dev_minor;
    uint32_t vma_name_size;
    uint32_t build_id_size;
    uint64_t vma_name_addr;
    uint64_t build_id_addr;
};
_Static_assert(sizeof(struct hcg_procmap_query) == 104, "procmap_query ABI");

#define HCG_PROCFS_IOCTL_MAGIC 'f'
#define HCG_PROCMAP_QUERY _IOWR(HCG_PROCFS_IOCTL_MAGIC, 17, struct hcg_procmap_query)
#define HCG_PQ_VMA_READABLE 0x01u
#define HCG_PQ_VMA_WRITABLE 0x02u

enum { PQ_UNKNOWN = 0, PQ_YES, PQ_NO };
enum { DK_UNKNOWN = 0, DK_HOST, DK_DEVICE };

static atomic_int g_pq_fd = -1;     /* our fd of /proc/self/maps, or -1 */
static atomic_int g_pq_state;       /* PQ_*: does the ioctl work here? */
static atomic_int g_vm_readv_ok = 1; /* 0 once seccomp or the kernel refused */
static atomic_int g_force_fallback;
static _Atomic(hcg_pfn_cuPointerGetAttributes) g_ptr_attrs_override;

/* Guards opening the fd and its identity; never taken on the fast path. */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static dev_t g_fd_dev;
static ino_t g_fd_ino;

/* ---- verdicts ----------------------------------------------------------- */

static hcg_mem perm_verdict(int readable, int writable, int write)
{
    if (!readable)
        return HCG_MEM_NO_READ;
    if (write && !writable)
        return HCG_MEM_NO_WRITE;
    return HCG_MEM_OK;
}

/* A walk over VMAs in address order: cur is the first byte not yet proven,
 * last the final byte of the range (inclusive, so a range may end at the
 * top of the address space). The first VMA that fails decides. */
typedef struct vma_walk {
    uintptr_t cur, last;
    int write;
    int done;
    int any_file; /* a VMA of the range maps a file (or is not known not to) */
    hcg_mem verdict;
} vma_walk;

static void walk_vma(vma_walk *w, uintptr_t start, uintptr_t end, int r,
                     int wr)
{
    if (w->done || end <= w->cur)
        return;
    if (start > w->cur) { /* a hole before this VMA */
        w->verdict = HCG_MEM_UNMAPPED;
        w->done = 1;
        return;
    }
    w->verdict = perm_verdict(r, wr, w->write);
    if (w->verdict != HCG_MEM_OK || end - 1 >= w->last) {
        w->done = 1;
        return;
    }
    w->cur = end;
}

/* ---- the per-thread VMA cache ---------------------------------------- */
#define VC_SLOTS 16
#define VC_TTL_NS 2000000u /* 2 ms on the coarse clock */

typedef struct vc_entry {
    uintptr_t start, end;
    uint64_t gen, t;
    uint8_t r, w, file;
} vc_entry;

static _Thread_local vc_entry vc[VC_SLOTS];
static _Thread_local unsigned vc_next;
_Atomic uint64_t hcg_g_oracle_gen = 1;
static atomic_int vc_disabled;

static uint64_t coarse_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void hcg_oracle_invalidate(void)
{
    atomic_fetch_add_explicit(&hcg_g_oracle_gen, 1, memory_order_release);
}

void hcg_oracle_set_cache(int on)
{
    atomic_store(&vc_disabled, !on);
    hcg_oracle_invalidate();
}

static const vc_entry *vc_find(uintptr_t a, uint64_t gen, uint64_t now)
{
    for (unsigned i = 0; i < VC_SLOTS; i++) {
        const vc_entry *e = &vc[i];
        if (e->gen == gen && a >= e->start && a < e->end && now - e->t <= VC_TTL_NS)
            return e;
    }
    return NULL;
}

static void vc_put(const struct hcg_procmap_query *q, uint64_t gen, uint64_t now)
{
    vc_entry *e = &vc[vc_next++ % VC_SLOTS];
    e->start = (uintptr_t)q->vma_start;
    e->end = (uintptr_t)q->vma_end;
    e->gen = gen;
    e->t = now;
    e->r = (q->vma_flags & HCG_PQ_VMA_READABLE) != 0;
    e->w = (q->vma_flags & HCG_PQ_VMA_WRITABLE) != 0;
    e->file = q->inode != 0 || q->dev_major != 0 || q->dev_minor != 0;
}

/* ---- records checked lately ----------------------------------------------
 * A record found good is remembered with its contents; while no mapping
 * changed through libc (same generation) the same record with the same
 * contents is good again, and checking it costs a compare. That makes the
 * launch path's cost depend on what the program did, not on how fast it
 * ran. Mappings changed past libc (glibc's free unmapping a large block)
 * are noticed once the entry is RC_TTL_NS old, measured on the times the
 * launches give (no clock read of its own; a copy's is its thread's last
 * copy stamp, at most one collector sleep old: run.h, hcg_copy_stamp);
 * a stale verdict in that window costs no crash: the copy it lets through
 * is fault-contained.
 * A record has at most one entry: a stale one is replaced in place. */
#define RC_TTL_NS 100000000u /* 100 ms */

_Thread_local hcg_rc_cache hcg_t_rc;

/* The entry of rec, or NULL. */
static hcg_rc_entry *rc_find(const void *rec)
{
    hcg_rc_cache *rc = &hcg_t_rc;
    for (unsigned i = 0; i < HCG_RC_SLOTS; i++)
        if (rc->e[i].rec == rec)
            return &rc->e[i];
    return NULL;
}

/* e is looked at first next time. The launch's fast path reads the record
 * it names fault-contained before it asks anything else (hcg_oracle_hot),
 * so an entry becomes hot only once the fault handler is installed (it is
 * never removed). */
static void rc_make_hot(const hcg_rc_entry *e)
{
    if (hcg_fault_ready())
        hcg_t_rc.hot = *e;
}

/* Not the entry looked at first (hcg_oracle_recent): the others. */
int hcg_oracle_recent_slow(const void *rec, const hcguard_copy_record *r, uint64_t t)
{
    const hcg_rc_entry *e = rec ? rc_find(rec) : NULL;
    if (!e || !hcg_rc_holds(e, rec, r, t, hcg_oracle_gen()))
        return 0;
    rc_make_hot(e);
    return 1;
}

/* RC_TTL_NS in ticks, at an estimate of their rate that never waits (a
 * launch path: each record validated in full). */
static uint64_t rc_ttl_ticks(void)
{
    double rate = hcg_clock_rate_estimate();
    double ticks = (double)RC_TTL_NS / (rate > 0 ? rate : 1.0);
    return ticks >= 1.0 && ticks < 1e15 ? (uint64_t)ticks : RC_TTL_NS;
}

void hcg_oracle_remember(const void *rec, const hcguard_copy_record *r, uint64_t gen, uint64_t t)
{
    if (atomic_load_explicit(&vc_disabled, memory_order_relaxed) || !rec)
        return;
    hcg_rc_entry *e = rc_find(rec);
    if (!e)
        e = &hcg_t_rc.e[hcg_t_rc.next++ % HCG_RC_SLOTS];
    e->rec = rec;
    e->r = *r;
    e->gen = gen;
    uint64_t ttl = rc_ttl_ticks();
    e->until = t <= UINT64_MAX - ttl ? t + ttl : UINT64_MAX;
    rc_make_hot(e);
}

/* ---- PROCMAP_QUERY ------------------------------------------------------ */

/* Fork hooks (src/lifecycle/fork.c). The fd was inherited from the parent and
 * describes the parent's memory. */
void hcg_oracle_fork_lock(void) { pthread_mutex_lock(&g_lock); }
void hcg_oracle_fork_unlock(void) { pthread_mutex_unlock(&g_lock); }
void hcg_oracle_after_fork(void)
{
    int fd = atomic_exchange(&g_pq_fd, -1);
    if (fd >= 0)
        close(fd);
    pthread_mutex_init(&g_lock, NULL);
}

/* 0, or the errno of the ioctl. */
static int pq_query(int fd, uintptr_t addr, struct hcg_procmap_query *q)
{
    memset(q, 0, sizeof *q);
    q->size = sizeof *q;
    q->query_addr = addr; /* no flags: only the VMA covering addr */
    if (ioctl(fd, HCG_PROCMAP_QUERY, q) == 0)
        return 0;
    return errno ? errno : EIO;
}

/* The kernel supports the ioctl if it describes one of our own variables. */
static int pq_probe(int fd)
{
    struct hcg_procmap_query q;
    uintptr_t here = (uintptr_t)&g_pq_state;
    if (pq_query(fd, here, &q) != 0)
        return -1;
    if (q.vma_start > here || q.vma_end <= here ||
        !(q.vma_flags & HCG_PQ_VMA_READABLE))
        return -1;
    return 0;
}

static int pq_open_locked(void)
{
    struct stat st;
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return -1;
    }
    if (pq_probe(fd) != 0) { /* open works, the ioctl does not: pre-6.11 */
        atomic_store(&g_pq_state, PQ_NO);
        close(fd);
        return -1;
    }
    g_fd_dev = st.st_dev;
    g_fd_ino = st.st_ino;
    atomic_store(&g_pq_state, PQ_YES);
    atomic_store(&g_pq_fd, fd);
    return fd;
}

/* Our fd, opened on first use. stale is an fd found not to be ours any
 * more (the program closed it, maybe reused the number): it is forgotten,
 * never closed, since the number may now belong to the program. */
static int pq_fd(int stale)
{
    int fd = atomic_load(&g_pq_fd);
    if (HCG_LIKELY(fd >= 0 && fd != stale))
        return fd;
    if (atomic_load(&g_pq_state) == PQ_NO)
        return -1;
    hcg_fork_register();
    int cancel = hcg_nocancel_begin(); /* open, under the lock */
    pthread_mutex_lock(&g_lock);
    fd = atomic_load(&g_pq_fd);
    if (fd < 0 || fd == stale) {
        atomic_store(&g_pq_fd, -1);
        fd = pq_open_locked();
    }
    pthread_mutex_unlock(&g_lock);
    hcg_nocancel_end(cancel);
    return fd;
}

static int pq_fd_is_ours(int fd)
{
    struct stat st;
    int ours;
    if (fstat(fd, &st) != 0)
        return 0;
    pthread_mutex_lock(&g_lock);
    ours = atomic_load(&g_pq_fd) == fd && st.st_dev == g_fd_dev &&
           st.st_ino == g_fd_ino;
    pthread_mutex_unlock(&g_lock);
    return ours;
}

/* 0 with w->verdict set, or the errno that stopped the walk. */
static int pq_walk(int fd, vma_walk *w)
{
    struct hcg_procmap_query q;
    int cache = !atomic_load_explicit(&vc_disabled, memory_order_relaxed);
    uint64_t gen = atomic_load_explicit(&hcg_g_oracle_gen, memory_order_acquire);
    uint64_t now = cache ? coarse_ns() : 0;
    while (!w->done) {
        const vc_entry *e = cache ? vc_find(w->cur, gen, now) : NULL;
        if (e) {
            w->any_file |= e->file;
            walk_vma(w, e->start, e->end, e->r, e->w);
            continue;
        }
        int err = pq_query(fd, w->cur, &q);
        if (err == ENOENT) { /* no VMA covers cur */
            w->verdict = HCG_MEM_UNMAPPED;
            return 0;
        }
        if (err)
            return err;
        if (q.vma_start > w->cur || q.vma_end <= w->cur)
            return EIO; /* not the VMA asked for: distrust the answer */
        if (cache)
            vc_put(&q, gen, now);
        w->any_file |= q.inode != 0 || q.dev_major != 0 || q.dev_minor != 0;
        walk_vma(w, (uintptr_t)q.vma_start, (uintptr_t)q.vma_end,
                 (q.vma_flags & HCG_PQ_VMA_READABLE) != 0,
                 (q.vma_flags & HCG_PQ_VMA_WRITABLE) != 0);
    }
    return 0;
}

/* 0 with the verdict in w, or -1: the ioctl cannot answer now. */
static int pq_classify(vma_walk *w)
{
    vma_walk start = *w;
    int fd = pq_fd(-1);
    for (int attempt = 0; fd >= 0 && attempt < 2; attempt++) {
        if (pq_walk(fd, w) == 0)
            return 0;
        *w = start;
        if (pq_fd_is_ours(fd))
            return -1; /* a real error on our own fd: parse this time */
        fd = pq_fd(fd);
    }
    return -1;
}

/* ---- /proc/self/maps ---------------------------------------------------- */

/* Lines are "start-end perms ...", start and end in hex, in address order.
 * Parsed a byte at a time so that a line may span two reads. */
typedef struct maps_parser {
    int field; /* 0 start, 1 end, 2 perms, 3 rest of the line */
    int digits, bad, nperm;
    uintptr_t start, end;
    char perm[2];
} maps_parser;

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static void maps_hex(maps_parser *p, uintptr_t *v, char c, char sep)
{
    int d = hex_digit(c);
    if (c == sep && p->digits > 0) {
        p->field++;
        p->digits = 0;
    } else if (d < 0 || p->digits >= (int)(2 * sizeof(uintptr_t))) {
        p->bad = 1;
        p->field = 3;
    } else {
        *v = (*v << 4) | (uintptr_t)d;
        p->digits++;
    }
}

static void maps_line_end(maps_parser *p, vma_walk *w)
{
    if (!p->bad && p->field == 3 && p->start < p->end)
        walk_vma(w, p->start, p->end, p->perm[0] == 'r', p->perm[1] == 'w');
    memset(p, 0, sizeof *p);
}

static void maps_char(maps_parser *p, vma_walk *w, char c)
{
    if (c == '\n') {
        maps_line_end(p, w);
        return;
    }
    switch (p->field) {
    case 0: maps_hex(p, &p->start, c, '-'); break;
    case 1: maps_hex(p, &p->end, c, ' '); break;
    case 2:
        if (p->nperm < 2)
            p->perm[p->nperm] = c;
        if (++p->nperm == 4)
            p->field = 3;
        break;
    default: break;
    }
}

static ssize_t read_retry(int fd, char *buf, size_t len)
{
    ssize_t n;
    do
        n = read(fd, buf, len);
    while (n < 0 && errno == EINTR);
    return n;
}

/* The map could not be opened (err): said once, kept for the summary. */
static atomic_int maps_unreadable_said;

__attribute__((noinline, cold)) static void maps_unreadable(int err)
{
    if (atomic_exchange(&maps_unreadable_said, 1))
        return;
    hcg_problem("cannot read /proc/self/maps (%s): host-copy records are not checked "
                "against the memory map at enqueue; their copies, fault-contained, skip "
                "what faults when they run", strerror(err));
}

/* What cannot be read or parsed is not proven mapped: UNMAPPED; but a map
 * that cannot be opened at all proves nothing either way (below). */
static void maps_classify(vma_walk *w)
{
    char buf[4096];
    maps_parser p;
    ssize_t n;
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    memset(&p, 0, sizeof p);
    w->verdict = HCG_MEM_UNMAPPED;
    w->any_file = 1; /* not parsed: assume a file may be mapped */
    if (fd < 0) {
        /* Nothing is known (no /proc, every descriptor taken): not a
         * reason to refuse a record. The copy hcguard makes is
         * fault-contained, and unprotected reads refuse (any_file). */
        maps_unreadable(errno);
        w->verdict = HCG_MEM_OK;
        return;
    }
    while (!w->done && (n = read_retry(fd, buf, sizeof buf)) > 0)
        for (ssize_t i = 0; i < n && !w->done; i++)
            maps_char(&p, w, buf[i]);
    close(fd);
    if (!w->done)
        w->verdict = HCG_MEM_UNMAPPED; /* ran past the last VMA */
}

/* ---- device memory ------------------------------------------------------ */

static hcg_pfn_cuPointerGetAttributes ptr_attrs_fn(void)
{
    hcg_pfn_cuPointerGetAttributes f = atomic_load(&g_ptr_attrs_override);
    hcg_driver *d;
    if (f)
        return f;
    d = hcg_driver_peek();
    return d ? atomic_load(&d->cuPointerGetAttributes) : NULL;
}

/* What the driver knows of addr. Managed memory is host-accessible. The
 * answers go to zeroed 8-byte slots so that a driver writing 4 bytes or 8
 * leaves the same low bits (both targets are little-endian). */
static int driver_kind(uintptr_t addr)
{
    CUpointer_attribute attrs[2] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                    CU_POINTER_ATTRIBUTE_IS_MANAGED};
    uint64_t type = 0, managed = 0;
    void *data[2] = {&type, &managed};
    hcg_pfn_cuPointerGetAttributes f;
    if (hcg_self.current != NULL)
        return DK_UNKNOWN; /* no CUDA call may be made inside a host function */
    f = ptr_attrs_fn();
    if (!f || f(2, attrs, data, (CUdeviceptr)addr) != CUDA_SUCCESS)
        return DK_UNKNOWN;
    if (managed != 0 || (uint32_t)type == CU_MEMORYTYPE_HOST)
        return DK_HOST;
    if ((uint32_t)type == CU_MEMORYTYPE_DEVICE)
        return DK_DEVICE;
    return DK_UNKNOWN;
}

/* ---- the oracle --------------------------------------------------------- */

static void walk_range(vma_walk *w, uintptr_t addr, size_t len, int write)
{
    memset(w, 0, sizeof *w);
    w->cur = addr;
    w->last = addr + (len - 1);
    w->write = write;
    if (atomic_load(&g_force_fallback) || pq_classify(w) != 0)
        maps_classify(w);
}

static hcg_mem proc_classify(void *ctx, uintptr_t addr, size_t len, int write)
{
    vma_walk w;
    (void)ctx;
    if (len == 0)
        return HCG_MEM_OK;
    if (len - 1 > UINTPTR_MAX - addr)
        return HCG_MEM_UNMAPPED; /* no mapping lies past the top */
    walk_range(&w, addr, len, write);
    /* Device memory is not host accessible; say so rather than "unmapped". */
    if (w.verdict != HCG_MEM_OK && driver_kind(addr) == DK_DEVICE)
        return HCG_MEM_DEVICE;
    return w.verdict;
}

/* 1: the bytes are in *buf; 0: the kernel would not read them (fault);
 * -1: process_vm_readv is unavailable here. */
static int vm_read(uintptr_t addr, void *buf, size_t len)
{
    struct iovec local = {buf, len};
    struct iovec remote = {(void *)addr, len};
    ssize_t n = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
    if (n == (ssize_t)len)
        return 1;
    if (n >= 0 || errno == EFAULT)
        return 0;
    if (errno == ENOSYS || errno == EPERM)
        atomic_store(&g_vm_readv_ok, 0);
    return -1;
}

/* Without hcguard's fault handler (it could not be installed): the kernel
 * reads, or, where it may not, anonymous memory proven readable just now. */
static int unprotected_read(uintptr_t addr, void *buf, size_t len)
{
    if (atomic_load(&g_vm_readv_ok)) {
        int r = vm_read(addr, buf, len);
        if (r == 1)
            return 0;
        /* The driver's pinned host memory is a VM_IO mapping, which
         * process_vm_readv refuses; plain loads work there. */
        if (r == 0 && driver_kind(addr) != DK_HOST)
            return -1;
    }
    vma_walk w;
    walk_range(&w, addr, len, 0);
    if (w.verdict != HCG_MEM_OK || w.any_file)
        return -1; /* a file page past EOF would raise SIGBUS */
    memcpy(buf, (const void *)addr, len);
    return 0;
}

static int proc_read(void *ctx, uintptr_t addr, void *buf, size_t len)
{
    (void)ctx;
    if (len == 0)
        return 0;
    if (addr == 0 || len - 1 > UINTPTR_MAX - addr)
        return -1;
    if (HCG_LIKELY(hcg_fault_ready()) || hcg_fault_install() == 0)
        return hcg_fault_copy(buf, (const void *)addr, len, NULL);
    return unprotected_read(addr, buf, len);
}

static const hcg_oracle g_process_oracle = {NULL, proc_read, proc_classify};

const hcg_oracle *hcg_oracle_process(void) { return &g_process_oracle; }

void hcg_oracle_force_fallback(int on)
{
    atomic_store(&g_force_fallback, on != 0);
}

void hcg_oracle_set_ptr_attrs(hcg_pfn_cuPointerGetAttributes f)
{
    atomic_store(&g_ptr_attrs_override, f);
}

const char *hcg_oracle_method(void)
{
    if (atomic_load(&g_force_fallback) || pq_fd(-1) < 0)
        return "maps";
    return "procmap-query";
}

/* ---- mapping changes ----------------------------------------------------
 * Wrapped so that cached VMAs are dropped as soon as the program changes
 * its mappings through libc. The real function is the next definition in
 * the search order (a sanitizer's, or libc's: driver/libc.def); the system
 * call itself is the fallback if there is none. */
HCG_EXPORT int munmap(void *addr, size_t len)
{
    hcg_libc_munmap_fn f = HCG_REAL(munmap);
    int r = f ? f(addr, len) : (int)syscall(SYS_munmap, addr, len);
    hcg_oracle_invalidate();
    return r;
}

HCG_EXPORT int mprotect(void *addr, size_t len, int prot)
{
    hcg_libc_mprotect_fn f = HCG_REAL(mprotect);
    int r = f ? f(addr, len, prot) : (int)syscall(SYS_mprotect, addr, len, prot);
    hcg_oracle_invalidate();
    return r;
}

/* mprotect with a protection key (-1: none, mprotect by another name). */
HCG_EXPORT int pkey_mprotect(void *addr, size_t len, int prot, int pkey)
{
    hcg_libc_pkey_mprotect_fn f = HCG_REAL(pkey_mprotect);
    int r = f ? f(addr, len, prot, pkey)
              : (int)syscall(SYS_pkey_mprotect, addr, len, prot, pkey);
    hcg_oracle_invalidate();
    return r;
}

HCG_EXPORT void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...)
{
    void *new_addr = NULL;
    if (flags & MREMAP_FIXED) {
        va_list ap;
        va_start(ap, flags);
        new_addr = va_arg(ap, void *);
        va_end(ap);
    }
    hcg_libc_mremap_fn f = HCG_REAL(mremap);
    void *r = f ? f(old, old_len, new_len, flags, new_addr)
                : (void *)syscall(SYS_mremap, old, old_len, new_len, flags, new_addr);
    hcg_oracle_invalidate();
    return r;
}

HCG_EXPORT int shmdt(const void *addr)
{
    hcg_libc_shmdt_fn f = HCG_REAL(shmdt);
    int r = f ? f(addr) : (int)syscall(SYS_shmdt, addr);
    hcg_oracle_invalidate();
    return r;
}
