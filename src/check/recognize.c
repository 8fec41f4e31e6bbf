/*
 * Which host functions are host copies. Runs on application threads at
 * enqueue: the answer for a pointer is cached in a lock-free table, so a
 * repeated pointer costs a hash probe; a miss may read an ELF file.
 *
 * Registration is looked up after the cache, so registering a pointer
 * already cached as ordinary takes effect at once. A library unloaded
 * (dlclose, interposed) makes every answer of before a miss, and drops the
 * registrations of functions no longer in any object: another library
 * loaded at the same address must not inherit a copy function's answer.
 */
#include <dlfcn.h>
#include <link.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "check/check.h"

/* ---- hcguard_register_copy_fn ----------------------------------------- */

#define MAX_REGISTERED 64

/* Each slot is taken by one compare-and-swap from 0 (free: no function is
 * 0), so two registrations never share one; slots in use lie below
 * g_nregistered, which only grows. in_object: the function was in a
 * loaded object when registered (else in anonymous memory: a closure, JIT
 * code), so that an unload may take it along; 0 until set, and while the
 * slot is free. */
static _Atomic uintptr_t g_registered[MAX_REGISTERED];
static _Atomic uint8_t g_in_object[MAX_REGISTERED];
static _Atomic size_t g_nregistered;
/* Moves after each registration is complete (its slot stored): the
 * threads' last answers (hcg_recognize_fast) are worth only as long as it
 * stays where it was when they were made. */
_Atomic unsigned hcg_g_recognize_gen = 1;

static int is_registered(uintptr_t fn)
{
    size_t n = atomic_load_explicit(&g_nregistered, memory_order_acquire);
    for (size_t i = 0; i < n; i++) {
        if (atomic_load_explicit(&g_registered[i], memory_order_acquire) == fn)
            return 1;
    }
    return 0;
}

/* The first free slot, taken for p; -1 if the table is full. */
static int take_slot(uintptr_t p)
{
    for (size_t i = 0; i < MAX_REGISTERED; i++) {
        uintptr_t free_slot = 0;
        if (!atomic_compare_exchange_strong(&g_registered[i], &free_slot, p))
            continue;
        size_t n = atomic_load(&g_nregistered);
        while (n < i + 1 && !atomic_compare_exchange_weak(&g_nregistered, &n, i + 1))
            ;
        return (int)i;
    }
    return -1;
}

HCG_EXPORT int hcguard_register_copy_fn(void *fn)
{
    uintptr_t p = (uintptr_t)fn;
    if (fn == (void *)hcguard_host_copy)
        return 0; /* a copy whatever the table says */
    if (!p || hcg_audit_libc_name(fn))
        return -1; /* a libc function is refused when launched, registered or not */
    if (is_registered(p))
        return 0;
    int i = take_slot(p);
    if (i < 0)
        return -1;
    Dl_info dl;
    atomic_store(&g_in_object[i], dladdr(fn, &dl) != 0);
    atomic_fetch_add_explicit(&hcg_g_recognize_gen, 1, memory_order_release);
    return 0;
}

/* ---- the cache ---------------------------------------------------------- */

#define CACHE_BITS 12
#define CACHE_SIZE (1u << CACHE_BITS)
#define CACHE_PROBES 32 /* past this many taken slots, the answer is not cached */

typedef struct slot {
    _Atomic uintptr_t key;   /* 0 = free; once set, never changes */
    _Atomic uint64_t value;  /* the unload epoch << 8 | hcg_fnkind + 1; 0 = being filled in */
} slot;

static slot g_cache[CACHE_SIZE];
static _Atomic uint64_t g_misses;
/* Moves each time an object was unloaded: an answer made before is a miss
 * (its function may be another now), and is made again in its slot. */
static _Atomic uint64_t g_unload_epoch;

static uint64_t slot_value(uint64_t epoch, hcg_fnkind kind)
{
    return epoch << 8 | (uint64_t)(kind + 1);
}

static size_t cache_hash(uintptr_t p)
{
    return (size_t)(((uint64_t)p * 0x9E3779B97F4A7C15ull) >> (64 - CACHE_BITS));
}

/* The kind + 1 cached in this epoch, or 0. */
static int cache_find(uintptr_t p, uint64_t epoch)
{
    size_t h = cache_hash(p);
    for (size_t i = 0; i < CACHE_PROBES; i++) {
        slot *s = &g_cache[(h + i) & (CACHE_SIZE - 1)];
        uintptr_t k = atomic_load_explicit(&s->key, memory_order_acquire);
        if (k == 0)
            return 0;
        if (k == p) {
            uint64_t v = atomic_load_explicit(&s->value, memory_order_acquire);
            return v >> 8 == epoch ? (int)(v & 0xff) : 0;
        }
    }
    return 0;
}

/* epoch: the one read before kind was found (an unload meanwhile leaves
 * the answer a miss). */
static void cache_put(uintptr_t p, hcg_fnkind kind, uint64_t epoch)
{
    size_t h = cache_hash(p);
    for (size_t i = 0; i < CACHE_PROBES; i++) {
        slot *s = &g_cache[(h + i) & (CACHE_SIZE - 1)];
        uintptr_t k = 0;
        if (atomic_compare_exchange_strong(&s->key, &k, p) || k == p) {
            atomic_store_explicit(&s->value, slot_value(epoch, kind), memory_order_release);
            return;
        }
    }
}

uint64_t hcg_recognize_misses(void)
{
    return atomic_load_explicit(&g_misses, memory_order_relaxed);
}

/* ---- the slow path ------------------------------------------------------ */

/* What dladdr knows about fn, and the file to read the .symtab from. */
typedef struct objinfo {
    Dl_info dl;
    struct link_map *map;
    const char *file;
} objinfo;

static int obj_lookup(const void *fn, objinfo *o)
{
    memset(o, 0, sizeof *o);
    if (!dladdr1(fn, &o->dl, (void **)&o->map, RTLD_DL_LINKMAP) || !o->map)
        return -1;
    /* The main program's link map has an empty name; dli_fname is then
     * argv[0], which need not be a path. */
    o->file = o->map->l_name[0] ? o->map->l_name : "/proc/self/exe";
    return 0;
}

/* Name of the function that starts exactly at fn, or -1. */
static int exact_name(const void *fn, const objinfo *o, char *buf, size_t len)
{
    if (o->dl.dli_sname && o->dl.dli_saddr == fn) {
        snprintf(buf, len, "%s", o->dl.dli_sname);
        return 0;
    }
    uintptr_t off = (uintptr_t)fn - o->map->l_addr, start = 0;
    if (hcg_elf_symbol_find(o->file, off, buf, len, &start) == 0 && start == off)
        return 0;
    return -1;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && memcmp(s + n - m, suffix, m) == 0;
}

/* .../cuda/core/[any/dirs/]_host_callback*.so (or a relative cuda/core/...). */
static int is_cuda_core_module(const char *path)
{
    const char *base = hcg_file_name(path);
    if (strncmp(base, "_host_callback", 14) != 0 || !ends_with(base, ".so"))
        return 0;
    static const char dir[] = "cuda/core/";
    for (const char *p = path; (p = strstr(p, dir)) && p + sizeof dir - 1 <= base;
         p++) {
        if (p == path || p[-1] == '/')
            return 1;
    }
    return 0;
}

/* .../cuda/bindings/driver*.so: cuda.bindings' Python driver module. */
static int is_bindings_module(const char *path)
{
    const char *base = hcg_file_name(path);
    return strncmp(base, "driver", 6) == 0 && ends_with(base, ".so") &&
           strstr(path, "cuda/bindings/") != NULL;
}

static int is_cuda_core_name(const char *name)
{
    return strcmp(name, "_host_copy") == 0 || ends_with(name, "__host_copy");
}

/* Bit i: HCGUARD_COPY_FN's name i has matched a launched host function. */
static _Atomic uint32_t g_names_matched;
_Static_assert(HCG_MAX_COPY_FNS <= 32, "one bit per name");

static int is_user_name(const char *name)
{
    const hcg_config *c = hcg_config_get();
    for (size_t i = 0; i < c->n_copy_fns; i++) {
        if (strcmp(name, c->copy_fns[i]) == 0) {
            atomic_fetch_or(&g_names_matched, 1u << i);
            return 1;
        }
    }
    return 0;
}

/* A --copy-fn name that matches nothing is a typo the user would never
 * see otherwise: checked at the first host function classified (said as
 * a warning: libraries may still be loaded) and at exit (kept for the
 * summary). A name counts as found if a launched host function had it or
 * a loaded object exports it. */
static atomic_int checked_first;

void hcg_copy_fns_check(int at_exit)
{
    const hcg_config *c = hcg_config_get();
    if ((!at_exit && atomic_exchange(&checked_first, 1)) || !c->n_copy_fns)
        return;
    uint32_t matched = atomic_load(&g_names_matched);
    for (size_t i = 0; i < c->n_copy_fns; i++) {
        if ((matched & (1u << i)) || hcg_real_dlsym(RTLD_DEFAULT, c->copy_fns[i]))
            continue;
        if (at_exit)
            hcg_problem_keep("--copy-fn %s matched no host function, and no loaded library "
                             "exports it (a misspelt name?)", c->copy_fns[i]);
        else
            hcg_msg("WARNING: --copy-fn %s matches nothing loaded so far (no loaded library "
                    "exports it); checked again at exit", c->copy_fns[i]);
    }
}

static hcg_fnkind classify(void *fn)
{
    objinfo o;
    if (obj_lookup(fn, &o) != 0)
        return HCG_FN_CLOSURE; /* not in any object: a ctypes/cffi closure, JIT code */
    if (hcg_audit_libc_name(fn))
        return HCG_FN_LIBC;
    int core_path = is_cuda_core_module(o.file);
    /* Wheels strip .symtab, so the wrapper is known by its module alone:
     * cuda.bindings hands the driver no other host function; what its data
     * holds is checked before anything is read through it. */
    if (!core_path && is_bindings_module(o.file))
        return HCG_FN_WRAP_BINDINGS;
    if (!core_path && hcg_config_get()->n_copy_fns == 0)
        return HCG_FN_ORDINARY; /* nothing a name could match: no file I/O */
    /* Longer than any name matched here; a name that fills it is cut. */
    char name[1024];
    if (exact_name(fn, &o, name, sizeof name) != 0 ||
        strlen(name) == sizeof name - 1)
        return HCG_FN_ORDINARY;
    if (core_path && is_cuda_core_name(name))
        return HCG_FN_COPY_CUDA_CORE;
    return is_user_name(name) ? HCG_FN_COPY_USER : HCG_FN_ORDINARY;
}

/* A registered function counts as registered unless its module's symbol
 * table, or a name, already made it a copy (then the summary says both). */
static hcg_fnkind with_registration(uintptr_t p, hcg_fnkind kind)
{
    if ((kind == HCG_FN_ORDINARY || kind == HCG_FN_CLOSURE) && is_registered(p))
        return HCG_FN_COPY_REGISTERED;
    return kind;
}

static hcg_fnkind recognize(void *fn)
{
    if (!fn)
        return HCG_FN_ORDINARY;
    if (fn == (void *)hcguard_host_copy)
        return HCG_FN_COPY_HCGUARD;
    uintptr_t p = (uintptr_t)fn;
    uint64_t epoch = atomic_load_explicit(&g_unload_epoch, memory_order_acquire);
    int cached = cache_find(p, epoch);
    if (HCG_LIKELY(cached))
        return with_registration(p, (hcg_fnkind)(cached - 1));
    atomic_fetch_add_explicit(&g_misses, 1, memory_order_relaxed);
    /* Symbol tables read from files: no cancellation point added to the
     * launch, which has none of its own. Once per function. */
    int cancel = hcg_nocancel_begin();
    hcg_fnkind kind = classify(fn);
    hcg_nocancel_end(cancel);
    cache_put(p, kind, epoch);
    return with_registration(p, kind);
}

/* ---- objects unloaded ------------------------------------------------------ */

/* glibc's count of objects removed from the process (dl_iterate_phdr),
 * as last seen. */
static _Atomic unsigned long long g_subs_seen;

static int read_subs(struct dl_phdr_info *info, size_t size, void *out)
{
    if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs)
        *(unsigned long long *)out = info->dlpi_subs;
    return 1; /* every object tells the same */
}

/* Registered functions of objects no longer loaded: forgotten, their
 * slots free again. Those registered in anonymous memory (never in an
 * object) stay. */
static void forget_unloaded(void)
{
    size_t n = atomic_load_explicit(&g_nregistered, memory_order_acquire);
    for (size_t i = 0; i < n; i++) {
        uintptr_t p = atomic_load_explicit(&g_registered[i], memory_order_acquire);
        Dl_info dl;
        if (!p || !atomic_load(&g_in_object[i]) || dladdr((void *)p, &dl))
            continue;
        atomic_store(&g_in_object[i], 0); /* before the slot is free */
        atomic_compare_exchange_strong(&g_registered[i], &p, 0);
    }
}

/* After a dlclose: if it removed an object, every answer of before is
 * asked again, and the threads' last answers are no longer used. */
static void after_dlclose(void)
{
    unsigned long long subs = 0;
    dl_iterate_phdr(read_subs, &subs);
    if (atomic_exchange(&g_subs_seen, subs) == subs)
        return;
    atomic_fetch_add_explicit(&g_unload_epoch, 1, memory_order_acq_rel);
    forget_unloaded();
    atomic_fetch_add_explicit(&hcg_g_recognize_gen, 1, memory_order_release);
}

HCG_EXPORT int dlclose(void *handle)
{
    hcg_libc_dlclose_fn f = HCG_REAL(dlclose);
    if (!f)
        return -1;
    int rc = f(handle);
    if (rc == 0)
        after_dlclose();
    return rc;
}

/* ---- which copy functions, and how (the summary) ------------------------- */

size_t hcg_copy_fns_of(hcg_fnkind k, uintptr_t *out, size_t max)
{
    size_t n = 0;
    if (k == HCG_FN_COPY_HCGUARD) {
        if (max)
            out[0] = (uintptr_t)hcguard_host_copy;
        return 1;
    }
    for (size_t i = 0; i < CACHE_SIZE; i++) {
        /* Answers of every epoch: the summary tells what ran. */
        uintptr_t p = atomic_load_explicit(&g_cache[i].key, memory_order_acquire);
        int v = p ? (int)(atomic_load_explicit(&g_cache[i].value, memory_order_acquire) & 0xff)
                  : 0;
        if (!v || with_registration(p, (hcg_fnkind)(v - 1)) != k)
            continue;
        if (n < max)
            out[n] = p;
        n++;
    }
    return n;
}

const char *hcg_copy_fn_how(uintptr_t fn, hcg_fnkind k)
{
    int reg = is_registered(fn);
    switch (k) {
    case HCG_FN_COPY_HCGUARD:
        return "hcguard's own";
    case HCG_FN_COPY_CUDA_CORE:
        return reg ? "recognised by symbol table (registered too)" : "recognised by symbol table";
    case HCG_FN_COPY_USER:
        return reg ? "recognised by name (--copy-fn; registered too)"
                   : "recognised by name (--copy-fn)";
    case HCG_FN_COPY_REGISTERED:
        return "registered (Python hook or hcguard_register_copy_fn)";
    default:
        return "not a copy function";
    }
}

_Thread_local hcg_recognized hcg_t_recognized;

hcg_fnkind hcg_recognize(void *fn)
{
    /* The generation before the answer: a registration completed while it
     * is made moves it, so the answer kept below is not used again. */
    unsigned gen = atomic_load_explicit(&hcg_g_recognize_gen, memory_order_acquire);
    hcg_fnkind kind = recognize(fn);
    /* after the first match could be made: one load once checked */
    if (HCG_UNLIKELY(!atomic_load_explicit(&checked_first, memory_order_relaxed))) {
        int cancel = hcg_nocancel_begin();
        hcg_copy_fns_check(0);
        hcg_nocancel_end(cancel);
    }
    hcg_t_recognized.fn = (uintptr_t)fn;
    hcg_t_recognized.gen = gen;
    hcg_t_recognized.kind = (uint8_t)kind;
    return kind;
}

/* ---- names -------------------------------------------------------------- */

int (*hcg_symbolize_from)(const void *fn, char *buf, size_t len, char *obj, size_t objlen);

int hcg_symbolize(const void *fn, char *buf, size_t len, char *obj,
                  size_t objlen)
{
    if (hcg_symbolize_from)
        return hcg_symbolize_from(fn, buf, len, obj, objlen);
    objinfo o;
    int found = fn ? obj_lookup(fn, &o) : -1;
    if (obj && objlen)
        snprintf(obj, objlen, "%s", found == 0 && o.dl.dli_fname ? o.dl.dli_fname : "");
    if (found != 0 || !buf || len == 0)
        return -1;
    if (o.dl.dli_sname && o.dl.dli_saddr == fn) {
        snprintf(buf, len, "%s", o.dl.dli_sname);
        return 0;
    }
    uintptr_t off = (uintptr_t)fn - o.map->l_addr, start = 0;
    char name[512];
    if (hcg_elf_symbol_find(o.file, off, name, sizeof name, &start) == 0) {
        if (start == off)
            snprintf(buf, len, "%s", name);
        else
            snprintf(buf, len, "%s+0x%zx", name, (size_t)(off - start));
        return 0;
    }
    if (o.dl.dli_sname && o.dl.dli_saddr) {
        snprintf(buf, len, "%s+0x%zx", o.dl.dli_sname,
                 (size_t)((uintptr_t)fn - (uintptr_t)o.dl.dli_saddr));
        return 0;
    }
    return -1;
}
