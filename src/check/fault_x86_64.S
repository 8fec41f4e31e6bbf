/* The fault-contained copy's entries and exit on x86-64 (src/check/fault.c).
 *
 * Two kinds of entry. hcguard's own copy code (between hcg_fault_own and
 * hcg_fault_own_end) is recognised by the faulting pc alone: it runs for
 * contained copies only, uses no stack and no callee-saved register, so
 * nothing arms it and a fault returns straight to its caller:
 * hcg_fault_ret hcg_fault_words(void *dst, const void *src, size_t n): a
 * loop of aligned 8-byte loads and stores (n a multiple of 8, at least 8):
 * each field of a record another thread may be rewriting is one value the
 * program wrote.
 * hcg_fault_ret hcg_fault_record(void *dst, const void *src): the same for
 * a copy record's three words, straight through (the launch path reads one
 * per copy launched), all read before any is written.
 * hcg_fault_ret hcg_fault_movsb(void *dst, const void *src, size_t n): one
 * rep movsb (mid-sized copies on processors with fast string moves, where
 * it is as fast as glibc's memcpy: see check.h).
 * The other, hcg_fault_ret hcg_fault_memcpy(void *dst, const void *src,
 * size_t n), runs glibc's memcpy (whose vector code no hand loop matches
 * for small copies, nor its non-temporal stores for huge ones). Its pc is
 * libc's, which runs for everyone, so it is armed: one store, the stack
 * pointer (pointing at the return address) into the thread's
 * hcg_fault_sp, then a tail-jump to memcpy (hcg_fault_target). glibc's
 * memcpy variants are leaves that touch neither the stack nor a
 * callee-saved register, so at any fault inside them the stack pointer is
 * still the armed one and the caller's registers are intact. The caller
 * disarms (hcg_fault_copy in check.h puts back the outer value).
 * hcg_fault_fixup, entered in place of the faulting instruction (the stack
 * pointer points at the copy's return address, rax and rdx set by the
 * handler to what happened), returns from the copy. The return goes to
 * the address the caller's call pushed, so a shadow stack (CET) sees an
 * ordinary return. */
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)

    .text
    .globl hcg_fault_memcpy
    .hidden hcg_fault_memcpy
    .type hcg_fault_memcpy, @function
    .p2align 4
hcg_fault_memcpy:
    .cfi_startproc
    movq hcg_fault_sp@gottpoff(%rip), %rax
    movq %rsp, %fs:(%rax)
    jmp *hcg_fault_target(%rip)
    .cfi_endproc
    .size hcg_fault_memcpy, .-hcg_fault_memcpy

    .globl hcg_fault_own
    .hidden hcg_fault_own
hcg_fault_own:
    .globl hcg_fault_words
    .hidden hcg_fault_words
    .type hcg_fault_words, @function
    .p2align 4
hcg_fault_words:
    .cfi_startproc
    movq %rdi, %rax
    xorl %ecx, %ecx
    testb $8, %dl               /* an odd word first, then pairs */
    jz 1f
    movq (%rsi), %r8
    movq %r8, (%rdi)
    movl $8, %ecx
    cmpq %rdx, %rcx
    jae 2f
1:  movq (%rsi,%rcx), %r8
    movq 8(%rsi,%rcx), %r9
    movq %r8, (%rdi,%rcx)
    movq %r9, 8(%rdi,%rcx)
    addq $16, %rcx
    cmpq %rdx, %rcx
    jb 1b
2:  ret
    .cfi_endproc
    .size hcg_fault_words, .-hcg_fault_words

    .globl hcg_fault_record
    .hidden hcg_fault_record
    .type hcg_fault_record, @function
    .p2align 4
hcg_fault_record:               /* 24 bytes: every word read, then written */
    .cfi_startproc
    movq (%rsi), %r8
    movq 8(%rsi), %r9
    movq 16(%rsi), %r10
    movq %rdi, %rax
    movq %r8, (%rdi)
    movq %r9, 8(%rdi)
    movq %r10, 16(%rdi)
    ret
    .cfi_endproc
    .size hcg_fault_record, .-hcg_fault_record

    .globl hcg_fault_movsb
    .hidden hcg_fault_movsb
    .type hcg_fault_movsb, @function
    .p2align 4
hcg_fault_movsb:
    .cfi_startproc
    movq %rdi, %rax
    movq %rdx, %rcx
    rep movsb
    ret
    .cfi_endproc
    .size hcg_fault_movsb, .-hcg_fault_movsb
    .globl hcg_fault_own_end
    .hidden hcg_fault_own_end
hcg_fault_own_end:

    .globl hcg_fault_fixup
    .hidden hcg_fault_fixup
    .type hcg_fault_fixup, @function
hcg_fault_fixup:
    ret
    .size hcg_fault_fixup, .-hcg_fault_fixup
#endif

/* No executable stack (every object, on every architecture, must say so). */
.section .note.GNU-stack, "", %progbits
