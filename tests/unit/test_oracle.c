/*
 * The process oracle on real mappings, with PROCMAP_QUERY and with the
 * /proc/self/maps fallback forced; the two must agree everywhere.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hcg.h"
#include "../e2e/deny_vm_readv.h"
#include "../common/check.h"

static size_t pg;
#define RC_TEST_SLOTS 12 /* more records than the cache holds */
static const char *g_mode = "procmap-query";

static const char *mem_name(hcg_mem m)
{
    static const char *names[] = {"ok", "unmapped", "no-read", "no-write",
                                  "device"};
    return (unsigned)m < 5 ? names[m] : "bogus";
}

static hcg_mem classify(const void *p, size_t n, int write)
{
    const hcg_oracle *o = hcg_oracle_process();
    return o->classify(o->ctx, (uintptr_t)p, n, write);
}

static int oread(uintptr_t p, void *buf, size_t n)
{
    const hcg_oracle *o = hcg_oracle_process();
    return o->read(o->ctx, p, buf, n);
}

#define CHECK_MEM(p, n, write, want)                                         \
    do {                                                                     \
        hcg_mem check_m_ = classify((const void *)(p), (n), (write));        \
        if (check_m_ != (want))                                              \
            check_fail(__FILE__, __LINE__, "[%s] classify(%s, %s, %s) == %s (got %s, want %s)", \
                       g_mode, #p, #n, (write) ? "write" : "read", #want,    \
                       mem_name(check_m_), mem_name(want));                  \
    } while (0)

/* n pages with prot, and unmapped pages on both sides. */
/* A sanitizer's runtime may map memory of its own lazily, at the first
 * munmap or mprotect through hcguard's interposers (ThreadSanitizer's
 * first look at the oracle's counters, after the real call): that mapping
 * could fill a fence just unmapped. One of each first, on a mapping of
 * its own. */
static void warm_up_interposers(void)
{
    static int done;
    if (done++)
        return;
    char *w = mmap(NULL, 2 * pg, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (w == MAP_FAILED) {
        perror("mmap");
        exit(2);
    }
    mprotect(w, pg, PROT_READ);
    munmap(w, 2 * pg);
}

static char *map_fenced(size_t n, int prot)
{
    warm_up_interposers();
    char *p = mmap(NULL, (n + 2) * pg, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        exit(2);
    }
    munmap(p, pg);
    munmap(p + (n + 1) * pg, pg);
    if (mprotect(p + pg, n * pg, prot) != 0) {
        perror("mprotect");
        exit(2);
    }
    return p + pg;
}

static void permissions_in_mode(void)
{
    char *rw = map_fenced(4, PROT_READ | PROT_WRITE);
    char *ro = map_fenced(2, PROT_READ);
    char *none = map_fenced(2, PROT_NONE);
    CHECK_MEM(rw, 4 * pg, 0, HCG_MEM_OK);
    CHECK_MEM(rw, 4 * pg, 1, HCG_MEM_OK);
    CHECK_MEM(rw + 100, 1000, 1, HCG_MEM_OK);
    CHECK_MEM(ro, 2 * pg, 0, HCG_MEM_OK);
    CHECK_MEM(ro, 2 * pg, 1, HCG_MEM_NO_WRITE);
    CHECK_MEM(ro + pg - 1, 2, 1, HCG_MEM_NO_WRITE);
    CHECK_MEM(none, 8, 0, HCG_MEM_NO_READ);
    CHECK_MEM(none, 8, 1, HCG_MEM_NO_READ);
    /* exact ends, and one byte past them into the fence */
    CHECK_MEM(rw + 4 * pg - 1, 1, 1, HCG_MEM_OK);
    CHECK_MEM(rw + 4 * pg - 1, 2, 0, HCG_MEM_UNMAPPED);
    CHECK_MEM(rw, 4 * pg + 1, 0, HCG_MEM_UNMAPPED);
    CHECK_MEM(rw - 1, 2, 0, HCG_MEM_UNMAPPED);
    CHECK_MEM(rw - pg, pg, 0, HCG_MEM_UNMAPPED);
    munmap(rw, 4 * pg);
    munmap(ro, 2 * pg);
    munmap(none, 2 * pg);
}

static void hole_in_mode(void)
{
    char *p = map_fenced(3, PROT_READ | PROT_WRITE);
    munmap(p + pg, pg);
    CHECK_MEM(p, pg, 1, HCG_MEM_OK);
    CHECK_MEM(p + 2 * pg, pg, 1, HCG_MEM_OK);
    CHECK_MEM(p, 3 * pg, 0, HCG_MEM_UNMAPPED);
    CHECK_MEM(p + pg - 1, 2, 1, HCG_MEM_UNMAPPED);
    CHECK_MEM(p + pg + 10, 10, 0, HCG_MEM_UNMAPPED);
    CHECK_MEM(p + 2 * pg - 1, 2, 0, HCG_MEM_UNMAPPED);
    munmap(p, pg);
    munmap(p + 2 * pg, pg);
}

/* mprotect on part of a mapping splits its VMA. */
static void split_in_mode(void)
{
    char *p = map_fenced(4, PROT_READ | PROT_WRITE);
    mprotect(p + 2 * pg, 2 * pg, PROT_READ);
    CHECK_MEM(p, 4 * pg, 0, HCG_MEM_OK);
    CHECK_MEM(p, 4 * pg, 1, HCG_MEM_NO_WRITE);
    CHECK_MEM(p, 2 * pg, 1, HCG_MEM_OK);
    CHECK_MEM(p + 2 * pg - 1, 2, 1, HCG_MEM_NO_WRITE);
    CHECK_MEM(p + 2 * pg, 2 * pg, 1, HCG_MEM_NO_WRITE);
    mprotect(p + 3 * pg, pg, PROT_NONE); /* rw | r | --- */
    CHECK_MEM(p, 3 * pg, 0, HCG_MEM_OK);
    CHECK_MEM(p, 4 * pg, 0, HCG_MEM_NO_READ);
    CHECK_MEM(p + 3 * pg - 1, 2, 0, HCG_MEM_NO_READ);
    /* alternating permissions: one range over four VMAs */
    mprotect(p + pg, pg, PROT_READ);
    mprotect(p + 2 * pg, pg, PROT_READ | PROT_WRITE);
    mprotect(p + 3 * pg, pg, PROT_READ);
    CHECK_MEM(p, 4 * pg, 0, HCG_MEM_OK);
    CHECK_MEM(p + 1, 4 * pg - 1, 0, HCG_MEM_OK);
    CHECK_MEM(p, 4 * pg, 1, HCG_MEM_NO_WRITE);
    CHECK_MEM(p + 2 * pg, pg, 1, HCG_MEM_OK);
    munmap(p, 4 * pg);
}

static const char g_literal_holder[] = "rodata";

static void special_in_mode(void)
{
    int local = 0;
    const char *lit = "a string literal";
    char *p = map_fenced(1, PROT_READ | PROT_WRITE);
    CHECK_MEM(0, 1, 0, HCG_MEM_UNMAPPED);
    CHECK_MEM(0, pg, 1, HCG_MEM_UNMAPPED);
    CHECK_MEM(16, 8, 0, HCG_MEM_UNMAPPED);
    CHECK_MEM(&local, sizeof local, 1, HCG_MEM_OK);
    CHECK_MEM(lit, strlen(lit) + 1, 0, HCG_MEM_OK);
    CHECK_MEM(lit, strlen(lit) + 1, 1, HCG_MEM_NO_WRITE);
    CHECK_MEM(g_literal_holder, sizeof g_literal_holder, 1, HCG_MEM_NO_WRITE);
    CHECK_MEM(&special_in_mode, 16, 0, HCG_MEM_OK); /* r-x text */
    CHECK_MEM(&special_in_mode, 16, 1, HCG_MEM_NO_WRITE);
    CHECK_MEM(&check_failures, sizeof check_failures, 1, HCG_MEM_OK);
    /* above [vsyscall], at the very top; and lengths that wrap */
    CHECK_MEM(UINTPTR_MAX - 15, 16, 0, HCG_MEM_UNMAPPED);
    CHECK_MEM(UINTPTR_MAX, 1, 0, HCG_MEM_UNMAPPED);
    CHECK_MEM(p, SIZE_MAX, 0, HCG_MEM_UNMAPPED);
    CHECK_MEM(UINTPTR_MAX, 2, 0, HCG_MEM_UNMAPPED);
    CHECK_MEM(p, 0, 1, HCG_MEM_OK);
    munmap(p, pg);
}

/* A fence page may be taken by another mapping meanwhile (a sanitizer's
 * runtime maps pages of its own): a read into it must fail unless the page
 * is mapped now. */
static int page_unmapped(const char *p)
{
    uintptr_t page = (uintptr_t)p & ~(uintptr_t)(pg - 1);
    return msync((void *)page, pg, MS_ASYNC) != 0 && errno == ENOMEM;
}
#define CHECK_READ_FENCE(at, fence)                                                         \
    CHECK(oread((uintptr_t)(at), buf, 8) == -1 || !page_unmapped(fence))

static void read_in_mode(void)
{
    char *rw = map_fenced(2, PROT_READ | PROT_WRITE);
    char *ro = map_fenced(1, PROT_READ | PROT_WRITE);
    char *none = map_fenced(1, PROT_NONE);
    char buf[256];
    for (int i = 0; i < 256; i++)
        rw[pg - 128 + i] = ro[i] = (char)i;
    mprotect(ro, pg, PROT_READ);
    memset(buf, 0, sizeof buf);
    CHECK_EQ(oread((uintptr_t)rw + pg - 128, buf, 256), 0); /* over 2 pages */
    CHECK(memcmp(buf, rw + pg - 128, 256) == 0);
    memset(buf, 0, sizeof buf);
    CHECK_EQ(oread((uintptr_t)ro, buf, 256), 0);
    CHECK(memcmp(buf, ro, 256) == 0);
    CHECK_EQ(oread((uintptr_t)none, buf, 8), -1);
    CHECK_EQ(oread((uintptr_t)none + pg - 8, buf, 8), -1);
    CHECK_EQ(oread(0, buf, 8), -1);
    CHECK_READ_FENCE(rw + 2 * pg - 4, rw + 2 * pg); /* into a fence */
    CHECK_READ_FENCE(rw - 4, rw - 4);
    CHECK_READ_FENCE(rw + 2 * pg, rw + 2 * pg);
    CHECK_EQ(oread(UINTPTR_MAX - 7, buf, 8), -1);
    CHECK_EQ(oread((uintptr_t)rw, buf, SIZE_MAX), -1);
    CHECK_EQ(oread((uintptr_t)none, buf, 0), 0);
    munmap(rw, 2 * pg);
    munmap(ro, pg);
    munmap(none, pg);
}

/* A page of a file mapping past the end of the file is mapped and "r", yet
 * a load there raises SIGBUS; process_vm_readv reports it instead. */
static void read_past_eof_in_mode(void)
{
    char buf[8];
    int fd = memfd_create("hcg-test", MFD_CLOEXEC);
    char *p;
    CHECK(fd >= 0);
    if (fd < 0 || ftruncate(fd, (off_t)pg) != 0)
        return;
    p = mmap(NULL, 2 * pg, PROT_READ, MAP_SHARED, fd, 0);
    CHECK(p != MAP_FAILED);
    if (p != MAP_FAILED) {
        CHECK_EQ(oread((uintptr_t)p, buf, sizeof buf), 0);
        CHECK_EQ(oread((uintptr_t)p + pg, buf, sizeof buf), -1);
        CHECK_EQ(oread((uintptr_t)p + pg - 4, buf, sizeof buf), -1);
        munmap(p, 2 * pg);
    }
    close(fd);
}

static void record_in_mode(void)
{
    char *p = map_fenced(2, PROT_READ | PROT_WRITE);
    char *none = map_fenced(1, PROT_NONE);
    const hcg_oracle *o = hcg_oracle_process();
    hcguard_copy_record *rec = (hcguard_copy_record *)(void *)p;
    hcguard_copy_record out;
    *rec = (hcguard_copy_record){(uintptr_t)p + 64, (uintptr_t)p + 1024, 512};
    memset(&out, 0, sizeof out);
    CHECK_STATUS(hcg_validate_record(o, rec, &out), HCGUARD_OK);
    CHECK(out.dst == rec->dst && out.src == rec->src && out.nbytes == 512);
    rec->src = (uintptr_t)none;
    CHECK_STATUS(hcg_validate_record(o, rec, NULL), HCGUARD_ERR_SRC_NOT_READABLE);
    rec->src = (uintptr_t)p + 1024;
    rec->dst = (uintptr_t)"literal";
    CHECK_STATUS(hcg_validate_record(o, rec, NULL), HCGUARD_ERR_DST_NOT_WRITABLE);
    rec->dst = (uintptr_t)p + 2 * pg - 100; /* 412 bytes past the end */
    CHECK_STATUS(hcg_validate_record(o, rec, NULL), HCGUARD_ERR_DST_UNMAPPED);
    CHECK_STATUS(hcg_validate_record(o, none, NULL),
                 HCGUARD_ERR_RECORD_UNREADABLE);
    CHECK_STATUS(hcg_validate_record(o, p + 2 * pg - 8, NULL),
                 HCGUARD_ERR_RECORD_UNREADABLE);
    /* a valid record in read-only memory is still readable */
    rec->dst = (uintptr_t)p + pg;
    mprotect(p, pg, PROT_READ);
    CHECK_STATUS(hcg_validate_record(o, rec, NULL), HCGUARD_OK);
    munmap(p, 2 * pg);
    munmap(none, pg);
}

/* ---- device memory, through a stand-in for cuPointerGetAttributes ------- */

typedef struct fake_span {
    uintptr_t lo, hi;
} fake_span;
static fake_span fk_dev, fk_managed, fk_err, fk_host;
static atomic_int fk_calls, fk_bad_args;

static int in_span(const fake_span *s, CUdeviceptr p)
{
    return p >= s->lo && p < s->hi;
}

static CUresult fake_attrs(unsigned int n, CUpointer_attribute *attrs,
                           void **data, CUdeviceptr p)
{
    unsigned int *type, *managed;
    atomic_fetch_add(&fk_calls, 1);
    if (n != 2 || attrs[0] != CU_POINTER_ATTRIBUTE_MEMORY_TYPE ||
        attrs[1] != CU_POINTER_ATTRIBUTE_IS_MANAGED) {
        atomic_fetch_add(&fk_bad_args, 1);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (in_span(&fk_err, p))
        return CUDA_ERROR_INVALID_VALUE;
    type = data[0]; /* the driver writes 4 bytes for both */
    managed = data[1];
    *type = 0; /* an unknown pointer: success, no type */
    *managed = 0;
    if (in_span(&fk_dev, p) || in_span(&fk_managed, p))
        *type = CU_MEMORYTYPE_DEVICE;
    if (in_span(&fk_managed, p))
        *managed = 1;
    if (in_span(&fk_host, p))
        *type = CU_MEMORYTYPE_HOST;
    return CUDA_SUCCESS;
}

static fake_span span_of(const char *p, size_t n)
{
    return (fake_span){(uintptr_t)p, (uintptr_t)p + n};
}

static void device_in_mode(void)
{
    /* Device memory is not host accessible: a PROT_NONE reservation. */
    char *dev = map_fenced(2, PROT_NONE);
    char *reserved = map_fenced(1, PROT_READ | PROT_WRITE);
    char *managed = map_fenced(1, PROT_READ | PROT_WRITE);
    char *err = map_fenced(1, PROT_NONE);
    char *host = map_fenced(1, PROT_NONE);
    char *plain = map_fenced(1, PROT_READ | PROT_WRITE);
    char buf[8];
    fk_dev = span_of(dev, 2 * pg);
    fk_managed = span_of(managed, pg);
    fk_err = span_of(err, pg);
    fk_host = span_of(host, pg);
    hcg_oracle_set_ptr_attrs(fake_attrs);
    CHECK_MEM(dev, 2 * pg, 0, HCG_MEM_DEVICE);
    CHECK_MEM(dev + pg, 8, 1, HCG_MEM_DEVICE);
    /* the driver is asked only about what the host cannot access: memory
     * it calls device memory but the host can read and write (coherent
     * systems) is fine to copy */
    fk_dev = span_of(reserved, pg);
    CHECK_MEM(reserved, 8, 1, HCG_MEM_OK);
    fk_dev = span_of(dev, 2 * pg);
    CHECK_MEM(managed, pg, 1, HCG_MEM_OK);    /* managed: host-accessible */
    CHECK_MEM(err, 8, 0, HCG_MEM_NO_READ);    /* an error: host, walk on */
    CHECK_MEM(host, 8, 0, HCG_MEM_NO_READ);   /* pinned host: walk on */
    CHECK_MEM(plain, pg, 1, HCG_MEM_OK);      /* unknown pointer: host */
    /* the driver's word never makes an unreadable page readable */
    CHECK_EQ(oread((uintptr_t)host, buf, sizeof buf), -1);
    hcguard_copy_record r = {(uintptr_t)dev, (uintptr_t)plain, 64};
    CHECK_STATUS(hcg_validate_fields(hcg_oracle_process(), &r),
                 HCGUARD_ERR_DST_DEVICE);
    r = (hcguard_copy_record){(uintptr_t)plain, (uintptr_t)dev + 8, 64};
    CHECK_STATUS(hcg_validate_fields(hcg_oracle_process(), &r),
                 HCGUARD_ERR_SRC_DEVICE);
    CHECK(atomic_load(&fk_calls) > 0);
    CHECK_EQ(atomic_load(&fk_bad_args), 0);
    hcg_oracle_set_ptr_attrs(NULL);
    int calls = atomic_load(&fk_calls);
    CHECK_MEM(dev, 2 * pg, 1, HCG_MEM_NO_READ); /* no driver: just unreadable */
    CHECK_EQ(atomic_load(&fk_calls), calls);
    munmap(dev, 2 * pg);
    munmap(reserved, pg);
    munmap(managed, pg);
    munmap(err, pg);
    munmap(host, pg);
    munmap(plain, pg);
}

/* The checks above, under each method of reading the address space. */
static void in_both_modes(void (*checks)(void))
{
    for (int fallback = 0; fallback < 2; fallback++) {
        g_mode = fallback ? "maps" : "procmap-query";
        hcg_oracle_force_fallback(fallback);
        checks();
    }
    hcg_oracle_force_fallback(0);
}

#define BOTH_MODES(name)                                                     \
    static void test_##name(void) { in_both_modes(name##_in_mode); }
BOTH_MODES(permissions)
BOTH_MODES(hole)
BOTH_MODES(split)
BOTH_MODES(special)
BOTH_MODES(read)
BOTH_MODES(record)
BOTH_MODES(device)
BOTH_MODES(read_past_eof) /* fault-contained in both methods */

/* ---- mode-independent ---------------------------------------------------- */

/* Whether PROCMAP_QUERY answers here, asked directly (Linux 6.11 on; not
 * under an emulator such as qemu-user, which reports the host's kernel
 * version but does not pass the ioctl on). */
static int kernel_has_procmap_query(void)
{
    uint64_t q[13] = {sizeof q, 0, (uint64_t)(uintptr_t)&kernel_has_procmap_query};
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    int ok = ioctl(fd, _IOWR('f', 17, uint64_t[13]), q) == 0;
    close(fd);
    return ok;
}

static void test_method(void)
{
    const char *m = hcg_oracle_method();
    if (kernel_has_procmap_query())
        CHECK(strcmp(m, "procmap-query") == 0);
    else
        CHECK(strcmp(m, "maps") == 0 || strcmp(m, "procmap-query") == 0);
    hcg_oracle_force_fallback(1);
    CHECK(strcmp(hcg_oracle_method(), "maps") == 0);
    hcg_oracle_force_fallback(0);
    printf("test_oracle: classifying with %s\n", m);
}

static hcg_mem classify_with(int fallback, uintptr_t a, size_t n, int write)
{
    hcg_oracle_force_fallback(fallback);
    hcg_mem m = classify((const void *)a, n, write);
    hcg_oracle_force_fallback(0);
    return m;
}

/* Both methods agree on ranges around every VMA of the process. */
static void compare_range(uintptr_t a, size_t n)
{
    for (int w = 0; w < 2; w++) {
        hcg_mem x = classify_with(0, a, n, w), y = classify_with(1, a, n, w);
        if (x != y) { /* a sanitizer's thread may have remapped: once more */
            x = classify_with(0, a, n, w);
            y = classify_with(1, a, n, w);
        }
        CHECK_MSG(x == y, "methods disagree at %#lx+%zu %s: %s vs %s",
                  (unsigned long)a, n, w ? "write" : "read", mem_name(x), mem_name(y));
    }
}

static char g_maps[1 << 20];

static void test_methods_agree(void)
{
    static uintptr_t lo[8192], hi[8192];
    size_t len = 0, nv = 0;
    ssize_t r;
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    uint64_t x = 0x9e3779b97f4a7c15u;
    CHECK(fd >= 0);
    while (fd >= 0 && len < sizeof g_maps - 1 &&
           (r = read(fd, g_maps + len, sizeof g_maps - 1 - len)) > 0)
        len += (size_t)r;
    if (fd >= 0)
        close(fd);
    g_maps[len] = 0;
    for (char *line = g_maps; *line && nv < 8192;) {
        char *end;
        lo[nv] = (uintptr_t)strtoull(line, &end, 16);
        hi[nv] = (uintptr_t)strtoull(end + 1, NULL, 16);
        if (hi[nv] < ((uintptr_t)1 << 47)) /* not [vsyscall] */
            nv++;
        line = strchr(line, '\n');
        line = line ? line + 1 : g_maps + len;
    }
    CHECK(nv > 5);
    for (size_t i = 0; i < nv; i++) {
        size_t size = hi[i] - lo[i];
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        compare_range(lo[i], 1);
        compare_range(hi[i] - 1, 1);
        compare_range(lo[i], size);
        compare_range(hi[i] - 1, 2);
        compare_range(lo[i] - 1, 2);
        compare_range(lo[i] + x % size, 1 + (x >> 32) % (2 * size));
        if (i + 1 < nv)
            compare_range(lo[i], lo[i + 1] - lo[i] + 1);
    }
}

/* fd 3.. whose link names this process's maps file, or -1. */
static int find_oracle_fd(void)
{
    char want[64], path[64], link[128];
    snprintf(want, sizeof want, "/proc/%d/maps", (int)getpid());
    for (int fd = 3; fd < 1024; fd++) {
        ssize_t n;
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        n = readlink(path, link, sizeof link - 1);
        if (n <= 0)
            continue;
        link[n] = 0;
        if (strcmp(link, want) == 0)
            return fd;
    }
    return -1;
}

static int fd_is_dev_null(int fd)
{
    char path[64], link[64];
    ssize_t n;
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    n = readlink(path, link, sizeof link - 1);
    if (n <= 0)
        return 0;
    link[n] = 0;
    return strcmp(link, "/dev/null") == 0;
}

/* Programs close and reuse fds; the oracle must notice and never close
 * an fd that has become the program's. */
static void test_fd_lifecycle(void)
{
    char *p = map_fenced(1, PROT_READ | PROT_WRITE);
    int fd, nul;
    if (strcmp(hcg_oracle_method(), "procmap-query") != 0) {
        printf("test_oracle: no PROCMAP_QUERY here, fd checks skipped\n");
        munmap(p, pg);
        return;
    }
    fd = find_oracle_fd();
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    close(fd);
    CHECK_MEM(p, pg, 1, HCG_MEM_OK);
    CHECK_MEM(p + pg, 1, 0, HCG_MEM_UNMAPPED);
    fd = find_oracle_fd();
    CHECK(fd >= 0);
    nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
    CHECK(nul >= 0 && fd >= 0);
    if (nul < 0 || fd < 0)
        return;
    CHECK_EQ(dup2(nul, fd), fd); /* the oracle's fd number is now /dev/null */
    close(nul);
    CHECK_MEM(p, pg, 1, HCG_MEM_OK);
    CHECK_MEM(p - 1, 1, 0, HCG_MEM_UNMAPPED);
    CHECK(fd_is_dev_null(fd)); /* still the program's, not closed */
    CHECK(find_oracle_fd() >= 0);
    close(fd);
    munmap(p, pg);
}

/* After fork the inherited fd describes the parent: the child must not
 * use it. */
static void test_fork(void)
{
    char *p = map_fenced(1, PROT_READ | PROT_WRITE);
    int st = 0;
    pid_t pid;
    CHECK_MEM(p, pg, 1, HCG_MEM_OK); /* fd opened in the parent */
    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) { /* p is rw in the parent only, q mapped in the child only */
        char *q = map_fenced(1, PROT_READ | PROT_WRITE);
        mprotect(p, pg, PROT_NONE);
        int bad = (classify(p, pg, 0) != HCG_MEM_NO_READ) +
                  2 * (classify(q, pg, 1) != HCG_MEM_OK);
        _exit(bad);
    }
    CHECK_EQ(waitpid(pid, &st, 0), pid);
    CHECK(WIFEXITED(st));
    CHECK_EQ(WEXITSTATUS(st), 0);
    CHECK_MEM(p, pg, 1, HCG_MEM_OK);
    munmap(p, pg);
}

typedef struct thread_arg {
    char *rw, *ro, *none;
    int toggler;
    atomic_int *wrong;
} thread_arg;

static void *classify_loop(void *v)
{
    thread_arg *a = v;
    for (int i = 0; i < 1500; i++) {
        if (a->toggler && i % 100 == 0)
            hcg_oracle_force_fallback((i / 100) % 2);
        int bad = (classify(a->rw, 2 * pg, 1) != HCG_MEM_OK) +
                  (classify(a->ro, pg, 1) != HCG_MEM_NO_WRITE) +
                  (classify(a->none, 1, 0) != HCG_MEM_NO_READ);
        atomic_fetch_add(a->wrong, bad);
    }
    return NULL;
}

static void *remap_loop(void *v)
{
    atomic_int *stop = v;
    while (!atomic_load(stop)) {
        char *q = mmap(NULL, pg, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (q != MAP_FAILED)
            munmap(q, pg);
    }
    return NULL;
}

static void test_threads(void)
{
    enum { N = 4 };
    pthread_t t[N], remapper;
    thread_arg a[N];
    atomic_int wrong = 0, stop = 0;
    char *rw = map_fenced(2, PROT_READ | PROT_WRITE);
    char *ro = map_fenced(1, PROT_READ);
    char *none = map_fenced(1, PROT_NONE); /* a hole could be remapped */
    pthread_create(&remapper, NULL, remap_loop, &stop);
    for (int i = 0; i < N; i++) {
        a[i] = (thread_arg){rw, ro, none, i == 0, &wrong};
        pthread_create(&t[i], NULL, classify_loop, &a[i]);
    }
    for (int i = 0; i < N; i++)
        pthread_join(t[i], NULL);
    atomic_store(&stop, 1);
    pthread_join(remapper, NULL);
    hcg_oracle_force_fallback(0);
    CHECK_EQ(atomic_load(&wrong), 0);
    munmap(rw, 2 * pg);
    munmap(ro, pg);
    munmap(none, pg);
}

/* ---- fault-contained copies, the generation, the record cache ---------- */

static void test_fault_copy(void)
{
    char *rw = map_fenced(2, PROT_READ | PROT_WRITE);
    char *none = map_fenced(1, PROT_NONE);
    char buf[64];
    hcg_fault_info fi;
    /* Installed by the oracle's first read in the cases before; here too,
     * so that this case stands alone (idempotent). */
    CHECK_EQ(hcg_fault_install(), 0);
    memset(rw, 5, 2 * pg);
    CHECK_EQ(hcg_fault_copy(buf, rw + pg - 8, sizeof buf, &fi), 0);
    CHECK(buf[0] == 5 && buf[63] == 5);
    memset(&fi, 0, sizeof fi);
    CHECK_EQ(hcg_fault_copy(buf, none + 8, sizeof buf, &fi), -1);
    CHECK_EQ(fi.sig, SIGSEGV);
    CHECK_EQ(fi.code, SEGV_ACCERR);
    CHECK(fi.addr >= (uintptr_t)none && fi.addr < (uintptr_t)none + pg);
    CHECK_EQ(hcg_fault_copy(buf, rw + 2 * pg - 8, sizeof buf, &fi), -1); /* into the hole */
    CHECK_EQ(fi.sig, SIGSEGV);
    CHECK_EQ(fi.code, SEGV_MAPERR);
    CHECK_EQ(hcg_fault_copy(none, buf, sizeof buf, &fi), -1); /* writing */
    CHECK_EQ(hcg_fault_copy(buf, (void *)((uintptr_t)1 << 63), 8, &fi), -1); /* non-canonical */
    CHECK_EQ(hcg_fault_copy(none, none, 0, NULL), 0);
    /* A file page past its end: SIGBUS, contained. */
    int fd = memfd_create("hcg-fault", MFD_CLOEXEC);
    CHECK(fd >= 0 && ftruncate(fd, (off_t)pg) == 0);
    char *f = mmap(NULL, 2 * pg, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    CHECK(f != MAP_FAILED);
    if (f != MAP_FAILED) {
        CHECK_EQ(hcg_fault_copy(buf, f + pg - 16, sizeof buf, &fi), -1);
        CHECK_EQ(fi.sig, SIGBUS);
        CHECK_EQ(fi.code, BUS_ADRERR);
        CHECK_EQ(fi.addr, (uintptr_t)f + pg);
        CHECK_STR(hcg_fault_code_name(fi.sig, fi.code), "BUS_ADRERR");
        munmap(f, 2 * pg);
    }
    close(fd);
    CHECK(hcg_fault_ready());
    munmap(rw, 2 * pg);
    munmap(none, pg);
}

static void test_generation(void)
{
    uint64_t g = hcg_oracle_gen();
    char *p = map_fenced(1, PROT_READ | PROT_WRITE);
    CHECK(hcg_oracle_gen() != g); /* map_fenced unmapped and mprotect'ed */
    g = hcg_oracle_gen();
    munmap(p, pg);
    CHECK(hcg_oracle_gen() != g);
}

/* A record re-remembered after an unmap must be found again: the stale
 * entry is replaced, not shadowing a second one. */
static void test_record_cache(void)
{
    hcguard_copy_record r = {0x1000, 0x2000, 64}, other = r;
    static char recs[RC_TEST_SLOTS][24];
    const void *rec = recs[0];
    other.nbytes = 65;
    uint64_t now = hcg_ticks();
    hcg_oracle_set_cache(1);
    uint64_t g = hcg_oracle_gen();
    hcg_oracle_remember(rec, &r, g, now);
    CHECK_EQ(hcg_oracle_recent(rec, &r, now), 1);
    CHECK_EQ(hcg_oracle_recent(rec, &other, now), 0); /* contents changed */
    CHECK_EQ(hcg_oracle_recent(recs[1], &r, now), 0); /* never seen */
    hcg_oracle_invalidate();
    CHECK_EQ(hcg_oracle_recent(rec, &r, now), 0); /* an unmap may have happened */
    hcg_oracle_remember(rec, &r, hcg_oracle_gen(), now);
    CHECK_EQ(hcg_oracle_recent(rec, &r, now), 1);
    /* The record rewritten and found good again: its one entry now holds
     * the new contents (an older entry must not answer first). */
    hcg_oracle_remember(rec, &other, hcg_oracle_gen(), now);
    CHECK_EQ(hcg_oracle_recent(rec, &other, now), 1);
    CHECK_EQ(hcg_oracle_recent(rec, &r, now), 0);
    /* A verdict reached before an unmap is not remembered as current. */
    g = hcg_oracle_gen();
    hcg_oracle_invalidate();
    hcg_oracle_remember(recs[2], &r, g, now);
    CHECK_EQ(hcg_oracle_recent(recs[2], &r, now), 0);
    /* Many records: each has one entry, the latest ones are found. */
    for (int i = 0; i < RC_TEST_SLOTS; i++)
        hcg_oracle_remember(recs[i], &r, hcg_oracle_gen(), now);
    CHECK_EQ(hcg_oracle_recent(recs[RC_TEST_SLOTS - 1], &r, now), 1);
    /* The verdict's age is measured on the callers' time stamps alone:
     * the same stamp answers the same however long the test took; a stamp
     * long after it does not. It holds until an expiry time (one compare
     * on the launch path): a stamp a tick before the verdict (another
     * core's counter) is within its life. */
    CHECK_EQ(hcg_oracle_recent(recs[RC_TEST_SLOTS - 1], &r, now), 1);
    CHECK_EQ(hcg_oracle_recent(recs[RC_TEST_SLOTS - 1], &r, now + 1000000000000ull), 0);
    CHECK_EQ(hcg_oracle_recent(recs[RC_TEST_SLOTS - 1], &r, now - 1), 1);
    /* Off: nothing is recent. */
    hcg_oracle_set_cache(0);
    CHECK_EQ(hcg_oracle_recent(recs[RC_TEST_SLOTS - 1], &r, now), 0);
    hcg_oracle_set_cache(1);
}

/* With process_vm_readv denied (seccomp), reads past a file's end are
 * still refused, never a SIGBUS: in a child, the filter is for ever. */
static void test_no_vm_readv(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        if (deny_vm_readv() != 0)
            _exit(77);
        for (int fallback = 0; fallback < 2; fallback++) {
            hcg_oracle_force_fallback(fallback);
            read_past_eof_in_mode();
            read_in_mode();
            record_in_mode();
        }
        _exit(check_failures ? 1 : 0);
    }
    int st = 0;
    CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
    CHECK(WIFEXITED(st) && (WEXITSTATUS(st) == 0 || WEXITSTATUS(st) == 77));
    if (WIFEXITED(st) && WEXITSTATUS(st) == 77)
        printf("test_oracle: seccomp unavailable, process_vm_readv not denied\n");
}

static const check_case cases[] = {
    CHECK_CASE(method),
    CHECK_CASE(permissions),
    CHECK_CASE(hole),
    CHECK_CASE(split),
    CHECK_CASE(special),
    CHECK_CASE(read),
    CHECK_CASE(record),
    CHECK_CASE(device),
    CHECK_CASE(read_past_eof),
    CHECK_CASE(methods_agree),
    CHECK_CASE(fd_lifecycle),
    CHECK_CASE(fork),
    CHECK_CASE(threads),
    CHECK_CASE(fault_copy),
    CHECK_CASE(generation),
    CHECK_CASE(record_cache),
    CHECK_CASE(no_vm_readv),
};

int main(int argc, char **argv)
{
    pg = (size_t)sysconf(_SC_PAGESIZE);
    return check_main("test_oracle", CHECK_CASES(cases), argc, argv);
}
