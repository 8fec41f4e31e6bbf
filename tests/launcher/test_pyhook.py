"""The Python hook (tools/python/sitecustomize.py): once cuda.core is
imported, the address of cuda.core.HOST_COPY_FN reaches
hcguard_register_copy_fn; it runs the sitecustomize it shadows; it is
silent and passive otherwise.

A fake cuda.core package is written for each case, and a stub library
stands in for libhcguard.so, recording what was registered."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from launcher_common import (case, clean_env, expect, expect_eq,  # noqa: E402
                             main, run)

# The fake cuda.core: _addr is a real C function's address, the stub's if
# it is loaded. KIND picks what HOST_COPY_FN holds.
CORE = '''
import ctypes
_lib = ctypes.CDLL(None)
_addr = ctypes.cast(getattr(_lib, "hcg_stub_copy", None) or _lib.abs,
                    ctypes.c_void_p).value
__version__ = "1.2.0"
%s
'''

KINDS = {
    "int": "HOST_COPY_FN = _addr",
    "index": "class _F:\n    def __index__(self): return _addr\n"
             "HOST_COPY_FN = _F()",
    "int_method": "class _F:\n    def __int__(self): return _addr\n"
                  "HOST_COPY_FN = _F()",
    "c_void_p": "HOST_COPY_FN = ctypes.c_void_p(_addr)",
    "c_size_t": "HOST_COPY_FN = ctypes.c_size_t(_addr)",
    # As cuda-core 1.3.0 has it: a ctypes function pointer object.
    "cfunctype": "HOST_COPY_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(_addr)",
    "c_pointer": "HOST_COPY_FN = ctypes.cast(_addr, ctypes.POINTER(ctypes.c_char))",
    # Defined in _host_callback, re-exported: registered once.
    "reexport": "from cuda.core._host_callback import HOST_COPY_FN",
    "lazy": "def __getattr__(name):\n"
            "    if name == 'HOST_COPY_FN': return _addr\n"
            "    raise AttributeError(name)",
    # As cuda-core wheels do: the symbols come from cuda.core.cu13.
    "versioned": "import importlib\n"
                 "globals().update(importlib.import_module("
                 "'.cu13', __package__).__dict__)",
    # A module that puts another object in its place in sys.modules.
    "replaced": "import sys, types\n"
                "_m = types.ModuleType(__name__)\n"
                "_m.__dict__.update(globals())\n"
                "_m.HOST_COPY_FN = _addr\n"
                "sys.modules[__name__] = _m",
}

# Nothing to register: silent, and the hook keeps watching for
# cuda.core._host_callback.
NO_KINDS = {
    "absent": "",
    "none": "HOST_COPY_FN = None",
}

# A HOST_COPY_FN that cannot be registered: one line says so (its copies
# would go unguarded), with the reason.
BAD_KINDS = {
    "str": "HOST_COPY_FN = hex(_addr)",
    "bytes": "HOST_COPY_FN = b'1234'",
    "float": "HOST_COPY_FN = float(_addr)",
    "bool": "HOST_COPY_FN = True",
    "zero": "HOST_COPY_FN = 0",
    "negative": "HOST_COPY_FN = -_addr",
    "huge": "HOST_COPY_FN = 1 << 64",
    "int_raises": "class _F:\n    def __int__(self): raise ValueError('no')\n"
                  "HOST_COPY_FN = _F()",
    "int_returns_str": "class _F:\n    def __index__(self): return 'x'\n"
                       "HOST_COPY_FN = _F()",
    "getattr_raises": "def __getattr__(name):\n"
                      "    raise RuntimeError('lazy attribute failed')",
    "cfunc_null": "HOST_COPY_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)()",
    "cfunc_callable": "HOST_COPY_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)("
                      "lambda p: None)",
    "c_void_p_null": "HOST_COPY_FN = ctypes.c_void_p()",
}

BAD_REASONS = {
    "str": "(str) is a str, not an address",
    "bytes": "(bytes) is a bytes, not an address",
    "float": "(float) is a float, not an address",
    "bool": "(bool) is a bool, not an address",
    "zero": "(int) holds a null address",
    "negative": "(int) holds a negative address",
    "huge": "(int) holds 0x10000000000000000, beyond the address space",
    "int_raises": "(_F) gave no address (ValueError: no)",
    "int_returns_str": "(_F) gave no address (TypeError",
    "getattr_raises": "registering cuda.core.HOST_COPY_FN failed: "
                      "RuntimeError: lazy attribute failed",
    "cfunc_null": "(CFunctionType) holds a null address",
    "cfunc_callable": "(CFunctionType) wraps a Python callable, not a copy "
                      "function",
    "c_void_p_null": "(c_void_p) holds a null address",
}

# What the program under test prints: registrations seen by the stub, the
# address registered, cuda.core's own, and whether the hook's finder is
# still installed.
DRIVER = '''
import ctypes, sys
import cuda.core
import cuda.core.sub
lib = ctypes.CDLL(None)
count = reg = 0
if hasattr(lib, "hcg_stub_count"):
    lib.hcg_stub_registered.restype = ctypes.c_void_p
    count, reg = lib.hcg_stub_count(), lib.hcg_stub_registered() or 0
print(count, reg, cuda.core._addr, cuda.core.sub.VALUE)
print(any(getattr(f, "_hcguard_hook", False) for f in sys.meta_path))
'''


# cuda.core._host_callback: HOST_COPY_FN as a ctypes function pointer to
# the same function as cuda.core's _addr.
HOST_CALLBACK = '''
import ctypes
_lib = ctypes.CDLL(None)
HOST_COPY_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(ctypes.cast(
    getattr(_lib, "hcg_stub_copy", None) or _lib.abs, ctypes.c_void_p).value)
'''


def make_pkg(tmp, body, namespace=False):
    pkg = os.path.join(tmp, "pkg")
    os.makedirs(os.path.join(pkg, "cuda", "core"))
    if not namespace:
        with open(os.path.join(pkg, "cuda", "__init__.py"), "w") as f:
            f.write("")
    with open(os.path.join(pkg, "cuda", "core", "__init__.py"), "w") as f:
        f.write(CORE % body)
    with open(os.path.join(pkg, "cuda", "core", "sub.py"), "w") as f:
        f.write("VALUE = 42\n")
    with open(os.path.join(pkg, "cuda", "core", "cu13.py"), "w") as f:
        f.write("from cuda.core import _addr\nHOST_COPY_FN = _addr\n")
    with open(os.path.join(pkg, "cuda", "core", "_host_callback.py"), "w") as f:
        f.write(HOST_CALLBACK)
    driver = os.path.join(tmp, "driver.py")
    with open(driver, "w") as f:
        f.write(DRIVER)
    return pkg, driver


def write_sitecustomize(tmp, name, body):
    d = os.path.join(tmp, name)
    os.makedirs(d)
    with open(os.path.join(d, "sitecustomize.py"), "w") as f:
        f.write(body)
    return d


def run_python(args, pythonpath, driver, preload=True, **extra):
    env = clean_env(PYTHONPATH=":".join(pythonpath), **extra)
    if preload:
        env["LD_PRELOAD"] = args.stub
    return run([sys.executable, driver], env=env)


def parse(p):
    lines = p.stdout.split("\n")
    expect_eq(len(lines), 3, "output lines", p)
    count, reg, addr, sub = (int(x) for x in lines[0].split())
    expect_eq(sub, 42, "cuda.core.sub", p)
    return count, reg, addr, lines[1]


def expect_registered(p, what):
    expect_eq(p.returncode, 0, "%s: exit status" % what, p)
    count, reg, addr, hooked = parse(p)
    expect_eq(count, 1, "%s: registrations" % what, p)
    expect_eq(reg, addr, "%s: address registered" % what, p)
    expect_eq(hooked, "False", "%s: finder left after cuda.core" % what, p)
    return addr


def expect_not_registered(p, what, watching=False):
    """watching: the hook still waits for cuda.core._host_callback."""
    expect_eq(p.returncode, 0, "%s: exit status" % what, p)
    count, reg, _, hooked = parse(p)
    expect_eq((count, reg), (0, 0), "%s: registrations" % what, p)
    expect_eq(hooked, str(watching), "%s: finder left after cuda.core" % what, p)


@case
def case_pyhook_registers(args, tmp):
    for kind, body in KINDS.items():
        for namespace in (False, True):
            d = os.path.join(tmp, "%s-%d" % (kind, namespace))
            pkg, driver = make_pkg(d, body, namespace)
            p = run_python(args, [args.hook_dir, pkg], driver)
            expect_registered(p, kind)
            expect_eq(p.stderr, "", "%s: stderr" % kind, p)


@case
def case_pyhook_debug_message(args, tmp):
    pkg, driver = make_pkg(tmp, KINDS["int"])
    p = run_python(args, [args.hook_dir, pkg], driver, HCGUARD_DEBUG="1")
    addr = expect_registered(p, "int")
    expect_eq(p.stderr, "==hcguard== python hook: registered "
              "cuda.core.HOST_COPY_FN at 0x%x\n" % addr, "stderr", p)


@case
def case_pyhook_no_host_copy_fn(args, tmp):
    for kind, body in NO_KINDS.items():
        pkg, driver = make_pkg(os.path.join(tmp, kind), body)
        p = run_python(args, [args.hook_dir, pkg], driver)
        expect_not_registered(p, kind, watching=True)
        expect_eq(p.stderr, "", "%s: stderr" % kind, p)
    # cuda-core 1.2.0 has no HOST_COPY_FN: one line says so, if asked.
    pkg, driver = make_pkg(os.path.join(tmp, "debug"), "")
    p = run_python(args, [args.hook_dir, pkg], driver, HCGUARD_DEBUG="1")
    expect_not_registered(p, "absent", watching=True)
    expect_eq(p.stderr, "==hcguard== python hook: cuda.core 1.2.0 has no "
              "HOST_COPY_FN: nothing to register\n", "stderr", p)


@case
def case_pyhook_unusable_host_copy_fn(args, tmp):
    """One line, without HCGUARD_DEBUG, says why; none in mode off."""
    for kind, body in BAD_KINDS.items():
        pkg, driver = make_pkg(os.path.join(tmp, kind), body)
        p = run_python(args, [args.hook_dir, pkg], driver)
        expect_not_registered(p, kind)
        expect(p.stderr.startswith("==hcguard== python hook: ")
               and p.stderr.count("\n") == 1 and p.stderr.endswith("\n"),
               "%s: not one line of hcguard's" % kind, p)
        expect(BAD_REASONS[kind] in p.stderr, "%s: reason" % kind, p)
        if kind != "getattr_raises":
            expect("cuda.core.HOST_COPY_FN (" in p.stderr
                   and "not recognised as host copies, and not guarded"
                   in p.stderr, "%s: what it means" % kind, p)
        q = run_python(args, [args.hook_dir, pkg], driver, HCGUARD_MODE="off")
        expect_not_registered(q, kind)
        expect_eq(q.stderr, "", "%s: stderr in mode off" % kind, q)


@case
def case_pyhook_host_callback_module(args, tmp):
    """HOST_COPY_FN only in cuda.core._host_callback, imported after the
    package (lazily, as a program does): registered then, once."""
    pkg, driver = make_pkg(tmp, "")
    late = os.path.join(tmp, "late.py")
    with open(late, "w") as f:
        f.write("import cuda.core._host_callback\nimport cuda.core\n"
                "cuda.core._addr = ctypes.cast(cuda.core._host_callback."
                "HOST_COPY_FN, ctypes.c_void_p).value\n")
    with open(driver) as f:
        text = f.read()
    with open(driver, "w") as f:
        f.write(text.replace("import cuda.core.sub\n", "import cuda.core.sub\n"
                             "exec(open(%r).read())\n" % late))
    p = run_python(args, [args.hook_dir, pkg], driver, HCGUARD_DEBUG="1")
    addr = expect_registered(p, "_host_callback")
    expect_eq(p.stderr, "==hcguard== python hook: cuda.core 1.2.0 has no "
              "HOST_COPY_FN: nothing to register\n"
              "==hcguard== python hook: registered cuda.core._host_callback."
              "HOST_COPY_FN at 0x%x\n" % addr, "stderr", p)


@case
def case_pyhook_not_preloaded(args, tmp):
    pkg, driver = make_pkg(tmp, KINDS["int"])
    p = run_python(args, [args.hook_dir, pkg], driver, preload=False)
    expect_not_registered(p, "without the library")
    expect_eq(p.stderr, "", "stderr", p)
    p = run_python(args, [args.hook_dir, pkg], driver, preload=False,
                   HCGUARD_DEBUG="1")
    expect_eq(p.stderr, "==hcguard== python hook: libhcguard is not "
              "preloaded: HOST_COPY_FN not registered\n", "debug stderr", p)


@case
def case_pyhook_import_error_kept(args, tmp):
    # cuda.core fails to import once (the flag file), then imports.
    flag = os.path.join(tmp, "fail-once")
    open(flag, "w").close()
    pkg, _ = make_pkg(tmp, (
        "import os\n"
        "if os.path.exists(%r):\n"
        "    os.unlink(%r)\n"
        "    raise RuntimeError('broken cuda.core')\n"
        "HOST_COPY_FN = _addr\n") % (flag, flag))
    driver = os.path.join(tmp, "retry.py")
    with open(driver, "w") as f:
        f.write("try:\n"
                "    import cuda.core\n"
                "except RuntimeError as e:\n"
                "    print('first import:', e)\n" + DRIVER)
    p = run_python(args, [args.hook_dir, pkg], driver)
    expect_eq(p.stdout.split("\n")[0], "first import: broken cuda.core",
              "the program's own error is not what it sees", p)
    p.stdout = p.stdout.split("\n", 1)[1]
    expect_registered(p, "imported at the second attempt")
    expect_eq(p.stderr, "", "stderr", p)
    # Uncaught, the error and its message reach the program's stderr.
    open(flag, "w").close()
    q = run_python(args, [args.hook_dir, pkg], os.path.join(tmp, "driver.py"))
    expect_eq(q.returncode, 1, "exit status", q)
    expect(q.stderr.endswith("RuntimeError: broken cuda.core\n"),
           "the program's own error is not what it sees", q)
    expect("==hcguard==" not in q.stderr, "the hook spoke", q)


@case
def case_pyhook_chains_shadowed(args, tmp):
    marker = os.path.join(tmp, "marker")
    other = write_sitecustomize(tmp, "other", (
        "import os\n"
        "with open(os.environ['HCG_MARKER'], 'a') as f:\n"
        "    f.write(__name__ + ' ' + os.path.basename(os.path.dirname("
        "__file__)) + '\\n')\n"))
    copy = os.path.join(tmp, "hookcopy")
    os.makedirs(copy)
    with open(os.path.join(args.hook_dir, "sitecustomize.py")) as src, \
            open(os.path.join(copy, "sitecustomize.py"), "w") as dst:
        dst.write(src.read())
    pkg, driver = make_pkg(tmp, KINDS["int"])
    for path in ([args.hook_dir, other, pkg],
                 [args.hook_dir, pkg, args.hook_dir, other],
                 [args.hook_dir, copy, other, pkg]):
        if os.path.exists(marker):
            os.unlink(marker)
        p = run_python(args, path, driver, HCG_MARKER=marker)
        expect_registered(p, "chained %r" % path)
        expect_eq(p.stderr, "", "stderr", p)
        with open(marker) as f:
            expect_eq(f.read(), "sitecustomize other\n",
                      "the shadowed sitecustomize ran, once", p)


@case
def case_pyhook_shadowed_failure_reported_as_python_does(args, tmp):
    other = write_sitecustomize(tmp, "other", "raise ValueError('boom')\n")
    pkg, driver = make_pkg(tmp, KINDS["int"])
    alone = run_python(args, [other, pkg], driver)
    expect_eq(alone.returncode, 0, "exit status without the hook", alone)
    expect("ValueError: boom" in alone.stderr, "python's own report", alone)
    p = run_python(args, [args.hook_dir, other, pkg], driver)
    expect_registered(p, "after a failing sitecustomize")
    expect_eq(p.stderr, alone.stderr, "the report of the shadowed failure", p)


@case
def case_pyhook_costs_no_imports(args, tmp):
    code = "import sys; print(' '.join(sorted(sys.modules)))"
    without = run([sys.executable, "-c", code], env=clean_env())
    with_hook = run([sys.executable, "-c", code],
                    env=clean_env(PYTHONPATH=args.hook_dir))
    extra = set(with_hook.stdout.split()) - set(without.stdout.split())
    expect(extra <= {"sitecustomize"},
           "the hook imports at start-up: %s" % sorted(extra), with_hook)
    expect_eq(with_hook.stderr, "", "stderr", with_hook)
    finder = run([sys.executable, "-c",
                  "import sys; print(type(sys.meta_path[0]).__name__)"],
                 env=clean_env(PYTHONPATH=args.hook_dir))
    expect_eq(finder.stdout, "_HcguardFinder\n", "hook installed", finder)


@case
def case_pyhook_through_launcher(args, tmp):
    pkg, driver = make_pkg(tmp, KINDS["int"])
    env = clean_env(HCGUARD_LIBRARY=args.stub, PYTHONPATH=pkg)
    p = run([args.hcguard, "run", "--mode", "off", sys.executable, driver],
            env=env)
    expect_registered(p, "under hcguard run")
    expect_eq(p.stderr, "", "stderr", p)


if __name__ == "__main__":
    sys.exit(main())
