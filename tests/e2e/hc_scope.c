/*
 * dlsym and dlvsym with RTLD_DEFAULT from a library loaded with RTLD_LOCAL
 * (hc_scope_lib.c): glibc searches the caller's own scope, so the names of
 * the library's dependency (cuBLAS-, cuRAND- and runtime-like, beginning
 * "cu") are found, as without hcguard. A driver name is found only when a
 * driver is loaded, and then it is what the driver's handle gives: under
 * hcguard, hcguard's wrapper.
 *   hc_scope LIB driver|no-driver
 * Not linked with libcuda: "driver" loads libcuda.so.1 (RTLD_GLOBAL) first.
 * Exit 0 passed, 1 failed, 77 no driver to load.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "../common/check.h"

typedef int (*probe_fn)(void **driver_fn);

/* The driver name in the library's scope: NULL without a driver, else the
 * driver handle's answer (hcguard's wrapper under hcguard). */
static void expect_driver(void *driver, void *found)
{
    void *want = driver ? dlsym(driver, "cuLaunchHostFunc") : NULL;
    CHECK_MSG(found == want, "cuLaunchHostFunc in the library's scope: %p, want %p", found, want);
    Dl_info info;
    int hcguard = dlsym(RTLD_DEFAULT, "hcguard_get_stats") != NULL;
    if (driver && hcguard)
        CHECK_MSG(found && dladdr(found, &info) && strstr(info.dli_fname, "libhcguard"),
                  "cuLaunchHostFunc under hcguard is not hcguard's wrapper: %p", found);
}

int main(int argc, char **argv)
{
    if (argc != 3 || (strcmp(argv[2], "driver") && strcmp(argv[2], "no-driver"))) {
        fprintf(stderr, "usage: hc_scope LIB driver|no-driver\n");
        return 2;
    }
    void *driver = NULL;
    if (strcmp(argv[2], "driver") == 0) {
        driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
        if (!driver) {
            fprintf(stderr, "SKIP: no libcuda.so.1: %s\n", dlerror());
            return 77;
        }
    }
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    probe_fn probe = lib ? (probe_fn)dlsym(lib, "hc_scope_probe") : NULL;
    if (!probe) {
        fprintf(stderr, "%s: hc_scope_probe: %s\n", argv[1], dlerror());
        return 1;
    }
    void *found = NULL;
    check_failures += probe(&found);
    expect_driver(driver, found);
    /* Through the library's handle too: its own scope, whoever asks. */
    CHECK_MSG(dlsym(lib, "cublasScopeCreate") != NULL, "dlsym(lib, cublasScopeCreate)");
    CHECK_MSG(dlsym(RTLD_DEFAULT, "cublasScopeCreate") == NULL,
              "cublasScopeCreate is not in the program's scope");
    printf("scope %s: %s\n", argv[2], check_failures ? "FAILED" : "passed");
    return check_failures ? 1 : 0;
}
