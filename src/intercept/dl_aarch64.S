/* dlsym and dlvsym on aarch64 (src/intercept/intercept.c): save the
 * arguments, ask hcg_dlsym_target (hcg_dlvsym_target) where to go, restore
 * them and branch there, so that the caller's own return address is what
 * glibc sees (RTLD_NEXT and a dlopen'd caller's local scope depend on it). */
#if defined(__aarch64__)
#include "intercept/thunk_layout.h" /* HCG_LANDING */

#define DL_STUB(sym, target)                                                   \
    .text;                                                                     \
    .globl sym;                                                                \
    .type sym, %function;                                                      \
    .p2align 2;                                                                \
sym:                                                                           \
    .cfi_startproc;                                                            \
    HCG_LANDING;                                                               \
    stp x29, x30, [sp, #-48]!;                                                 \
    .cfi_def_cfa_offset 48;                                                    \
    .cfi_offset 29, -48;                                                       \
    .cfi_offset 30, -40;                                                       \
    mov x29, sp;                                                               \
    stp x0, x1, [sp, #16];                                                     \
    str x2, [sp, #32];                                                         \
    bl target;                                                                 \
    mov x16, x0;                                                               \
    ldp x0, x1, [sp, #16];                                                     \
    ldr x2, [sp, #32];                                                         \
    ldp x29, x30, [sp], #48;                                                   \
    .cfi_def_cfa_offset 0;                                                     \
    .cfi_restore 29;                                                           \
    .cfi_restore 30;                                                           \
    br x16;                                                                    \
    .cfi_endproc;                                                              \
    .size sym, .-sym

DL_STUB(dlsym, hcg_dlsym_target)
DL_STUB(dlvsym, hcg_dlvsym_target)
#endif

/* No executable stack (every object, on every architecture, must say so). */
.section .note.GNU-stack, "", %progbits
