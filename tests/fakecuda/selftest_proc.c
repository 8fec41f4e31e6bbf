/* Self-test: entry-point lookup (cuGetProcAddress) and the exports. */
#include "selftest.h"

/* ---- cuGetProcAddress ------------------------------------------------- */
static void *driver_sym(const char *name)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    void *p = h ? dlsym(h, name) : NULL;
    if (h)
        dlclose(h);
    return p;
}

/* Look name up through _v2 at version v with flags: the pointer, or NULL
 * with the reason in *st. A valid query always returns CUDA_SUCCESS. */
static void *gpa(const char *name, int v, cuuint64_t flags,
                 CUdriverProcAddressQueryResult *st)
{
    void *p = (void *)1;
    *st = (CUdriverProcAddressQueryResult)99;
    CHECK_OK(cuGetProcAddress_v2(name, &p, v, flags, st));
    CHECK((p != NULL) == (*st == CU_GET_PROC_ADDRESS_SUCCESS));
    return p;
}

void test_proc_address(void)
{
    need_context();
    const cuuint64_t PTDS = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    const cuuint64_t LEGACY = CU_GET_PROC_ADDRESS_LEGACY_STREAM;
    const cuuint64_t BOTH = PTDS | LEGACY;
    CUdriverProcAddressQueryResult st;
    void *p;

    CHECK(gpa("cuLaunchHostFunc", 12000, 0, &st) == driver_sym("cuLaunchHostFunc"));
    CHECK(gpa("cuLaunchHostFunc", 10000, LEGACY, &st) ==
          driver_sym("cuLaunchHostFunc"));
    CHECK(gpa("cuLaunchHostFunc", 10000, PTDS, &st) ==
          driver_sym("cuLaunchHostFunc_ptsz"));
    CHECK(gpa("cuLaunchHostFunc", 12000, BOTH, &st) ==
          driver_sym("cuLaunchHostFunc_ptsz"));
    CHECK(gpa("cuLaunchHostFunc", 9020, 0, &st) == NULL);
    CHECK(st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    CHECK(gpa("cuLaunchHostFunc_v2", 13010, 0, &st) == NULL);
    CHECK(st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    CHECK(gpa("cuLaunchHostFunc_v2", 13020, 0, &st) ==
          driver_sym("cuLaunchHostFunc_v2"));
    CHECK(gpa("cuLaunchHostFunc_v2", 13020, PTDS, &st) ==
          driver_sym("cuLaunchHostFunc_v2_ptsz"));
    CHECK(gpa("cuGetProcAddress", 11030, 0, &st) == driver_sym("cuGetProcAddress"));
    CHECK(gpa("cuGetProcAddress", 12000, 0, &st) ==
          driver_sym("cuGetProcAddress_v2"));
    CHECK(gpa("cuMemAlloc", 3020, 0, &st) == driver_sym("cuMemAlloc_v2"));
    CHECK(gpa("cuMemcpyHtoD", 7000, PTDS, &st) == driver_sym("cuMemcpyHtoD_v2_ptds"));
    /* A per-thread variant has its own first version: no fallback below it. */
    CHECK(gpa("cuStreamSynchronize", 2000, LEGACY, &st) ==
          driver_sym("cuStreamSynchronize"));
    CHECK(gpa("cuStreamSynchronize", 2000, PTDS, &st) == NULL);
    CHECK(st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    CHECK(gpa("cuStreamSynchronize", 7000, PTDS, &st) ==
          driver_sym("cuStreamSynchronize_ptsz"));
    CHECK(gpa("cuInit", 2000, PTDS, &st) == driver_sym("cuInit"));
    CHECK(gpa("cuStreamGetCaptureInfo", 12030, PTDS, &st) ==
          driver_sym("cuStreamGetCaptureInfo_v3_ptsz"));
    CHECK(gpa("cuStreamGetCaptureInfo", 11030, 0, &st) ==
          driver_sym("cuStreamGetCaptureInfo_v2"));
    CHECK(gpa("cuGraphInstantiate", 12000, 0, &st) == driver_sym("cuGraphInstantiate_v2"));
    CHECK(gpa("cuGraphInstantiateWithFlags", 11040, 0, &st) ==
          driver_sym("cuGraphInstantiateWithFlags"));
    CHECK(gpa("cuGraphExecUpdate", 12000, 0, &st) == driver_sym("cuGraphExecUpdate_v2"));
    CHECK(gpa("cuGraphExecUpdate", 11000, 0, &st) == driver_sym("cuGraphExecUpdate"));
    CHECK(gpa("cuGraphAddNode", 12030, 0, &st) == driver_sym("cuGraphAddNode_v2"));
    CHECK(gpa("cuCtxSynchronize", 13000, 0, &st) == driver_sym("cuCtxSynchronize_v2"));
    CHECK(gpa("cuGraphNodeGetParams", 13020, 0, &st) ==
          driver_sym("cuGraphNodeGetParams"));
    /* The 13.0 cuda.h maps cuStreamGetCaptureInfo to _v3. */
    CHECK(driver_sym("cuStreamGetCaptureInfo_v3") != NULL);
    CHECK(gpa("cuStreamGetCaptureInfo", 13000, 0, &st) ==
          driver_sym("cuStreamGetCaptureInfo_v3"));
    CHECK(gpa("cuStreamGetCaptureInfo", 10010, 0, &st) ==
          driver_sym("cuStreamGetCaptureInfo"));
    static const char *const uobj_fns[] = {
        "cuUserObjectCreate", "cuUserObjectRetain", "cuUserObjectRelease",
        "cuGraphRetainUserObject", "cuGraphReleaseUserObject"};
    for (size_t i = 0; i < sizeof uobj_fns / sizeof uobj_fns[0]; i++) {
        CHECK(driver_sym(uobj_fns[i]) != NULL);
        CHECK(gpa(uobj_fns[i], 11030, 0, &st) == driver_sym(uobj_fns[i]));
        CHECK(gpa(uobj_fns[i], 13000, PTDS, &st) == driver_sym(uobj_fns[i]));
        CHECK(gpa(uobj_fns[i], 11020, 0, &st) == NULL);
        CHECK(st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    }
    /* A variant's own name is not a base name. */
    CHECK(gpa("cuMemAlloc_v2", 13020, 0, &st) == NULL);
    CHECK(st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    CHECK(gpa("cuNoSuchEntryPoint", 13020, 0, &st) == NULL);
    CHECK(st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);

    /* Bad queries: nothing is written. */
    p = (void *)1;
    st = (CUdriverProcAddressQueryResult)99;
    CHECK_CU(cuGetProcAddress_v2("cuInit", &p, 13030, 0, &st), CUDA_ERROR_INVALID_VALUE);
    CHECK(p == (void *)1 && st == (CUdriverProcAddressQueryResult)99);
    CHECK_CU(cuGetProcAddress_v2("cuInit", &p, 12000, 4, &st), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGetProcAddress_v2(NULL, &p, 12000, 0, &st), CUDA_ERROR_INVALID_VALUE);
    CHECK_OK(cuGetProcAddress_v2("cuInit", &p, 12000, 0, NULL)); /* status optional */

    /* v1: same table, CUDA_ERROR_NOT_FOUND and *pfn untouched on a miss. */
    p = (void *)1;
    CHECK_CU(cuGetProcAddress("cuLaunchHostFunc", &p, 9000, 0), CUDA_ERROR_NOT_FOUND);
    CHECK_CU(cuGetProcAddress("cuNoSuchEntryPoint", &p, 12000, 0), CUDA_ERROR_NOT_FOUND);
    CHECK(p == (void *)1);
    CHECK_OK(cuGetProcAddress("cuStreamQuery", &p, 12000, PTDS));
    CHECK(p == driver_sym("cuStreamQuery_ptsz"));
    CHECK(driver_sym("cuStreamQuery_ptsz") == (void *)cuStreamQuery_ptsz);
}

/* Every function the library exports must be reachable through
 * cuGetProcAddress_v2 at some version and flag, and nothing but driver
 * entry points may be exported. Reads the library's .dynsym. */
static int findable(const char *name, void *addr)
{
    static const int versions[] = {2000,  2020,  3020,  4000,  5000,  6000,  7000,
                                   10000, 10010, 10020, 11000, 11030, 11040, 12000,
                                   12020, 12030, 12050, 13000, 13020};
    char base[3][128];
    snprintf(base[0], sizeof base[0], "%s", name);
    snprintf(base[1], sizeof base[1], "%s", name);
    size_t n = strlen(base[1]);
    if (n > 5 && (!strcmp(base[1] + n - 5, "_ptsz") || !strcmp(base[1] + n - 5, "_ptds")))
        base[1][n - 5] = '\0';
    snprintf(base[2], sizeof base[2], "%s", base[1]);
    char *v = strrchr(base[2], '_');
    if (v && v[1] == 'v' && v[2] >= '0' && v[2] <= '9')
        *v = '\0';
    for (int b = 0; b < 3; b++)
        for (size_t i = 0; i < sizeof versions / sizeof versions[0]; i++)
            for (cuuint64_t f = 1; f <= 2; f++) {
                void *p = NULL;
                if (cuGetProcAddress_v2(base[b], &p, versions[i], f, NULL) ==
                        CUDA_SUCCESS && p == addr)
                    return 1;
            }
    return 0;
}

void test_exports(void)
{
    need_context();
    Dl_info info;
    CHECK(dladdr((void *)cuInit, &info) != 0);
    int fd = open(info.dli_fname, O_RDONLY);
    struct stat sb;
    CHECK(fd >= 0 && fstat(fd, &sb) == 0);
    if (fd < 0)
        return;
    const unsigned char *map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    CHECK(map != MAP_FAILED && memcmp(map, ELFMAG, SELFMAG) == 0);
    if (map == MAP_FAILED)
        return;
    const ElfW(Ehdr) *eh = (const void *)map;
    const ElfW(Shdr) *sh = (const void *)(map + eh->e_shoff);
    int funcs = 0;
    for (int i = 0; i < eh->e_shnum; i++) {
        if (sh[i].sh_type != SHT_DYNSYM)
            continue;
        const ElfW(Sym) *sym = (const void *)(map + sh[i].sh_offset);
        const char *str = (const char *)(map + sh[sh[i].sh_link].sh_offset);
        for (size_t k = 0; k < sh[i].sh_size / sizeof *sym; k++) {
            const char *name = str + sym[k].st_name;
            if (sym[k].st_shndx == SHN_UNDEF || !*name)
                continue;
            int is_fn = ELF64_ST_TYPE(sym[k].st_info) == STT_FUNC;
            if (!is_fn || strncmp(name, "cu", 2) != 0) {
                fprintf(stderr, "unexpected export: %s\n", name);
                CHECK(!"only driver entry points are exported");
                continue;
            }
            funcs++;
            void *addr = driver_sym(name);
            if (!findable(name, addr)) {
                fprintf(stderr, "not found through cuGetProcAddress: %s\n", name);
                CHECK(!"every export is reachable through cuGetProcAddress");
            }
        }
    }
    CHECK(funcs > 50);
    munmap((void *)map, (size_t)sb.st_size);
}

