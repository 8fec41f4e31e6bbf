/*
 * Static symbol tables (.symtab) of ELF files. cuda.core's _host_copy is a
 * static Cython function, absent from .dynsym, so dladdr cannot name it.
 *
 * Addresses: `off` is an address as the file's symbol table states it
 * (st_value space). For an ET_DYN object (shared library, PIE) that is the
 * run-time address minus the load base; for an ET_EXEC program it is the
 * run-time address itself. Callers get both right with
 * `addr - link_map->l_addr` (dladdr1 with RTLD_DL_LINKMAP); this file makes
 * no adjustment of its own.
 *
 * Only the native class and byte order are read: a file of another class
 * cannot be loaded in this process, so it never needs naming. Every offset
 * and count in the file is checked against the file size and every field
 * is copied out with memcpy, so a truncated, hostile or misaligned image
 * yields -1, never a fault. (A file truncated by someone else while it is
 * mapped could still raise SIGBUS; loaded objects are not rewritten in
 * place by package installers, which replace them by rename.)
 */
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"

typedef ElfW(Ehdr) elf_ehdr;
typedef ElfW(Shdr) elf_shdr;
typedef ElfW(Sym) elf_sym; /* ELF64_ST_TYPE is the same macro as ELF32_ST_TYPE */

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define NATIVE_DATA ELFDATA2LSB
#else
#define NATIVE_DATA ELFDATA2MSB
#endif
#if __SIZEOF_POINTER__ == 8
#define NATIVE_CLASS ELFCLASS64
#else
#define NATIVE_CLASS ELFCLASS32
#endif

typedef struct image {
    const unsigned char *p;
    size_t size;
} image;

typedef struct table {
    uint64_t off, size; /* checked: inside the image */
} table;

static int img_read(const image *im, uint64_t off, void *dst, size_t n)
{
    if (off > im->size || n > im->size - off)
        return -1;
    memcpy(dst, im->p + off, n);
    return 0;
}

static int img_table(const image *im, const elf_shdr *sh, table *t)
{
    if (sh->sh_offset > im->size || sh->sh_size > im->size - sh->sh_offset)
        return -1;
    t->off = sh->sh_offset;
    t->size = sh->sh_size;
    return 0;
}

static int read_ehdr(const image *im, elf_ehdr *eh)
{
    if (img_read(im, 0, eh, sizeof *eh) != 0)
        return -1;
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
        eh->e_ident[EI_CLASS] != NATIVE_CLASS ||
        eh->e_ident[EI_DATA] != NATIVE_DATA ||
        eh->e_ident[EI_VERSION] != EV_CURRENT || eh->e_shoff == 0 ||
        eh->e_shentsize != sizeof(elf_shdr))
        return -1;
    return 0;
}

/* Number of section headers, bounded by what fits in the image. */
static int section_count(const image *im, const elf_ehdr *eh, uint64_t *n)
{
    uint64_t count = eh->e_shnum;
    if (count == 0) { /* extended numbering: the count is in section 0 */
        elf_shdr s0;
        if (img_read(im, eh->e_shoff, &s0, sizeof s0) != 0)
            return -1;
        count = s0.sh_size;
    }
    if (eh->e_shoff > im->size ||
        count > (im->size - eh->e_shoff) / sizeof(elf_shdr))
        return -1;
    *n = count;
    return 0;
}

static int read_shdr(const image *im, const elf_ehdr *eh, uint64_t nsec,
                     uint64_t i, elf_shdr *sh)
{
    if (i >= nsec)
        return -1;
    return img_read(im, eh->e_shoff + i * sizeof *sh, sh, sizeof *sh);
}

/* The .symtab and its string table. */
static int find_symtab(const image *im, table *syms, table *strs)
{
    elf_ehdr eh;
    uint64_t nsec;
    if (read_ehdr(im, &eh) != 0 || section_count(im, &eh, &nsec) != 0)
        return -1;
    for (uint64_t i = 0; i < nsec; i++) {
        elf_shdr sh, str;
        if (read_shdr(im, &eh, nsec, i, &sh) != 0)
            return -1;
        if (sh.sh_type != SHT_SYMTAB)
            continue;
        if (sh.sh_entsize != sizeof(elf_sym) || img_table(im, &sh, syms) != 0 ||
            read_shdr(im, &eh, nsec, sh.sh_link, &str) != 0 ||
            str.sh_type != SHT_STRTAB || img_table(im, &str, strs) != 0)
            return -1;
        return 0;
    }
    return -1;
}

static int sym_holds(const elf_sym *s, uintptr_t off)
{
    if (ELF64_ST_TYPE(s->st_info) != STT_FUNC || s->st_shndx == SHN_UNDEF ||
        off < s->st_value)
        return 0;
    return s->st_size == 0 ? off == s->st_value : off - s->st_value < s->st_size;
}

/* The symbol's name, if it lies NUL-terminated inside the string table. */
static const char *sym_name(const image *im, const table *strs, const elf_sym *s)
{
    if (s->st_name >= strs->size)
        return NULL;
    const char *name = (const char *)im->p + strs->off + s->st_name;
    if (!memchr(name, '\0', strs->size - s->st_name))
        return NULL;
    return name;
}

int hcg_elf_symbol_image(const void *img, size_t size, uintptr_t off,
                         char *name, size_t len, uintptr_t *start)
{
    image im = {img, size};
    table syms = {0, 0}, strs = {0, 0};
    if (!img || !name || len == 0 || find_symtab(&im, &syms, &strs) != 0)
        return -1;
    const char *best = NULL;
    uintptr_t best_value = 0;
    uint64_t n = syms.size / sizeof(elf_sym);
    for (uint64_t i = 1; i < n; i++) { /* entry 0 is the null symbol */
        elf_sym s;
        memcpy(&s, im.p + syms.off + i * sizeof s, sizeof s);
        if (!sym_holds(&s, off) || (best && s.st_value <= best_value))
            continue;
        const char *nm = sym_name(&im, &strs, &s);
        if (nm) { /* the innermost (highest-starting) holder wins */
            best = nm;
            best_value = s.st_value;
        }
    }
    if (!best)
        return -1;
    size_t nlen = strnlen(best, len - 1);
    memcpy(name, best, nlen);
    name[nlen] = '\0';
    if (start)
        *start = best_value;
    return 0;
}

int hcg_elf_symbol_find(const char *path, uintptr_t off, char *name,
                        size_t len, uintptr_t *start)
{
    if (!path || !name || len == 0)
        return -1;
    /* O_NONBLOCK: a FIFO at path must not hang the caller in open. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
        (uint64_t)st.st_size > SIZE_MAX) {
        close(fd);
        return -1;
    }
    size_t size = (size_t)st.st_size;
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED)
        return -1;
    int rc = hcg_elf_symbol_image(map, size, off, name, len, start);
    munmap(map, size);
    return rc;
}

int hcg_elf_symbol_at(const char *path, uintptr_t off, char *name, size_t len)
{
    return hcg_elf_symbol_find(path, off, name, len, NULL);
}
