/*
 * A stand-in for cuda.core's _host_callback extension module: the host-copy
 * function is static, with the name Cython gives a cdef function _host_copy
 * of module cuda.core.cu13._host_callback, so it is only in .symtab. The
 * exported getters hand its address to tests, as int(HOST_COPY_FN) does.
 */
#include <stdint.h>
#include <string.h>

/* The record of cuda.core's HOST_COPY_FN (and hcguard_copy_record). */
typedef struct fake_record {
    uintptr_t dst;
    uintptr_t src;
    size_t nbytes;
} fake_record;

void *fake_host_copy_fn(void);
void *fake_other_fn(void);
void *fake_plain_copy_fn(void);
void *fake_near_copy_fn(void);
void fake_user_copy(void *rec);

static void __pyx_f_4cuda_4core_4cu13_14_host_callback__host_copy(void *rec)
{
    const fake_record *r = rec;
    if (r->nbytes)
        memcpy((void *)r->dst, (const void *)r->src, r->nbytes);
}

/* A static function of the same module that is not the copy. */
static void __pyx_f_4cuda_4core_4cu13_14_host_callback__other(void *rec)
{
    *(volatile int *)rec = 42;
}

/* Named exactly _host_copy, as an unmangled build would name it. */
static void _host_copy(void *rec)
{
    const fake_record *r = rec;
    unsigned char *d = (unsigned char *)r->dst;
    const unsigned char *s = (const unsigned char *)r->src;
    for (size_t i = 0; i < r->nbytes; i++)
        d[i] = s[i];
}

/* Ends in "_host_copy" but not "__host_copy": some other function. */
static void __pyx_f_4cuda_4core_4cu13_14_host_callback_host_copy(void *rec)
{
    *(volatile int *)rec = 43;
}

void *fake_plain_copy_fn(void)
{
    return (void *)_host_copy;
}

void *fake_near_copy_fn(void)
{
    return (void *)__pyx_f_4cuda_4core_4cu13_14_host_callback_host_copy;
}

void *fake_host_copy_fn(void)
{
    return (void *)__pyx_f_4cuda_4core_4cu13_14_host_callback__host_copy;
}

void *fake_other_fn(void)
{
    return (void *)__pyx_f_4cuda_4core_4cu13_14_host_callback__other;
}

/* Exported, so dladdr names it: for HCGUARD_COPY_FN by dynamic symbol.
 * (memmove, so that its code differs from the static copy's.) */
void fake_user_copy(void *rec)
{
    const fake_record *r = rec;
    memmove((void *)r->dst, (const void *)r->src, r->nbytes);
}
