"""CuPy under hcguard.

CuPy reaches the driver through the CUDA runtime, which gets every entry
point through cuGetProcAddress looked up through itself. This checks that
hcguard sees CuPy's Stream.launch_host_func callbacks (Python callables run
by CuPy's own C trampoline, ordinary host functions to hcguard), and that a
host-copy record enqueued on a CuPy stream through the same runtime
instance (cudaLaunchHostFunc) is copied when good and refused when bad.
Exit 0 passed, 1 failed, 77 not applicable.
"""
import ctypes
import struct
import sys

from hcguard_ctypes import Checks, Hcguard

try:
    import cupy
except ImportError as e:
    print(f"SKIP: cupy not importable: {e}")
    sys.exit(77)

hcg = Hcguard()
copy_addr = hcg.copy_addr
stats = hcg.stats


check = Checks("cupy hostfn")


try:
    cupy.cuda.runtime.getDeviceCount()
except Exception as e:  # noqa: BLE001 - any CUDA failure means no GPU here
    print(f"SKIP: no GPU: {e}")
    sys.exit(77)

stream = cupy.cuda.Stream(non_blocking=True)
before = stats()

# 1. CuPy's own host callbacks (Python callables), 50 of them.
src = bytearray(b"cupy-host-func" * 1000)
dst = bytearray(len(src))
seen = []


def cb(arg):
    seen.append(arg)
    if arg == 0:
        dst[:] = src


a = cupy.arange(1 << 20, dtype=cupy.float32)
with stream:
    for i in range(50):
        a *= 1.0001
        stream.launch_host_func(cb, i)
stream.synchronize()
check(seen == list(range(50)), f"callbacks ran {len(seen)} times in order")
check(dst == src, "copy made inside a CuPy callback differs")
after = stats()
check(after.host_fns_ran - before.host_fns_ran >= 50,
      f"hcguard saw {after.host_fns_ran - before.host_fns_ran} host functions, want >= 50")

# 2. hcguard_host_copy on a CuPy stream. CuPy's launch_host_func (and
# cupy.cuda.runtime.launchHostFunc) take Python callables only, run by
# CuPy's own C trampoline, so a host-copy function is enqueued on CuPy's
# stream through a CUDA runtime library (the toolkit's or a wheel's): the
# same runtime path (cuGetProcAddress through itself), in a CuPy process.
import glob
import os


def find_cudart():
    cands = []
    for root in (os.environ.get("CUDA_HOME", ""), "/usr/local/cuda"):
        if root:
            cands += sorted(glob.glob(os.path.join(root, "lib64", "libcudart.so*")))
    for p in sys.path:
        cands += sorted(glob.glob(os.path.join(p, "nvidia", "*", "lib", "libcudart.so*")))
        cands += sorted(glob.glob(os.path.join(p, "nvidia", "cuda_runtime", "lib", "libcudart.so*")))
    for c in cands:
        try:
            return ctypes.CDLL(c), c
        except OSError:
            continue
    return None, None


cudart, cudart_path = find_cudart()
if cudart is None:
    print("FAIL: no libcudart found to enqueue a host copy on CuPy's stream", file=sys.stderr)
    sys.exit(1)
print(f"runtime: {cudart_path}")
cudart.cudaLaunchHostFunc.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
cudart.cudaLaunchHostFunc.restype = ctypes.c_int
CUDA_ERROR_INVALID_VALUE = 1  # cudaErrorInvalidValue


def launch(stream_ptr, fn, arg):
    err = cudart.cudaLaunchHostFunc(stream_ptr, fn, arg)
    cudart.cudaGetLastError()
    return err


N = 4 << 20
s_buf = (ctypes.c_ubyte * N)(*([3, 5, 7, 11] * (N // 4)))
d_buf = (ctypes.c_ubyte * N)()
rec = ctypes.create_string_buffer(struct.pack("@PPN", ctypes.addressof(d_buf), ctypes.addressof(s_buf), N), 24)
check(launch(stream.ptr, copy_addr, ctypes.addressof(rec)) == 0, "good cudaLaunchHostFunc")
stream.synchronize()
check(bytes(d_buf) == bytes(s_buf), "good host copy on a CuPy stream differs")
dev = cupy.empty(1024, dtype=cupy.uint8)
bad = {
    "null-dst": (0, ctypes.addressof(s_buf), 64),
    "overlap": (ctypes.addressof(d_buf), ctypes.addressof(d_buf) + 4, 64),
    "dst-device": (dev.data.ptr, ctypes.addressof(s_buf), 64),
}
keep = []
for name, (d, s, n) in bad.items():
    b = ctypes.create_string_buffer(struct.pack("@PPN", d, s, n), 24)
    keep.append(b)
    err = launch(stream.ptr, copy_addr, ctypes.addressof(b))
    check(err == CUDA_ERROR_INVALID_VALUE,
          f"{name}: cudaLaunchHostFunc returned {err}, want 1 (cudaErrorInvalidValue)")
stream.synchronize()
final = stats()
check(final.rejected - before.rejected == len(bad), f"rejected {final.rejected - before.rejected}")
check.done()
