/* The thunks' stubs on aarch64 (src/intercept/thunk.c says what they do).
 * Only x16 and x17 (IP0/IP1, which veneers and PLT stubs clobber as well)
 * are used before the jump; br through x16 is what BTI "bti c" admits.
 * Fast stub (at most 36 bytes, 48 apart): read the flag through tpidr_el0,
 * cbnz to cold_i, else load hcg_thunk_real[i] and br. Cold stub i (8 apart)
 * puts i in w16 and branches to the slow path. Resolver stub i (16 apart)
 * puts the export's index in w16 and branches to the resolver. */
#if defined(__aarch64__) && !defined(HCG_THUNK_NO_ASM)
#include "intercept/thunk_layout.h"
#include "hcg_driver_exports.h" /* HCG_DRIVER_EXPORTS: generated at configure time */
#define HCG_N_EXPORTS HCG_N_DRIVER_EXPORTS

/* The frame of the slow path and the resolver (224 bytes): x29 x30, x0-x7,
 * x8 (the address of a result returned through memory), x16 (the index),
 * q0-q7. SVE registers beyond q are not kept: no driver entry point takes
 * an SVE type. */
.macro SAVE_ARGS
    stp x29, x30, [sp, #-224]!
    .cfi_def_cfa_offset 224
    .cfi_offset 29, -224
    .cfi_offset 30, -216
    mov x29, sp
    stp x0, x1, [sp, #16]
    stp x2, x3, [sp, #32]
    stp x4, x5, [sp, #48]
    stp x6, x7, [sp, #64]
    stp x8, x16, [sp, #80]
    stp q0, q1, [sp, #96]
    stp q2, q3, [sp, #128]
    stp q4, q5, [sp, #160]
    stp q6, q7, [sp, #192]
.endm

/* Everything but the index register, then the frame is left: jump
 * through it next. */
.macro RESTORE_ARGS_AND_LEAVE
    ldp x0, x1, [sp, #16]
    ldp x2, x3, [sp, #32]
    ldp x4, x5, [sp, #48]
    ldp x6, x7, [sp, #64]
    ldr x8, [sp, #80]
    ldp q0, q1, [sp, #96]
    ldp q2, q3, [sp, #128]
    ldp q4, q5, [sp, #160]
    ldp q6, q7, [sp, #192]
    ldp x29, x30, [sp], #224
    .cfi_def_cfa_offset 0
    .cfi_restore 29
    .cfi_restore 30
.endm

.pushsection .text
.p2align 4
.globl hcg_thunk_stubs
.hidden hcg_thunk_stubs
.type hcg_thunk_stubs,%function
hcg_thunk_stubs:
    .cfi_startproc
    .set hcg_thunk_i, 0
    .rept (HCG_THUNK_MAX + HCG_N_EXPORTS)
    .org hcg_thunk_stubs + hcg_thunk_i * HCG_THUNK_STRIDE, 0
    HCG_LANDING
    mrs x17, tpidr_el0
    adrp x16, :gottprel:hcg_self /* hcg_self.in_host_fn: offset 0 */
    ldr x16, [x16, #:gottprel_lo12:hcg_self]
    ldrb w16, [x17, x16]
    cbnz w16, hcg_thunk_cold + hcg_thunk_i * 8
    adrp x16, hcg_thunk_real + hcg_thunk_i * 8
    ldr x16, [x16, #:lo12:hcg_thunk_real + hcg_thunk_i * 8]
    br x16
    .set hcg_thunk_i, hcg_thunk_i + 1
    .endr
    .org hcg_thunk_stubs + (HCG_THUNK_MAX + HCG_N_EXPORTS) * HCG_THUNK_STRIDE, 0
    .cfi_endproc
.size hcg_thunk_stubs, .-hcg_thunk_stubs

.p2align 3
.type hcg_thunk_cold,%function
hcg_thunk_cold:
    .cfi_startproc
    .set hcg_thunk_i, 0
    .rept (HCG_THUNK_MAX + HCG_N_EXPORTS)
    .org hcg_thunk_cold + hcg_thunk_i * 8, 0
    movz w16, #hcg_thunk_i
    b hcg_thunk_slow_common
    .set hcg_thunk_i, hcg_thunk_i + 1
    .endr
    .cfi_endproc
.size hcg_thunk_cold, .-hcg_thunk_cold

.p2align 4
.globl hcg_thunk_resolvers
.hidden hcg_thunk_resolvers
.type hcg_thunk_resolvers,%function
hcg_thunk_resolvers:
    .cfi_startproc
    .set hcg_thunk_i, 0
    .rept HCG_N_EXPORTS
    .org hcg_thunk_resolvers + hcg_thunk_i * HCG_THUNK_RESOLVER_STRIDE, 0
    HCG_LANDING
    movz w16, #(HCG_THUNK_MAX + hcg_thunk_i)
    b hcg_thunk_resolve_common
    .set hcg_thunk_i, hcg_thunk_i + 1
    .endr
    .cfi_endproc
.size hcg_thunk_resolvers, .-hcg_thunk_resolvers

.p2align 4
.type hcg_thunk_slow_common,%function
hcg_thunk_slow_common:
    .cfi_startproc
    SAVE_ARGS
    mov w0, w16
    bl hcg_thunk_slow
    cmn w0, #1
    b.ne 1f
    .cfi_remember_state
    ldr x16, [sp, #88]
    adrp x17, hcg_thunk_real
    add x17, x17, #:lo12:hcg_thunk_real
    ldr x16, [x17, x16, lsl #3]
    RESTORE_ARGS_AND_LEAVE
    br x16
    .cfi_restore_state
1:
    ldp x29, x30, [sp], #224
    .cfi_def_cfa_offset 0
    .cfi_restore 29
    .cfi_restore 30
    ret
    .cfi_endproc
.size hcg_thunk_slow_common, .-hcg_thunk_slow_common

.p2align 4
.type hcg_thunk_resolve_common,%function
hcg_thunk_resolve_common:
    .cfi_startproc
    SAVE_ARGS
    mov w0, w16
    bl hcg_thunk_resolve
    mov x16, x0
    RESTORE_ARGS_AND_LEAVE
    br x16
    .cfi_endproc
.size hcg_thunk_resolve_common, .-hcg_thunk_resolve_common
.popsection
#if defined(HCG_DEFINE_DRIVER_SYMBOLS)
HCG_DRIVER_EXPORTS(HCG_THUNK_EXPORT_SYMBOL)
#endif
#endif

/* No executable stack (every object, on every architecture, must say so). */
.section .note.GNU-stack, "", %progbits
