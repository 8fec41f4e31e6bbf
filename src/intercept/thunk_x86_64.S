/* The thunks' stubs on x86-64 (src/intercept/thunk.c says what they do).
 * Only r11 (a scratch register, which PLT stubs may clobber as well) is
 * used before the jump. Fast stub (at most 28 bytes, 32 apart):
 *   endbr64; mov flag@gottpoff(%rip),%r11; cmpb $0,%fs:(%r11);
 *   jne cold_i; jmp *hcg_thunk_real+8i(%rip)
 * Cold stub i (16 apart) puts i in r11d and jumps to the slow path.
 * Resolver stub i (16 apart, an export's slot until it is resolved) puts
 * the export's index in r11d and jumps to the resolver. */
#if defined(__x86_64__) && !defined(HCG_THUNK_NO_ASM)
#include "intercept/thunk_layout.h"
#include "hcg_driver_exports.h" /* HCG_DRIVER_EXPORTS: generated at configure time */
#define HCG_N_EXPORTS HCG_N_DRIVER_EXPORTS

/* The frame of the slow path and the resolver: rbp, then 9 integer
 * registers (rdi rsi rdx rcx r8 r9, rax for the vector count of varargs,
 * r10 the static chain, r11 the index) and xmm0-7, 16-byte aligned for
 * movaps. The upper halves of ymm/zmm are not kept: no driver entry point
 * takes a __m256 or __m512. */
.macro SAVE_ARGS
    pushq %rbp
    .cfi_adjust_cfa_offset 8
    .cfi_rel_offset %rbp, 0
    movq %rsp, %rbp
    .cfi_def_cfa_register %rbp
    subq $208, %rsp
    movq %rdi, 0(%rsp)
    movq %rsi, 8(%rsp)
    movq %rdx, 16(%rsp)
    movq %rcx, 24(%rsp)
    movq %r8, 32(%rsp)
    movq %r9, 40(%rsp)
    movq %rax, 48(%rsp)
    movq %r10, 56(%rsp)
    movq %r11, 64(%rsp)
    movaps %xmm0, 80(%rsp)
    movaps %xmm1, 96(%rsp)
    movaps %xmm2, 112(%rsp)
    movaps %xmm3, 128(%rsp)
    movaps %xmm4, 144(%rsp)
    movaps %xmm5, 160(%rsp)
    movaps %xmm6, 176(%rsp)
    movaps %xmm7, 192(%rsp)
.endm

/* Everything but the index register, then the frame is left: jump
 * through it next. */
.macro RESTORE_ARGS_AND_LEAVE
    movq 0(%rsp), %rdi
    movq 8(%rsp), %rsi
    movq 16(%rsp), %rdx
    movq 24(%rsp), %rcx
    movq 32(%rsp), %r8
    movq 40(%rsp), %r9
    movq 48(%rsp), %rax
    movq 56(%rsp), %r10
    movaps 80(%rsp), %xmm0
    movaps 96(%rsp), %xmm1
    movaps 112(%rsp), %xmm2
    movaps 128(%rsp), %xmm3
    movaps 144(%rsp), %xmm4
    movaps 160(%rsp), %xmm5
    movaps 176(%rsp), %xmm6
    movaps 192(%rsp), %xmm7
    leave
    .cfi_def_cfa %rsp, 8
    .cfi_restore %rbp
.endm

.pushsection .text
.p2align 5
.globl hcg_thunk_stubs
.hidden hcg_thunk_stubs
.type hcg_thunk_stubs,@function
hcg_thunk_stubs:
    .cfi_startproc
    .set hcg_thunk_i, 0
    .rept (HCG_THUNK_MAX + HCG_N_EXPORTS)
    .org hcg_thunk_stubs + hcg_thunk_i * HCG_THUNK_STRIDE, 0xcc
    HCG_LANDING
    movq hcg_self@gottpoff(%rip), %r11 /* hcg_self.in_host_fn: offset 0 */
    cmpb $0, %fs:(%r11)
    jne hcg_thunk_cold + hcg_thunk_i * 16
    jmp *hcg_thunk_real + hcg_thunk_i * 8(%rip)
    .set hcg_thunk_i, hcg_thunk_i + 1
    .endr
    .org hcg_thunk_stubs + (HCG_THUNK_MAX + HCG_N_EXPORTS) * HCG_THUNK_STRIDE, 0xcc
    .cfi_endproc
.size hcg_thunk_stubs, .-hcg_thunk_stubs

.p2align 4
.type hcg_thunk_cold,@function
hcg_thunk_cold:
    .cfi_startproc
    .set hcg_thunk_i, 0
    .rept (HCG_THUNK_MAX + HCG_N_EXPORTS)
    .org hcg_thunk_cold + hcg_thunk_i * 16, 0xcc
    movl $hcg_thunk_i, %r11d
    jmp hcg_thunk_slow_common
    .set hcg_thunk_i, hcg_thunk_i + 1
    .endr
    .cfi_endproc
.size hcg_thunk_cold, .-hcg_thunk_cold

.p2align 4
.globl hcg_thunk_resolvers
.hidden hcg_thunk_resolvers
.type hcg_thunk_resolvers,@function
hcg_thunk_resolvers:
    .cfi_startproc
    .set hcg_thunk_i, 0
    .rept HCG_N_EXPORTS
    .org hcg_thunk_resolvers + hcg_thunk_i * HCG_THUNK_RESOLVER_STRIDE, 0xcc
    HCG_LANDING
    movl $HCG_THUNK_MAX + hcg_thunk_i, %r11d
    jmp hcg_thunk_resolve_common
    .set hcg_thunk_i, hcg_thunk_i + 1
    .endr
    .cfi_endproc
.size hcg_thunk_resolvers, .-hcg_thunk_resolvers

.p2align 4
.type hcg_thunk_slow_common,@function
hcg_thunk_slow_common:
    .cfi_startproc
    SAVE_ARGS
    movl %r11d, %edi
    call hcg_thunk_slow
    cmpl $-1, %eax
    jne 1f
    .cfi_remember_state
    movq 64(%rsp), %r11
    leaq hcg_thunk_real(%rip), %rax
    movq (%rax,%r11,8), %r11
    RESTORE_ARGS_AND_LEAVE
    jmp *%r11
    .cfi_restore_state
1:
    leave
    .cfi_def_cfa %rsp, 8
    .cfi_restore %rbp
    ret
    .cfi_endproc
.size hcg_thunk_slow_common, .-hcg_thunk_slow_common

.p2align 4
.type hcg_thunk_resolve_common,@function
hcg_thunk_resolve_common:
    .cfi_startproc
    SAVE_ARGS
    movl %r11d, %edi
    call hcg_thunk_resolve
    movq %rax, %r11
    RESTORE_ARGS_AND_LEAVE
    jmp *%r11
    .cfi_endproc
.size hcg_thunk_resolve_common, .-hcg_thunk_resolve_common
.popsection
#if defined(HCG_DEFINE_DRIVER_SYMBOLS)
HCG_DRIVER_EXPORTS(HCG_THUNK_EXPORT_SYMBOL)
#endif
#endif

/* No executable stack (every object, on every architecture, must say so). */
.section .note.GNU-stack, "", %progbits
