"""A ctypes Python callback as a host function through cuda.bindings.

The callback is a libffi closure (code in anonymous memory) that takes the
GIL on the driver's thread; cuda.bindings runs it inside its own wrapper.
hcguard must look through the wrapper, report the closure, and let it run.
Exit 0 passed, 1 failed, 77 not applicable.
"""
import ctypes
import sys

try:
    from cuda.bindings import driver
except ImportError as e:
    print(f"SKIP: cuda.bindings not importable: {e}")
    sys.exit(77)

(err,) = driver.cuInit(0)
if err != driver.CUresult.CUDA_SUCCESS:
    print(f"SKIP: cuInit: {err}")
    sys.exit(77)
err, dev = driver.cuDeviceGet(0)
err, ctx = driver.cuDevicePrimaryCtxRetain(dev)
driver.cuCtxSetCurrent(ctx)
err, stream = driver.cuStreamCreate(0)

ran = []
HOSTFN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


def py_callback(arg):
    ran.append(arg)


cb = HOSTFN(py_callback)
fn = driver.CUhostFn(ctypes.cast(cb, ctypes.c_void_p).value)
for i in range(5):
    (err,) = driver.cuLaunchHostFunc(stream, fn, i + 1)
    if err != driver.CUresult.CUDA_SUCCESS:
        print(f"FAIL: cuLaunchHostFunc: {err}", file=sys.stderr)
        sys.exit(1)
(err,) = driver.cuStreamSynchronize(stream)
ok = err == driver.CUresult.CUDA_SUCCESS and ran == [1, 2, 3, 4, 5]
print(f"ctypes callbacks ran: {ran}")
print(f"bindings ctypes: {'passed' if ok else 'FAILED'}")
sys.exit(0 if ok else 1)
