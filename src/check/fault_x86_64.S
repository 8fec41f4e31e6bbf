/* The fault-contained copy's entry and exit on x86-64 (src/check/fault.c).
 *
 * void *hcg_fault_memcpy(void *dst, const void *src, size_t n, uint64_t *save):
 * memcpy(dst, src, n), with the callee-saved registers and the stack
 * pointer (pointing at the return address) in save[0..6]; hcg_fault_words
 * the same around hcg_copy_words.
 * hcg_fault_fixup, entered with rdi = save in place of the faulting
 * instruction, restores them and returns (void *)-1 from the copy. */
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)

#define SAVE_AND_JUMP(name, target)                                            \
    .globl name;                                                               \
    .hidden name;                                                              \
    .type name, @function;                                                     \
name:                                                                          \
    .cfi_startproc;                                                            \
    movq %rbx, 0(%rcx);                                                        \
    movq %rbp, 8(%rcx);                                                        \
    movq %r12, 16(%rcx);                                                       \
    movq %r13, 24(%rcx);                                                       \
    movq %r14, 32(%rcx);                                                       \
    movq %r15, 40(%rcx);                                                       \
    movq %rsp, 48(%rcx);                                                       \
    jmp target;                                                                \
    .cfi_endproc;                                                              \
    .size name, .-name

    .text
SAVE_AND_JUMP(hcg_fault_memcpy, memcpy@PLT)
SAVE_AND_JUMP(hcg_fault_words, hcg_copy_words)

    .globl hcg_fault_fixup
    .hidden hcg_fault_fixup
    .type hcg_fault_fixup, @function
hcg_fault_fixup:
    movq 0(%rdi), %rbx
    movq 8(%rdi), %rbp
    movq 16(%rdi), %r12
    movq 24(%rdi), %r13
    movq 32(%rdi), %r14
    movq 40(%rdi), %r15
    movq 48(%rdi), %rsp
    movq $-1, %rax
    ret
    .size hcg_fault_fixup, .-hcg_fault_fixup
#endif

/* No executable stack (every object, on every architecture, must say so). */
.section .note.GNU-stack, "", %progbits
