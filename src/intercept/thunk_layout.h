/* The thunks' layout, shared by thunk.c and the stubs (thunk_<arch>.S):
 * macros only, so that the assembler can read it too. */
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

#endif /* HCG_THUNK_LAYOUT_H */
