/*
 * Uses hcguard's public API from an installed package (CMake or
 * pkg-config): packs and checks host-copy records, runs hcguard's copy
 * function by hand, and says which file the library was loaded from, so
 * that the test can tell the installed one (by its SONAME) from the build
 * tree's. Exit 0 and "consumer: ok" when every check passed.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dladdr */
#endif
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include <hcguard.h>

#define STR2(x) #x
#define STR(x) STR2(x)

static int failures;

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "consumer: FAILED: %s\n", what);
        failures++;
    }
}

int main(void)
{
    static unsigned char src[4096], dst[4096];
    const char *header = STR(HCGUARD_VERSION_MAJOR) "." STR(HCGUARD_VERSION_MINOR) "." STR(
        HCGUARD_VERSION_PATCH);
#ifdef HCG_EXPECT_VERSION
    check(strcmp(header, HCG_EXPECT_VERSION) == 0, "header version is the package's");
#endif
    for (size_t i = 0; i < sizeof src; i++)
        src[i] = (unsigned char)(i * 7 + 1);

    hcguard_copy_record rec;
    check(hcguard_pack_copy(&rec, dst, src, sizeof src) == HCGUARD_OK, "pack a good record");
    hcguard_host_copy(&rec);
    check(memcmp(dst, src, sizeof src) == 0, "hcguard_host_copy copied");

    hcguard_copy_record bad;
    check(hcguard_pack_copy(&bad, src + 16, src, 64) == HCGUARD_ERR_OVERLAP,
          "an overlapping record is refused");
    check(strcmp(hcguard_status_name(HCGUARD_ERR_OVERLAP), "overlap") == 0,
          "status names");

    hcguard_stats st;
    check(hcguard_get_stats(&st, sizeof st) == 0, "hcguard_get_stats");

    Dl_info info;
    check(dladdr((void *)hcguard_host_copy, &info) != 0 && info.dli_fname, "dladdr");
    printf("consumer: hcguard %s, library %s\n", header,
           info.dli_fname ? info.dli_fname : "?");
    if (failures)
        return 1;
    puts("consumer: ok");
    return 0;
}
