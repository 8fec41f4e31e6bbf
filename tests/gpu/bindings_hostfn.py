"""cuda.bindings under hcguard: driver.cuLaunchHostFunc with hcguard_host_copy.

cuda.bindings dlopens libcuda.so.1, takes cuGetProcAddress_v2 with dlsym and
gets every entry point through it. Good copies must be exact, bad records
must come back as CUDA_ERROR_INVALID_VALUE with the process alive.
Exit 0 passed, 1 failed, 77 not applicable (no cuda.bindings, no GPU, or no
hcguard preloaded).
"""
import ctypes
import struct
import sys

from hcguard_ctypes import Checks, Hcguard

try:
    from cuda.bindings import driver
except ImportError as e:
    print(f"SKIP: cuda.bindings not importable: {e}")
    sys.exit(77)

check = Checks("bindings hostfn")


def ok(ret, what):
    err = ret[0]
    if err != driver.CUresult.CUDA_SUCCESS:
        print(f"FAIL: {what}: {err}", file=sys.stderr)
        sys.exit(1)
    return ret[1] if len(ret) == 2 else ret[1:]


(err,) = driver.cuInit(0)
if err != driver.CUresult.CUDA_SUCCESS:
    print(f"SKIP: cuInit: {err}")
    sys.exit(77)
dev = ok(driver.cuDeviceGet(0), "cuDeviceGet")
ctx = ok(driver.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
ok((driver.cuCtxSetCurrent(ctx)[0], None), "cuCtxSetCurrent")
stream = ok(driver.cuStreamCreate(0), "cuStreamCreate")

copy_fn = driver.CUhostFn(Hcguard().copy_addr)

N = 1 << 20
src = (ctypes.c_ubyte * N)(*([7, 1, 2, 9] * (N // 4)))
dst = (ctypes.c_ubyte * N)()
rec = ctypes.create_string_buffer(struct.pack("@PPN", ctypes.addressof(dst), ctypes.addressof(src), N), 24)
(err,) = driver.cuLaunchHostFunc(stream, copy_fn, ctypes.addressof(rec))
check(err == driver.CUresult.CUDA_SUCCESS, f"good copy: {err}")
(err,) = driver.cuStreamSynchronize(stream)
check(err == driver.CUresult.CUDA_SUCCESS, f"synchronize: {err}")
check(bytes(dst) == bytes(src), "good copy differs")

dptr = ok(driver.cuMemAlloc(4096), "cuMemAlloc")
bad = {
    "null-dst": (0, ctypes.addressof(src), 64),
    "null-src": (ctypes.addressof(dst), 0, 64),
    "overlap": (ctypes.addressof(dst), ctypes.addressof(dst) + 8, 64),
    "dst-overflow": ((1 << 64) - 16, ctypes.addressof(src), 64),
    "dst-device": (int(dptr), ctypes.addressof(src), 64),
}
keep = []
for name, (d, s, n) in bad.items():
    b = ctypes.create_string_buffer(struct.pack("@PPN", d, s, n), 24)
    keep.append(b)
    (err,) = driver.cuLaunchHostFunc(stream, copy_fn, ctypes.addressof(b))
    check(err == driver.CUresult.CUDA_ERROR_INVALID_VALUE, f"{name}: got {err}")
(err,) = driver.cuLaunchHostFunc(stream, copy_fn, 0)
check(err == driver.CUresult.CUDA_ERROR_INVALID_VALUE, f"null record: got {err}")
(err,) = driver.cuStreamSynchronize(stream)
check(err == driver.CUresult.CUDA_SUCCESS, f"stream alive after rejections: {err}")
driver.cuMemFree(dptr)
driver.cuStreamDestroy(stream)
check.done()
