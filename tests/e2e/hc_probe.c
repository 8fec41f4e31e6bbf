/*
 * A program that probes for a CUDA driver without linking one: with none
 * loaded, every driver name libhcguard exports (its wrappers and the
 * exports of every other driver function) is found neither by
 * dlsym(RTLD_DEFAULT) nor through the main program's handle, as without
 * hcguard, and looking does not load a driver. The names are read from
 * libhcguard's own dynamic symbol table.
 *   hc_probe
 * Not linked with libcuda. Exit 0 passed, 1 failed.
 */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/check.h"

/* The whole file at path, or NULL. */
static unsigned char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    unsigned char *buf = NULL;
    if (fseek(f, 0, SEEK_END) == 0) {
        long n = ftell(f);
        buf = n > 0 ? malloc((size_t)n) : NULL;
        if (buf && (fseek(f, 0, SEEK_SET) != 0 || fread(buf, 1, (size_t)n, f) != (size_t)n)) {
            free(buf);
            buf = NULL;
        }
        *len = buf ? (size_t)n : 0;
    }
    fclose(f);
    return buf;
}

static int is_driver_name(const char *name)
{
    return name[0] == 'c' && name[1] == 'u';
}

/* Checks every defined function of the image's .dynsym named like the
 * driver's; how many there were. */
static unsigned check_dynsym(const unsigned char *elf, size_t len, void *main_handle)
{
    const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)elf;
    if (len < sizeof *eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
        eh->e_shoff + (size_t)eh->e_shnum * sizeof(ElfW(Shdr)) > len)
        return 0;
    const ElfW(Shdr) *sh = (const ElfW(Shdr) *)(elf + eh->e_shoff);
    unsigned n = 0;
    for (unsigned i = 0; i < eh->e_shnum; i++) {
        if (sh[i].sh_type != SHT_DYNSYM || sh[i].sh_link >= eh->e_shnum)
            continue;
        const ElfW(Sym) *sym = (const ElfW(Sym) *)(elf + sh[i].sh_offset);
        const char *str = (const char *)elf + sh[sh[i].sh_link].sh_offset;
        for (size_t k = 0; k < sh[i].sh_size / sizeof *sym; k++) {
            const char *name = str + sym[k].st_name;
            if (sym[k].st_shndx == SHN_UNDEF || ELF64_ST_TYPE(sym[k].st_info) != STT_FUNC ||
                !is_driver_name(name))
                continue;
            n++;
            void *p = dlsym(RTLD_DEFAULT, name), *q = dlsym(main_handle, name);
            CHECK_MSG(p == NULL, "dlsym(RTLD_DEFAULT, %s) = %p with no driver", name, p);
            CHECK_MSG(q == NULL, "dlsym(main program, %s) = %p with no driver", name, q);
        }
    }
    return n;
}

int main(void)
{
    void *stats = dlsym(RTLD_DEFAULT, "hcguard_get_stats");
    Dl_info info;
    if (!stats || !dladdr(stats, &info) || !info.dli_fname) {
        fprintf(stderr, "hcguard is not preloaded\n");
        return 1;
    }
    size_t len = 0;
    unsigned char *elf = read_file(info.dli_fname, &len);
    CHECK_MSG(elf != NULL, "cannot read %s", info.dli_fname);
    void *main_handle = dlopen(NULL, RTLD_NOW);
    unsigned n = elf ? check_dynsym(elf, len, main_handle) : 0;
    free(elf);
    /* At least the wrappers: a list that came out empty tests nothing. */
    CHECK_MSG(n >= 30, "%u driver names exported by %s", n, info.dli_fname);
    CHECK_MSG(dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD) == NULL,
              "looking up driver names loaded a driver");
    printf("probe: %u driver names exported by hcguard\n", n);
    printf("probe: %s\n", check_failures ? "FAILED" : "passed");
    return check_failures ? 1 : 0;
}
