/*
 * Thunks (thunk.c): a thunk behaves exactly like its real function for many
 * signatures, outside and inside a host function; every argument register
 * survives a handler that clobbers them; a handler's CUresult replaces the
 * call; the slow path unwinds; registration is idempotent, bounded and
 * thread-safe. Also prints the cost of a call through a thunk.
 *
 * The exports (thunks of the driver's functions) resolve on their first
 * call, outside or inside a host function, keeping every argument
 * register; a function the driver lacks answers CUDA_ERROR_NOT_FOUND. The
 * driver is exports_driver (HCGUARD_DRIVER); with `test_thunk nodriver`
 * there is none, and an export answers CUDA_ERROR_NOT_INITIALIZED.
 */
#include <dlfcn.h>
#include <execinfo.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hcg.h"
#include "hcg_driver_exports.h"
#include "../common/check.h"

#define NOINLINE __attribute__((noinline, noclone))

/* Built with HCG_THUNK_NO_ASM (as thunk.c then is), the portable fallback. */
#if (defined(__x86_64__) || defined(__aarch64__)) && !defined(HCG_THUNK_NO_ASM)
#define HAVE_THUNKS 1
#endif

/* ---- real functions of many signatures ------------------------------------
 * Each weighs its arguments differently, so a lost or swapped one shows. */
static int real_calls;

static NOINLINE long f0(void) { real_calls++; return 42; }
static NOINLINE long f1(long a) { return a * 3 + 1; }
static NOINLINE long f2(long a, long b) { return a * 3 + b * 5; }
static NOINLINE long f3(long a, long b, long c) { return f2(a, b) + c * 7; }
static NOINLINE long f4(long a, long b, long c, long d) { return f3(a, b, c) + d * 11; }
static NOINLINE long f5(long a, long b, long c, long d, long e)
{
    return f4(a, b, c, d) + e * 13;
}
static NOINLINE long f6(long a, long b, long c, long d, long e, long f)
{
    return f5(a, b, c, d, e) + f * 17;
}
static NOINLINE long f7(long a, long b, long c, long d, long e, long f, long g)
{
    return f6(a, b, c, d, e, f) + g * 19;
}
static NOINLINE long f8(long a, long b, long c, long d, long e, long f, long g, long h)
{
    return f7(a, b, c, d, e, f, g) + h * 23;
}
/* Past the integer argument registers of both ABIs: the rest on the stack. */
static NOINLINE long f12(long a, long b, long c, long d, long e, long f, long g, long h,
                         int i, char j, long k, short l)
{
    return f8(a, b, c, d, e, f, g, h) + i * 29 + j * 31 + k * 37 + l * 41;
}
/* Ten doubles and two floats: past the eight vector registers. */
static NOINLINE double fd(double a, double b, double c, double d, double e, double f,
                          double g, double h, double i, double j, float k, float l)
{
    return a + 2 * b + 3 * c + 4 * d + 5 * e + 6 * f + 7 * g + 8 * h + 9 * i + 10 * j +
           11 * (double)k + 12 * (double)l;
}
static NOINLINE float fmix(int a, float b, long c, double d, char e, float f, short g,
                           double h)
{
    return (float)(a + 2 * (double)b + 3 * (double)c + 4 * d + 5 * e + 6 * (double)f +
                   7 * g + 8 * h);
}

typedef struct pair { long a, b; } pair;          /* returned in two registers */
typedef struct fpair { double x, y; } fpair;      /* in two vector registers   */
typedef struct big { long v[6]; } big;            /* through memory (rdi / x8) */

static NOINLINE pair ret_pair(long x, long y) { return (pair){x * 2, y * 3}; }
static NOINLINE fpair ret_fpair(double x, double y) { return (fpair){x / 2, y * 4}; }
static NOINLINE big ret_big(long seed, double scale)
{
    big b;
    for (int i = 0; i < 6; i++)
        b.v[i] = seed * (i + 1) + (long)scale;
    return b;
}
static NOINLINE long take_big(big b, long k, big c)
{
    long s = k;
    for (int i = 0; i < 6; i++)
        s += b.v[i] * (i + 1) - c.v[i];
    return s;
}
static NOINLINE int fmt(char *buf, size_t n, const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    int r = vsnprintf(buf, n, f, ap);
    va_end(ap);
    return r;
}
static NOINLINE CUresult driver_like(int *out, int v)
{
    real_calls++;
    *out = v;
    return CUDA_SUCCESS;
}

/* ---- handlers ------------------------------------------------------------- */
static int handled, handled_flag_set;
static unsigned last_idx;
static const char *last_name;
static void *last_real;
static volatile double sink;

static NOINLINE double churn(double a, double b, double c, double d, double e, double f,
                             double g, double h, long i, long j, long k, long l, long m,
                             long n)
{
    return a * b + c * d + e * f + g * h + (double)(i * j + k * l + m * n);
}

/* Overwrite every argument register the thunk must preserve. */
static NOINLINE void clobber(void)
{
#if defined(__x86_64__)
    __asm__ volatile("movq $-1, %%rdi\nmovq $-1, %%rsi\nmovq $-1, %%rdx\nmovq $-1, %%rcx\n"
                     "movq $-1, %%r8\nmovq $-1, %%r9\nmovq $-1, %%r10\nmovq $-1, %%rax\n"
                     "pcmpeqd %%xmm0, %%xmm0\npcmpeqd %%xmm1, %%xmm1\n"
                     "pcmpeqd %%xmm2, %%xmm2\npcmpeqd %%xmm3, %%xmm3\n"
                     "pcmpeqd %%xmm4, %%xmm4\npcmpeqd %%xmm5, %%xmm5\n"
                     "pcmpeqd %%xmm6, %%xmm6\npcmpeqd %%xmm7, %%xmm7\n" ::
                         : "rdi", "rsi", "rdx", "rcx", "r8", "r9", "r10", "rax", "xmm0",
                           "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7");
#elif defined(__aarch64__)
    __asm__ volatile("mov x0, #-1\nmov x1, #-1\nmov x2, #-1\nmov x3, #-1\nmov x4, #-1\n"
                     "mov x5, #-1\nmov x6, #-1\nmov x7, #-1\nmov x8, #-1\n"
                     "movi v0.16b, #0xff\nmovi v1.16b, #0xff\nmovi v2.16b, #0xff\n"
                     "movi v3.16b, #0xff\nmovi v4.16b, #0xff\nmovi v5.16b, #0xff\n"
                     "movi v6.16b, #0xff\nmovi v7.16b, #0xff\n" ::
                         : "x0", "x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8", "v0", "v1",
                           "v2", "v3", "v4", "v5", "v6", "v7");
#endif
    sink = churn(sink + 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5, 8.5, 9, 10, 11, 12, 13, 14);
}

static void note(unsigned idx, const char *name, void *real)
{
    handled++;
    handled_flag_set += hcg_self.in_host_fn != 0;
    last_idx = idx;
    last_name = name;
    last_real = real;
}

static CUresult pass_handler(unsigned idx, const char *name, void *real)
{
    note(idx, name, real);
    clobber();
    return HCG_THUNK_PASS;
}

static CUresult deny_handler(unsigned idx, const char *name, void *real)
{
    note(idx, name, real);
    clobber();
    return CUDA_ERROR_NOT_PERMITTED;
}

/* ---- the same calls, direct or through thunks ---------------------------- */
typedef struct fns {
    long (*f0)(void);
    long (*f1)(long);
    long (*f2)(long, long);
    long (*f3)(long, long, long);
    long (*f4)(long, long, long, long);
    long (*f5)(long, long, long, long, long);
    long (*f6)(long, long, long, long, long, long);
    long (*f7)(long, long, long, long, long, long, long);
    long (*f8)(long, long, long, long, long, long, long, long);
    long (*f12)(long, long, long, long, long, long, long, long, int, char, long, short);
    double (*fd)(double, double, double, double, double, double, double, double, double,
                 double, float, float);
    float (*fmix)(int, float, long, double, char, float, short, double);
    pair (*ret_pair)(long, long);
    fpair (*ret_fpair)(double, double);
    big (*ret_big)(long, double);
    long (*take_big)(big, long, big);
    int (*fmt)(char *, size_t, const char *, ...);
} fns;

static const fns direct = {f0, f1, f2, f3, f4, f5, f6, f7, f8, f12, fd, fmix,
                           ret_pair, ret_fpair, ret_big, take_big, fmt};
#define N_FNS (sizeof(fns) / sizeof(void *))

static void *as_ptr(const fns *f, size_t i)
{
    void *p;
    memcpy(&p, (const char *)f + i * sizeof p, sizeof p);
    return p;
}

/* Each function's thunk; with want_thunk 0, the function itself. */
static fns thunked(int want_thunk)
{
    static const char *names[N_FNS] = {"f0", "f1", "f2", "f3", "f4", "f5",
                                       "f6", "f7", "f8", "f12", "fd", "fmix",
                                       "ret_pair", "ret_fpair", "ret_big",
                                       "take_big", "fmt"};
    fns t;
    for (size_t i = 0; i < N_FNS; i++) {
        void *p = hcg_thunk_for(names[i], as_ptr(&direct, i));
        CHECK((p != as_ptr(&direct, i)) == want_thunk);
        memcpy((char *)&t + i * sizeof p, &p, sizeof p);
    }
    return t;
}

#ifdef HAVE_THUNKS
/* The thunks of the functions above, made by the first case that needs
 * them: the registry's first entries are then theirs (test_registry). */
static const fns *thunks(void)
{
    static fns t;
    static int made;
    if (!made) {
        t = thunked(1);
        made = 1;
    }
    return &t;
}
#endif

/* Every call through t returns what the direct call returns. */
static int compare_all(const fns *t)
{
    int before = check_failures;
    CHECK_EQ(t->f0(), direct.f0());
    CHECK_EQ(t->f1(-9), direct.f1(-9));
    CHECK_EQ(t->f2(1, 2), direct.f2(1, 2));
    CHECK_EQ(t->f3(1, 2, 3), direct.f3(1, 2, 3));
    CHECK_EQ(t->f4(1, 2, 3, 4), direct.f4(1, 2, 3, 4));
    CHECK_EQ(t->f5(1, 2, 3, 4, 5), direct.f5(1, 2, 3, 4, 5));
    CHECK_EQ(t->f6(1, 2, 3, 4, 5, 6), direct.f6(1, 2, 3, 4, 5, 6));
    CHECK_EQ(t->f7(1, 2, 3, 4, 5, 6, 7), direct.f7(1, 2, 3, 4, 5, 6, 7));
    CHECK_EQ(t->f8(1, 2, 3, 4, 5, 6, 7, -8), direct.f8(1, 2, 3, 4, 5, 6, 7, -8));
    CHECK_EQ(t->f12(1, 2, 3, 4, 5, 6, 7, 8, -9, 10, 1L << 40, -12),
             direct.f12(1, 2, 3, 4, 5, 6, 7, 8, -9, 10, 1L << 40, -12));
    double d1 = t->fd(.5, 1, 2, 3, 4, 5, 6, 7, 8.25, 9.5, 10.75f, -11.5f);
    double d2 = direct.fd(.5, 1, 2, 3, 4, 5, 6, 7, 8.25, 9.5, 10.75f, -11.5f);
    CHECK(d1 == d2);
    CHECK(t->fmix(1, 2.5f, 3, 4.25, 5, 6.5f, 7, 8.125) ==
          direct.fmix(1, 2.5f, 3, 4.25, 5, 6.5f, 7, 8.125));
    pair p = t->ret_pair(5, -7);
    CHECK(p.a == 10 && p.b == -21);
    fpair q = t->ret_fpair(3, 0.5);
    CHECK(q.x == 1.5 && q.y == 2);
    big b = t->ret_big(3, 100.0), bd = direct.ret_big(3, 100.0);
    CHECK(memcmp(&b, &bd, sizeof b) == 0 && b.v[5] == 118);
    CHECK_EQ(t->take_big(b, 77, bd), direct.take_big(b, 77, bd));
    char s1[160], s2[160];
    int n1 = t->fmt(s1, sizeof s1, "%d %s %.3f %ld %c %g %g %g %g %g %g %g %g %g", -5, "str",
                    2.25, 1L << 50, 'x', 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.5);
    int n2 = snprintf(s2, sizeof s2, "%d %s %.3f %ld %c %g %g %g %g %g %g %g %g %g", -5, "str",
                      2.25, 1L << 50, 'x', 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.5);
    CHECK_EQ(n1, n2);
    CHECK(strcmp(s1, s2) == 0);
    return check_failures == before;
}

/* ---- exact argument registers, with assembly on both sides ---------------
 * regs_call loads every argument register from regs_in and calls its
 * argument; regs_probe stores them all into regs_out. */
#ifdef HAVE_THUNKS
/* x86-64: rdi rsi rdx rcx r8 r9 rax r10, xmm0-7. aarch64: x0-x8, q0-q7. */
/* Slots: 10 integer (80 bytes, the last unused on x86-64), then 8 vector
 * registers of 16 bytes (bytes 80 to 208). */
#define N_REG_SLOTS (10 + 8 * 2)
uint64_t regs_in[N_REG_SLOTS] __attribute__((aligned(16), visibility("hidden")));
uint64_t regs_out[N_REG_SLOTS] __attribute__((aligned(16), visibility("hidden")));
void regs_probe(void) __attribute__((visibility("hidden")));
void regs_call(void *fn) __attribute__((visibility("hidden")));
#endif

#if defined(HAVE_THUNKS) && defined(__x86_64__)
#if defined(__CET__) && (__CET__ & 1)
#define T_LANDING "endbr64\n"
#else
#define T_LANDING ""
#endif
__asm__(".pushsection .text\n.p2align 4\n.type regs_probe,@function\nregs_probe:\n"
        ".cfi_startproc\n" T_LANDING
        "leaq regs_out(%rip), %r11\n"
        "movq %rdi, 0(%r11)\nmovq %rsi, 8(%r11)\nmovq %rdx, 16(%r11)\nmovq %rcx, 24(%r11)\n"
        "movq %r8, 32(%r11)\nmovq %r9, 40(%r11)\nmovq %rax, 48(%r11)\nmovq %r10, 56(%r11)\n"
        "movdqu %xmm0, 80(%r11)\nmovdqu %xmm1, 96(%r11)\nmovdqu %xmm2, 112(%r11)\n"
        "movdqu %xmm3, 128(%r11)\nmovdqu %xmm4, 144(%r11)\nmovdqu %xmm5, 160(%r11)\n"
        "movdqu %xmm6, 176(%r11)\nmovdqu %xmm7, 192(%r11)\nret\n.cfi_endproc\n"
        ".size regs_probe,.-regs_probe\n"
        ".p2align 4\n.type regs_call,@function\nregs_call:\n.cfi_startproc\n" T_LANDING
        "pushq %rbx\n.cfi_adjust_cfa_offset 8\n.cfi_rel_offset %rbx, 0\n"
        "movq %rdi, %rbx\nleaq regs_in(%rip), %rax\n"
        "movdqu 80(%rax), %xmm0\nmovdqu 96(%rax), %xmm1\nmovdqu 112(%rax), %xmm2\n"
        "movdqu 128(%rax), %xmm3\nmovdqu 144(%rax), %xmm4\nmovdqu 160(%rax), %xmm5\n"
        "movdqu 176(%rax), %xmm6\nmovdqu 192(%rax), %xmm7\n"
        "movq 0(%rax), %rdi\nmovq 8(%rax), %rsi\nmovq 16(%rax), %rdx\nmovq 24(%rax), %rcx\n"
        "movq 32(%rax), %r8\nmovq 40(%rax), %r9\nmovq 56(%rax), %r10\nmovq 48(%rax), %rax\n"
        "call *%rbx\npopq %rbx\n.cfi_adjust_cfa_offset -8\n.cfi_restore %rbx\nret\n"
        ".cfi_endproc\n.size regs_call,.-regs_call\n.popsection\n");
#define N_GPR_USED 8
#elif defined(HAVE_THUNKS) && defined(__aarch64__)
#if defined(__ARM_FEATURE_BTI_DEFAULT)
#define T_LANDING "bti c\n"
#else
#define T_LANDING ""
#endif
__asm__(".pushsection .text\n.p2align 2\n.type regs_probe,%function\nregs_probe:\n"
        ".cfi_startproc\n" T_LANDING
        "adrp x16, regs_out\nadd x16, x16, :lo12:regs_out\n"
        "stp x0, x1, [x16]\nstp x2, x3, [x16, #16]\nstp x4, x5, [x16, #32]\n"
        "stp x6, x7, [x16, #48]\nstr x8, [x16, #64]\n"
        "stp q0, q1, [x16, #80]\nstp q2, q3, [x16, #112]\nstp q4, q5, [x16, #144]\n"
        "stp q6, q7, [x16, #176]\nret\n.cfi_endproc\n.size regs_probe,.-regs_probe\n"
        ".p2align 2\n.type regs_call,%function\nregs_call:\n.cfi_startproc\n" T_LANDING
        "stp x29, x30, [sp, #-32]!\n.cfi_def_cfa_offset 32\n.cfi_offset 29, -32\n"
        ".cfi_offset 30, -24\nmov x29, sp\nstr x19, [sp, #16]\n.cfi_offset 19, -16\n"
        "mov x19, x0\nadrp x16, regs_in\nadd x16, x16, :lo12:regs_in\n"
        "ldp q0, q1, [x16, #80]\nldp q2, q3, [x16, #112]\nldp q4, q5, [x16, #144]\n"
        "ldp q6, q7, [x16, #176]\n"
        "ldp x0, x1, [x16]\nldp x2, x3, [x16, #16]\nldp x4, x5, [x16, #32]\n"
        "ldp x6, x7, [x16, #48]\nldr x8, [x16, #64]\n"
        "blr x19\nldr x19, [sp, #16]\nldp x29, x30, [sp], #32\n.cfi_def_cfa_offset 0\n"
        ".cfi_restore 19\n.cfi_restore 29\n.cfi_restore 30\nret\n.cfi_endproc\n"
        ".size regs_call,.-regs_call\n.popsection\n");
#define N_GPR_USED 9
#endif

#ifdef HAVE_THUNKS
/* Slots 0..N_GPR_USED-1 are registers; vector registers start at 10 (byte
 * 80) on both; the rest must be left as they were (zero). */
static int regs_survive(void *fn, uint64_t salt)
{
    for (size_t i = 0; i < sizeof regs_in / sizeof regs_in[0]; i++)
        regs_in[i] = (i < N_GPR_USED || i >= 10) ? 0x0123456789abcdefull * (i + 1) ^ salt : 0;
    memset(regs_out, 0, sizeof regs_out);
    regs_call(fn);
    int ok = memcmp(regs_in, regs_out, sizeof regs_in) == 0;
    for (size_t i = 0; !ok && i < sizeof regs_in / sizeof regs_in[0]; i++)
        if (regs_in[i] != regs_out[i])
            fprintf(stderr, "register slot %zu: in %#llx out %#llx\n", i,
                    (unsigned long long)regs_in[i], (unsigned long long)regs_out[i]);
    return ok;
}

static long (*nested_f1)(long);
static long nested_result;

static CUresult nested_handler(unsigned idx, const char *name, void *real)
{
    note(idx, name, real);
    nested_result = nested_f1((long)idx);
    return HCG_THUNK_PASS;
}

/* ---- tests ---------------------------------------------------------------- */
static void outside_with(const fns *t)
{
    hcg_thunk_set_handler(pass_handler);
    handled = 0;
    CHECK(compare_all(t));
    CHECK_EQ(handled, 0); /* the fast path never asks */
    hcg_thunk_set_handler(NULL);
}

static void inside_pass_with(const fns *t)
{
    hcg_thunk_set_handler(pass_handler);
    handled = handled_flag_set = 0;
    hcg_self.in_host_fn = 1;
    int ok = compare_all(t);
    hcg_self.in_host_fn = 0;
    CHECK(ok);
    CHECK_EQ(handled, (int)N_FNS); /* one call through each thunk */
    CHECK_EQ(handled_flag_set, 0); /* the handler runs with the flag cleared */

    /* The handler sees the entry it was called for. */
    hcg_self.in_host_fn = 1;
    long r = t->f3(4, 5, 6);
    CHECK_EQ(hcg_self.in_host_fn, 1); /* restored after the handler */
    hcg_self.in_host_fn = 0;
    CHECK_EQ(r, f3(4, 5, 6));
    CHECK(last_real == (void *)f3);
    CHECK(last_name && strcmp(last_name, "f3") == 0);
    CHECK(hcg_thunk_name(last_idx) && strcmp(hcg_thunk_name(last_idx), "f3") == 0);

    /* A handler may call thunks: they take the fast path, not recurse. */
    nested_f1 = t->f1;
    nested_result = 0;
    hcg_thunk_set_handler(nested_handler);
    handled = 0;
    hcg_self.in_host_fn = 1;
    r = t->f2(8, 9);
    hcg_self.in_host_fn = 0;
    CHECK_EQ(r, f2(8, 9));
    CHECK_EQ(handled, 1);
    CHECK_EQ(nested_result, f1((long)last_idx));
    CHECK(strcmp(hcg_thunk_name(last_idx), "f2") == 0);

    /* No handler: everything passes. */
    hcg_thunk_set_handler(NULL);
    handled = 0;
    hcg_self.in_host_fn = 1;
    ok = compare_all(t);
    hcg_self.in_host_fn = 0;
    CHECK(ok);
    CHECK_EQ(handled, 0);
}

static void deny_with(const fns *t)
{
    void *th = hcg_thunk_for("driver_like", (void *)driver_like);
    CUresult (*dl)(int *, int) = (CUresult(*)(int *, int))th;
    int out = 0;
    hcg_thunk_set_handler(deny_handler);
    real_calls = 0;
    hcg_self.in_host_fn = 1;
    CUresult r = dl(&out, 7);
    long z = t->f0(); /* any signature: the CUresult lands in the return register */
    hcg_self.in_host_fn = 0;
    CHECK_EQ(r, CUDA_ERROR_NOT_PERMITTED);
    CHECK_EQ((CUresult)z, CUDA_ERROR_NOT_PERMITTED);
    CHECK_EQ(real_calls, 0);
    CHECK_EQ(out, 0);
    CHECK(last_real == (void *)f0);
    /* Outside a host function the same handler is never asked. */
    r = dl(&out, 9);
    CHECK_EQ(r, CUDA_SUCCESS);
    CHECK_EQ(out, 9);
    CHECK_EQ(real_calls, 1);
    hcg_thunk_set_handler(NULL);
}

static void test_registers(void)
{
    void *th = hcg_thunk_for("regs_probe", (void *)regs_probe);
    CHECK(th != (void *)regs_probe);
    CHECK(regs_survive((void *)regs_probe, 0)); /* the probe itself */
    CHECK(regs_survive(th, 1));
    hcg_thunk_set_handler(pass_handler);
    hcg_self.in_host_fn = 1;
    handled = 0;
    CHECK(regs_survive(th, 2));
    hcg_self.in_host_fn = 0;
    CHECK_EQ(handled, 1);
    hcg_thunk_set_handler(NULL);
}

/* The unwinder walks from the handler through the slow path to the caller
 * and beyond: the caller's own return address shows in the backtrace. */
static void *want_frame;
static int saw_frame;

static CUresult unwind_check_handler(unsigned idx, const char *name, void *real)
{
    (void)idx, (void)name, (void)real;
    void *frames[64];
    int n = backtrace(frames, 64);
    for (int i = 0; i < n; i++)
        saw_frame |= frames[i] == want_frame;
    return HCG_THUNK_PASS;
}

static NOINLINE long call_for_unwind(const fns *t)
{
    want_frame = __builtin_extract_return_addr(__builtin_return_address(0));
    hcg_self.in_host_fn = 1;
    long r = t->f2(3, 4);
    hcg_self.in_host_fn = 0;
    return r;
}

static void unwind_with(const fns *t)
{
    void *warm[4];
    backtrace(warm, 4); /* loads the unwinder outside the test */
    hcg_thunk_set_handler(unwind_check_handler);
    saw_frame = 0;
    CHECK_EQ(call_for_unwind(t), f2(3, 4));
    CHECK(saw_frame);
    hcg_thunk_set_handler(NULL);
}

static void registry_with(const fns *t)
{
    CHECK(hcg_thunk_for(NULL, NULL) == NULL);
    CHECK(hcg_thunk_for("again", (void *)f1) == (void *)t->f1); /* same real, same thunk */
    CHECK(hcg_thunk_for("f1", (void *)t->f1) == (void *)t->f1); /* a thunk is its own */
    CHECK((void *)t->f1 != (void *)t->f2);
    unsigned n = hcg_thunk_count();
    CHECK(n >= N_FNS);
    CHECK(hcg_thunk_name(n) == NULL);
    CHECK(hcg_thunk_name(0) && strcmp(hcg_thunk_name(0), "f0") == 0);
    CHECK_EQ(hcg_thunk_count(), n); /* look-ups add nothing */

    static char fake[2];
    char longname[200];
    memset(longname, 'n', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    CHECK(hcg_thunk_for(longname, fake) != fake);
    CHECK_EQ(strlen(hcg_thunk_name(n)), 63); /* truncated, terminated */
    CHECK(hcg_thunk_for(NULL, fake + 1) != fake + 1);
    CHECK(strcmp(hcg_thunk_name(n + 1), "") == 0);
    CHECK_EQ(hcg_thunk_count(), n + 2);
}

/* ---- concurrency ------------------------------------------------------------- */
#define N_THREADS 4
#define N_SHARED 300
#define N_OWN 50
static char shared_fakes[N_SHARED];
static char own_fakes[N_THREADS][N_OWN];
static void *got[N_THREADS][N_SHARED];
static const fns *thread_fns;
static atomic_int thread_handled;

static CUresult count_handler(unsigned idx, const char *name, void *real)
{
    (void)idx, (void)name, (void)real;
    atomic_fetch_add(&thread_handled, 1);
    return HCG_THUNK_PASS;
}

static void *registrar(void *arg)
{
    int k = (int)(intptr_t)arg;
    for (int i = 0; i < N_SHARED; i++) {
        int j = (k & 1) ? N_SHARED - 1 - i : (i * 7 + k * 13) % N_SHARED;
        got[k][j] = hcg_thunk_for("shared", &shared_fakes[j]);
        if (i < N_OWN)
            hcg_thunk_for("own", &own_fakes[k][i]);
    }
    /* Each thread's flag is its own. */
    int ok = 1;
    for (int i = 0; i < 1000; i++) {
        hcg_self.in_host_fn = (unsigned char)(i & 1);
        ok &= thread_fns->f2(i, k) == f2(i, k);
    }
    hcg_self.in_host_fn = 0;
    return (void *)(intptr_t)ok;
}

static void concurrent_with(const fns *t)
{
    pthread_t th[N_THREADS];
    unsigned before = hcg_thunk_count();
    thread_fns = t;
    atomic_store(&thread_handled, 0);
    hcg_thunk_set_handler(count_handler);
    for (int k = 0; k < N_THREADS; k++)
        CHECK_EQ(pthread_create(&th[k], NULL, registrar, (void *)(intptr_t)k), 0);
    for (int k = 0; k < N_THREADS; k++) {
        void *ok = NULL;
        pthread_join(th[k], &ok);
        CHECK(ok == (void *)1);
    }
    hcg_thunk_set_handler(NULL);
    CHECK_EQ(atomic_load(&thread_handled), N_THREADS * 500);
    CHECK_EQ(hcg_thunk_count(), before + N_SHARED + N_THREADS * N_OWN);
    int same = 1;
    for (int j = 0; j < N_SHARED; j++) {
        same &= got[0][j] != &shared_fakes[j];
        for (int k = 1; k < N_THREADS; k++)
            same &= got[k][j] == got[0][j];
    }
    CHECK(same);
}

/* ---- the exports ------------------------------------------------------------ */
extern void *hcg_thunk_real[] __attribute__((visibility("hidden")));

/* Export named name, and its index in *idx; NULL if there is none. */
static void *export_named(const char *name, unsigned *idx)
{
    for (unsigned i = 0; i < hcg_thunk_exports(); i++)
        if (strcmp(hcg_thunk_name(HCG_THUNK_MAX + i), name) == 0) {
            *idx = HCG_THUNK_MAX + i;
            return hcg_thunk_export(i);
        }
    return NULL;
}

static void test_export_table(void)
{
    unsigned n = hcg_thunk_exports(), cu = 0;
    CHECK_EQ(n, HCG_N_DRIVER_EXPORTS);
    for (unsigned i = 0; i < n; i++) {
        const char *name = hcg_thunk_name(HCG_THUNK_MAX + i);
        cu += name && strncmp(name, "cu", 2) == 0;
        CHECK(hcg_thunk_is_export(hcg_thunk_export(i)));
    }
    CHECK_EQ(cu, n);
    CHECK(hcg_thunk_name(HCG_THUNK_MAX + n) == NULL);
    CHECK(hcg_thunk_export(n) == NULL);
    CHECK(!hcg_thunk_is_export(hcg_thunk_for("f1", (void *)f1)));
    CHECK(!hcg_thunk_is_export((void *)f1));
    void *e = hcg_thunk_export(0);
    CHECK(hcg_thunk_for("again", e) == e); /* an export is its own thunk */
}

typedef CUresult (*version_fn)(int *);

/* The first call of an export is made inside a host function: refused
 * without resolving (nor loading the driver); let through, it resolves
 * and reaches the driver. Returns the driver's handle. */
static void *test_export_first_inside(void)
{
    unsigned idx = 0;
    version_fn v = (version_fn)export_named("cuDriverGetVersion", &idx);
    void *before = hcg_thunk_real[idx];
    int version = 0;
    hcg_thunk_set_handler(deny_handler);
    hcg_self.in_host_fn = 1;
    CUresult r = v(&version);
    hcg_self.in_host_fn = 0;
    CHECK_EQ(r, CUDA_ERROR_NOT_PERMITTED);
    CHECK_EQ(version, 0);
    CHECK(hcg_thunk_real[idx] == before);
    CHECK(hcg_driver_peek() == NULL);
    CHECK(last_idx == idx && strcmp(last_name, "cuDriverGetVersion") == 0);

    hcg_thunk_set_handler(pass_handler);
    handled = 0;
    hcg_self.in_host_fn = 1;
    r = v(&version);
    hcg_self.in_host_fn = 0;
    hcg_thunk_set_handler(NULL); /* loading the driver installed the audit's */
    CHECK_EQ(r, CUDA_SUCCESS);
    CHECK_EQ(version, 4242);
    CHECK_EQ(handled, 1);
    hcg_driver *d = hcg_driver_peek();
    CHECK(d != NULL);
    if (!d)
        return NULL;
    int *calls = (int *)dlsym(d->handle, "exports_driver_calls");
    CHECK(calls && *calls == 1);
    CHECK(hcg_thunk_real[idx] == dlsym(d->handle, "cuDriverGetVersion"));
    version = 0;
    CHECK_EQ(v(&version), CUDA_SUCCESS);
    CHECK_EQ(version, 4242);
    CHECK(calls && *calls == 2);
    return d->handle;
}

/* Every argument register reaches the driver's function through the
 * resolver: outside (cuStreamQuery), and from the slow path
 * (cuCtxGetCurrent's first call, inside a host function). */
static void test_export_registers(void *driver)
{
    void (*set_probe)(void *) = (void (*)(void *))dlsym(driver, "exports_driver_set_probe");
    unsigned iq = 0, ic = 0;
    void *query = export_named("cuStreamQuery", &iq);
    void *ctx = export_named("cuCtxGetCurrent", &ic);
    CHECK(set_probe && query && ctx);
    if (!set_probe || !query || !ctx)
        return;
    set_probe((void *)regs_probe);
    void *before = hcg_thunk_real[iq];
    CHECK(regs_survive(query, 4));
    CHECK(hcg_thunk_real[iq] != before);
    CHECK(regs_survive(query, 5));

    hcg_thunk_set_handler(pass_handler);
    handled = 0;
    hcg_self.in_host_fn = 1;
    CHECK(regs_survive(ctx, 6));
    hcg_self.in_host_fn = 0;
    hcg_thunk_set_handler(NULL);
    CHECK_EQ(handled, 1);
    CHECK_EQ(last_idx, ic);
    CHECK(regs_survive(ctx, 7));
}

typedef CUresult (*load_fn)(CUmodule *, const char *);

/* A function the driver lacks answers CUDA_ERROR_NOT_FOUND, and keeps
 * answering it without another look-up. */
static void test_export_missing(void)
{
    unsigned idx = 0;
    load_fn load = (load_fn)export_named("cuModuleLoad", &idx);
    CHECK(load != NULL);
    if (!load)
        return;
    CUmodule m = NULL;
    CHECK_EQ(load(&m, "x"), CUDA_ERROR_NOT_FOUND);
    void *answer = hcg_thunk_real[idx];
    CHECK_EQ(load(&m, "x"), CUDA_ERROR_NOT_FOUND);
    CHECK(hcg_thunk_real[idx] == answer);
    hcg_thunk_set_handler(pass_handler);
    hcg_self.in_host_fn = 1;
    CUresult r = load(&m, "x");
    hcg_self.in_host_fn = 0;
    hcg_thunk_set_handler(NULL);
    CHECK_EQ(r, CUDA_ERROR_NOT_FOUND);
    CHECK(m == NULL);
}

static void test_exports(void)
{
    test_export_table();
    if (!hcg_thunk_exports()) {
        printf("no exports in this build (no stub libcuda.so)\n");
        return;
    }
    if (!getenv("HCGUARD_DRIVER")) { /* CTest names exports_driver */
        printf("HCGUARD_DRIVER unset: the exports are not called\n");
        return;
    }
    void *driver = test_export_first_inside();
    if (driver)
        test_export_registers(driver);
    test_export_missing();
}

/* No driver: an export answers CUDA_ERROR_NOT_INITIALIZED, and tries again
 * at the next call (the driver may be loaded later). */
static void test_exports_no_driver(void)
{
    unsigned idx = 0;
    version_fn v = (version_fn)export_named("cuDriverGetVersion", &idx);
    if (!v) {
        printf("no exports in this build (no stub libcuda.so)\n");
        return;
    }
    void *before = hcg_thunk_real[idx];
    int version = 0;
    CHECK_EQ(v(&version), CUDA_ERROR_NOT_INITIALIZED);
    CHECK_EQ(v(&version), CUDA_ERROR_NOT_INITIALIZED);
    CHECK_EQ(version, 0);
    CHECK(hcg_thunk_real[idx] == before);
    CHECK(hcg_driver_error()[0] != '\0');
}

/* Fills the table: the last entry is a real function (the last stub works),
 * and a full table hands back real. Runs last. */
static NOINLINE double last_fn(long a, double b, const char *c) { return (double)a * b + c[0]; }

static void test_full(void)
{
    static char pool[HCG_THUNK_MAX];
    (void)thunks(); /* f0 and f12 are in the table, as when run after the rest */
    unsigned n = hcg_thunk_count(), i = 0;
    while (hcg_thunk_count() < HCG_THUNK_MAX - 1 && i < HCG_THUNK_MAX) {
        CHECK(hcg_thunk_for("filler", &pool[i]) != &pool[i]);
        i++;
    }
    CHECK_EQ(n + i, HCG_THUNK_MAX - 1);
    CHECK(hcg_thunk_for("f12", (void *)f12) != (void *)f12); /* found, not added */
    CHECK_EQ(hcg_thunk_count(), HCG_THUNK_MAX - 1);

    double (*last)(long, double, const char *) =
        (double (*)(long, double, const char *))hcg_thunk_for("last", (void *)last_fn);
    CHECK((void *)last != (void *)last_fn);
    CHECK_EQ(hcg_thunk_count(), HCG_THUNK_MAX);
    CHECK(strcmp(hcg_thunk_name(HCG_THUNK_MAX - 1), "last") == 0);
    CHECK(last(3, 1.5, "A") == last_fn(3, 1.5, "A"));
    hcg_thunk_set_handler(pass_handler);
    handled = 0;
    hcg_self.in_host_fn = 1;
    double r = last(-2, 0.25, "b");
    hcg_self.in_host_fn = 0;
    hcg_thunk_set_handler(NULL);
    CHECK(r == last_fn(-2, 0.25, "b"));
    CHECK_EQ(handled, 1);
    CHECK_EQ(last_idx, HCG_THUNK_MAX - 1);

    static char over;
    CHECK(hcg_thunk_for("over", &over) == &over);
    CHECK(hcg_thunk_for("f0", (void *)f0) != (void *)f0); /* old entries still found */
    CHECK_EQ(hcg_thunk_count(), HCG_THUNK_MAX);
}

/* ---- cost ------------------------------------------------------------------ */
static NOINLINE long bump(long x) { return x + 1; }

static double ns_per_call(long (*volatile fn)(long), long iters)
{
    struct timespec a, b;
    long x = 0;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < iters; i++)
        x = fn(x);
    clock_gettime(CLOCK_MONOTONIC, &b);
    CHECK_EQ(x, iters);
    return ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) /
           (double)iters;
}

static void test_cost(void)
{
    long (*th)(long) = (long (*)(long))hcg_thunk_for("bump", (void *)bump);
    /* Short alternating rounds, best of each: the machine may be busy. */
    const long iters = 4000000;
    double best_d = 1e9, best_t = 1e9;
    for (int r = 0; r < 25; r++) {
        double d = ns_per_call(bump, iters), t = ns_per_call(th, iters);
        best_d = d < best_d ? d : best_d;
        best_t = t < best_t ? t : best_t;
    }
    hcg_thunk_set_handler(count_handler);
    hcg_self.in_host_fn = 1;
    double slow = ns_per_call(th, iters / 20);
    hcg_self.in_host_fn = 0;
    hcg_thunk_set_handler(NULL);
    printf("call cost: direct %.2f ns, through a thunk %.2f ns (+%.2f), slow path %.2f ns\n",
           best_d, best_t, best_t - best_d, slow);
}

#else
/* No thunks: every function comes back as itself, calls inside a host
 * function reach it unnoticed, and nothing is registered. */
static void test_portable(void)
{
    fns t = thunked(0);
    hcg_thunk_set_handler(deny_handler);
    handled = 0;
    hcg_self.in_host_fn = 1;
    int ok = compare_all(&t);
    hcg_self.in_host_fn = 0;
    hcg_thunk_set_handler(NULL);
    CHECK(ok);
    CHECK_EQ(handled, 0);
    CHECK_EQ(hcg_thunk_count(), 0);
    CHECK(hcg_thunk_name(0) == NULL);
    CHECK(hcg_thunk_for("f0", NULL) == NULL);

    CUresult (*dl)(int *, int) =
        (CUresult(*)(int *, int))hcg_thunk_for("driver_like", (void *)driver_like);
    int out = 0;
    hcg_thunk_set_handler(pass_handler);
    hcg_self.in_host_fn = 1;
    CHECK_EQ(dl(&out, 5), CUDA_SUCCESS);
    hcg_self.in_host_fn = 0;
    hcg_thunk_set_handler(NULL);
    CHECK_EQ(out, 5);
    CHECK_EQ(handled, 0);

    /* Nor any exports. */
    CHECK_EQ(hcg_thunk_exports(), 0);
    CHECK(hcg_thunk_export(0) == NULL);
    CHECK(hcg_thunk_name(HCG_THUNK_MAX) == NULL);
    CHECK(!hcg_thunk_is_export((void *)f0));
}
#endif

#ifdef HAVE_THUNKS
#define WITH_THUNKS(name)                                                    \
    static void test_##name(void) { name##_with(thunks()); }
WITH_THUNKS(outside)
WITH_THUNKS(inside_pass)
WITH_THUNKS(deny)
WITH_THUNKS(unwind)
WITH_THUNKS(registry)
WITH_THUNKS(concurrent)

/* No driver: HCGUARD_DRIVER names a missing file, so by name only. */
static void test_nodriver(void) { test_exports_no_driver(); }

static const check_case cases[] = {
    CHECK_CASE(outside),
    CHECK_CASE(inside_pass),
    CHECK_CASE(deny),
    CHECK_CASE(registers),
    CHECK_CASE(unwind),
    CHECK_CASE(registry),
    CHECK_CASE(concurrent),
    CHECK_CASE(cost),
    CHECK_CASE(exports),
    CHECK_CASE(full),
    CHECK_CASE_NAMED_ONLY(nodriver),
};
#define PROGRAM "test_thunk"
#else
static const check_case cases[] = {
    CHECK_CASE(portable),
};
#define PROGRAM "test_thunk_portable"
#endif

int main(int argc, char **argv)
{
    return check_main(PROGRAM, CHECK_CASES(cases), argc, argv);
}
