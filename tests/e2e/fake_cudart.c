/*
 * A stand-in for the CUDA runtime, built as libcudart.so.99 for the call
 * site tests (tests/e2e/hc_rtsite.c, check_rtsite.py): like libcudart it
 * opens libcuda.so.1 itself, takes cuGetProcAddress_v2 with dlsym, asks it
 * for "cuGetProcAddress" and gets every entry point through that (or, as
 * fcrt_init says, with dlsym alone, or through a cuGetProcAddress_v2 it is
 * given), and calls them from frames of its own.
 *
 * The stream launches of every entry point go through one internal
 * launcher, reached by different outer paths with different depths, one
 * of them through a frame of variable size (alloca): the same return
 * address into the runtime with the program's frame at different places
 * above it. Nothing here is inlined or a tail call.
 */
#include <alloca.h>
#include <cuda.h>
#include <dlfcn.h>
#include <stddef.h>
#include <string.h>

#define FCRT_API __attribute__((visibility("default")))
#define KEEP_FRAME() __asm__ __volatile__("" ::: "memory") /* no tail call */

typedef CUresult (*gpa_fn)(const char *, void **, int, cuuint64_t,
                           CUdriverProcAddressQueryResult *);
typedef CUresult (*launch_fn)(CUstream, CUhostFn, void *);
typedef CUresult (*add_cb_fn)(CUstream, CUstreamCallback, void *, unsigned int);
typedef CUresult (*add_node_fn)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t,
                                const CUDA_HOST_NODE_PARAMS *);

static launch_fn p_launch;
static add_cb_fn p_add_cb;
static add_node_fn p_add_node;

static int look_up(gpa_fn gpa, void *h, const char *name, void **out)
{
    if (!gpa)
        *out = dlsym(h, name);
    else if (gpa(name, out, 12000, 0, NULL) != CUDA_SUCCESS)
        *out = NULL;
    return *out ? 0 : -1;
}

/* How the entry points are found: FCRT_GPA as libcudart does (dlsym of
 * cuGetProcAddress_v2, then everything through it), FCRT_DLSYM with dlsym
 * alone, FCRT_GIVEN through the cuGetProcAddress_v2 the caller passes (so
 * that the runtime's only look-ups are cuGetProcAddress calls). 0, or -1
 * if the driver or an entry point cannot be found. */
enum { FCRT_GPA, FCRT_DLSYM, FCRT_GIVEN };
FCRT_API int fcrt_init(int how, void *given);
FCRT_API int fcrt_init(int how, void *given)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!h)
        return -1;
    gpa_fn gpa = NULL;
    if (how != FCRT_DLSYM) {
        gpa_fn first = how == FCRT_GIVEN ? (gpa_fn)given : (gpa_fn)dlsym(h, "cuGetProcAddress_v2");
        /* The runtime asks for cuGetProcAddress through itself and uses
         * what it gets from then on. */
        if (!first || first("cuGetProcAddress", (void **)&gpa, 12000, 0, NULL) != CUDA_SUCCESS ||
            !gpa)
            return -1;
    }
    if (look_up(gpa, h, "cuLaunchHostFunc", (void **)&p_launch) ||
        look_up(gpa, h, "cuStreamAddCallback", (void **)&p_add_cb) ||
        look_up(gpa, h, "cuGraphAddHostNode", (void **)&p_add_node))
        return -1;
    return 0;
}

/* The one launcher every stream launch goes through: its return address
 * is the same whatever the path. */
static __attribute__((noinline)) CUresult launcher(CUstream s, CUhostFn fn, void *user)
{
    CUresult r = p_launch(s, fn, user);
    KEEP_FRAME();
    return r;
}

/* A frame between the entry point and the launcher, with locals. */
static __attribute__((noinline)) CUresult middle(CUstream s, CUhostFn fn, void *user)
{
    char pad[96];
    __asm__ __volatile__("" ::"r"(pad) : "memory"); /* a frame of its own size */
    CUresult r = launcher(s, fn, user);
    KEEP_FRAME();
    return r;
}

static __attribute__((noinline)) CUresult deeper(CUstream s, CUhostFn fn, void *user)
{
    CUresult r = middle(s, fn, user);
    KEEP_FRAME();
    return r;
}

/* Entry A: the launcher directly (two frames of the runtime). */
FCRT_API CUresult fcrt_launch_a(CUstream s, CUhostFn fn, void *user);
FCRT_API CUresult fcrt_launch_a(CUstream s, CUhostFn fn, void *user)
{
    CUresult r = launcher(s, fn, user);
    KEEP_FRAME();
    return r;
}

/* Entry B: through two more frames (four of the runtime). */
FCRT_API CUresult fcrt_launch_b(CUstream s, CUhostFn fn, void *user);
FCRT_API CUresult fcrt_launch_b(CUstream s, CUhostFn fn, void *user)
{
    CUresult r = deeper(s, fn, user);
    KEEP_FRAME();
    return r;
}

/* Entry C: a frame of n bytes more (alloca), then the launcher. */
FCRT_API CUresult fcrt_launch_alloca(CUstream s, CUhostFn fn, void *user, size_t n);
FCRT_API CUresult fcrt_launch_alloca(CUstream s, CUhostFn fn, void *user, size_t n)
{
    volatile char *buf = alloca(n ? n : 1);
    buf[0] = 1;
    CUresult r = launcher(s, fn, user);
    buf[n ? n - 1 : 0] = (char)r;
    KEEP_FRAME();
    return r;
}

static __attribute__((noinline)) CUresult cb_launcher(CUstream s, CUstreamCallback cb,
                                                      void *user)
{
    CUresult r = p_add_cb(s, cb, user, 0);
    KEEP_FRAME();
    return r;
}

/* cudaStreamAddCallback's way: two frames of the runtime. */
FCRT_API CUresult fcrt_add_callback(CUstream s, CUstreamCallback cb, void *user);
FCRT_API CUresult fcrt_add_callback(CUstream s, CUstreamCallback cb, void *user)
{
    CUresult r = cb_launcher(s, cb, user);
    KEEP_FRAME();
    return r;
}

static __attribute__((noinline)) CUresult node_adder(CUgraphNode *node, CUgraph g, CUhostFn fn,
                                                     void *user)
{
    CUDA_HOST_NODE_PARAMS p;
    memset(&p, 0, sizeof p);
    p.fn = fn;
    p.userData = user;
    CUresult r = p_add_node(node, g, NULL, 0, &p);
    KEEP_FRAME();
    return r;
}

/* cudaGraphAddHostNode's way: two frames of the runtime. */
FCRT_API CUresult fcrt_graph_add_host_node(CUgraphNode *node, CUgraph g, CUhostFn fn,
                                           void *user);
FCRT_API CUresult fcrt_graph_add_host_node(CUgraphNode *node, CUgraph g, CUhostFn fn,
                                           void *user)
{
    CUresult r = node_adder(node, g, fn, user);
    KEEP_FRAME();
    return r;
}
