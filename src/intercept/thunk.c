/* Thunks: stand-ins for driver entry points of any signature, so that a
 * driver call made from inside a host function (forbidden by CUDA, often a
 * deadlock) is noticed however the caller found the entry point.
 *
 * Thunk i is a small assembly stub. Outside a host function it costs one
 * thread-local load, a branch that is not taken and an indirect jump
 * through hcg_thunk_real[i]; it touches no argument register and not the
 * stack, and it jumps rather than calls, so stack arguments, varargs and
 * results returned through memory reach the real function as the caller
 * left them. Inside a host function the stub goes to a common slow path,
 * which saves every argument register, asks the handler, and then either
 * restores them and jumps to the real function or returns the handler's
 * CUresult.
 *
 * Registration (hcg_thunk_for) is rare and on application threads: a
 * mutex serialises inserts; look-ups read an open-addressing hash keyed by
 * the real pointer without a lock. Entries are never removed, so a thunk
 * stays valid for the life of the process.
 *
 * Past the HCG_THUNK_MAX thunks handed out at run time come the exports:
 * one thunk for each function of the toolkit's driver (its stub libcuda.so,
 * listed at configure time), which libhcguard exports under the driver's
 * name as a weak symbol, so that a program linked with -lcuda reaches a
 * thunk whatever it calls, while hcguard's own wrappers (strong) keep their
 * names. An export's slot starts out at a resolver stub that saves the
 * argument registers, finds the driver's function, stores it in the slot
 * and jumps there: one dlsym on the first call, nothing after. */
#include <pthread.h>
#include <string.h>

#include "intercept/intercept.h"
#include "hcg_driver_exports.h" /* HCG_DRIVER_EXPORTS: generated at configure time */

#define NAME_LEN 64

/* HCG_THUNK_NO_ASM builds the portable fallback anywhere (its test). */
#if (defined(__x86_64__) || defined(__aarch64__)) && !defined(HCG_THUNK_NO_ASM)
#define HCG_HAVE_THUNKS 1
#define N_EXPORTS HCG_N_DRIVER_EXPORTS
#else
#define N_EXPORTS 0
#endif
#define N_SLOTS (HCG_THUNK_MAX + N_EXPORTS)
#define RESOLVER_STRIDE HCG_THUNK_RESOLVER_STRIDE

#ifdef HCG_HAVE_THUNKS
extern const char hcg_thunk_resolvers[] __attribute__((visibility("hidden")));
#define RESOLVER_SLOT(i, name)                                                 \
    [HCG_THUNK_MAX + (i)] = (void *)(hcg_thunk_resolvers + (i) * RESOLVER_STRIDE),
#define EXPORT_NAME(i, name) #name,
static const char *const export_names[N_EXPORTS + 1] = {HCG_DRIVER_EXPORTS(EXPORT_NAME) NULL};
#else
#define RESOLVER_SLOT(i, name)
#endif

/* Read by the stubs. A thunk's slot is written once, before the thunk is
 * published: a thread that calls it got it through hcg_thunk_for or from a
 * thread that did, so it sees the entry (as with any pointer to data handed
 * between threads). An export's slot is static data, later overwritten
 * (atomically, always with the same value) by whichever thread resolves it
 * first. */
void *hcg_thunk_real[N_SLOTS] __attribute__((visibility("hidden"), used)) = {
    NULL, HCG_DRIVER_EXPORTS(RESOLVER_SLOT)};
static char names[HCG_THUNK_MAX][NAME_LEN];
static atomic_uint n_thunks;
static _Atomic(hcg_thunk_handler) handler;

static const char *name_at(unsigned idx)
{
#ifdef HCG_HAVE_THUNKS
    if (idx >= HCG_THUNK_MAX)
        return export_names[idx - HCG_THUNK_MAX];
#endif
    return names[idx];
}

/* The slow path, called from the stubs with the caller's registers saved. */
unsigned hcg_thunk_slow(unsigned idx) __attribute__((visibility("hidden"), used));

unsigned hcg_thunk_slow(unsigned idx)
{
    hcg_thunk_handler h = atomic_load_explicit(&handler, memory_order_acquire);
    if (!h)
        return (unsigned)HCG_THUNK_PASS;
    /* A handler that calls a thunk itself must not come back here. */
    unsigned char was = hcg_self.in_host_fn;
    hcg_self.in_host_fn = 0;
    CUresult r = h(idx, name_at(idx), __atomic_load_n(&hcg_thunk_real[idx], __ATOMIC_ACQUIRE));
    hcg_self.in_host_fn = was;
    return (unsigned)r;
}

/* The stubs themselves are in thunk_x86_64.S and thunk_aarch64.S. */
#ifdef HCG_HAVE_THUNKS
#define STUB_STRIDE HCG_THUNK_STRIDE
#endif

/* ---- the table -------------------------------------------------------------- */
#ifdef HCG_HAVE_THUNKS
#define HASH_SLOTS (2 * HCG_THUNK_MAX) /* power of two, never more than half full */
static _Atomic uint32_t slots[HASH_SLOTS]; /* index + 1; 0 = empty */
static pthread_mutex_t insert_lock = PTHREAD_MUTEX_INITIALIZER;
extern const char hcg_thunk_stubs[] __attribute__((visibility("hidden")));

static void *stub_at(unsigned idx)
{
    return (void *)(hcg_thunk_stubs + (size_t)idx * STUB_STRIDE);
}

/* Whether p is in stubs [from, to): thunks, exports or both. */
static int in_stubs(const void *p, unsigned from, unsigned to)
{
    uintptr_t a = (uintptr_t)p, base = (uintptr_t)hcg_thunk_stubs;
    return a >= base + (uintptr_t)from * STUB_STRIDE && a < base + (uintptr_t)to * STUB_STRIDE;
}

static int is_stub(const void *p)
{
    return in_stubs(p, 0, N_SLOTS);
}

static uint32_t hash_of(const void *p)
{
    uint64_t h = (uint64_t)(uintptr_t)p * 0x9e3779b97f4a7c15ull;
    return (uint32_t)(h >> 40) & (HASH_SLOTS - 1);
}

/* The slot that holds real, or the empty slot where it would go. */
static uint32_t probe(const void *real, uint32_t *idx)
{
    for (uint32_t s = hash_of(real);; s = (s + 1) & (HASH_SLOTS - 1)) {
        uint32_t v = atomic_load_explicit(&slots[s], memory_order_acquire);
        if (v == 0 || hcg_thunk_real[v - 1] == real) {
            *idx = v;
            return s;
        }
    }
}

/* Fork hooks (src/lifecycle/fork.c): a child forked while another thread held the
 * lock must not inherit it. */
void hcg_thunk_fork_lock(void)
{
    pthread_mutex_lock(&insert_lock);
}

void hcg_thunk_fork_unlock(void)
{
    pthread_mutex_unlock(&insert_lock);
}

void hcg_thunk_after_fork(void)
{
    pthread_mutex_init(&insert_lock, NULL);
}

/* Under insert_lock. Index + 1 of the new entry, or 0 if the table is full. */
static uint32_t insert(uint32_t slot, const char *name, void *real)
{
    unsigned n = atomic_load_explicit(&n_thunks, memory_order_relaxed);
    if (n >= HCG_THUNK_MAX)
        return 0;
    hcg_thunk_real[n] = real;
    size_t len = name ? strnlen(name, NAME_LEN - 1) : 0;
    memcpy(names[n], name ? name : "", len);
    names[n][len] = '\0';
    atomic_store_explicit(&n_thunks, n + 1, memory_order_release);
    atomic_store_explicit(&slots[slot], n + 1, memory_order_release);
    return n + 1;
}

void *hcg_thunk_for(const char *name, void *real)
{
    if (!real || is_stub(real))
        return real;
    uint32_t v;
    probe(real, &v);
    if (v)
        return stub_at(v - 1);
    hcg_fork_register();
    pthread_mutex_lock(&insert_lock);
    uint32_t slot = probe(real, &v); /* again: another thread may have won */
    if (!v)
        v = insert(slot, name, real);
    pthread_mutex_unlock(&insert_lock);
    return v ? stub_at(v - 1) : real;
}

/* ---- the exports -------------------------------------------------------------
 * What an unresolved export answers instead of crashing: every driver entry
 * point returns a CUresult, whatever its arguments. */
static CUresult answer_not_initialized(void)
{
    return CUDA_ERROR_NOT_INITIALIZED;
}

static CUresult answer_not_found(void)
{
    return CUDA_ERROR_NOT_FOUND;
}

/* Called from the resolver stubs with the caller's registers saved: where
 * export idx must go. The slot keeps the driver's function, or the "not
 * found" answer; not the "no driver" one, as the program may load the
 * driver later. Racing threads store the same value. */
void *hcg_thunk_resolve(unsigned idx) __attribute__((visibility("hidden"), used));

void *hcg_thunk_resolve(unsigned idx)
{
    hcg_driver *d = hcg_driver_get();
    if (!d)
        return (void *)answer_not_initialized;
    void *p = hcg_real_dlsym(d->handle, export_names[idx - HCG_THUNK_MAX]);
    if (!p || is_stub(p)) /* a "driver" that is hcguard itself would loop */
        p = (void *)answer_not_found;
    __atomic_store_n(&hcg_thunk_real[idx], p, __ATOMIC_RELEASE);
    return p;
}

void *hcg_thunk_export(unsigned i)
{
    return i < hcg_thunk_exports() ? stub_at(HCG_THUNK_MAX + i) : NULL;
}

int hcg_thunk_is_export(const void *p)
{
    return in_stubs(p, HCG_THUNK_MAX, N_SLOTS);
}
#else
/* No stubs on this architecture: pointers are handed out as they are, and
 * calls through them inside host functions go unnoticed; nothing is
 * exported. */
void *hcg_thunk_for(const char *name, void *real)
{
    (void)name;
    return real;
}

void *hcg_thunk_export(unsigned i)
{
    (void)i;
    return NULL;
}

int hcg_thunk_is_export(const void *p)
{
    (void)p;
    return 0;
}

void hcg_thunk_fork_lock(void) {}
void hcg_thunk_fork_unlock(void) {}
void hcg_thunk_after_fork(void) {}
#endif

void hcg_thunk_set_handler(hcg_thunk_handler h)
{
    atomic_store_explicit(&handler, h, memory_order_release);
}

unsigned hcg_thunk_count(void)
{
    return atomic_load_explicit(&n_thunks, memory_order_acquire);
}

unsigned hcg_thunk_exports(void)
{
    return N_EXPORTS;
}

const char *hcg_thunk_name(unsigned idx)
{
    if (idx >= HCG_THUNK_MAX)
        return idx < N_SLOTS ? name_at(idx) : NULL;
    return idx < hcg_thunk_count() ? names[idx] : NULL;
}
