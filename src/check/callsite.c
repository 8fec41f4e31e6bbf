/* Call sites: the code of the application that enqueued a host function,
 * or made the call a finding is about. The caller is the first frame
 * outside hcguard and the CUDA runtime and driver libraries (libcudart*,
 * libcuda*): for a program that calls cudaLaunchHostFunc, the program's
 * function, not the runtime's.
 *
 * A site is a uintptr_t: a return address, or (HCG_SITE_BIT set) an
 * interned backtrace (--backtrace N), whose first frame is the caller.
 * Stream launches keep only their wrapper's return address (one store on
 * the launch path); findings made at enqueue walk the stack, off the hot
 * path. Sites are named off the hot path too (hcg_callsite_name). */
#include <dlfcn.h>
#include <execinfo.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check/check.h"

#define WALK_MAX 128
#define SITE_SLOTS 16384 /* interned backtraces; past that, return addresses */

typedef struct site_frames {
    unsigned n;
    uintptr_t frame[];
} site_frames;

static pthread_mutex_t site_lock = PTHREAD_MUTEX_INITIALIZER;
static site_frames **sites; /* open addressing, by the frames' hash */
static unsigned n_sites;

void hcg_callsite_after_fork(void)
{
    pthread_mutex_init(&site_lock, NULL);
    hcg_reject_after_fork();
}

static struct link_map *self_map; /* hcguard's own object */
static pthread_once_t self_once = PTHREAD_ONCE_INIT;

static void find_self(void)
{
    Dl_info dl;
    if (!dladdr1((void *)find_self, &dl, (void **)&self_map, RTLD_DL_LINKMAP))
        self_map = NULL;
}

/* 1 if pc is hcguard's own code or the CUDA runtime's or driver's. */
static int internal_pc(uintptr_t pc)
{
    Dl_info dl;
    struct link_map *map = NULL;
    pthread_once(&self_once, find_self);
    struct link_map *self = self_map;
    if (!dladdr1((void *)pc, &dl, (void **)&map, RTLD_DL_LINKMAP) || !map)
        return 0; /* anonymous memory (JIT code, a closure): the program's */
    if (map == self)
        return 1;
    const char *base = strrchr(map->l_name, '/');
    base = base ? base + 1 : map->l_name;
    /* libcuda.so.1, libcudart.so.13, ...; and a sanitizer runtime's
     * interceptor of backtrace itself (test builds). */
    return strncmp(base, "libcuda", 7) == 0 || strncmp(base, "libasan", 7) == 0 ||
           strncmp(base, "libtsan", 7) == 0 || strncmp(base, "libubsan", 8) == 0 ||
           strncmp(base, "libclang_rt", 11) == 0;
}

static uint64_t hash_frames(const uintptr_t *f, unsigned n)
{
    uint64_t h = n;
    for (unsigned i = 0; i < n; i++)
        h = (h ^ f[i]) * 0x9e3779b97f4a7c15ull;
    return h;
}

/* The interned copy of frames f[0..n), or NULL when the table is full. */
static const site_frames *intern(const uintptr_t *f, unsigned n)
{
    uint64_t h = hash_frames(f, n);
    const site_frames *found = NULL;
    pthread_mutex_lock(&site_lock);
    if (!sites)
        sites = calloc(SITE_SLOTS, sizeof *sites);
    for (unsigned i = 0; sites && i < SITE_SLOTS; i++) {
        site_frames **slot = &sites[(h + i) % SITE_SLOTS];
        if (*slot && (*slot)->n == n && memcmp((*slot)->frame, f, n * sizeof *f) == 0) {
            found = *slot;
            break;
        }
        if (*slot)
            continue;
        if (n_sites >= SITE_SLOTS * 3 / 4)
            break;
        site_frames *s = malloc(sizeof *s + n * sizeof *f);
        if (s) {
            s->n = n;
            memcpy(s->frame, f, n * sizeof *f);
            *slot = s;
            n_sites++;
        }
        found = s;
        break;
    }
    pthread_mutex_unlock(&site_lock);
    return found;
}

uintptr_t hcg_callsite_here(void)
{
    void *raw[WALK_MAX];
    int n = backtrace(raw, WALK_MAX);
    int first = 0;
    while (first < n && internal_pc((uintptr_t)raw[first]))
        first++;
    if (first >= n)
        return n > 0 ? (uintptr_t)raw[n - 1] : 0;
    unsigned want = hcg_config_get()->backtrace;
    if (!want)
        return (uintptr_t)raw[first];
    unsigned keep = (unsigned)(n - first) < want ? (unsigned)(n - first) : want;
    uintptr_t f[WALK_MAX];
    for (unsigned i = 0; i < keep; i++)
        f[i] = (uintptr_t)raw[first + (int)i];
    const site_frames *s = intern(f, keep);
    return s ? (uintptr_t)s | HCG_SITE_BIT : f[0];
}

unsigned hcg_g_backtrace;
atomic_int hcg_g_launch_rare;

void hcg_callsite_init(void)
{
    hcg_g_backtrace = hcg_config_get()->backtrace;
    if (hcg_g_backtrace)
        atomic_fetch_or(&hcg_g_launch_rare, HCG_LAUNCH_BACKTRACE);
}

size_t hcg_callsite_frames(uintptr_t s, uintptr_t *out, size_t max)
{
    if (!s)
        return 0;
    if (!(s & HCG_SITE_BIT)) {
        if (max)
            out[0] = s;
        return max ? 1 : 0;
    }
    const site_frames *st = (const site_frames *)(s & ~HCG_SITE_BIT);
    size_t n = st->n < max ? st->n : max;
    memcpy(out, st->frame, n * sizeof *out);
    return n;
}

uintptr_t hcg_callsite_pc(uintptr_t s)
{
    uintptr_t pc = 0;
    hcg_callsite_frames(s, &pc, 1);
    return pc;
}

/* "main+0x1c (in hc_audit)"; "unknown" when there is no site. */
void hcg_callsite_pc_name(uintptr_t pc, char *buf, size_t len)
{
    char name[512], obj[HCG_PATH_MAX];
    if (!pc) {
        snprintf(buf, len, "unknown");
        return;
    }
    if (hcg_symbolize((const void *)pc, name, sizeof name, obj, sizeof obj) != 0)
        snprintf(name, sizeof name, "%#lx", (unsigned long)pc);
    const char *base = strrchr(obj, '/');
    snprintf(buf, len, "%s (in %s)", name, obj[0] ? (base ? base + 1 : obj) : "anonymous memory");
}

int (*hcg_callsite_name_from)(uintptr_t site, char *buf, size_t len);

void hcg_callsite_name(uintptr_t s, char *buf, size_t len)
{
    if (hcg_callsite_name_from && hcg_callsite_name_from(s, buf, len) == 0)
        return;
    hcg_callsite_pc_name(hcg_callsite_pc(s), buf, len);
}

void hcg_callsite_print(const char *how, uintptr_t site)
{
    char where[HCG_PATH_MAX + 600];
    hcg_callsite_name(site, where, sizeof where);
    hcg_msg("    %s %s", how, where);
    unsigned want = hcg_config_get()->backtrace;
    uintptr_t frames[HCG_BACKTRACE_MAX];
    size_t n = want ? hcg_callsite_frames(site, frames, want) : 0;
    for (size_t i = 0; i < n; i++) {
        hcg_callsite_pc_name(frames[i], where, sizeof where);
        hcg_msg("        #%zu %s", i, where);
    }
}
