"""Graph host nodes through cuda.bindings under hcguard.

cuda.bindings dlopens libcuda.so.1 and takes every entry point through
cuGetProcAddress_v2, so the graph entry points it calls are the wrappers
hcguard's routing hands out. With hcguard_host_copy as the host function:
  1. a host node copies exactly on each of 100 replays;
  2. the getters return the function and record the user set;
  3. bad records are refused by cuGraphAddHostNode and by the set-params
     entry points, and a refused update leaves the node as it was;
  4. a record rewritten bad between replays is skipped at run time (the
     process lives on), and copies again once it is restored;
  5. host functions captured from a stream replay;
  6. cuGraphAddNode and the generic set-params entry points, where this
     cuda.bindings has them.
Exit 0 passed, 1 failed, 77 not applicable (no cuda.bindings, no GPU, or no
hcguard preloaded).
"""
import ctypes
import os
import platform
import struct
import sys

from hcguard_ctypes import Checks, Hcguard
import time

try:
    from cuda.bindings import driver
except ImportError as e:
    print(f"SKIP: cuda.bindings not importable: {e}")
    sys.exit(77)

SUCCESS = driver.CUresult.CUDA_SUCCESS
INVALID = driver.CUresult.CUDA_ERROR_INVALID_VALUE

try:
    (err,) = driver.cuInit(0)
    count = driver.cuDeviceGetCount()
except Exception as e:  # cuda.bindings raises when it cannot load a driver
    print(f"SKIP: no CUDA driver: {e}")
    sys.exit(77)
if err != SUCCESS or count[0] != SUCCESS or count[1] == 0:
    print(f"SKIP: no CUDA device (cuInit: {err})")
    sys.exit(77)

hcg = Hcguard()
process = hcg.process
copy_addr = hcg.copy_addr
stats = hcg.stats
if os.environ.get("HCGUARD_MODE") == "off":
    # Nothing is checked then, and the bad replays below would crash.
    print("SKIP: hcguard runs in mode off")
    sys.exit(77)
copy_fn = driver.CUhostFn(copy_addr)


check = Checks("bindings graph")


def ok(ret, what):
    """The value a call returns; a failed call ends the test, since what
    follows depends on it."""
    if ret[0] != SUCCESS:
        print(f"FAIL: {what}: {ret[0]}", file=sys.stderr)
        print("bindings graph: FAILED")
        sys.exit(1)
    return ret[1] if len(ret) == 2 else None


dev = ok(driver.cuDeviceGet(0), "cuDeviceGet")
ctx = ok(driver.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
ok(driver.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
# Non-blocking (CU_STREAM_NON_BLOCKING): nothing on the legacy stream can
# join a capture on it.
stream = ok(driver.cuStreamCreate(1), "cuStreamCreate")

# An address no mapping can ever have (as NEVER_MAPPED in tests/e2e/testutil.h):
# past the largest user address space, below the top byte aarch64 may ignore.
HOLE = 1 << 55 if platform.machine() in ("aarch64", "arm64") else 1 << 56

N = 1 << 20
src = ctypes.create_string_buffer(N)
dst = ctypes.create_string_buffer(N)
SRC, DST = ctypes.addressof(src), ctypes.addressof(dst)
SENTINEL = b"\xee" * N
keep = []  # records must outlive every node that names them


def record(d, s, n):
    """A host-copy record in a ctypes buffer: (buffer, its address)."""
    buf = ctypes.create_string_buffer(struct.pack("@PPN", d, s, n), 24)
    keep.append(buf)
    return buf, ctypes.addressof(buf)


def fill(seed):
    """New contents for src, different for every seed at every offset, so
    that a stale dst never passes for a copy."""
    unit = bytes((seed * 31 + k * 7) & 0xFF for k in range(251))
    data = (unit * (N // len(unit) + 1))[:N]
    ctypes.memmove(src, data, N)
    return data


def clear_dst():
    ctypes.memset(dst, 0xEE, N)


def dst_now():
    return ctypes.string_at(DST, N)


def host_params(user):
    p = driver.CUDA_HOST_NODE_PARAMS()
    p.fn = copy_fn
    p.userData = user
    return p


def instantiate(g, what):
    # cuda.bindings 12.x+ has cuGraphInstantiate(graph, flags); older ones
    # took more arguments and had cuGraphInstantiateWithFlags for this.
    try:
        ret = driver.cuGraphInstantiate(g, 0)
    except TypeError:
        ret = driver.cuGraphInstantiateWithFlags(g, 0)
    return ok(ret, what)


def replay(e, what):
    ok(driver.cuGraphLaunch(e, stream), f"cuGraphLaunch ({what})")
    ok(driver.cuStreamSynchronize(stream), f"cuStreamSynchronize ({what})")


def node_get_params(n):
    """cuGraphNodeGetParams' parameters, or None where the driver or this
    cuda.bindings lacks it (cuda.bindings asks for it at 13.2)."""
    f = getattr(driver, "cuGraphNodeGetParams", None)
    if f is None:
        return None
    try:
        ret = f(n)
    except RuntimeError:  # the driver has no such entry point
        return None
    if ret[0] in (driver.CUresult.CUDA_ERROR_NOT_FOUND, driver.CUresult.CUDA_ERROR_NOT_SUPPORTED):
        return None
    check(ret[0] == SUCCESS, f"cuGraphNodeGetParams: {ret[0]}")
    return ret[1] if ret[0] == SUCCESS else None


def check_getters(n, rec_addr, what):
    got = ok(driver.cuGraphHostNodeGetParams(n), f"cuGraphHostNodeGetParams ({what})")
    check(int(got.fn) == copy_addr,
          f"cuGraphHostNodeGetParams ({what}): fn {int(got.fn):#x}, set {copy_addr:#x}")
    check(got.userData == rec_addr,
          f"cuGraphHostNodeGetParams ({what}): userData {got.userData:#x}, set {rec_addr:#x}")
    np_ = node_get_params(n)
    if np_ is None:
        return False
    check(np_.type == driver.CUgraphNodeType.CU_GRAPH_NODE_TYPE_HOST,
          f"cuGraphNodeGetParams ({what}): type {np_.type}")
    check(int(np_.host.fn) == copy_addr,
          f"cuGraphNodeGetParams ({what}): fn {int(np_.host.fn):#x}, set {copy_addr:#x}")
    check(np_.host.userData == rec_addr,
          f"cuGraphNodeGetParams ({what}): userData {np_.host.userData:#x}, set {rec_addr:#x}")
    return True


start = stats()
refusals = 0  # bad records this test hands over: each must be refused


def refused(err, what):
    global refusals
    refusals += 1
    check(err == INVALID, f"{what}: got {err}, want CUDA_ERROR_INVALID_VALUE")


# ---- 1. a host-copy node, replayed ------------------------------------------
REPLAYS = 100
g = ok(driver.cuGraphCreate(0), "cuGraphCreate")
rec_good, REC_GOOD = record(DST, SRC, N)
node = ok(driver.cuGraphAddHostNode(g, None, 0, host_params(REC_GOOD)),
          "cuGraphAddHostNode (good record)")
ex = instantiate(g, "cuGraphInstantiate")
wrong = 0
for i in range(REPLAYS):
    if i % 10 == 0:
        data = fill(i // 10 + 1)
    clear_dst()
    replay(ex, "good record")
    wrong += dst_now() != data
check(wrong == 0, f"{wrong} of {REPLAYS} replays did not copy exactly")

# ---- 2. the getters return what the user set ----------------------------------
generic_get = check_getters(node, REC_GOOD, "after cuGraphAddHostNode")
print(f"cuGraphNodeGetParams: {'checked' if generic_get else 'not available here'}")

# ---- 3. bad records refused -------------------------------------------------------
_, REC_NULL_DST = record(0, SRC, 64)
_, REC_OVERLAP = record(DST, DST + 8, 64)
# Refusals are tried on a graph of their own: one let through must not
# reach a graph that runs.
scratch = ok(driver.cuGraphCreate(0), "cuGraphCreate (scratch)")
refused(driver.cuGraphAddHostNode(scratch, None, 0, host_params(REC_NULL_DST))[0],
        "cuGraphAddHostNode (null-dst)")
refused(driver.cuGraphAddHostNode(scratch, None, 0, host_params(REC_OVERLAP))[0],
        "cuGraphAddHostNode (overlap)")
refused(driver.cuGraphHostNodeSetParams(node, host_params(REC_OVERLAP))[0],
        "cuGraphHostNodeSetParams (overlap)")
check_getters(node, REC_GOOD, "after a refused cuGraphHostNodeSetParams")
# A second executable graph takes the refused exec update, so that one let
# through cannot reach the replays below.
ex2 = instantiate(g, "cuGraphInstantiate after a refused update")
refused(driver.cuGraphExecHostNodeSetParams(ex2, node, host_params(REC_NULL_DST))[0],
        "cuGraphExecHostNodeSetParams (null-dst)")
data = fill(20)
clear_dst()
replay(ex2, "after refused updates")
check(dst_now() == data, "the node did not copy after refused cuGraphHostNodeSetParams "
      "and cuGraphExecHostNodeSetParams")
ok(driver.cuGraphExecDestroy(ex2), "cuGraphExecDestroy")

# ---- 4. a record rewritten bad between replays ------------------------------------
BAD_REPLAYS = 10
before = stats()
ctypes.memmove(rec_good, struct.pack("@PPN", HOLE, SRC, N), 24)
fill(30)
clear_dst()
touched = 0
for i in range(BAD_REPLAYS):
    replay(ex, "record rewritten bad")
    touched += dst_now() != SENTINEL
check(touched == 0, f"dst changed during {touched} of {BAD_REPLAYS} replays of a bad record")
ctypes.memmove(rec_good, struct.pack("@PPN", DST, SRC, N), 24)
wrong = 0
for i in range(BAD_REPLAYS):
    data = fill(40 + i)
    clear_dst()
    replay(ex, "record restored")
    wrong += dst_now() != data
check(wrong == 0, f"{wrong} of {BAD_REPLAYS} replays after the record was restored did not copy")
after = stats()
check(after.skipped - before.skipped == BAD_REPLAYS,
      f"hcguard skipped {after.skipped - before.skipped} copies, want {BAD_REPLAYS}")
check(after.copies_ran - before.copies_ran == BAD_REPLAYS,
      f"hcguard ran {after.copies_ran - before.copies_ran} copies, want {BAD_REPLAYS}")
ok(driver.cuGraphExecDestroy(ex), "cuGraphExecDestroy")

# ---- 5. capture -----------------------------------------------------------------
CAPTURE_MODE = driver.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_GLOBAL


def capture(enqueue, what):
    """A graph captured from one host function enqueued on the stream, or
    None if the enqueue failed."""
    ok(driver.cuStreamBeginCapture(stream, CAPTURE_MODE), f"cuStreamBeginCapture ({what})")
    err = enqueue()
    # End the capture whatever happened, so that the stream is usable again.
    cg = ok(driver.cuStreamEndCapture(stream), f"cuStreamEndCapture ({what})")
    if not check(err == SUCCESS, f"{what} during capture: {err}"):
        ok(driver.cuGraphDestroy(cg), "cuGraphDestroy")
        return None
    return cg


# cuda.bindings' cuLaunchHostFunc hands the driver a wrapper of its own whose
# malloc'd {function, data} the wrapper frees after its first call: without
# hcguard, a second replay of a graph captured from it reads freed memory.
# hcguard reports it (oneshot-host-fn-in-graph) and runs the function itself
# on every replay, so each of these replays must copy.
WRAPPED_REPLAYS = 5
cg = capture(lambda: driver.cuLaunchHostFunc(stream, copy_fn, REC_GOOD)[0],
             "cuda.bindings cuLaunchHostFunc")
if cg is not None:
    ce = instantiate(cg, "cuGraphInstantiate (captured through the wrapper)")
    wrong = 0
    for i in range(WRAPPED_REPLAYS):
        data = fill(50 + i)
        clear_dst()
        replay(ce, "captured through cuda.bindings' wrapper")
        wrong += dst_now() != data
    check(wrong == 0, f"{wrong} of {WRAPPED_REPLAYS} replays captured through cuda.bindings' "
          "wrapper did not copy exactly")
    ok(driver.cuGraphExecDestroy(ce), "cuGraphExecDestroy")
    ok(driver.cuGraphDestroy(cg), "cuGraphDestroy")

# Without the wrapper: cuLaunchHostFunc_v2 (CUDA 13.2 drivers) passes the
# function through as it is; on older drivers, hcguard's exported
# cuLaunchHostFunc is called the way a C program linked with -lcuda calls it.
plain = None
v2 = getattr(driver, "cuLaunchHostFunc_v2", None)
if v2 is not None:
    data = fill(60)
    clear_dst()
    try:
        err = v2(stream, copy_fn, REC_GOOD, 0)[0]
    except Exception as e:  # RuntimeError where the driver lacks it
        err = e
    if err != SUCCESS:
        print(f"cuLaunchHostFunc_v2 not usable here: {err}")
    else:
        ok(driver.cuStreamSynchronize(stream), "cuStreamSynchronize (cuLaunchHostFunc_v2)")
        check(dst_now() == data, "cuda.bindings cuLaunchHostFunc_v2 did not copy")
        plain = ("cuda.bindings cuLaunchHostFunc_v2",
                 lambda: v2(stream, copy_fn, REC_GOOD, 0)[0])
if plain is None:
    c_launch = process.cuLaunchHostFunc
    c_launch.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    c_launch.restype = ctypes.c_int

    def c_enqueue():
        rc = c_launch(int(stream), copy_addr, REC_GOOD)
        return SUCCESS if rc == 0 else f"CUresult {rc}"

    plain = ("hcguard's exported cuLaunchHostFunc", c_enqueue)
print(f"capture replays: host function enqueued through {plain[0]}")
CAPTURE_REPLAYS = 20
cg = capture(plain[1], plain[0])
if cg is not None:
    ce = instantiate(cg, "cuGraphInstantiate (captured)")
    # The executable graph alone must keep what hcguard attached alive.
    ok(driver.cuGraphDestroy(cg), "cuGraphDestroy (captured)")
    wrong = 0
    for i in range(CAPTURE_REPLAYS):
        data = fill(70 + i)
        clear_dst()
        replay(ce, "captured")
        wrong += dst_now() != data
    check(wrong == 0, f"{wrong} of {CAPTURE_REPLAYS} captured replays did not copy exactly")
    ok(driver.cuGraphExecDestroy(ce), "cuGraphExecDestroy")

# ---- 6. cuGraphAddNode and the generic set-params entry points ----------------------
add_node = getattr(driver, "cuGraphAddNode", None)
if add_node is None or not hasattr(driver, "CUgraphNodeParams"):
    print("cuGraphAddNode: not in this cuda.bindings; generic host nodes not tested")
else:
    def node_params(user):
        p = driver.CUgraphNodeParams()  # zeroed, as the driver requires
        p.type = driver.CUgraphNodeType.CU_GRAPH_NODE_TYPE_HOST
        p.host.fn = copy_fn
        p.host.userData = user
        return p

    def add_generic(graph, params):
        # 13.x: (graph, dependencies, dependencyData, count, params);
        # 12.x: the same without dependencyData.
        try:
            return add_node(graph, None, None, 0, params)
        except TypeError:
            return add_node(graph, None, 0, params)

    g6 = ok(driver.cuGraphCreate(0), "cuGraphCreate (generic)")
    _, REC6 = record(DST, SRC, N)
    n6 = ok(add_generic(g6, node_params(REC6)), "cuGraphAddNode (good record)")
    check_getters(n6, REC6, "after cuGraphAddNode")
    refused(add_generic(scratch, node_params(REC_OVERLAP))[0], "cuGraphAddNode (overlap)")
    ex6 = instantiate(g6, "cuGraphInstantiate (generic)")
    data = fill(90)
    clear_dst()
    replay(ex6, "node added by cuGraphAddNode")
    check(dst_now() == data, "the node added by cuGraphAddNode did not copy")
    tested = ["cuGraphAddNode"]
    if hasattr(driver, "cuGraphNodeSetParams"):
        refused(driver.cuGraphNodeSetParams(n6, node_params(REC_NULL_DST))[0],
                "cuGraphNodeSetParams (null-dst)")
        check_getters(n6, REC6, "after a refused cuGraphNodeSetParams")
        tested.append("cuGraphNodeSetParams")
    if hasattr(driver, "cuGraphExecNodeSetParams"):
        refused(driver.cuGraphExecNodeSetParams(ex6, n6, node_params(REC_OVERLAP))[0],
                "cuGraphExecNodeSetParams (overlap)")
        tested.append("cuGraphExecNodeSetParams")
    data = fill(91)
    clear_dst()
    replay(ex6, "after refused generic updates")
    check(dst_now() == data, "the generic node did not copy after refused updates")
    print(f"generic host nodes: {', '.join(tested)} checked")
    ok(driver.cuGraphExecDestroy(ex6), "cuGraphExecDestroy")
    ok(driver.cuGraphDestroy(g6), "cuGraphDestroy")

ok(driver.cuGraphDestroy(scratch), "cuGraphDestroy (scratch)")
ok(driver.cuGraphDestroy(g), "cuGraphDestroy")

# ---- what hcguard counted ---------------------------------------------------------
end = stats()
check(end.rejected - start.rejected == refusals,
      f"hcguard rejected {end.rejected - start.rejected} records, want {refusals}")
check(end.skipped - start.skipped == BAD_REPLAYS,
      f"hcguard skipped {end.skipped - start.skipped} copies in all, want {BAD_REPLAYS}")
# User objects' destructors run on a driver thread, some time after the
# last graph holding them is gone.
ok(driver.cuStreamSynchronize(stream), "cuStreamSynchronize")
live = end.graph_calls_live
for _ in range(400):
    live = stats().graph_calls_live
    if live <= start.graph_calls_live:
        break
    time.sleep(0.005)
check(live == start.graph_calls_live,
      f"{live} graph calls still alive after every graph was destroyed (was {start.graph_calls_live})")
print(f"hcguard: {end.rejected - start.rejected} records rejected, "
      f"{end.skipped - start.skipped} copies skipped")

ok(driver.cuStreamDestroy(stream), "cuStreamDestroy")
check.done()
