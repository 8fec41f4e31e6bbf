"""Hands HOST_COPY_FN (of cuda.core, or of cuda.core._host_callback) to the
preloaded libhcguard.

Loaded by hcguard's sitecustomize only once one of those modules has been
imported, so that Python programs which never import them pay nothing for
this code."""

import sys

_MAX_ADDRESS = sys.maxsize * 2 + 1


def _ctypes_address(obj):
    """(address, None) for a ctypes function pointer or pointer, (None,
    reason) for one that cannot be a copy function, None if obj is not one.
    ctypes is looked up, not imported: an object of it means it is loaded."""
    ctypes = sys.modules.get("ctypes")
    if ctypes is None or not isinstance(obj, (ctypes._CFuncPtr, ctypes._Pointer)):
        return None
    # CFUNCTYPE(...)(python_callable) keeps its libffi thunk in _objects:
    # a Python callback, not cuda.core's _host_copy.
    kept = getattr(obj, "_objects", None)
    if isinstance(obj, ctypes._CFuncPtr) and isinstance(kept, dict) and any(
            type(v).__name__ == "CThunkObject" for v in kept.values()):
        return None, "wraps a Python callable, not a copy function"
    return ctypes.cast(obj, ctypes.c_void_p).value, None


def _address(obj):
    """(address, None), or (None, why HOST_COPY_FN holds no usable address).
    An address is a positive int that fits a pointer, given as an int, a
    ctypes function pointer (cuda.core's CFUNCTYPE(None, c_void_p) object),
    a ctypes pointer or c_void_p, or anything with __index__ or __int__."""
    if isinstance(obj, (bool, str, bytes, bytearray, float, complex)):
        return None, "is a %s, not an address" % type(obj).__name__
    try:
        found = _ctypes_address(obj)
        if found is not None:
            value, why = found
            if why:
                return None, why
        elif isinstance(obj, int):
            value = obj
        elif hasattr(type(obj), "__index__") or hasattr(type(obj), "__int__"):
            value = int(obj)
        else:
            value = getattr(obj, "value", None)  # c_void_p, c_size_t
    except Exception as exc:
        return None, "gave no address (%s: %s)" % (type(exc).__name__, exc)
    if value is None:
        return None, "holds a null address"
    if not isinstance(value, int) or isinstance(value, bool):
        return None, "holds a %s, not an address" % type(value).__name__
    if value == 0:
        return None, "holds a null address"
    if value < 0:
        return None, "holds a negative address (%d)" % value
    if value > _MAX_ADDRESS:
        return None, "holds 0x%x, beyond the address space" % value
    return value, None


def _register_fn():
    """hcguard_register_copy_fn of the preloaded library, or None."""
    import ctypes  # only now: it costs milliseconds

    try:
        fn = ctypes.CDLL(None).hcguard_register_copy_fn
    except AttributeError:
        return None
    fn.argtypes = [ctypes.c_void_p]
    fn.restype = ctypes.c_int
    return fn


def register(module, say, warn, done):
    """Register module.HOST_COPY_FN unless its address is in done (a set of
    the addresses registered already, which this adds to). say(text)
    reports what happened under HCGUARD_DEBUG; warn(text) always, for what
    leaves copies unrecognised. Returns "registered", "absent" (nothing to
    register: keep watching the other module) or "failed"."""
    name = getattr(module, "__name__", "cuda.core")
    fn = getattr(module, "HOST_COPY_FN", None)
    if fn is None:
        if name == "cuda.core":
            version = getattr(module, "__version__", "(unknown version)")
            say("cuda.core %s has no HOST_COPY_FN: nothing to register" % version)
        else:
            say("%s has no HOST_COPY_FN: nothing to register" % name)
        return "absent"
    what = "%s.HOST_COPY_FN (%s)" % (name, type(fn).__name__)
    addr, why = _address(fn)
    if addr is not None and addr in done:
        say("%s at 0x%x: registered already" % (what, addr))
        return "registered"
    fn_register = _register_fn()
    if fn_register is None:
        say("libhcguard is not preloaded: HOST_COPY_FN not registered")
        return "failed"
    if addr is None:
        warn("%s %s: its copies are not recognised as host copies, "
             "and not guarded" % (what, why))
        return "failed"
    rc = fn_register(addr)
    if rc != 0:
        warn("hcguard_register_copy_fn(0x%x) for %s returned %d: its copies "
             "are not recognised as host copies" % (addr, what, rc))
        return "failed"
    done.add(addr)
    say("registered %s.HOST_COPY_FN at 0x%x" % (name, addr))
    return "registered"
