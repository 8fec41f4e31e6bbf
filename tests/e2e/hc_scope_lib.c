/*
 * Loaded by hc_scope.c with RTLD_LOCAL: looks up names beginning "cu" with
 * RTLD_DEFAULT, which glibc searches in the global scope and then in this
 * library's local scope, where its dependency hc_scope_dep is. Those
 * names must be found there, with or without hcguard, by dlsym and by
 * dlvsym; a driver name is found wherever the program put the driver.
 */
#include <dlfcn.h>
#include <stdio.h>

#include "../common/check.h"

int cublasScopeCreate(void);
int curandScopeGenerate(void);
int cudaScopeMalloc(void);
int hc_scope_probe(void **driver_fn);

#define SCOPE_VERSION "HC_SCOPE_1.0"

/* name found by dlsym and dlvsym(SCOPE_VERSION) as the function this
 * library is linked to. */
static void expect_local(const char *name, void *linked)
{
    void *p = dlsym(RTLD_DEFAULT, name);
    void *v = dlvsym(RTLD_DEFAULT, name, SCOPE_VERSION);
    printf("scope lib: %s: dlsym %p, dlvsym %p, linked %p\n", name, p, v, linked);
    CHECK_MSG(p == linked, "dlsym(RTLD_DEFAULT, %s) = %p, want %p", name, p, linked);
    CHECK_MSG(v == linked, "dlvsym(RTLD_DEFAULT, %s, %s) = %p, want %p", name, SCOPE_VERSION, v,
              linked);
}

/* Failed checks; *driver_fn: what dlsym(RTLD_DEFAULT, "cuLaunchHostFunc")
 * gave this library. */
int hc_scope_probe(void **driver_fn)
{
    expect_local("cublasScopeCreate", (void *)cublasScopeCreate);
    expect_local("curandScopeGenerate", (void *)curandScopeGenerate);
    expect_local("cudaScopeMalloc", (void *)cudaScopeMalloc);
    *driver_fn = dlsym(RTLD_DEFAULT, "cuLaunchHostFunc");
    /* The driver's functions carry no version: a versioned look-up finds
     * none, with or without hcguard (whose exports carry none either). */
    void *v = dlvsym(RTLD_DEFAULT, "cuLaunchHostFunc", SCOPE_VERSION);
    printf("scope lib: cuLaunchHostFunc: dlsym %p, dlvsym %p\n", *driver_fn, v);
    CHECK_MSG(v == NULL, "dlvsym(RTLD_DEFAULT, cuLaunchHostFunc, %s) = %p", SCOPE_VERSION, v);
    return check_failures;
}
