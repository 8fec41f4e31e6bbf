/* The thunks' layout, shared by thunk.c and the stubs (thunk_<arch>.S),
 * and what every stub file of src/intercept needs: macros only, so that the
 * assembler can read it too. */
#ifndef HCG_THUNK_LAYOUT_H
#define HCG_THUNK_LAYOUT_H

#define HCG_THUNK_MAX 4096 /* thunks handed out at run time; the exports follow */
#define HCG_THUNK_RESOLVER_STRIDE 16 /* bytes between an export's resolver stubs */
/* Bytes between the fast stubs. */
#if defined(__x86_64__)
#define HCG_THUNK_STRIDE 32
#elif defined(__aarch64__)
#define HCG_THUNK_STRIDE 48
#endif

#ifdef __ASSEMBLER__
/* The landing pad of a function reached by an indirect branch. */
#if defined(__x86_64__) && defined(__CET__)
#include <cet.h> /* the note that marks the object IBT/SHSTK-compatible */
#endif
#if defined(__x86_64__) && defined(__CET__) && (__CET__ & 1) /* indirect branch tracking */
#define HCG_LANDING endbr64
#elif defined(__aarch64__) && defined(__ARM_FEATURE_BTI_DEFAULT)
#define HCG_LANDING bti c
#else
#define HCG_LANDING
#endif

/* The exports' names, thunk i of HCG_DRIVER_EXPORTS under its name. Only
 * in libhcguard (see CMakeLists.txt): weak, so that a wrapper of the same
 * name, a strong definition, is what the library exports instead. */
#define HCG_THUNK_EXPORT_SYMBOL(i, name)                                       \
    .weak name;                                                                \
    .type name, %function;                                                     \
    .set name, hcg_thunk_stubs + (HCG_THUNK_MAX + i) * HCG_THUNK_STRIDE;       \
    .size name, HCG_THUNK_STRIDE;
#endif

#endif /* HCG_THUNK_LAYOUT_H */
