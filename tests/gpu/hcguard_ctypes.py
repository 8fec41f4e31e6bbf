"""hcguard as a Python test sees it: the preloaded library's host-copy
function and its counters, through ctypes; and the way a test script
counts its checks. Shared by the GPU tests."""
import ctypes
import sys


class Stats(ctypes.Structure):
    """hcguard_stats (include/hcguard.h); hcguard_get_stats writes no more
    than the size it is given, so a shorter copy of it stays safe."""
    _fields_ = [(n, ctypes.c_uint64) for n in (
        "host_fns_launched", "host_fns_ran", "copies_launched", "copies_ran",
        "rejected", "skipped", "bytes_copied", "events_dropped", "graph_calls_live")]


class Hcguard:
    def __init__(self):
        """Exits 77 (not applicable) where hcguard is not preloaded."""
        process = ctypes.CDLL(None)
        try:
            self.copy_addr = ctypes.cast(process.hcguard_host_copy, ctypes.c_void_p).value
            self._get_stats = process.hcguard_get_stats
        except AttributeError:
            print("SKIP: hcguard is not preloaded (no hcguard_host_copy)")
            sys.exit(77)
        self.process = process

    def stats(self):
        s = Stats()
        self._get_stats(ctypes.byref(s), ctypes.sizeof(s))
        return s


class Checks:
    """A test script's checks: check(cond, what) says each failure on
    stderr and counts it (and returns cond); done() prints "NAME: passed"
    or "NAME: FAILED" and exits 0 or 1."""

    def __init__(self, name):
        self.name, self.failures = name, 0

    def __call__(self, cond, what):
        if not cond:
            self.failures += 1
            print(f"FAIL: {what}", file=sys.stderr)
        return cond

    def done(self):
        print(f"{self.name}: {'FAILED' if self.failures else 'passed'}")
        sys.exit(1 if self.failures else 0)
