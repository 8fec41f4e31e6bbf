/*
 * A library with names like CUDA's libraries (cuBLAS, cuRAND, the runtime's
 * cuda*), none of the driver, at a version of its own: a dependency of
 * hc_scope_lib, so it is only in that library's local scope (hc_scope.c).
 */
int cublasScopeCreate(void);
int curandScopeGenerate(void);
int cudaScopeMalloc(void);

int cublasScopeCreate(void)
{
    return 42;
}

int curandScopeGenerate(void)
{
    return 7;
}

int cudaScopeMalloc(void)
{
    return 3;
}
