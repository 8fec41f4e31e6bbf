"""cuda.core as it really ships, under `hcguard run` with the real library
and the test driver: HOST_COPY_FN is a ctypes function pointer
(CFUNCTYPE(None, c_void_p)) to the copy function of a module stripped of
its symbol table (strip --strip-all), so that only the Python hook can make
hcguard know it. Good copies are exact; bad records are refused with
CUDA_ERROR_INVALID_VALUE (guard mode) or reported and skipped (audit mode),
and the process lives on. Also: cuda.bindings' cuStreamAddCallback wrapper
is looked through, so a ctypes callback in it is reported as a closure.

The stand-in package is written for each case: cuda/core/__init__.py and
cuda/core/_host_callback.py take the copy function's address from the
stripped module (the unit tests' stand-in of cuda.core's _host_callback)."""

import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from launcher_common import (Skip, case, clean_env, expect,  # noqa: E402
                             expect_eq, main, run)

# Where HOST_COPY_FN comes from: the stripped module's copy function, as a
# ctypes function pointer object (cuda-core 1.3.0).
HOST_COPY = '''
import ctypes as _ctypes, os as _os
_lib = _ctypes.CDLL(_os.environ["HCG_TEST_PYMOD"])
_lib.fake_host_copy_fn.restype = _ctypes.c_void_p
HOST_COPY_FN = _ctypes.CFUNCTYPE(None, _ctypes.c_void_p)(_lib.fake_host_copy_fn())
'''

# cuda/core/__init__.py and cuda/core/_host_callback.py, per layout.
LAYOUTS = {
    # HOST_COPY_FN defined by the package itself.
    "package": ('__version__ = "1.3.0"\n' + HOST_COPY, "X = 1\n"),
    # Defined in _host_callback and re-exported by the package.
    "reexport": ('__version__ = "1.3.0"\n'
                 "from cuda.core._host_callback import HOST_COPY_FN\n",
                 HOST_COPY),
    # The package imports _host_callback first and defines HOST_COPY_FN
    # after: registered once the package has finished running.
    "late": ('__version__ = "1.3.0"\n'
             "import cuda.core._host_callback\n" + HOST_COPY, "X = 1\n"),
    # Only _host_callback has it; the program imports that module.
    "module": ('__version__ = "1.3.0"\n', HOST_COPY),
}

# The program: a 1 MiB copy through HOST_COPY_FN, checked; then bad
# records. HCG_TEST_IMPORT names the module it takes HOST_COPY_FN from;
# HCG_TEST_BAD is guard, audit or none (no bad records).
PROGRAM = r'''
import ctypes, importlib, os, struct, sys

mod = importlib.import_module(os.environ["HCG_TEST_IMPORT"])
fn = ctypes.cast(mod.HOST_COPY_FN, ctypes.c_void_p).value
cuda = ctypes.CDLL("libcuda.so.1")
vp = ctypes.c_void_p


def drv(name, *args):
    rc = getattr(cuda, name)(*args)
    if rc != 0:
        print("FAIL: %s returned %d" % (name, rc))
        sys.exit(1)


drv("cuInit", 0)
dev, ctx, stream = ctypes.c_int(), vp(), vp()
drv("cuDeviceGet", ctypes.byref(dev), 0)
drv("cuDevicePrimaryCtxRetain", ctypes.byref(ctx), dev)
drv("cuCtxSetCurrent", ctx)
drv("cuStreamCreate", ctypes.byref(stream), 1)
launch = cuda.cuLaunchHostFunc
launch.argtypes = [vp, vp, vp]
keep = []


def record(dst, src, n):
    rec = ctypes.create_string_buffer(struct.pack("@PPN", dst, src, n), 24)
    keep.append(rec)
    return ctypes.addressof(rec)


N = 1 << 20
src = (ctypes.c_ubyte * N)(*(i * 7 % 251 for i in range(N)))
dst = (ctypes.c_ubyte * N)()
rc = launch(stream, fn, record(ctypes.addressof(dst), ctypes.addressof(src), N))
drv("cuStreamSynchronize", stream)
if rc != 0 or bytes(dst) != bytes(src):
    print("FAIL: the good copy: launch returned %d, data %s"
          % (rc, "equal" if bytes(dst) == bytes(src) else "differs"))
    sys.exit(1)
mode = os.environ["HCG_TEST_BAD"]
if mode != "none":
    libc = ctypes.CDLL(None)
    libc.mmap.restype = vp
    libc.mmap.argtypes = [vp, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    page = libc.mmap(None, 4096, 1, 0x22, -1, 0)  # PROT_READ, private anon
    dptr = ctypes.c_uint64()
    drv("cuMemAlloc_v2", ctypes.byref(dptr), 4096)
    d, s = ctypes.addressof(dst), ctypes.addressof(src)
    bad = {"null-dst": (0, s, 64), "overlap": (d, d + 8, 64),
           "dst-not-writable": (page, s, 64),
           "src-device": (d, dptr.value, 64)}
    before = bytes(dst)
    want = 1 if mode == "guard" else 0  # CUDA_ERROR_INVALID_VALUE
    for name, (bd, bs, n) in bad.items():
        rc = launch(stream, fn, record(bd, bs, n))
        if rc != want:
            print("FAIL: %s: launch returned %d, want %d" % (name, rc, want))
            sys.exit(1)
    drv("cuStreamSynchronize", stream)
    if bytes(dst) != before:
        print("FAIL: a bad copy wrote the destination")
        sys.exit(1)
print("pycopy %s: passed" % mode)
'''

def summary_registered(launched):
    """The summary's lines for the stripped copy function: recognised only
    because the hook registered it. Audit mode launches the bad records."""
    counts = "%d launched, 1 ran" % launched
    return (r"recognised as registered \(hcguard_register_copy_fn\): " + counts,
            r"copy function 0x[0-9a-f]+ \(no symbol\) \(in .*/pymod_stripped/"
            r"cuda/core/_host_callback[^ ]*\.so\): registered \(Python hook or "
            r"hcguard_register_copy_fn\), " + counts)


def make_pkg(tmp, layout):
    init, callback = LAYOUTS[layout]
    pkg = os.path.join(tmp, "pkg")
    os.makedirs(os.path.join(pkg, "cuda", "core"))
    for path, text in (("cuda/__init__.py", ""),
                       ("cuda/core/__init__.py", init),
                       ("cuda/core/_host_callback.py", callback)):
        with open(os.path.join(pkg, path), "w") as f:
            f.write(text)
    program = os.path.join(tmp, "program.py")
    with open(program, "w") as f:
        f.write(PROGRAM)
    return pkg, program


def hcg_env(args, **extra):
    """The environment of a Python program under hcguard and the test
    driver. A sanitizer-built library needs its runtime first (the launcher
    keeps it there); the interpreter's own leaks are not ours."""
    if not os.path.isfile(args.pymod_stripped):
        raise RuntimeError("no stripped module at %r" % args.pymod_stripped)
    env = clean_env(LD_LIBRARY_PATH=args.fakecuda_dir,
                    HCG_TEST_PYMOD=args.pymod_stripped,
                    HCGUARD_SLOW_MS="10000", **extra)
    if args.sanitizer_runtime:
        env.update(LD_PRELOAD=args.sanitizer_runtime,
                   ASAN_OPTIONS="detect_leaks=0")
    return env


def hcguard_run(args, mode, argv, env, *flags):
    return run([args.hcguard, "run", "--mode", mode] + list(flags) + ["--"]
               + argv, env=env, timeout=60)


def expect_lines(p, patterns):
    for pat in patterns:
        expect(re.search(pat, p.stderr, re.M), "stderr lacks /%s/" % pat, p)


def expect_guarded(p, mode):
    expect_eq(p.returncode, 0, "exit status", p)
    expect_eq(p.stdout, "pycopy %s: passed\n" % mode, "stdout", p)
    expect_lines(p, summary_registered(1 if mode == "guard" else 5))
    reasons = [r"null-dst +1", r"overlap +1", r"dst-not-writable +1",
               r"src-device +1", r"ERROR SUMMARY: 4 errors"]
    if mode == "guard":
        reasons.append(r"bad records rejected at enqueue: 4$")
    else:
        reasons += [r"reported at enqueue \(passed through\): 4$",
                    r"copies skipped at run time: 4$",
                    r"\(4 of them reported at enqueue already\)"]
    expect_lines(p, reasons)


def run_layout(args, tmp, layout, module, mode):
    pkg, program = make_pkg(tmp, layout)
    env = hcg_env(args, PYTHONPATH=pkg, HCG_TEST_IMPORT=module,
                  HCG_TEST_BAD=mode)
    return hcguard_run(args, mode, [sys.executable, program], env)


@case
def case_pycopy_stripped_guard(args, tmp):
    p = run_layout(args, tmp, "package", "cuda.core", "guard")
    expect_guarded(p, "guard")


@case
def case_pycopy_stripped_audit(args, tmp):
    p = run_layout(args, tmp, "package", "cuda.core", "audit")
    expect_guarded(p, "audit")


@case
def case_pycopy_reexported(args, tmp):
    """Both the package and _host_callback have HOST_COPY_FN: once."""
    p = run_layout(args, tmp, "reexport", "cuda.core", "guard")
    expect_guarded(p, "guard")


@case
def case_pycopy_defined_after_submodule(args, tmp):
    p = run_layout(args, tmp, "late", "cuda.core", "guard")
    expect_guarded(p, "guard")


@case
def case_pycopy_host_callback_direct(args, tmp):
    """cuda.core has none; the program imports cuda.core._host_callback."""
    for mode in ("guard", "audit"):
        p = run_layout(args, os.path.join(tmp, mode), "module",
                       "cuda.core._host_callback", mode)
        expect_guarded(p, mode)


def user_site(tmp, line):
    """A user site-packages whose .pth file runs line, as site.py does
    before it imports sitecustomize; PYTHONUSERBASE points Python at it."""
    base = os.path.join(tmp, "userbase")
    find = run([sys.executable, "-c", "import site; print(site.ENABLE_USER_SITE, "
                "site.getusersitepackages())"], env=clean_env(PYTHONUSERBASE=base))
    enabled, _, site_dir = find.stdout.strip().partition(" ")
    if enabled != "True":
        # A virtual environment (or -s, PYTHONNOUSERSITE) reads no user
        # site-packages: nothing runs before sitecustomize here.
        raise Skip("this Python reads no user site-packages (ENABLE_USER_SITE %s)" % enabled)
    expect(site_dir.startswith(base), "user site-packages: %r" % site_dir, find)
    os.makedirs(site_dir)
    with open(os.path.join(site_dir, "early.pth"), "w") as f:
        f.write(line + "\n")
    return base


@case
def case_pycopy_imported_before_hook(args, tmp):
    """A .pth file imports cuda.core before sitecustomize (the hook) runs:
    registered when the hook starts."""
    for layout, module, line in (
            ("package", "cuda.core", "import cuda.core"),
            ("reexport", "cuda.core", "import cuda.core"),
            # The .pth imports the package only; the module comes later.
            ("module", "cuda.core._host_callback", "import cuda.core"),
            ("module", "cuda.core._host_callback", "import cuda.core._host_callback")):
        d = os.path.join(tmp, "%s-%s" % (layout, line.split()[-1]))
        pkg, program = make_pkg(d, layout)
        marker = os.path.join(d, "hook-saw")
        env = hcg_env(args, PYTHONPATH=pkg, HCG_TEST_IMPORT=module,
                      HCG_TEST_BAD="guard",
                      PYTHONUSERBASE=user_site(d, line), HCG_MARKER=marker)
        # A sitecustomize shadowed by the hook's notes what was imported
        # before the hook ran.
        other = os.path.join(d, "other")
        os.makedirs(other)
        with open(os.path.join(other, "sitecustomize.py"), "w") as f:
            f.write("import os, sys\nopen(os.environ['HCG_MARKER'], 'w').write("
                    "' '.join(m for m in ('cuda.core', 'cuda.core._host_callback')"
                    " if m in sys.modules))\n")
        env["PYTHONPATH"] = other + ":" + pkg
        p = hcguard_run(args, "guard", [sys.executable, program], env)
        with open(marker) as f:
            early = f.read()
        expect("cuda.core" in early.split(), "%s: not imported before the hook "
               "(%r)" % (line, early), p)
        expect_guarded(p, "guard")


@case
def case_pycopy_needs_the_hook(args, tmp):
    """Control: the same program with libhcguard preloaded but without the
    hook on PYTHONPATH: the stripped copy function is an ordinary host
    function (so the bad records above would have reached it)."""
    pkg, program = make_pkg(tmp, "package")
    env = hcg_env(args, PYTHONPATH=pkg, HCG_TEST_IMPORT="cuda.core",
                  HCG_TEST_BAD="none")
    env["LD_PRELOAD"] = ":".join(
        x for x in (args.sanitizer_runtime, args.library) if x)
    p = run([sys.executable, program], env=env, timeout=60)
    expect_eq(p.stdout, "pycopy none: passed\n", "stdout", p)
    expect_lines(p, [r"host functions: 1 launched, 1 ran",
                     r"host copies: 0 launched, 0 ran"])


@case
def case_pycopy_debug_says_registered(args, tmp):
    """Issue 7's reproduction: `hcguard run --debug -- python3 -c 'import
    cuda.core'` with a ctypes HOST_COPY_FN says it registered it."""
    pkg, _ = make_pkg(tmp, "package")
    p = hcguard_run(args, "guard", [sys.executable, "-c", "import cuda.core"],
                    hcg_env(args, PYTHONPATH=pkg), "--debug")
    expect_eq(p.returncode, 0, "exit status", p)
    expect_lines(p, [r"^==hcguard== python hook: registered "
                     r"cuda\.core\.HOST_COPY_FN at 0x[0-9a-f]+$"])
    expect("holds no address" not in p.stderr, "the old refusal", p)


@case
def case_pycopy_unusable_said_without_debug(args, tmp):
    """A HOST_COPY_FN with no address: one line says so, without --debug."""
    pkg, _ = make_pkg(tmp, "package")
    with open(os.path.join(pkg, "cuda", "core", "__init__.py"), "a") as f:
        f.write("HOST_COPY_FN = _ctypes.CFUNCTYPE(None, _ctypes.c_void_p)()\n")
    p = hcguard_run(args, "guard", [sys.executable, "-c", "import cuda.core"],
                    hcg_env(args, PYTHONPATH=pkg), "--no-summary")
    expect_eq(p.returncode, 0, "exit status", p)
    expect_eq(p.stderr, "==hcguard== python hook: cuda.core.HOST_COPY_FN "
              "(CFunctionType) holds a null address: its copies are not "
              "recognised as host copies, and not guarded\n", "stderr", p)


# ---- the GPU test's Cython stand-in, on the test driver ----------------------
CORE_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                           "..", "gpu", "core_host_copy.py")


def run_cython_example(args, variant, mode):
    """tests/gpu/core_host_copy.py (the GPU test gpu_core_*) with ctypes and
    the test driver: the same Cython build, package and checks."""
    env = clean_env(LD_LIBRARY_PATH=args.fakecuda_dir, HCGUARD_SLOW_MS="10000")
    if args.sanitizer_runtime:
        env.update(HCG_TEST_CHILD_PRELOAD=args.sanitizer_runtime,
                   ASAN_OPTIONS="detect_leaks=0")
    p = run([sys.executable, CORE_SCRIPT, "--hcguard", args.hcguard, "--variant",
             variant, "--mode", mode, "--driver", "ctypes"], env=env, timeout=120)
    if p.returncode == 77:
        raise Skip(p.stdout.strip())
    expect_eq(p.returncode, 0, "exit status", p)
    expect("core host copy (%s, %s): passed" % (variant, mode) in p.stdout,
           "not passed", p)
    launched = 16 if mode == "guard" else 20
    counts = "%d launched, 16 ran" % launched
    if variant == "unstripped":
        lines = [r"recognised as cuda\.core _host_copy: " + counts,
                 r"copy function 0x[0-9a-f]+ __pyx_f_\w*__host_copy \(in .*/cuda/core/"
                 r"_host_callback[^ ]*\.so\): recognised by symbol table "
                 r"\(registered too\), " + counts]
    else:
        lines = [r"recognised as registered \(hcguard_register_copy_fn\): " + counts,
                 r"copy function 0x[0-9a-f]+ \(no symbol\) \(in .*/cuda/core/"
                 r"_host_callback[^ ]*\.so\): registered \(Python hook or "
                 r"hcguard_register_copy_fn\), " + counts]
    if mode == "guard":
        lines.append(r"bad records rejected at enqueue: 4$")
    else:
        lines += [r"reported at enqueue \(passed through\): 4$",
                  r"copies skipped at run time: 4$"]
    lines.append(r"ERROR SUMMARY: 4 errors$")
    expect_lines(p, lines)


@case
def case_pycopy_cython_unstripped(args, tmp):
    for mode in ("guard", "audit"):
        run_cython_example(args, "unstripped", mode)


@case
def case_pycopy_cython_stripped(args, tmp):
    for mode in ("guard", "audit"):
        run_cython_example(args, "stripped", mode)


# numba-cuda's Stream.add_callback: a ctypes callback through cuda.bindings'
# driver.cuStreamAddCallback, whose wrapper calls it with the GIL.
BINDINGS = r'''
import ctypes, os, sys
cuda = ctypes.CDLL("libcuda.so.1")
vp = ctypes.c_void_p
dev, ctx, stream = ctypes.c_int(), vp(), vp()
assert cuda.cuInit(0) == 0
assert cuda.cuDeviceGet(ctypes.byref(dev), 0) == 0
assert cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
assert cuda.cuCtxSetCurrent(ctx) == 0
assert cuda.cuStreamCreate(ctypes.byref(stream), 1) == 0
bindings = ctypes.CDLL(os.environ["HCG_TEST_BINDINGS"])
add = bindings.fake_bindings_add_callback
add.argtypes = [vp, vp, vp, ctypes.c_uint]
CB = ctypes.CFUNCTYPE(None, vp, ctypes.c_int, vp)
ran = []
cb = CB(lambda s, status, data: ran.append((status, data)))
for i in range(3):
    rc = add(stream, ctypes.cast(cb, vp).value, i + 1, 0)
    assert rc == 0, rc
if os.environ["HCGUARD_MODE"] == "guard":
    # libc's memcpy through the wrapper: refused (in audit mode it would
    # run as memcpy(stream, status, NULL), so it is not tried there).
    rc = add(stream, ctypes.cast(ctypes.CDLL(None).memcpy, vp).value, None, 0)
    assert rc == 1, rc  # CUDA_ERROR_INVALID_VALUE
assert cuda.cuStreamSynchronize(stream) == 0
assert ran == [(0, 1), (0, 2), (0, 3)], ran
print("bindings add_callback: passed")
'''


@case
def case_bindings_add_callback_closure(args, tmp):
    program = os.path.join(tmp, "bindings.py")
    with open(program, "w") as f:
        f.write(BINDINGS)
    for mode in ("guard", "audit"):
        env = hcg_env(args, HCG_TEST_BINDINGS=args.bindings_module,
                      HCGUARD_MODE=mode)
        p = hcguard_run(args, mode, [sys.executable, program], env)
        expect_eq(p.returncode, 0, "%s: exit status" % mode, p)
        expect_eq(p.stdout, "bindings add_callback: passed\n", mode, p)
        lines = [r"closure-host-fn: host function 0x[0-9a-f]+ is code in "
                 r"anonymous memory",
                 r"closure-host-fn +3$", r"host functions: 3 launched, 3 ran"]
        if mode == "guard":
            lines.append(r"libc-function-as-host-fn: .*memcpy")
        expect_lines(p, lines)
        found = re.search(r"closure-host-fn: host function (0x[0-9a-f]+)", p.stderr)
        expect(found and "cuStreamCallbackWrapper" not in found.group(0),
               "%s: the closure is named by the wrapper" % mode, p)


if __name__ == "__main__":
    sys.exit(main())
