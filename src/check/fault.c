/*
 * Fault containment: a copy hcguard makes never kills the process.
 *
 * How, on x86-64 (sanitizer builds excepted): a copy runs either in
 * hcguard's own copy code (fault_x86_64.S: a word loop for records, rep
 * movsb for copies of 4 to 64 KiB where the processor moves strings fast),
 * or in glibc's memcpy (whose bandwidth no hand loop matches elsewhere),
 * entered through a few instructions of assembly that arm it with one
 * store: the stack pointer, into an initial-exec thread-local
 * (hcg_fault_sp; the caller puts the outer value back after). SIGSEGV and
 * SIGBUS go first to hcguard's handler, which recovers only when the fault
 * was raised by the kernel for an instruction of the copy: the interrupted
 * pc lies in hcguard's own copy code (which runs for contained copies
 * alone), or a copy is armed on the faulting thread, the interrupted stack
 * pointer is exactly the armed one and the pc lies in glibc's code (libc's
 * executable segment, which holds its memcpy). Then it points the
 * interrupted context at a fix-up that returns from the copy with the
 * signal, code and address in registers (so that nothing a signal handler
 * does meanwhile can overwrite them; hcg_fault_copy then returns -1), and
 * the kernel's sigreturn restores the signal mask. The handler runs with
 * every signal blocked (another handler's faulting copy would otherwise
 * fault with SIGSEGV blocked, which kills). Anything else goes on to the
 * program's own handler, or to the default action, as without hcguard: a
 * signal handler that runs during a copy runs deeper on the stack (or on
 * its own), so its faults are never taken for the copy's.
 * Nothing needs restoring on the way back because hcguard's copy code and
 * glibc's memcpy variants are leaves that use neither the stack nor a
 * callee-saved register (none of the x86-64 variants of glibc 2.36 to 2.39
 * does): had one saved a register, it would have moved the stack pointer,
 * and the fault would not be taken for the copy's. The fixed cost per
 * copy: none for hcguard's own code beyond its call; one thread-local
 * load, two stores and a jump around glibc's (bench/bench_copy).
 * Other architectures and sanitizer builds use sigsetjmp(env, 0) (no mask
 * save: no system call; a few ns more) and siglongjmp, recovering when the
 * fault address lies in the pages of the copy's two ranges, the mask put
 * right on the recovery path alone. Either way: no system call and no lock
 * when nothing faults.
 *
 * The program's handlers: sigaction and signal are interposed, so that a
 * handler installed for SIGSEGV or SIGBUS after hcguard's is recorded as the
 * chained one while hcguard's stays with the kernel; the program sees its
 * own previous handler as oldact. Limits: a raw rt_sigaction system call,
 * and sysv_signal, bsd_signal, sigset and __sigaction (which do not go
 * through the exported sigaction), replace hcguard's handler; its copies
 * are then no longer contained, and the program's faults are its own.
 *
 * Deaths by signal (hcg_fault_watch_deaths): a process that dies of a
 * signal's default action runs no exit code, so the events hcguard holds
 * in memory would die with it. While the program leaves a death signal
 * (HCG_DEATH_SIGNALS: SIGABRT, SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGPIPE,
 * SIGALRM, SIGUSR1, SIGXCPU, ...) at the default, hcguard's handler stands
 * in for it: it calls the death hook (the events to the log and the trace),
 * puts the default back and raises the signal again, so the process dies
 * of it as it would have (core, exit status). Any other action the program
 * sets goes to the kernel as it is: its handlers are its own business, and
 * SIG_IGN must survive exec (nohup relies on it); only a handler with
 * SA_RESETHAND is run by hcguard's (on_reset_death), since the kernel would
 * put the default back unseen. A default-action death by SIGSEGV or SIGBUS
 * calls the hook too, before the fault is let happen.
 */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "check/check.h"

/* The interposers run whenever anything calls sigaction, signal included a
 * sanitizer runtime initialising itself before it can run instrumented
 * code: they and what they call on that path are not instrumented. */
#define HCG_UNINSTRUMENTED __attribute__((no_sanitize("address", "thread", "undefined")))

/* A fault signal not raised by the instruction it interrupted: sent
 * (kill, tgkill, sigqueue: si_code <= 0), or the kernel's report of memory
 * found poisoned in the background (BUS_MCEERR_AO, sent to a process that
 * asked for early reports whenever it next returns to user space: it may
 * interrupt a copy). Never the copy's: it goes to the program. */
static int not_raised_here(int sig, const siginfo_t *si)
{
    return si->si_code <= 0 || (sig == SIGBUS && si->si_code == BUS_MCEERR_AO);
}

#if HCG_FAULT_FIXUP
/* In fault_x86_64.S: the way back from a fault, and hcguard's own copy
 * code (see there). */
void hcg_fault_fixup(void);
extern const char hcg_fault_own[], hcg_fault_own_end[];

_Thread_local uintptr_t hcg_fault_sp;
/* Copies from 4 KiB to 64 KiB go by rep movsb where the processor moves
 * strings fast (ERMS): measured as fast as glibc's memcpy there, hot or
 * cold (bench_copy), and, being hcguard's own code, recognised without
 * arming, whose few cycles are a percent of a 4 KiB copy in L1. Smaller
 * copies keep glibc's vector code (rep movsb starts slowly), larger ones
 * its choice of stores (non-temporal for huge copies). Set once, at
 * installation. */
#define MOVSB_LO ((size_t)4 << 10)
#define MOVSB_HI ((size_t)64 << 10)
size_t hcg_fault_movsb_lo HCG_HIDDEN, hcg_fault_movsb_span HCG_HIDDEN;
/* What hcg_fault_memcpy jumps to: libc's own memcpy once installed (not
 * one the program defines), and the executable segment that holds it. */
void *(*hcg_fault_target)(void *, const void *, size_t) HCG_HIDDEN = memcpy;
static _Atomic uintptr_t g_text[2];
static _Atomic uintptr_t g_self[2]; /* hcguard's own executable segment */

int hcg_fault_failed(hcg_fault_ret r, hcg_fault_info *out)
{
    if (out) {
        out->addr = r.addr;
        out->sig = (int)(r.done >> 16 & 0xff);
        out->code = (int)(int16_t)(r.done & 0xffff);
    }
    return -1;
}

/* What a failed copy returns in rax: the mark, the signal and si_code. */
static uintptr_t fault_done(int sig, int code)
{
    return HCG_FAULT_MARK | (uintptr_t)(sig & 0xff) << 16 | (uintptr_t)(code & 0xffff);
}

int hcg_fault_too_long(hcg_fault_info *out)
{
    hcg_fault_ret r = {fault_done(SIGSEGV, SI_KERNEL), 0};
    return hcg_fault_failed(r, out);
}

typedef struct find_text {
    uintptr_t addr, lo, hi;
} find_text;

static int text_of(struct dl_phdr_info *info, size_t size, void *v)
{
    (void)size;
    find_text *f = v;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && f->addr >= lo &&
            f->addr - lo < ph->p_memsz) {
            f->lo = lo;
            f->hi = lo + ph->p_memsz;
            return 1;
        }
    }
    return 0;
}

/* Point the copy at libc's memcpy and note the code it runs in. Once,
 * before the handlers are installed and outside their lock (dlopen takes
 * the loader's lock, which a library's constructor calling sigaction may
 * hold while it waits for hcguard's). */
static int fast_strings(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
        return 0;
    return (b >> 9) & 1; /* ERMS: enhanced rep movsb */
}

void hcg_fault_movsb_window(size_t *lo, size_t *hi, int set)
{
    if (set) {
        hcg_fault_movsb_lo = *lo;
        hcg_fault_movsb_span = *hi > *lo ? *hi - *lo : 0;
    }
    *lo = hcg_fault_movsb_lo;
    *hi = hcg_fault_movsb_lo + hcg_fault_movsb_span;
}

static void find_memcpy(void)
{
    if (fast_strings()) {
        size_t lo = MOVSB_LO, hi = MOVSB_HI;
        hcg_fault_movsb_window(&lo, &hi, 1);
    }
    /* libc's own, resolved (an IFUNC: its symbol is the selector) by dlsym
     * on libc's handle (driver/libc.c). */
    void *m = hcg_libc_find("memcpy", HCG_LIBC_HOW_LIBC_DLSYM, NULL);
    find_text f = {(uintptr_t)(m ? m : (void *)hcg_fault_target), 0, 0};
    if (dl_iterate_phdr(text_of, &f) == 0)
        return; /* unknown: faults in it are not taken for the copy's */
    if (m)
        hcg_fault_target = (void *(*)(void *, const void *, size_t))m;
    find_text self = {(uintptr_t)hcg_fault_memcpy, 0, 0};
    if (dl_iterate_phdr(text_of, &self) == 0)
        return;
    atomic_store_explicit(&g_self[0], self.lo, memory_order_relaxed);
    atomic_store_explicit(&g_self[1], self.hi, memory_order_relaxed);
    atomic_store_explicit(&g_text[0], f.lo, memory_order_relaxed);
    atomic_store_explicit(&g_text[1], f.hi, memory_order_relaxed);
}

/* An armed copy in glibc's memcpy: the stack pointer the armed one, the pc
 * libc's, and the return address it points at hcguard's code (a copy
 * left by a signal handler's siglongjmp leaves hcg_fault_sp behind; a
 * program's own memcpy faulting later at that very stack pointer returns
 * into the program's code, and is the program's). */
static int in_armed_memcpy(const ucontext_t *u, uintptr_t pc, uintptr_t sp)
{
    if (!sp || (uintptr_t)u->uc_mcontext.gregs[REG_RSP] != sp ||
        pc < atomic_load_explicit(&g_text[0], memory_order_relaxed) ||
        pc >= atomic_load_explicit(&g_text[1], memory_order_relaxed))
        return 0;
    /* Readable: the call that armed it wrote there, and a memcpy never
     * moves the stack pointer. */
    uintptr_t ret = *(const uintptr_t *)sp;
    return ret >= atomic_load_explicit(&g_self[0], memory_order_relaxed) &&
           ret < atomic_load_explicit(&g_self[1], memory_order_relaxed);
}

/* Whether the thread was inside a contained copy when the kernel raised
 * this fault (see the top of the file); then the way out is prepared. */
static int recover(int sig, const siginfo_t *si, void *uc)
{
    ucontext_t *u = uc;
    uintptr_t sp = hcg_fault_sp;
    uintptr_t pc = (uintptr_t)u->uc_mcontext.gregs[REG_RIP];
    if (not_raised_here(sig, si))
        return 0;
    int ours = (pc >= (uintptr_t)hcg_fault_own && pc < (uintptr_t)hcg_fault_own_end) ||
               in_armed_memcpy(u, pc, sp);
    if (!ours)
        return 0;
    /* Return from the copy with what happened in rax and rdx (check.h),
     * the direction flag clear as the ABI wants it (a backward rep movsb
     * sets it); sigreturn restores the mask. */
    u->uc_mcontext.gregs[REG_RAX] = (greg_t)fault_done(sig, si->si_code);
    u->uc_mcontext.gregs[REG_RDX] = (greg_t)(uintptr_t)si->si_addr;
    u->uc_mcontext.gregs[REG_RIP] = (greg_t)(uintptr_t)hcg_fault_fixup;
    u->uc_mcontext.gregs[REG_EFL] &= ~(greg_t)0x400;
    return 1;
}
#else
typedef struct recovery {
    sigjmp_buf env;
    uintptr_t at[2];            /* dst and src: the ranges a fault may hit */
    size_t n;
    struct recovery *prev;      /* an outer copy (a signal handler's launch) */
    hcg_fault_info info;
} recovery;

/* Initial-exec in libhcguard: one load from the thread pointer, and safe
 * to read in a signal handler. */
static _Thread_local recovery *armed;

#define PAGE_FLOOR(a) ((a) & ~(uintptr_t)4095)

/* a in the pages of [at, at + n), n > 0 (signal handler). */
static int in_range(uintptr_t a, uintptr_t at, size_t n)
{
    uintptr_t last = n - 1 > UINTPTR_MAX - at ? UINTPTR_MAX : PAGE_FLOOR(at + (n - 1)) + 4095;
    return a >= PAGE_FLOOR(at) && a <= last;
}

/* A record another thread may be rewriting is read a whole aligned word
 * per field, so that each field is one value the program wrote, old or
 * new, never a mix of the two (which could be any address). Small aligned
 * copies (records, a cuda.bindings wrapper's data) go word by word. */
static int by_words(const void *dst, const void *src, size_t n)
{
    return n <= 64 && (((uintptr_t)dst | (uintptr_t)src | n) & 7) == 0;
}

__attribute__((no_sanitize("address", "thread"), noinline)) static void *
copy_words(void *dst, const void *src, size_t n)
{
    volatile uint64_t *d = dst;
    const volatile uint64_t *s = src;
    for (size_t i = 0; i < n / 8; i++)
        d[i] = s[i];
    return dst;
}

/* Sanitizer builds: hcguard reads and writes user memory that may be
 * freed, unmapped or written by another thread on purpose (that is what it
 * guards against), so its copies are not instrumented; races and misuse of
 * hcguard's own data are still reported. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
__attribute__((no_sanitize("address", "thread"), noinline)) static void
copy_bytes(void *dst, const void *src, size_t n)
{
    volatile unsigned char *d = dst;
    const volatile unsigned char *s = src;
    while (n--)
        *d++ = *s++;
}
#else
#define copy_bytes memcpy
#endif

void hcg_fault_movsb_window(size_t *lo, size_t *hi, int set)
{
    (void)set; /* no rep movsb copies here */
    *lo = *hi = 0;
}

int hcg_fault_copy(void *dst, const void *src, size_t n, hcg_fault_info *out)
{
    recovery r;
    if (HCG_UNLIKELY(!hcg_self.faults_open))
        return hcg_fault_copy_masked(dst, src, n, out);
    if (n == 0)
        return 0;
    if (n > PTRDIFF_MAX) { /* no address space holds it; memcpy may wrap around */
        if (out)
            *out = (hcg_fault_info){0, SIGSEGV, SI_KERNEL};
        return -1;
    }
    r.at[0] = (uintptr_t)dst;
    r.at[1] = (uintptr_t)src;
    r.n = n;
    r.prev = armed;
    if (sigsetjmp(r.env, 0) != 0) {
        armed = r.prev;
        if (out)
            *out = r.info;
        return -1;
    }
    armed = &r;
    atomic_signal_fence(memory_order_seq_cst);
    if (by_words(dst, src, n))
        copy_words(dst, src, n);
    else
        copy_bytes(dst, src, n);
    atomic_signal_fence(memory_order_seq_cst);
    armed = r.prev;
    return 0;
}

/* On aarch64 loads and stores ignore an address's top byte (Linux turns
 * top-byte-ignore on for every process), and the kernel reports a fault's
 * address with that byte cleared: a copy from 0x80...08 faults at 0x8.
 * Ranges are compared without it there. */
#if defined(__aarch64__)
#define UNTAG(a) ((a) & (((uintptr_t)1 << 56) - 1))
#else
#define UNTAG(a) (a)
#endif

static int in_recovery(const recovery *r, uintptr_t a)
{
    a = UNTAG(a);
    return in_range(a, UNTAG(r->at[0]), r->n) || in_range(a, UNTAG(r->at[1]), r->n);
}

/* Whether a fault on a thread inside a contained copy is the copy's: a
 * kernel-raised fault at an address of its ranges, or one whose address
 * the kernel does not give (SI_KERNEL: a non-canonical address, such as a
 * record pointer no mapping can have). Then it does not return: the copy
 * does, with -1. */
static int recover(int sig, const siginfo_t *si, void *uc)
{
    recovery *r = armed;
    if (!r || not_raised_here(sig, si) ||
        (si->si_code != SI_KERNEL && !in_recovery(r, (uintptr_t)si->si_addr)))
        return 0;
    r->info.addr = (uintptr_t)si->si_addr;
    r->info.sig = sig;
    r->info.code = si->si_code;
    /* siglongjmp(.., 0 saved) keeps the handler's mask: the interrupted one back. */
    pthread_sigmask(SIG_SETMASK, &((ucontext_t *)uc)->uc_sigmask, NULL);
    siglongjmp(r->env, 1);
}
#endif

/* The thread's mask by system call: not through the interposers below
 * (which would forget what this learns) nor a sanitizer's. */
static int thread_sigmask(int how, const sigset_t *set, sigset_t *old)
{
    return (int)syscall(SYS_rt_sigprocmask, how, set, old, (size_t)(_NSIG / 8));
}

int hcg_fault_copy_masked(void *dst, const void *src, size_t n, hcg_fault_info *out)
{
    sigset_t faults, old;
    sigemptyset(&faults);
    sigaddset(&faults, SIGSEGV);
    sigaddset(&faults, SIGBUS);
    sigemptyset(&old);
    int blocked = thread_sigmask(SIG_UNBLOCK, &faults, &old) == 0 &&
                  (sigismember(&old, SIGSEGV) == 1 || sigismember(&old, SIGBUS) == 1);
    hcg_self.faults_open = 1;
    int rc = hcg_fault_copy(dst, src, n, out);
    if (blocked) {
        thread_sigmask(SIG_SETMASK, &old, NULL);
        hcg_self.faults_open = 0;
    }
    return rc;
}

const char *hcg_fault_code_name(int sig, int code)
{
    if (sig == SIGSEGV) {
        switch (code) {
        case SEGV_MAPERR: return "SEGV_MAPERR";
        case SEGV_ACCERR: return "SEGV_ACCERR";
#ifdef SEGV_PKUERR
        case SEGV_PKUERR: return "SEGV_PKUERR";
#endif
        default: break;
        }
    } else if (sig == SIGBUS) {
        switch (code) {
        case BUS_ADRALN: return "BUS_ADRALN";
        case BUS_ADRERR: return "BUS_ADRERR";
        case BUS_OBJERR: return "BUS_OBJERR";
        default: break;
        }
    }
    return code == SI_KERNEL ? "SI_KERNEL" : "other";
}

/* ---- the program's handlers ---------------------------------------------
 * Two copies of each chained action; a writer fills the one not in use and
 * then publishes it, so that the handler, which cannot take a lock, reads a
 * whole one. Writers are serialised by a spin lock taken with every signal
 * blocked (sigaction may be called from a signal handler). */
/* The death signals (HCG_DEATH_SIGNALS, base.h), slots N_FAULT_SLOTS on. */
static const int death_sigs[] = {HCG_DEATH_SIGNALS};
enum {
    SLOT_SEGV,
    SLOT_BUS,
    N_FAULT_SLOTS,
    N_SLOTS = N_FAULT_SLOTS + sizeof death_sigs / sizeof death_sigs[0]
};

typedef struct chained {
    struct sigaction act[2];
    atomic_uint cur;
} chained;

static chained g_chain[N_SLOTS];
static atomic_int g_installed;
static atomic_int g_deaths;               /* hcg_fault_watch_deaths was called */
static _Atomic(void (*)(void)) g_death_hook;
static atomic_flag g_lock = ATOMIC_FLAG_INIT;

HCG_UNINSTRUMENTED static int slot_of(int sig)
{
    if (sig == SIGSEGV || sig == SIGBUS)
        return sig == SIGSEGV ? SLOT_SEGV : SLOT_BUS;
    for (int i = 0; i < N_SLOTS - N_FAULT_SLOTS; i++)
        if (death_sigs[i] == sig)
            return N_FAULT_SLOTS + i;
    return -1;
}

/* Death slot `slot` has hcguard's handler in the kernel, or not: what a
 * drain holds back (hcg_g_standin_sigs). A hint: where the program's view
 * depends on it, the kernel is asked (still_ours). */
static void set_ours(int slot, int on)
{
    uint64_t bit = 1ull << (death_sigs[slot - N_FAULT_SLOTS] & 63);
    if (on)
        atomic_fetch_or(&hcg_g_standin_sigs, bit);
    else
        atomic_fetch_and(&hcg_g_standin_sigs, ~bit);
}

/* The program's sigaction: the next definition in the search order (a
 * sanitizer's or libc's; driver/libc.def). */
HCG_UNINSTRUMENTED static int real_sigaction(int sig, const struct sigaction *act,
                                             struct sigaction *old)
{
    hcg_libc_sigaction_fn f = HCG_REAL(sigaction);
    if (!f) {
        errno = ENOSYS;
        return -1;
    }
    return f(sig, act, old);
}

/* hcguard's own actions go to libc's sigaction, past any interposer (a
 * sanitizer's would wrap hcguard's handler in its own): what the kernel
 * runs on a fault is hcguard's handler itself. */
HCG_UNINSTRUMENTED static int kernel_sigaction(int sig, const struct sigaction *act,
                                               struct sigaction *old)
{
    hcg_libc_libc_sigaction_fn f = HCG_REAL(libc_sigaction);
    if (!f)
        return real_sigaction(sig, act, old);
    return f(sig, act, old);
}

/* The child of fork has only the forking thread: a sigaction of another
 * thread at the fork must not leave the lock taken for ever. */
void hcg_fault_after_fork(void)
{
    atomic_flag_clear(&g_lock);
}

static void lock_all(sigset_t *saved)
{
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, saved);
    while (atomic_flag_test_and_set_explicit(&g_lock, memory_order_acquire))
        ;
}

static void unlock_all(const sigset_t *saved)
{
    atomic_flag_clear_explicit(&g_lock, memory_order_release);
    pthread_sigmask(SIG_SETMASK, saved, NULL);
}

static void chain_read(int slot, struct sigaction *out)
{
    unsigned i = atomic_load_explicit(&g_chain[slot].cur, memory_order_acquire);
    *out = g_chain[slot].act[i & 1];
}

/* Under the lock. */
static void chain_write(int slot, const struct sigaction *act)
{
    unsigned i = atomic_load_explicit(&g_chain[slot].cur, memory_order_relaxed) ^ 1;
    g_chain[slot].act[i & 1] = *act;
    atomic_store_explicit(&g_chain[slot].cur, i, memory_order_release);
}

/* The process is about to die of a default action: the hook first. It
 * must not wait for anything the interrupted code may hold. */
static void before_death(void)
{
    void (*hook)(void) = atomic_load_explicit(&g_death_hook, memory_order_acquire);
    if (hook) {
        int err = errno;
        hook();
        errno = err;
    }
}

/* The fault is not hcguard's: what the kernel would have done without it. */
static void chain(int sig, siginfo_t *si, void *uc)
{
    struct sigaction a;
    int slot = slot_of(sig);
    chain_read(slot, &a);
    int sync = si->si_code > 0; /* raised by the kernel for this instruction */
    if (a.sa_handler == SIG_IGN && !sync)
        return; /* an ignored kill() */
    if (a.sa_handler == SIG_DFL || a.sa_handler == SIG_IGN) {
        before_death();
        /* Default action: reset, then let the fault happen again on return
         * (or the signal be delivered again), so that the process dies of
         * it, with its core, exactly as it would have. */
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        kernel_sigaction(sig, &dfl, NULL);
        if (!sync)
            raise(sig); /* blocked here: delivered when the handler returns */
        return;
    }
    if (a.sa_flags & SA_RESETHAND) {
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        sigset_t saved;
        lock_all(&saved);
        chain_write(slot, &dfl);
        unlock_all(&saved);
    }
    /* The mask the kernel would have set for the program's handler (hcguard's
     * own runs with every signal blocked): the interrupted one, its
     * sa_mask, and the signal itself unless SA_NODEFER. */
    sigset_t old, mask;
    sigorset(&mask, &((ucontext_t *)uc)->uc_sigmask, &a.sa_mask);
    if (a.sa_flags & SA_NODEFER)
        sigdelset(&mask, sig);
    else
        sigaddset(&mask, sig);
    pthread_sigmask(SIG_SETMASK, &mask, &old);
    if (a.sa_flags & SA_SIGINFO)
        a.sa_sigaction(sig, si, uc);
    else
        a.sa_handler(sig);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static void on_fault(int sig, siginfo_t *si, void *uc)
{
    if (!recover(sig, si, uc))
        chain(sig, si, uc);
}

/* Every signal blocked while hcguard's handler decides: another signal's
 * handler making a contained copy that faults would otherwise fault with
 * SIGSEGV blocked, which kills. chain() gives the program's handler the
 * mask the kernel would have. */
static void our_action(struct sigaction *a)
{
    memset(a, 0, sizeof *a);
    a->sa_sigaction = on_fault;
    a->sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
    sigfillset(&a->sa_mask);
}

int hcg_fault_ready(void)
{
    return atomic_load_explicit(&g_installed, memory_order_acquire);
}

int hcg_fault_install(void)
{
    if (hcg_fault_ready())
        return 0;
#if HCG_FAULT_FIXUP
    static pthread_once_t found = PTHREAD_ONCE_INIT;
    pthread_once(&found, find_memcpy);
#endif
    /* Found now, not first in a signal handler (dlsym is not
     * async-signal-safe). */
    (void)HCG_REAL(pthread_sigmask);
    (void)HCG_REAL(sigprocmask);
    sigset_t saved;
    int rc = 0;
    lock_all(&saved);
    if (!atomic_load(&g_installed)) {
        struct sigaction ours;
        our_action(&ours);
        static const int sigs[N_FAULT_SLOTS] = {SIGSEGV, SIGBUS};
        /* The program's action is recorded before hcguard's takes its
         * place, so that a fault on another thread meanwhile finds it. */
        for (int i = 0; i < N_FAULT_SLOTS && rc == 0; i++) {
            struct sigaction old;
            rc = kernel_sigaction(sigs[i], NULL, &old);
            if (rc == 0) {
                chain_write(i, &old);
                rc = kernel_sigaction(sigs[i], &ours, NULL);
            }
        }
        if (rc == 0)
            atomic_store_explicit(&g_installed, 1, memory_order_release);
    }
    unlock_all(&saved);
    return rc;
}

/* sig's action in the kernel is not hcguard's (the program replaced it
 * while hcguard installed its own): keep it as the chained one, and put
 * hcguard's back. */
static void reinstall(int sig)
{
    int slot = slot_of(sig);
    sigset_t saved;
    struct sigaction now;
    if (slot < 0)
        return;
    lock_all(&saved);
    if (kernel_sigaction(sig, NULL, &now) == 0 && now.sa_sigaction != on_fault) {
        struct sigaction ours;
        our_action(&ours);
        chain_write(slot, &now);
        kernel_sigaction(sig, &ours, NULL);
    }
    unlock_all(&saved);
}

/* ---- deaths by signal (see the top of the file) -------------------------- */

static void on_death(int sig, siginfo_t *si, void *uc)
{
    (void)si;
    (void)uc;
    int err = errno;
    before_death();
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    kernel_sigaction(sig, &dfl, NULL);
    /* hcg_g_standin_sigs stays: the process dies, and a vfork child (which
     * shares it) must not change what its parent believes. */
    raise(sig); /* blocked in this handler: delivered, by default, on return */
    errno = err;
}

/* Every death signal held back while the hook writes: a second one would
 * end the process half-way, of the wrong signal. */
static void death_action(struct sigaction *a)
{
    memset(a, 0, sizeof *a);
    a->sa_sigaction = on_death;
    a->sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
    sigemptyset(&a->sa_mask);
    for (int i = 0; i < N_SLOTS - N_FAULT_SLOTS; i++)
        sigaddset(&a->sa_mask, death_sigs[i]);
}

/* The program's SA_RESETHAND handler for a death signal: the kernel would
 * put back SIG_DFL itself, unseen, and the next such signal would kill
 * without the events being written. So hcguard's stands in for it, with
 * the program's mask and other flags: it puts hcguard's stand-in for the
 * default in its place, then runs the program's handler. A second thread
 * taking the signal meanwhile finds the default (it dies, as it would). */
static void on_reset_death(int sig, siginfo_t *si, void *uc)
{
    int slot = slot_of(sig), reset = 0;
    struct sigaction a, ours;
    sigset_t saved;
    lock_all(&saved);
    chain_read(slot, &a);
    if (a.sa_handler != SIG_DFL && a.sa_handler != SIG_IGN && (a.sa_flags & SA_RESETHAND)) {
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        chain_write(slot, &dfl);
        death_action(&ours);
        kernel_sigaction(sig, &ours, NULL);
        reset = 1;
    }
    unlock_all(&saved);
    if (!reset)
        on_death(sig, si, uc);
    else if (a.sa_flags & SA_SIGINFO)
        a.sa_sigaction(sig, si, uc);
    else
        a.sa_handler(sig);
}

/* The program sets a (its copy) for death slot `slot`: hcguard's handler in
 * place of the default once watching, else a as it is. Under the lock. */
HCG_UNINSTRUMENTED static int set_death_action(int sig, int slot, const struct sigaction *a)
{
    int rc;
    if (atomic_load(&g_deaths) && a->sa_handler != SIG_DFL && a->sa_handler != SIG_IGN &&
        (a->sa_flags & SA_RESETHAND)) {
        struct sigaction ours = *a;
        ours.sa_sigaction = on_reset_death;
        ours.sa_flags = (a->sa_flags & ~SA_RESETHAND) | SA_SIGINFO;
        chain_write(slot, a);
        rc = kernel_sigaction(sig, &ours, NULL);
        if (rc == 0)
            set_ours(slot, 1);
        return rc;
    }
    if (atomic_load(&g_deaths) && a->sa_handler == SIG_DFL) {
        struct sigaction ours;
        death_action(&ours);
        chain_write(slot, a);
        rc = kernel_sigaction(sig, &ours, NULL);
        if (rc == 0)
            set_ours(slot, 1);
        return rc;
    }
    rc = real_sigaction(sig, a, NULL);
    if (rc == 0)
        set_ours(slot, 0);
    return rc;
}

void hcg_fault_watch_deaths(void (*hook)(void))
{
    atomic_store_explicit(&g_death_hook, hook, memory_order_release);
    if (atomic_exchange(&g_deaths, 1))
        return;
    for (int slot = N_FAULT_SLOTS; slot < N_SLOTS; slot++) {
        int sig = death_sigs[slot - N_FAULT_SLOTS];
        sigset_t saved;
        struct sigaction now;
        lock_all(&saved);
        /* The default, or a handler the kernel would reset to it unseen. */
        if (real_sigaction(sig, NULL, &now) == 0 &&
            (now.sa_handler == SIG_DFL ||
             (now.sa_handler != SIG_IGN && (now.sa_flags & SA_RESETHAND))))
            set_death_action(sig, slot, &now);
        unlock_all(&saved);
    }
}

/* ---- the interposers ----------------------------------------------------- */

/* Whether the kernel still runs hcguard's handler for death signal sig:
 * sysv_signal, bsd_signal, sigset and a raw system call replace it without
 * passing through sigaction, and the program must then see what they set.
 * Under the lock. */
HCG_UNINSTRUMENTED static int still_ours(int sig)
{
    struct sigaction now;
    if (kernel_sigaction(sig, NULL, &now) != 0)
        return 1;
    if ((now.sa_flags & SA_SIGINFO) &&
        (now.sa_sigaction == on_death || now.sa_sigaction == on_reset_death))
        return 1;
    set_ours(slot_of(sig), 0);
    return 0;
}

/* Before hcguard's handlers are installed the call goes straight through;
 * should they be installed during it, the program's action may have
 * replaced hcguard's: it is then taken as the chained one, and hcguard's
 * put back. */
HCG_UNINSTRUMENTED static int passed_through(int sig, const struct sigaction *act,
                                             struct sigaction *oldact)
{
    int rc = real_sigaction(sig, act, oldact);
    if (rc != 0 || !act || !atomic_load(&g_installed))
        return rc;
    int err = errno;
    reinstall(sig);
    errno = err;
    return rc;
}

/* For a signal hcguard handles, once its handlers are installed (or it
 * watches deaths): the program's action is read and its old one written
 * through fault-contained copies, outside the lock (a fault with the
 * signal blocked would kill), so that a bad pointer gives EFAULT as the
 * kernel would. oldact is what the program set: for a fault signal the
 * chained action, for a death signal the default while hcguard's handler
 * stands in for it. */
HCG_UNINSTRUMENTED static int program_sigaction(int sig, int slot, const struct sigaction *act,
                                                struct sigaction *oldact)
{
    struct sigaction next, view;
    if (act && hcg_fault_copy(&next, act, sizeof next, NULL) != 0) {
        errno = EFAULT;
        return -1;
    }
    sigset_t saved;
    lock_all(&saved);
    int rc = 0, death = slot >= N_FAULT_SLOTS;
    if (!death || still_ours(sig)) /* the kernel's word, never the hint */
        chain_read(slot, &view);
    else
        rc = real_sigaction(sig, NULL, &view);
    if (rc == 0 && act && death)
        rc = set_death_action(sig, slot, &next);
    else if (act)
        chain_write(slot, &next);
    int err = errno;
    unlock_all(&saved);
    if (rc == 0 && oldact && hcg_fault_copy(oldact, &view, sizeof view, NULL) != 0) {
        errno = EFAULT; /* the new action is in place, as with the kernel */
        return -1;
    }
    errno = err;
    return rc;
}

/* In a child made without fork's handlers (vfork's shares this memory
 * with its parent, which hcguard's state is): the kernel's action is set
 * and read as it is, hcguard's state read and never written. The view is
 * still the program's: hcguard's handler, inherited, shows as the chained
 * action. */
HCG_UNINSTRUMENTED static int foreign_sigaction(int sig, int slot, const struct sigaction *act,
                                                struct sigaction *oldact)
{
    struct sigaction now;
    int rc = real_sigaction(sig, act, &now);
    if (rc != 0 || !oldact)
        return rc;
    if ((now.sa_flags & SA_SIGINFO) && (now.sa_sigaction == on_death ||
                                        now.sa_sigaction == on_reset_death ||
                                        now.sa_sigaction == on_fault))
        chain_read(slot, &now);
    if (hcg_fault_copy(oldact, &now, sizeof now, NULL) != 0) {
        errno = EFAULT;
        return -1;
    }
    return 0;
}

HCG_UNINSTRUMENTED HCG_EXPORT int sigaction(int sig, const struct sigaction *act,
                                            struct sigaction *oldact)
{
    int slot = slot_of(sig);
    if (slot < 0 || hcg_libc_looking_up())
        return real_sigaction(sig, act, oldact);
    /* Not before hcguard keeps any state: a sanitizer's runtime calls
     * this before it can run the (instrumented) code of hcg_fork_foreign. */
    if ((atomic_load(&g_installed) || atomic_load(&g_deaths)) && hcg_fork_foreign())
        return foreign_sigaction(sig, slot, act, oldact);
    if (slot >= N_FAULT_SLOTS) {
        if (atomic_load(&g_deaths))
            return program_sigaction(sig, slot, act, oldact);
        int rc = real_sigaction(sig, act, oldact), err = errno;
        if (rc == 0 && act && atomic_load(&g_deaths))
            program_sigaction(sig, slot, act, NULL); /* watching began meanwhile: act wins */
        errno = err;
        return rc;
    }
    if (!atomic_load(&g_installed))
        return passed_through(sig, act, oldact);
    return program_sigaction(sig, slot, act, oldact);
}

/* glibc's signal() calls its internal sigaction, not the exported one. */
HCG_UNINSTRUMENTED HCG_EXPORT void (*signal(int sig, void (*handler)(int)))(int)
{
    int slot = slot_of(sig);
    if (slot < 0 || !atomic_load(slot < N_FAULT_SLOTS ? &g_installed : &g_deaths)) {
        hcg_libc_signal_fn f = HCG_REAL(signal);
        if (!f) {
            errno = ENOSYS;
            return SIG_ERR;
        }
        return f(sig, handler);
    }
    if (handler == SIG_ERR) {
        errno = EINVAL;
        return SIG_ERR;
    }
    struct sigaction act, old;
    memset(&act, 0, sizeof act);
    act.sa_handler = handler;
    act.sa_flags = SA_RESTART; /* BSD semantics, as glibc's signal() */
    sigemptyset(&act.sa_mask);
    sigaddset(&act.sa_mask, sig);
    if (sigaction(sig, &act, &old) != 0)
        return SIG_ERR;
    return old.sa_handler;
}

/* The program sets its thread's mask: whether SIGSEGV and SIGBUS reach
 * hcguard's handler here is learnt again by the thread's next contained
 * copy (hcg_fault_copy_masked). Masks set otherwise (a raw system call,
 * setcontext, siglongjmp to a sigsetjmp that saved one) are not seen. */
HCG_UNINSTRUMENTED HCG_EXPORT int pthread_sigmask(int how, const sigset_t *set, sigset_t *old)
{
    hcg_libc_pthread_sigmask_fn f = HCG_REAL(pthread_sigmask);
    int rc = f ? f(how, set, old) : ENOSYS;
    if (set)
        hcg_self.faults_open = 0;
    return rc;
}

HCG_UNINSTRUMENTED HCG_EXPORT int sigprocmask(int how, const sigset_t *set, sigset_t *old)
{
    hcg_libc_sigprocmask_fn f = HCG_REAL(sigprocmask);
    if (!f) {
        errno = ENOSYS;
        return -1;
    }
    int rc = f(how, set, old);
    if (set)
        hcg_self.faults_open = 0;
    return rc;
}
