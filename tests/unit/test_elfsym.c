/*
 * hcg_elf_symbol_at and friends: static functions of this program and of a
 * shared library found by .symtab; stripped, truncated, corrupted, non-ELF
 * and missing files give -1 without a fault (run under ASan to make an
 * over-read of an exact-size buffer fail the test).
 */
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hcg.h"
#include "../common/check.h"

#ifdef HCG_TEST_EXPECT_EXEC
#define PROGRAM "test_elfsym_exec"
#else
#define PROGRAM "test_elfsym"
#endif
#define MODULE HCG_PYMOD_DIR "/cuda/core/cu13/" HCG_PYMOD_FILE
#define MODULE_STRIPPED HCG_PYMOD_STRIPPED_DIR "/cuda/core/" HCG_PYMOD_FILE
#define COPY_NAME "__pyx_f_4cuda_4core_4cu13_14_host_callback__host_copy"

__attribute__((noinline)) static int hcg_test_static_target(int x)
{
    /* Enough code that the function is longer than one byte. */
    volatile int v = x;
    for (int i = 0; i < 3; i++)
        v = v * 7 + i;
    return v;
}

typedef struct blob {
    unsigned char *p;
    size_t size;
} blob;

static blob read_file(const char *path)
{
    blob b = {NULL, 0};
    FILE *f = fopen(path, "rb");
    if (!f)
        return b;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    b.p = malloc(n > 0 ? (size_t)n : 1);
    if (b.p && n > 0 && fread(b.p, 1, (size_t)n, f) == (size_t)n)
        b.size = (size_t)n;
    fclose(f);
    return b;
}

static void write_file(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f)
        return;
    CHECK(fwrite(p, 1, n, f) == n);
    fclose(f);
}

/* Lookup over an exact-size heap copy, so ASan sees any over-read. */
static int image_lookup(const unsigned char *p, size_t n, uintptr_t off,
                        char *name, size_t len)
{
    unsigned char *copy = malloc(n ? n : 1);
    if (n)
        memcpy(copy, p, n);
    int rc = hcg_elf_symbol_image(copy, n, off, name, len, NULL);
    free(copy);
    return rc;
}

/* st_value-space address of fn: see elfsym.c. */
static uintptr_t symtab_addr(const void *fn, const char **file, Dl_info *dl)
{
    struct link_map *map = NULL;
    CHECK(dladdr1(fn, dl, (void **)&map, RTLD_DL_LINKMAP) != 0 && map != NULL);
    if (!map)
        return 0;
    *file = map->l_name[0] ? map->l_name : "/proc/self/exe";
    return (uintptr_t)fn - map->l_addr;
}

static int self_type(void)
{
    blob b = read_file("/proc/self/exe");
    ElfW(Ehdr) eh;
    int type = -1;
    if (b.size >= sizeof eh) {
        memcpy(&eh, b.p, sizeof eh);
        type = eh.e_type;
    }
    free(b.p);
    return type;
}

static void test_self(void)
{
    char name[256];
    uintptr_t start = 0;
    Dl_info dl;
    const char *file = NULL;
    void *fn = (void *)hcg_test_static_target;
    uintptr_t off = symtab_addr(fn, &file, &dl);
    CHECK(hcg_test_static_target(1) != 0);
#ifdef HCG_TEST_EXPECT_EXEC
    CHECK(self_type() == ET_EXEC);
    CHECK(off == (uintptr_t)fn); /* l_addr is 0: st_value is absolute */
#else
    CHECK(self_type() == ET_DYN);
    /* A PIE's load base: the offset is fn - dli_fbase. */
    CHECK(off == (uintptr_t)fn - (uintptr_t)dl.dli_fbase);
#endif
    CHECK(hcg_elf_symbol_at("/proc/self/exe", off, name, sizeof name) == 0);
    CHECK_STR(name, "hcg_test_static_target");
    CHECK(hcg_elf_symbol_find("/proc/self/exe", off + 1, name, sizeof name, &start) == 0);
    CHECK_STR(name, "hcg_test_static_target");
    CHECK(start == off);
    /* Truncation of the name to the buffer. */
    CHECK(hcg_elf_symbol_at("/proc/self/exe", off, name, 5) == 0);
    CHECK_STR(name, "hcg_");
    CHECK(hcg_elf_symbol_at("/proc/self/exe", off, name, 0) == -1);
    CHECK(hcg_elf_symbol_at("/proc/self/exe", off, NULL, 8) == -1);
    /* Offset 0 is the ELF header: no function there. */
    CHECK(hcg_elf_symbol_at("/proc/self/exe", 0, name, sizeof name) == -1);
}

static void *module_fn(void *h, const char *getter)
{
    void *(*get)(void) = NULL;
    *(void **)&get = dlsym(h, getter);
    CHECK(get != NULL);
    return get ? get() : NULL;
}

static void test_module(void)
{
    char name[256];
    void *h = dlopen(MODULE, RTLD_NOW | RTLD_LOCAL);
    CHECK(h != NULL);
    if (!h) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return;
    }
    Dl_info dl;
    const char *file = NULL;
    void *copy = module_fn(h, "fake_host_copy_fn");
    uintptr_t off = symtab_addr(copy, &file, &dl);
    CHECK_STR(file, MODULE);
    CHECK(off == (uintptr_t)copy - (uintptr_t)dl.dli_fbase);
    /* Not a dynamic symbol: dladdr cannot name it. */
    CHECK(dl.dli_saddr != copy);
    CHECK(hcg_elf_symbol_at(MODULE, off, name, sizeof name) == 0);
    CHECK_STR(name, COPY_NAME);
    /* An exported function is in .symtab too. */
    void *user = dlsym(h, "fake_user_copy");
    CHECK(hcg_elf_symbol_at(MODULE, (uintptr_t)user - (uintptr_t)dl.dli_fbase,
                            name, sizeof name) == 0);
    CHECK_STR(name, "fake_user_copy");
    /* Stripped: no .symtab, so no name, though the file is valid ELF. */
    CHECK(hcg_elf_symbol_at(MODULE_STRIPPED, off, name, sizeof name) == -1);
    /* hcg_elf_symbol_image over the same bytes agrees with the file. */
    blob b = read_file(MODULE);
    CHECK(b.size > 0);
    CHECK(image_lookup(b.p, b.size, off, name, sizeof name) == 0);
    CHECK_STR(name, COPY_NAME);
    free(b.p);
    dlclose(h);
}

static void test_not_elf(void)
{
    char name[64], path[] = "/tmp/hcg_test_elfsym_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    close(fd);
    CHECK(hcg_elf_symbol_at(path, 0, name, sizeof name) == -1); /* empty */
    write_file(path, "#!/bin/sh\necho this is not ELF\n", 31);
    CHECK(hcg_elf_symbol_at(path, 0, name, sizeof name) == -1);
    unsigned char magic_only[EI_NIDENT + 2] = {ELFMAG0, ELFMAG1, ELFMAG2, ELFMAG3};
    write_file(path, magic_only, sizeof magic_only);
    CHECK(hcg_elf_symbol_at(path, 0, name, sizeof name) == -1);
    unlink(path);
    CHECK(hcg_elf_symbol_at(path, 0, name, sizeof name) == -1); /* gone */
    CHECK(hcg_elf_symbol_at("/nonexistent/dir/lib.so", 0, name, sizeof name) == -1);
    CHECK(hcg_elf_symbol_at("/tmp", 0, name, sizeof name) == -1);      /* directory */
    CHECK(hcg_elf_symbol_at("/dev/null", 0, name, sizeof name) == -1); /* not regular */
    CHECK(hcg_elf_symbol_at(NULL, 0, name, sizeof name) == -1);
    CHECK(hcg_elf_symbol_image(NULL, 100, 0, name, sizeof name, NULL) == -1);
}

/* The module's copy function offset, found once from the real module. */
static uintptr_t module_copy_off(void)
{
    void *h = dlopen(MODULE, RTLD_NOW | RTLD_LOCAL);
    CHECK(h != NULL);
    if (!h)
        return 0;
    Dl_info dl;
    const char *file;
    uintptr_t off = symtab_addr(module_fn(h, "fake_host_copy_fn"), &file, &dl);
    dlclose(h);
    return off;
}

static void test_truncated(const blob *b, uintptr_t off)
{
    char name[256];
    ElfW(Ehdr) eh;
    memcpy(&eh, b->p, sizeof eh);
    size_t shend = eh.e_shoff + (size_t)eh.e_shnum * eh.e_shentsize;
    CHECK(shend <= b->size);
    /* Every prefix through the headers, then every 61st byte. */
    for (size_t n = 0; n < b->size; n += n < 512 ? 1 : 61) {
        int rc = image_lookup(b->p, n, off, name, sizeof name);
        if (n < shend)
            CHECK(rc == -1);
    }
    /* And a truncated file on disk. */
    char path[] = "/tmp/hcg_test_elfsym_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    close(fd);
    write_file(path, b->p, b->size / 2);
    CHECK(hcg_elf_symbol_at(path, off, name, sizeof name) == -1);
    write_file(path, b->p, b->size);
    CHECK(hcg_elf_symbol_at(path, off, name, sizeof name) == 0);
    CHECK_STR(name, COPY_NAME);
    unlink(path);
}

typedef struct layout {
    ElfW(Ehdr) eh;
    size_t symtab_sh, strtab_sh; /* file offsets of the two section headers */
    ElfW(Shdr) symtab, strtab;
} layout;

static int find_layout(const blob *b, layout *l)
{
    memcpy(&l->eh, b->p, sizeof l->eh);
    for (size_t i = 0; i < l->eh.e_shnum; i++) {
        size_t at = l->eh.e_shoff + i * sizeof(ElfW(Shdr));
        ElfW(Shdr) sh;
        memcpy(&sh, b->p + at, sizeof sh);
        if (sh.sh_type != SHT_SYMTAB)
            continue;
        l->symtab_sh = at;
        l->symtab = sh;
        l->strtab_sh = l->eh.e_shoff + sh.sh_link * sizeof(ElfW(Shdr));
        memcpy(&l->strtab, b->p + l->strtab_sh, sizeof l->strtab);
        return 0;
    }
    return -1;
}

/* Apply one change to a copy of the image and look up off. */
static int mutated(const blob *b, size_t at, const void *val, size_t n,
                   uintptr_t off)
{
    char name[256];
    unsigned char *p = malloc(b->size);
    memcpy(p, b->p, b->size);
    memcpy(p + at, val, n);
    int rc = image_lookup(p, b->size, off, name, sizeof name);
    free(p);
    return rc;
}

#define MUTATE(field_at, type, v) \
    mutated(b, (field_at), &(type){(v)}, sizeof(type), off)

static void test_hostile_headers(const blob *b, const layout *l, uintptr_t off)
{
    typedef ElfW(Off) off_t_;
    typedef ElfW(Half) half;
    typedef ElfW(Word) word;
    typedef ElfW(Xword) xword;
    CHECK(MUTATE(0, unsigned char, 0x7e) == -1);                           /* magic */
    CHECK(MUTATE(EI_CLASS, unsigned char, ELFCLASSNONE) == -1);            /* class */
    CHECK(MUTATE(EI_DATA, unsigned char, ELFDATA2MSB) == -1);              /* order */
    CHECK(MUTATE(offsetof(ElfW(Ehdr), e_shoff), off_t_, (off_t_)-8) == -1);
    CHECK(MUTATE(offsetof(ElfW(Ehdr), e_shoff), off_t_, b->size - 8) == -1);
    CHECK(MUTATE(offsetof(ElfW(Ehdr), e_shnum), half, 0xffff) == -1);
    CHECK(MUTATE(offsetof(ElfW(Ehdr), e_shentsize), half, 8) == -1);
    size_t sy = l->symtab_sh, st = l->strtab_sh;
    CHECK(MUTATE(sy + offsetof(ElfW(Shdr), sh_offset), off_t_, (off_t_)-1) == -1);
    CHECK(MUTATE(sy + offsetof(ElfW(Shdr), sh_offset), off_t_, b->size - 16) == -1);
    CHECK(MUTATE(sy + offsetof(ElfW(Shdr), sh_size), xword, (xword)-24) == -1);
    CHECK(MUTATE(sy + offsetof(ElfW(Shdr), sh_entsize), xword, 7) == -1);
    CHECK(MUTATE(sy + offsetof(ElfW(Shdr), sh_link), word, 0xfffffff0u) == -1);
    CHECK(MUTATE(st + offsetof(ElfW(Shdr), sh_type), word, SHT_PROGBITS) == -1);
    CHECK(MUTATE(st + offsetof(ElfW(Shdr), sh_size), xword, (xword)-1) == -1);
    /* The count of 0 means "in section 0"; there it is 0, so no sections. */
    CHECK(MUTATE(offsetof(ElfW(Ehdr), e_shnum), half, 0) == -1);
}

/* The file offset of the symtab entry naming sym. */
static size_t sym_at(const blob *b, const layout *l, const char *sym)
{
    for (size_t i = 1; i < l->symtab.sh_size / sizeof(ElfW(Sym)); i++) {
        size_t at = l->symtab.sh_offset + i * sizeof(ElfW(Sym));
        ElfW(Sym) s;
        memcpy(&s, b->p + at, sizeof s);
        if (strcmp((const char *)b->p + l->strtab.sh_offset + s.st_name, sym) == 0)
            return at;
    }
    return 0;
}

static void test_hostile_symbols(const blob *b, const layout *l, uintptr_t off)
{
    typedef ElfW(Word) word;
    typedef ElfW(Xword) xword;
    size_t at = sym_at(b, l, COPY_NAME);
    CHECK(at != 0);
    if (!at)
        return;
    /* The name outside the string table: that symbol is skipped. */
    CHECK(MUTATE(at + offsetof(ElfW(Sym), st_name), word, 0x7fffffff) == -1);
    CHECK(MUTATE(at + offsetof(ElfW(Sym), st_name), word, (word)l->strtab.sh_size) == -1);
    /* A string table cut just inside the name: no terminating NUL. */
    ElfW(Sym) s;
    memcpy(&s, b->p + at, sizeof s);
    CHECK(MUTATE(l->strtab_sh + offsetof(ElfW(Shdr), sh_size), xword,
                 s.st_name + 3) == -1);
    /* Not a function; then undefined. */
    CHECK(MUTATE(at + offsetof(ElfW(Sym), st_info), unsigned char,
                 (unsigned char)((s.st_info & 0xf0) | STT_OBJECT)) == -1);
    CHECK(MUTATE(at + offsetof(ElfW(Sym), st_shndx), ElfW(Section), SHN_UNDEF) == -1);
    /* A size of 0 matches the exact start only. */
    CHECK(MUTATE(at + offsetof(ElfW(Sym), st_size), xword, 0) == 0);
    CHECK(mutated(b, at + offsetof(ElfW(Sym), st_size), &(xword){0}, sizeof(xword),
                  off + 1) == -1);
    /* [st_value, st_value + st_size): the end is outside. */
    CHECK(MUTATE(at + offsetof(ElfW(Sym), st_size), xword, 1) == 0);
    CHECK(mutated(b, at + offsetof(ElfW(Sym), st_size), &(xword){1}, sizeof(xword),
                  off + 1) == -1);
    /* A huge size must not wrap: it holds everything from st_value on,
     * and nothing below it. */
    char name[256];
    CHECK(mutated(b, at + offsetof(ElfW(Sym), st_size), &(xword){(xword)-1},
                  sizeof(xword), off + 0x100000) == 0);
    unsigned char *p = malloc(b->size);
    memcpy(p, b->p, b->size);
    memcpy(p + at + offsetof(ElfW(Sym), st_size), &(xword){(xword)-1}, sizeof(xword));
    int rc = image_lookup(p, b->size, off - 2, name, sizeof name);
    CHECK(rc == -1 || strcmp(name, COPY_NAME) != 0);
    free(p);
}

/* Two symbols hold off: the one starting nearer (the innermost) wins,
 * whichever comes first in the table. */
static void test_innermost(const blob *b, const layout *l, uintptr_t off)
{
    size_t outer = sym_at(b, l, COPY_NAME), inner = sym_at(b, l, "fake_user_copy");
    CHECK(outer != 0 && inner != 0 && outer < inner);
    if (!outer || !inner)
        return;
    unsigned char *p = malloc(b->size);
    char name[256];
    memcpy(p, b->p, b->size);
    ElfW(Addr) v = off - 16, w = off;
    ElfW(Xword) big = 0x1000, small = 8;
    memcpy(p + outer + offsetof(ElfW(Sym), st_value), &v, sizeof v);
    memcpy(p + outer + offsetof(ElfW(Sym), st_size), &big, sizeof big);
    memcpy(p + inner + offsetof(ElfW(Sym), st_value), &w, sizeof w);
    memcpy(p + inner + offsetof(ElfW(Sym), st_size), &small, sizeof small);
    CHECK(image_lookup(p, b->size, off, name, sizeof name) == 0);
    CHECK_STR(name, "fake_user_copy");
    CHECK(image_lookup(p, b->size, off - 1, name, sizeof name) == 0);
    CHECK_STR(name, COPY_NAME);
    free(p);
}

/* Misaligned image: every field is copied out, so UBSan stays quiet. */
static void test_misaligned(const blob *b, uintptr_t off)
{
    char name[256];
    unsigned char *p = malloc(b->size + 1);
    memcpy(p + 1, b->p, b->size);
    CHECK(hcg_elf_symbol_image(p + 1, b->size, off, name, sizeof name, NULL) == 0);
    CHECK_STR(name, COPY_NAME);
    free(p);
}

/* Random byte damage to the headers and tables: any answer, no fault. */
static void test_random_damage(const blob *b, const layout *l, uintptr_t off)
{
    uint64_t x = 0x243F6A8885A308D3ull;
    size_t regions[3][2] = {
        {0, sizeof(ElfW(Ehdr))},
        {l->eh.e_shoff, (size_t)l->eh.e_shnum * sizeof(ElfW(Shdr))},
        {l->symtab.sh_offset, l->symtab.sh_size},
    };
    unsigned char *p = malloc(b->size);
    char name[256];
    for (int iter = 0; iter < 3000; iter++) {
        memcpy(p, b->p, b->size);
        for (int k = 0; k < 4; k++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            size_t *r = regions[(x >> 8) % 3];
            p[r[0] + (x >> 16) % r[1]] = (unsigned char)(x >> 56);
        }
        unsigned char *copy = malloc(b->size);
        memcpy(copy, p, b->size);
        int rc = hcg_elf_symbol_image(copy, b->size, off, name, sizeof name, NULL);
        CHECK(rc == 0 || rc == -1);
        if (rc == 0)
            CHECK(strlen(name) < sizeof name);
        free(copy);
    }
    free(p);
}

static void test_hostile(void)
{
    uintptr_t off = module_copy_off();
    blob b = read_file(MODULE);
    layout l;
    CHECK(b.size > sizeof(ElfW(Ehdr)) && off != 0);
    CHECK(find_layout(&b, &l) == 0);
    if (b.size > sizeof(ElfW(Ehdr)) && off && find_layout(&b, &l) == 0) {
        test_truncated(&b, off);
        test_hostile_headers(&b, &l, off);
        test_hostile_symbols(&b, &l, off);
        test_innermost(&b, &l, off);
        test_misaligned(&b, off);
        test_random_damage(&b, &l, off);
    }
    free(b.p);
}

static const check_case cases[] = {
    CHECK_CASE(self),
    CHECK_CASE(module),
    CHECK_CASE(not_elf),
    CHECK_CASE(hostile),
};

int main(int argc, char **argv)
{
    return check_main(PROGRAM, CHECK_CASES(cases), argc, argv);
}
