/* dlsym and dlvsym on x86-64 (src/intercept/intercept.c): save the
 * arguments, ask hcg_dlsym_target (hcg_dlvsym_target) where to go, restore
 * them and jump there, so that the caller's own return address is what
 * glibc sees (RTLD_NEXT and a dlopen'd caller's local scope depend on it). */
#if defined(__x86_64__)
#include "intercept/thunk_layout.h" /* HCG_LANDING */

    .text
    .globl dlsym
    .type dlsym, @function
    .p2align 4
dlsym:
    .cfi_startproc
    HCG_LANDING
    pushq %rdi
    .cfi_adjust_cfa_offset 8
    pushq %rsi
    .cfi_adjust_cfa_offset 8
    subq $8, %rsp
    .cfi_adjust_cfa_offset 8
    call hcg_dlsym_target
    addq $8, %rsp
    .cfi_adjust_cfa_offset -8
    popq %rsi
    .cfi_adjust_cfa_offset -8
    popq %rdi
    .cfi_adjust_cfa_offset -8
    jmp *%rax
    .cfi_endproc
    .size dlsym, .-dlsym

    .text
    .globl dlvsym
    .type dlvsym, @function
    .p2align 4
dlvsym:
    .cfi_startproc
    HCG_LANDING
    pushq %rdi
    .cfi_adjust_cfa_offset 8
    pushq %rsi
    .cfi_adjust_cfa_offset 8
    pushq %rdx
    .cfi_adjust_cfa_offset 8
    call hcg_dlvsym_target
    popq %rdx
    .cfi_adjust_cfa_offset -8
    popq %rsi
    .cfi_adjust_cfa_offset -8
    popq %rdi
    .cfi_adjust_cfa_offset -8
    jmp *%rax
    .cfi_endproc
    .size dlvsym, .-dlvsym
#endif

/* No executable stack (every object, on every architecture, must say so). */
.section .note.GNU-stack, "", %progbits
