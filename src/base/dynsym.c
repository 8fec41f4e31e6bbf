/* Symbols of an object already loaded, read from its dynamic symbol table
 * in memory (GNU hash), without dlsym: hcguard exports dlsym itself, so
 * glibc's own has to be found this way, and the benchmark finds the real
 * driver's entry points this way beside hcguard's.
 *
 * Everything here can run before a sanitizer runtime preloaded ahead of
 * hcguard is initialised (it resolves its interceptors with dlsym, which
 * is hcguard's): no instrumentation, and no libc function a sanitizer
 * intercepts. */
#include <elf.h>
#include <link.h>

#include "base/base.h"

#define HCG_EARLY __attribute__((no_sanitize("address", "thread", "undefined")))

typedef struct elf_dyn_view {
    uintptr_t base;
    const ElfW(Sym) *sym;
    const char *str;
    const uint32_t *gnu_hash;
    const ElfW(Half) *versym;
    const ElfW(Verdef) *verdef;
} elf_dyn_view;

HCG_EARLY static int str_eq(const char *a, const char *b)
{
    while (*a && *a == *b)
        a++, b++;
    return *a == *b;
}

/* Whether the file name of path begins with prefix ("libc.so."). */
HCG_EARLY static int base_has_prefix(const char *path, const char *prefix)
{
    const char *base = path;
    for (const char *p = path; *p; p++)
        if (*p == '/')
            base = p + 1;
    for (; *prefix; prefix++, base++)
        if (*base != *prefix)
            return 0;
    return 1;
}

/* ld.so relocates d_ptr in place on most targets, not on all. */
HCG_EARLY static uintptr_t dyn_ptr(const elf_dyn_view *v, ElfW(Addr) p)
{
    return p < v->base ? v->base + p : p;
}

/* The object's dynamic section, from the loader's list of objects. */
HCG_EARLY static int find_object(const char *prefix, elf_dyn_view *v)
{
    for (const struct link_map *m = _r_debug.r_map; m; m = m->l_next) {
        if (!m->l_name || !base_has_prefix(m->l_name, prefix) || !m->l_ld)
            continue;
        v->base = m->l_addr;
        for (const ElfW(Dyn) *d = m->l_ld; d->d_tag != DT_NULL; d++) {
            uintptr_t p = dyn_ptr(v, d->d_un.d_ptr);
            switch (d->d_tag) {
            case DT_SYMTAB: v->sym = (const void *)p; break;
            case DT_STRTAB: v->str = (const void *)p; break;
            case DT_GNU_HASH: v->gnu_hash = (const void *)p; break;
            case DT_VERSYM: v->versym = (const void *)p; break;
            case DT_VERDEF: v->verdef = (const void *)p; break;
            default: break;
            }
        }
        return v->sym && v->str && v->gnu_hash;
    }
    return 0;
}

HCG_EARLY static uint32_t gnu_hash(const char *s)
{
    uint32_t h = 5381;
    for (; *s; s++)
        h = h * 33 + (unsigned char)*s;
    return h;
}

HCG_EARLY static const char *version_name(const elf_dyn_view *v, ElfW(Half) idx)
{
    const ElfW(Verdef) *d = v->verdef;
    while (d) {
        if ((d->vd_ndx & 0x7fff) == (idx & 0x7fff)) {
            const ElfW(Verdaux) *a = (const void *)((const char *)d + d->vd_aux);
            return v->str + a->vda_name;
        }
        d = d->vd_next ? (const void *)((const char *)d + d->vd_next) : NULL;
    }
    return NULL;
}

HCG_EARLY static int version_matches(const elf_dyn_view *v, uint32_t i, const char *version)
{
    if (!version)
        return 1;
    const char *ver = v->versym && v->verdef ? version_name(v, v->versym[i]) : NULL;
    return ver && str_eq(ver, version);
}

HCG_EARLY static void *lookup(const elf_dyn_view *v, const char *name, const char *version)
{
    const uint32_t *h = v->gnu_hash;
    uint32_t nbuckets = h[0], symoff = h[1], bloom_words = h[2];
    const uint32_t *buckets = (const void *)((const ElfW(Addr) *)(h + 4) + bloom_words);
    const uint32_t *chain = buckets + nbuckets;
    uint32_t want = gnu_hash(name);
    uint32_t i = buckets[want % nbuckets];
    if (i < symoff)
        return NULL;
    for (;; i++) {
        uint32_t ch = chain[i - symoff];
        const ElfW(Sym) *s = &v->sym[i];
        if ((ch | 1) == (want | 1) && str_eq(v->str + s->st_name, name) &&
            s->st_shndx != SHN_UNDEF && version_matches(v, i, version))
            return (void *)(v->base + s->st_value);
        if (ch & 1)
            return NULL;
    }
}

HCG_EARLY void *hcg_dynsym(const char *object, const char *name, const char *version)
{
    elf_dyn_view v = {0};
    return find_object(object, &v) ? lookup(&v, name, version) : NULL;
}

HCG_EARLY const char *hcg_dyn_soname(uintptr_t base, const void *dyn)
{
    elf_dyn_view v = {.base = base};
    uintptr_t soname = 0;
    int has_soname = 0;
    for (const ElfW(Dyn) *d = dyn; d && d->d_tag != DT_NULL; d++) {
        if (d->d_tag == DT_STRTAB)
            v.str = (const void *)dyn_ptr(&v, d->d_un.d_ptr);
        else if (d->d_tag == DT_SONAME)
            soname = d->d_un.d_val, has_soname = 1;
    }
    return has_soname && v.str ? v.str + soname : NULL;
}
