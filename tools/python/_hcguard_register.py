"""Hands cuda.core.HOST_COPY_FN to the preloaded libhcguard.

Loaded by hcguard's sitecustomize only once cuda.core has been imported, so
that Python programs which never import it pay nothing for this code."""

import sys


def _address(obj):
    """The address held by HOST_COPY_FN, or None if it holds none."""
    if isinstance(obj, (bool, str, bytes, bytearray, float)):
        return None
    if isinstance(obj, int):
        value = obj
    elif hasattr(type(obj), "__index__") or hasattr(type(obj), "__int__"):
        value = int(obj)
    else:
        value = getattr(obj, "value", None)  # a ctypes c_void_p
    if not isinstance(value, int) or isinstance(value, bool):
        return None
    if not 0 < value <= sys.maxsize * 2 + 1:
        return None
    return value


def register(module, say):
    """Register module.HOST_COPY_FN, if it holds an address; say(text)
    reports what happened (it prints only under HCGUARD_DEBUG)."""
    fn = getattr(module, "HOST_COPY_FN", None)
    if fn is None:
        version = getattr(module, "__version__", "(unknown version)")
        say("cuda.core %s has no HOST_COPY_FN: nothing to register" % version)
        return
    addr = _address(fn)
    if addr is None:
        say("cuda.core.HOST_COPY_FN (%s) holds no address: ignored"
            % type(fn).__name__)
        return
    import ctypes  # only now: it costs milliseconds

    try:
        fn_register = ctypes.CDLL(None).hcguard_register_copy_fn
    except AttributeError:
        say("libhcguard is not preloaded: HOST_COPY_FN not registered")
        return
    fn_register.argtypes = [ctypes.c_void_p]
    fn_register.restype = ctypes.c_int
    rc = fn_register(addr)
    if rc == 0:
        say("registered cuda.core.HOST_COPY_FN at 0x%x" % addr)
    else:
        say("hcguard_register_copy_fn(0x%x) returned %d" % (addr, rc))
