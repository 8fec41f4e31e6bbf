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
 * path. In a process with the CUDA runtime, a launch whose wrapper returns
 * into it reads the program's return address from a stack slot learned
 * once (hcg_callsite_launch, below). Sites are named off the hot path too
 * (hcg_callsite_name). */
#include <alloca.h>
#include <dlfcn.h>
#include <execinfo.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unwind.h>

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

static pthread_mutex_t rt_lock = PTHREAD_MUTEX_INITIALIZER; /* the runtime's slots */

void hcg_callsite_after_fork(void)
{
    pthread_mutex_init(&site_lock, NULL);
    pthread_mutex_init(&rt_lock, NULL);
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
    const char *base = hcg_file_name(map->l_name);
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
atomic_int hcg_g_launch_rare = HCG_LAUNCH_UNREADY;

/* ---- launches made through the CUDA runtime --------------------------------
 * libcudart calls the wrappers through pointers from cuGetProcAddress, so a
 * launch's wrapper returns to R, in the runtime; the program's frame is a
 * few frames further up. On x86-64 the return address into it lies in a
 * stack slot (the CFA of the frame it called, less 8) whose distance from
 * hcg_callsite_launch's own frame stays the same as long as the frames in
 * between keep their sizes: learned once per R and path with a full unwind
 * (_Unwind_Backtrace), then read, one load. A value read there is believed
 * only if an unwind found that very value at that very distance for R
 * before (path and call site both seen): a slot that moved (another way
 * into R, a runtime frame of variable size) is never taken for the site,
 * the stack is unwound again and the new distance kept, up to RT_OFFS per
 * R. Where nothing fits (RT_GIVE_UP unwinds for R taught nothing that
 * could be kept, or the unwind found no frame outside), the launch names R.
 * Elsewhere (aarch64: return addresses are not at CFA - 8) launches name
 * their wrapper's return address, as before. */
#if defined(__x86_64__)
#define RT_SLOTS 1
#else
#define RT_SLOTS 0
#endif
#define RT_OFFS 8      /* distances kept per R */
#define RT_RETS 1024   /* return addresses classified (open addressing) */
#define RT_SITES 4096  /* (R, distance, site) seen by an unwind */
#define RT_GIVE_UP 64  /* unwinds for one R that left nothing kept */
#define RT_HITS 8      /* per thread */

typedef struct rt_ret {
    uintptr_t ra;
    uint8_t inside;   /* hcguard's or the CUDA libraries' code (internal_pc) */
    uint8_t n_off;
    uint16_t wasted;  /* unwinds that left nothing kept */
    uint32_t off[RT_OFFS];
} rt_ret;

typedef struct rt_site {
    uintptr_t ra, off, site;
} rt_site;

static rt_ret *rt_rets;   /* under rt_lock; made on first use */
static unsigned n_rt_rets;
static rt_site *rt_sites;
static unsigned n_rt_sites;

/* The launches this thread resolved lately: off 0 means R is the site
 * itself (the program called the wrapper). stack_hi: the highest frame
 * the last unwind on this thread reached; no slot at or above it is read
 * (a launch from above it, or from another stack, learns again). */
static _Thread_local struct {
    struct {
        uintptr_t ra, off, site;
    } hit[RT_HITS];
    unsigned next;
    uintptr_t stack_hi;
} rt_t;

static uint64_t rt_hash(uintptr_t a, uintptr_t b, uintptr_t c)
{
    return ((a * 0x9e3779b97f4a7c15ull) ^ (b * 0xc2b2ae3d27d4eb4full) ^ c) *
           0x165667b19e3779f9ull;
}

/* R's entry (made, classified outside the lock, on first sight), copied
 * into *out. */
static void rt_ret_get(uintptr_t ra, rt_ret *out)
{
    uint64_t h = rt_hash(ra, 0, 0);
    for (int pass = 0; pass < 2; pass++) {
        int inside = pass ? internal_pc(ra) : 0; /* dladdr: never under rt_lock */
        pthread_mutex_lock(&rt_lock);
        if (!rt_rets)
            rt_rets = calloc(RT_RETS, sizeof *rt_rets);
        for (unsigned i = 0; rt_rets && i < RT_RETS; i++) {
            rt_ret *e = &rt_rets[(h + i) % RT_RETS];
            if (e->ra == ra) {
                *out = *e;
                pthread_mutex_unlock(&rt_lock);
                return;
            }
            if (e->ra)
                continue;
            if (pass && n_rt_rets < RT_RETS * 3 / 4) {
                e->ra = ra;
                e->inside = (uint8_t)inside;
                n_rt_rets++;
            }
            break;
        }
        pthread_mutex_unlock(&rt_lock);
        if (pass) { /* kept, or the table is full: classified for this launch */
            memset(out, 0, sizeof *out);
            out->ra = ra;
            out->inside = (uint8_t)inside;
        }
    }
}

/* Whether an unwind found site at distance off for R (rt_lock held). */
static rt_site *rt_site_slot(uintptr_t ra, uintptr_t off, uintptr_t site, int *found)
{
    uint64_t h = rt_hash(ra, off, site);
    *found = 0;
    if (!rt_sites)
        rt_sites = calloc(RT_SITES, sizeof *rt_sites);
    for (unsigned i = 0; rt_sites && i < RT_SITES; i++) {
        rt_site *e = &rt_sites[(h + i) % RT_SITES];
        if (e->ra == ra && e->off == off && e->site == site) {
            *found = 1;
            return e;
        }
        if (!e->ra)
            return n_rt_sites < RT_SITES * 3 / 4 ? e : NULL;
    }
    return NULL;
}

static void rt_hit_put(uintptr_t ra, uintptr_t off, uintptr_t site)
{
    unsigned i = rt_t.next++ % RT_HITS;
    rt_t.hit[i].ra = ra;
    rt_t.hit[i].off = off;
    rt_t.hit[i].site = site;
}

/* The word at base + off, if it lies below the highest frame this
 * thread's last unwind reached (this thread's live stack, above the
 * caller's frame): 0 and *v, or -1. Fault-contained, in every build
 * (sanitizer builds too, by their portable copy): on a stack
 * switched since (a signal handler's alternate stack, a fiber's), below
 * the bound, a distance learned on the thread's own stack can lie past
 * the top of the small one, in memory that is not mapped. Uninstrumented
 * either way: a distance learned on another path may point into a
 * sanitizer's redzone of the program's frame, which is not an error here,
 * only a value that fails the check. */
__attribute__((no_sanitize("address", "thread"))) static int rt_read(uintptr_t base,
                                                                       uintptr_t off,
                                                                       uintptr_t *v)
{
    uintptr_t at = base + off;
    if (at < base || rt_t.stack_hi < sizeof *v || at > rt_t.stack_hi - sizeof *v)
        return -1;
    /* Where hcguard's handlers could not be installed nothing is read:
     * the stack is unwound at every such launch instead. */
    return hcg_fault_ready() ? hcg_fault_copy(v, (const void *)at, sizeof *v, NULL) : -1;
}

typedef struct rt_walk {
    uintptr_t ra, base;   /* R; hcg_callsite_launch's frame */
    uintptr_t prev_cfa;   /* the CFA the unwinder gave for the frame before */
    uintptr_t slot, site; /* found: where the program's return address is */
    uintptr_t hi;         /* the highest CFA seen */
    uintptr_t lo;         /* the deepest frame of the callback */
    unsigned n;
    int past_ra;
} rt_walk;

/* Where the return address ip lies: pushed by the call of the frame
 * below, just under that frame's CFA. libgcc's _Unwind_GetCFA gives, with
 * a frame's ip, the CFA of the frame it called; another unwinder may give
 * the frame's own, so both are tried, and the slot must hold ip. */
__attribute__((no_sanitize("address", "thread"))) static uintptr_t rt_slot_of(uintptr_t ip,
                                                                              uintptr_t cfa,
                                                                              uintptr_t prev)
{
    const uintptr_t w = sizeof(uintptr_t);
    if (cfa > w && *(const uintptr_t *)(cfa - w) == ip)
        return cfa - w;
    if (prev > w && *(const uintptr_t *)(prev - w) == ip)
        return prev - w;
    return 0;
}

static _Unwind_Reason_Code rt_walk_frame(struct _Unwind_Context *ctx, void *arg)
{
    rt_walk *w = arg;
    uintptr_t ip = (uintptr_t)_Unwind_GetIP(ctx), cfa = (uintptr_t)_Unwind_GetCFA(ctx);
    if (!ip || ++w->n > WALK_MAX)
        return _URC_END_OF_STACK;
    if (cfa > w->hi)
        w->hi = cfa;
    uintptr_t here = (uintptr_t)__builtin_frame_address(0);
    if (!w->lo || here < w->lo)
        w->lo = here;
    /* The first frame R returns into, then the first one outside. */
    if (!w->site && !w->past_ra)
        w->past_ra = ip == w->ra && cfa > w->base;
    else if (!w->site && !internal_pc(ip)) {
        w->site = ip;
        w->slot = rt_slot_of(ip, cfa, w->prev_cfa);
    }
    w->prev_cfa = cfa;
    return _URC_NO_REASON;
}

/* Unwind this thread's stack: the program's return address above R, and
 * its slot's distance from base in *off; 0 if none is found. *lo: the
 * deepest frame the walk's callback had. */
__attribute__((noinline, no_sanitize("address", "thread"))) static uintptr_t
rt_learn(uintptr_t ra, uintptr_t base, uintptr_t *off, uintptr_t *lo)
{
    rt_walk w;
    memset(&w, 0, sizeof w);
    w.ra = ra;
    w.base = base;
    _Unwind_Backtrace(rt_walk_frame, &w);
    *lo = w.lo;
    /* The stack walked last: a thread that launches from another stack
     * (a fiber's) reads nothing above that one's top, but learns again. */
    if (w.hi)
        rt_t.stack_hi = w.hi;
    if (!w.site || w.slot <= base || w.slot - base > UINT32_MAX)
        return 0; /* not the x86-64 convention: nothing to learn */
    *off = w.slot - base;
    return w.site;
}

/* Keep what an unwind found (off 0: it found nothing). */
static void rt_keep(uintptr_t ra, uintptr_t off, uintptr_t site)
{
    uint64_t h = rt_hash(ra, 0, 0);
    pthread_mutex_lock(&rt_lock);
    rt_ret *e = NULL;
    for (unsigned i = 0; rt_rets && i < RT_RETS; i++) {
        rt_ret *x = &rt_rets[(h + i) % RT_RETS];
        if (x->ra == ra || !x->ra) {
            e = x->ra == ra ? x : NULL;
            break;
        }
    }
    int kept = 0, known = 0;
    if (e && off) {
        unsigned k = 0;
        while (k < e->n_off && e->off[k] != off)
            k++;
        if (k == e->n_off && k < RT_OFFS)
            e->off[e->n_off++] = (uint32_t)off;
        rt_site *slot = k < RT_OFFS ? rt_site_slot(ra, off, site, &known) : NULL;
        if (slot && !known) {
            slot->ra = ra;
            slot->off = off;
            slot->site = site;
            n_rt_sites++;
        }
        kept = slot != NULL;
    }
    if (e && !kept && e->wasted < RT_GIVE_UP)
        e->wasted++;
    pthread_mutex_unlock(&rt_lock);
}

/* The dead stack an unwind leaves below its caller holds copies of the
 * program's return addresses (the unwinder's contexts, the walk's own):
 * a later launch from deeper down (a larger runtime frame, an alloca)
 * could find one at a learned distance, in memory its frames have not
 * written, and believe it. Cleared down to lo, the deepest frame of the
 * walk's callback (mapped: in use a moment ago). */
__attribute__((noinline, no_sanitize("address", "thread"))) static void rt_scrub(uintptr_t lo)
{
    uintptr_t top = (uintptr_t)__builtin_frame_address(0);
    if (!lo || lo >= top || top - lo > (64u << 10))
        return;
    volatile unsigned char *dead = alloca(top - lo);
    for (size_t i = 0; i < top - lo; i++)
        dead[i] = 0;
}

static uintptr_t rt_site_slow(uintptr_t ra, uintptr_t base)
{
    rt_ret r;
    rt_ret_get(ra, &r);
    if (!r.inside) { /* the program's own call */
        rt_hit_put(ra, 0, ra);
        return ra;
    }
    /* The values at R's known distances, read first, then checked. */
    uintptr_t v[RT_OFFS];
    for (unsigned i = 0; i < r.n_off; i++)
        if (rt_read(base, r.off[i], &v[i]) != 0)
            v[i] = 0;
    pthread_mutex_lock(&rt_lock);
    uintptr_t off = 0, site = 0;
    for (unsigned i = 0; i < r.n_off && !site; i++) {
        int known = 0;
        if (v[i])
            rt_site_slot(ra, r.off[i], v[i], &known);
        if (known) {
            off = r.off[i];
            site = v[i];
        }
    }
    pthread_mutex_unlock(&rt_lock);
    if (!site && r.wasted < RT_GIVE_UP) {
        uintptr_t lo = 0;
        site = rt_learn(ra, base, &off, &lo);
        rt_scrub(lo);
        rt_keep(ra, site ? off : 0, site);
        hcg_debug("call site: stack unwound above %#lx (in the CUDA libraries): %s %#lx at +%#lx",
                  (unsigned long)ra, site ? "the program's frame" : "no frame outside",
                  (unsigned long)site, (unsigned long)off);
    }
    if (!site)
        return ra;
    rt_hit_put(ra, off, site);
    return site;
}

__attribute__((noinline)) uintptr_t hcg_callsite_launch(uintptr_t ra)
{
#if RT_SLOTS
    /* The anchor of every distance: this frame (GCC and clang give the
     * function a frame pointer for it). */
    uintptr_t base = (uintptr_t)__builtin_frame_address(0);
    for (unsigned i = 0; i < RT_HITS; i++) {
        if (rt_t.hit[i].ra != ra)
            continue;
        uintptr_t v;
        if (!rt_t.hit[i].off)
            return ra;
        if (rt_read(base, rt_t.hit[i].off, &v) == 0 && v == rt_t.hit[i].site)
            return v;
    }
    return rt_site_slow(ra, base);
#else
    (void)rt_site_slow; /* aarch64: return addresses are not at CFA - 8 */
    return ra;
#endif
}

uintptr_t hcg_callsite_rare(uintptr_t ra)
{
    return hcg_g_backtrace ? hcg_callsite_here() : hcg_callsite_launch(ra);
}

uintptr_t hcg_callsite_made(uintptr_t ra)
{
    if (hcg_g_backtrace)
        return hcg_callsite_here();
    uintptr_t s = hcg_callsite_launch(ra);
    if (s != ra)
        return s;
    rt_ret r;
    rt_ret_get(ra, &r);
    return r.inside ? hcg_callsite_here() : ra;
}

/* A runtime that calls the wrappers: launches take the branch that asks
 * hcg_callsite_launch. Seen when it looks entry points up (hooked by the
 * interception layer) or, at start-up, among the loaded objects. */
static int is_runtime(const char *path)
{
    const char *base = hcg_file_name(path);
    return base && strncmp(base, "libcudart", 9) == 0;
}

static void runtime_seen(void)
{
    if (RT_SLOTS && !(atomic_load(&hcg_g_launch_rare) & HCG_LAUNCH_RUNTIME))
        atomic_fetch_or(&hcg_g_launch_rare, HCG_LAUNCH_RUNTIME);
}

static void note_lookup(uintptr_t ra)
{
    static _Atomic uintptr_t last; /* a caller already looked at */
    if ((atomic_load_explicit(&hcg_g_launch_rare, memory_order_relaxed) & HCG_LAUNCH_RUNTIME) ||
        atomic_exchange_explicit(&last, ra, memory_order_relaxed) == ra)
        return;
    Dl_info dl;
    if (dladdr((void *)ra, &dl) && is_runtime(dl.dli_fname))
        runtime_seen();
}
void (*hcg_gpa_caller_hook)(uintptr_t ra) = note_lookup;

static int find_runtime(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    (void)arg;
    return is_runtime(info->dlpi_name);
}

void hcg_callsite_init(void)
{
    hcg_g_backtrace = hcg_config_get()->backtrace;
    if (hcg_g_backtrace)
        atomic_fetch_or(&hcg_g_launch_rare, HCG_LAUNCH_BACKTRACE);
    if (dl_iterate_phdr(find_runtime, NULL))
        runtime_seen();
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
    snprintf(buf, len, "%s (in %s)", name, obj[0] ? hcg_file_name(obj) : "anonymous memory");
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
