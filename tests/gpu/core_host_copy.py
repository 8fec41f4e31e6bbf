"""cuda.core 1.3.0's host-copy example under hcguard, with a Cython-built
stand-in of its _host_callback module (core_host_callback.pyx).

    core_host_copy.py --hcguard PATH --variant unstripped|stripped
                      --mode guard|audit [--driver bindings|ctypes]

builds the stand-in (cython, then the system C compiler; `strip
--strip-all` for the stripped variant) as cuda/core/_host_callback<EXT> of
a package cuda.core in a temporary directory, then runs the workload under
`hcguard run --mode MODE`, with that directory first on sys.path (the
installed cuda.core, if any, is shadowed):

  a 64 MiB device buffer copied into a NumPy array (a ctypes array without
  NumPy) in 4 MiB chunks through two pinned slots (cuMemAllocHost), one
  stream each: cuMemcpyDtoHAsync into the slot, then
  cuLaunchHostFunc(HOST_COPY_FN, record); the data must be exact. Then
  four bad records (null dst, overlapping ranges, a read-only destination
  page, a device pointer as source): CUDA_ERROR_INVALID_VALUE in guard
  mode; launched, reported and skipped in audit mode; the process lives.

Unstripped, hcguard knows the copy function from the module's .symtab;
stripped, only through the Python hook's registration: hcguard's summary
says which. --driver bindings (the default) goes through cuda.bindings on a
GPU; --driver ctypes calls libcuda.so.1 through ctypes (the test driver in
CI, which has no cuMemcpyDtoHAsync: there the slot's stream is
synchronised, then cuMemcpyDtoH).

Exit 0 passed, 1 failed, 77 not applicable (no cython, C compiler or
Python headers; no cuda.bindings or GPU)."""

import argparse
import ctypes
import os
import shutil
import struct
import subprocess
import sys
import sysconfig
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOTAL = 64 << 20
CHUNK = 4 << 20
CUDA_SUCCESS = 0
CUDA_ERROR_INVALID_VALUE = 1


def skip(why):
    print("SKIP: %s" % why)
    sys.exit(77)


def fail(why):
    print("FAIL: %s" % why)
    sys.exit(1)


# ---- building the stand-in -------------------------------------------------
def cython_command():
    """How to run Cython: the running interpreter's module, or an
    executable on PATH (Debian's cython3 runs under its own python3; the C
    it writes builds against any Python 3 it supports)."""
    import importlib.util

    if importlib.util.find_spec("Cython") is not None:
        return [sys.executable, "-m", "cython"]
    for name in ("cython", "cython3"):
        path = shutil.which(name)
        if path:
            return [path]
    return None


def elf_sections(path):
    """The section names of an ELF64 little-endian file."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        fail("%s is not an ELF64 little-endian file" % path)
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    def header(i):
        return struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize)
    strtab_off = header(shstrndx)[4]
    names = []
    for i in range(shnum):
        name_off = header(i)[0]
        end = data.index(b"\0", strtab_off + name_off)
        names.append(data[strtab_off + name_off:end].decode())
    return names, data


def build(variant, top):
    """The stand-in package in top: cuda/core/__init__.py (no
    cuda/__init__.py: cuda stays a namespace package, as installed) and
    the built module. Returns the module's path."""
    cython = cython_command()
    cc = shutil.which(os.environ.get("CC", "cc"))
    include = sysconfig.get_paths().get("include", "")
    if not cython:
        skip("no cython (the Cython module, or cython/cython3 on PATH)")
    if not cc:
        skip("no C compiler (cc)")
    if not os.path.isfile(os.path.join(include, "Python.h")):
        skip("no Python.h in %s (python3-dev)" % include)
    if variant == "stripped" and not shutil.which("strip"):
        skip("no strip (binutils)")
    core = os.path.join(top, "cuda", "core")
    os.makedirs(core)
    src = os.path.join(top, "_host_callback.pyx")
    shutil.copyfile(os.path.join(HERE, "core_host_callback.pyx"), src)
    c_file = os.path.join(top, "_host_callback.c")
    module = os.path.join(core, "_host_callback" + sysconfig.get_config_var("EXT_SUFFIX"))
    steps = [cython + ["-3", src, "-o", c_file],
             [cc, "-shared", "-fPIC", "-O2", "-I" + include, c_file, "-o", module]]
    if variant == "stripped":
        steps.append(["strip", "--strip-all", module])
    for argv in steps:
        p = subprocess.run(argv, capture_output=True, text=True)
        if p.returncode != 0:
            fail("%s: exit %d\n%s%s" % (" ".join(argv), p.returncode, p.stdout, p.stderr))
    with open(os.path.join(core, "__init__.py"), "w") as f:
        f.write('"""Stand-in of cuda.core 1.3.0 (hcguard\'s tests)."""\n'
                '__version__ = "1.3.0"\n'
                "from cuda.core._host_callback import HOST_COPY_FN\n")
    names, data = elf_sections(module)
    has_symtab = ".symtab" in names
    if variant == "stripped" and has_symtab:
        fail("strip --strip-all left a .symtab in %s" % module)
    if variant == "unstripped" and (not has_symtab or b"__host_copy\0" not in data):
        fail("%s has no .symtab symbol ending in __host_copy" % module)
    print("built %s (%s)" % (module, ".symtab kept" if has_symtab else "no .symtab"))
    return module


# ---- the driver, two ways ------------------------------------------------------
class Bindings:
    """cuda.bindings' driver module, as cuda.core uses it."""

    name = "cuda.bindings"

    def __init__(self):
        try:
            from cuda.bindings import driver
        except ImportError as e:
            skip("cuda.bindings not importable: %s" % e)
        self.d = driver
        (err,) = driver.cuInit(0)
        if err != driver.CUresult.CUDA_SUCCESS:
            skip("cuInit: %s" % err)
        dev = self.ok(driver.cuDeviceGet(0), "cuDeviceGet")
        ctx = self.ok(driver.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
        self.ok(driver.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")

    def ok(self, ret, what):
        if ret[0] != self.d.CUresult.CUDA_SUCCESS:
            fail("%s: %s" % (what, ret[0]))
        return ret[1] if len(ret) > 1 else None

    def stream(self):
        return self.ok(self.d.cuStreamCreate(1), "cuStreamCreate")

    def mem_alloc(self, n):
        return int(self.ok(self.d.cuMemAlloc(n), "cuMemAlloc"))

    def htod(self, dptr, src, n):
        self.ok(self.d.cuMemcpyHtoD(dptr, src, n), "cuMemcpyHtoD")

    def alloc_host(self, n):
        return int(self.ok(self.d.cuMemAllocHost(n), "cuMemAllocHost"))

    def dtoh_async(self, dst, dptr, n, stream):
        self.ok(self.d.cuMemcpyDtoHAsync(dst, dptr, n, stream), "cuMemcpyDtoHAsync")

    def launch(self, stream, fn, user):
        (err,) = self.d.cuLaunchHostFunc(stream, self.d.CUhostFn(fn), user)
        return int(getattr(err, "value", err))  # a CUresult enum member

    def sync(self, stream):
        self.ok(self.d.cuStreamSynchronize(stream), "cuStreamSynchronize")


class Ctypes:
    """libcuda.so.1 through ctypes: the test driver in CI."""

    name = "libcuda.so.1 through ctypes"

    def __init__(self):
        self.lib = ctypes.CDLL("libcuda.so.1")
        vp, u64, sz = ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t
        for fn, types in (("cuMemAlloc_v2", [vp, sz]), ("cuMemcpyHtoD_v2", [u64, vp, sz]),
                          ("cuMemAllocHost_v2", [vp, sz]), ("cuMemcpyDtoH_v2", [vp, u64, sz]),
                          ("cuLaunchHostFunc", [vp, vp, vp]), ("cuStreamSynchronize", [vp])):
            getattr(self.lib, fn).argtypes = types
        self.call("cuInit", 0)
        dev, ctx = ctypes.c_int(), vp()
        self.call("cuDeviceGet", ctypes.byref(dev), 0)
        self.call("cuDevicePrimaryCtxRetain", ctypes.byref(ctx), dev)
        self.call("cuCtxSetCurrent", ctx)

    def call(self, name, *args):
        rc = getattr(self.lib, name)(*args)
        if rc != CUDA_SUCCESS:
            fail("%s: %d" % (name, rc))

    def stream(self):
        s = ctypes.c_void_p()
        self.call("cuStreamCreate", ctypes.byref(s), 1)
        return s.value

    def mem_alloc(self, n):
        p = ctypes.c_uint64()
        self.call("cuMemAlloc_v2", ctypes.byref(p), n)
        return p.value

    def htod(self, dptr, src, n):
        self.call("cuMemcpyHtoD_v2", dptr, src, n)

    def alloc_host(self, n):
        p = ctypes.c_void_p()
        self.call("cuMemAllocHost_v2", ctypes.byref(p), n)
        return p.value

    def dtoh_async(self, dst, dptr, n, stream):
        self.sync(stream)  # no async copy in the test driver
        self.call("cuMemcpyDtoH_v2", dst, dptr, n)

    def launch(self, stream, fn, user):
        return self.lib.cuLaunchHostFunc(stream, fn, user)

    def sync(self, stream):
        self.call("cuStreamSynchronize", stream)


# ---- the workload (under hcguard) ----------------------------------------------
def import_stand_in(top):
    """cuda.core from top, ahead of any installed one."""
    sys.path.insert(0, top)
    import cuda

    portion = os.path.join(top, "cuda")
    path = getattr(cuda, "__path__", None)
    if path is not None and portion not in list(path) and hasattr(path, "insert"):
        path.insert(0, portion)  # an installed cuda/__init__.py: a regular package
    import cuda.core

    if not os.path.abspath(cuda.core.__file__).startswith(os.path.abspath(top) + os.sep):
        fail("cuda.core came from %s, not the stand-in in %s" % (cuda.core.__file__, top))
    return cuda.core


def host_array(n):
    """(object, address, bytes of it) of an n-byte host array: NumPy's if
    there is NumPy, as in cuda.core's example."""
    try:
        import numpy
    except ImportError:
        arr = (ctypes.c_ubyte * n)()
        return arr, ctypes.addressof(arr), lambda: bytes(arr)
    arr = numpy.zeros(n, dtype=numpy.uint8)
    return arr, arr.ctypes.data, arr.tobytes


def pattern(n):
    """Period 251: a chunk copied to the wrong place is seen."""
    return (bytes(range(251)) * (n // 251 + 1))[:n]


class Records:
    """Records kept alive until the copies have run."""

    def __init__(self):
        self.keep = []

    def __call__(self, dst, src, n):
        rec = ctypes.create_string_buffer(struct.pack("@PPN", dst, src, n), 24)
        self.keep.append(rec)
        return ctypes.addressof(rec)


def copy_chunks(drv, fn, dptr, out_addr, records):
    slots = [drv.alloc_host(CHUNK) for _ in range(2)]
    streams = [drv.stream() for _ in range(2)]
    for i in range(TOTAL // CHUNK):
        k = i % 2  # the slot's own stream orders its reuse after its copy
        drv.dtoh_async(slots[k], dptr + i * CHUNK, CHUNK, streams[k])
        rc = drv.launch(streams[k], fn, records(out_addr + i * CHUNK, slots[k], CHUNK))
        if rc != CUDA_SUCCESS:
            fail("chunk %d: cuLaunchHostFunc returned %d" % (i, rc))
    for s in streams:
        drv.sync(s)
    return slots, streams


def bad_records(drv, fn, mode, out_addr, slot, dptr, stream, records):
    libc = ctypes.CDLL(None)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    page = libc.mmap(None, 4096, 1, 0x22, -1, 0)  # PROT_READ, MAP_PRIVATE|MAP_ANONYMOUS
    bad = {"null dst": (0, slot, 64), "overlap": (slot + 8, slot, 64),
           "read-only dst": (page, slot, 64), "device src": (out_addr, dptr, 64)}
    want = CUDA_ERROR_INVALID_VALUE if mode == "guard" else CUDA_SUCCESS
    for name, (d, s, n) in bad.items():
        rc = drv.launch(stream, fn, records(d, s, n))
        if rc != want:
            fail("%s: cuLaunchHostFunc returned %d, want %d (%s mode)" % (name, rc, want, mode))
        print("bad record (%s): cuLaunchHostFunc returned %d" % (name, rc))
    drv.sync(stream)
    if ctypes.string_at(page, 4096) != bytes(4096):
        fail("the read-only page was written")


def workload(args):
    sys.path.insert(0, HERE)
    from hcguard_ctypes import Hcguard

    hcg = Hcguard()
    core = import_stand_in(args.pkg)
    fn = ctypes.cast(core.HOST_COPY_FN, ctypes.c_void_p).value
    drv = Bindings() if args.driver == "bindings" else Ctypes()
    want = pattern(TOTAL)
    src = ctypes.create_string_buffer(want, TOTAL)
    dptr = drv.mem_alloc(TOTAL)
    drv.htod(dptr, ctypes.addressof(src), TOTAL)
    del src
    _, out_addr, out_bytes = host_array(TOTAL)
    records = Records()
    slots, streams = copy_chunks(drv, fn, dptr, out_addr, records)
    if out_bytes() != want:
        fail("the 64 MiB copied through HOST_COPY_FN differ from the device buffer")
    print("cuda.core example (%s): 64 MiB in 16 chunks of 4 MiB through 2 pinned slots: "
          "data exact" % drv.name)
    bad_records(drv, fn, args.mode, out_addr, slots[0], dptr, streams[0], records)
    if out_bytes() != want:
        fail("a bad record changed the data")
    s = hcg.stats()
    got = (s.copies_launched, s.copies_ran, s.rejected, s.skipped)
    expect = (16, 16, 4, 0) if args.mode == "guard" else (20, 16, 4, 4)
    if got != expect:
        fail("hcguard's counts (copies launched, ran, rejected, skipped): %r, want %r"
             % (got, expect))
    print("core host copy (%s, %s): passed" % (args.variant, args.mode))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--hcguard")
    p.add_argument("--variant", choices=("unstripped", "stripped"), required=True)
    p.add_argument("--mode", choices=("guard", "audit"), required=True)
    p.add_argument("--driver", choices=("bindings", "ctypes"), default="bindings")
    p.add_argument("--workload", action="store_true")
    p.add_argument("--pkg")
    args = p.parse_args()
    if args.workload:
        workload(args)
        return 0
    if args.driver == "bindings":
        import importlib.util
        if importlib.util.find_spec("cuda.bindings") is None:
            skip("cuda.bindings not installed")
    top = tempfile.mkdtemp(prefix="hcg-core-")
    try:
        build(args.variant, top)
        sys.stdout.flush()
        # A 4 MiB chunk, cuda.core's own recommendation, runs about 1 ms on
        # the GPU machine's host: not what this test is about.
        argv = [args.hcguard, "run", "--mode", args.mode, "--slow-ms", "100000",
                "--", sys.executable,
                os.path.abspath(__file__), "--workload", "--pkg", top,
                "--variant", args.variant, "--mode", args.mode, "--driver", args.driver]
        env = dict(os.environ)
        # A sanitizer runtime that must come before a sanitizer-built
        # libhcguard, in the workload only (not in cython and cc).
        first = env.pop("HCG_TEST_CHILD_PRELOAD", "")
        if first:
            env["LD_PRELOAD"] = first
        return subprocess.run(argv, env=env).returncode
    finally:
        shutil.rmtree(top, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
