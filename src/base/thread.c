/* Each thread's own state, one block (base.h: hcg_thread).
 *
 * Initial-exec TLS lets the thunks' stubs reach in_host_fn through the
 * thread pointer (%fs, tpidr_el0) and one GOT slot, without __tls_get_addr. It
 * marks libhcguard DF_STATIC_TLS: its whole TLS segment (every
 * _Thread_local of the library, about 1.4 KiB now) must live in the static
 * TLS block. Preloaded, or linked, that is always so: the block is sized at
 * start-up for every initial module. A library dlopen'd later can only take
 * glibc's surplus static TLS, 1664 bytes by default since glibc 2.32
 * (192 * (nns - 1) + 144 * nns + glibc.rtld.optional_static_tls, nns = 4,
 * optional = 512) and shared with every other such library: a late dlopen
 * of libhcguard alone works (glibc 2.36 here takes up to about 1.6 KiB;
 * e2e_late_dlopen: so no large buffer may be thread-local),
 * after libraries that took some 600 bytes of it fails with "cannot allocate
 * memory in static TLS block". GLIBC_TUNABLES=glibc.rtld.optional_static_tls=
 * 4096 lifts the limit. hcguard is meant to be preloaded. */
#include <stddef.h>

#include "base/base.h"

_Static_assert(offsetof(hcg_thread, in_host_fn) == 0,
               "the thunks' stubs (src/intercept/thunk_*.S) read the block's first byte");

_Thread_local hcg_thread hcg_self __attribute__((tls_model("initial-exec")));
_Atomic uint64_t hcg_g_standin_sigs;
