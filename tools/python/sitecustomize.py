"""hcguard's Python hook.

`hcguard run` puts this directory first on PYTHONPATH, so Python's site
module imports this `sitecustomize` at start-up. It waits for cuda.core (or
its module cuda.core._host_callback) to be imported, then has
_hcguard_register.py hand the address of HOST_COPY_FN to the preloaded
libhcguard (which then knows the copy function even in a cuda.core stripped
of its symbol table); and it runs the sitecustomize it shadows, the next one
on sys.path. A cuda.core imported before this hook ran (by a .pth file) is
registered at once.

Kept small, since Python compiles it at every start where it cannot write
__pycache__: it imports nothing, costs one set look-up per import until
HOST_COPY_FN is registered or both modules have been imported, never
raises, and is silent unless HCGUARD_DEBUG is set, but for one line when a
HOST_COPY_FN it finds cannot be registered (its copies would go unguarded).
"""

import os
import sys

_CORE = "cuda.core"
_CALLBACK = "cuda.core._host_callback"
_TARGETS = frozenset((_CORE, _CALLBACK))
_HERE = os.path.dirname(os.path.abspath(__file__))
_DEBUG = os.environ.get("HCGUARD_DEBUG", "") not in ("", "0")
_QUIET = os.environ.get("HCGUARD_MODE", "") == "off"


def _say(text):
    if _DEBUG:
        _write(text)


def _warn(text):
    """What the user must know even without HCGUARD_DEBUG."""
    if _DEBUG or not _QUIET:
        _write(text)


def _write(text):
    try:
        sys.stderr.write("==hcguard== python hook: %s\n" % text)
    except Exception:
        pass


def _path_finder():
    for finder in sys.meta_path:
        if getattr(finder, "__name__", None) == "PathFinder":
            return finder
    import importlib.machinery

    return importlib.machinery.PathFinder


def _load(spec):
    """Execute the module of spec, outside sys.modules."""
    create = getattr(spec.loader, "create_module", None)
    module = (create(spec) if create else None) or type(sys)(spec.name)
    module.__spec__ = spec
    module.__loader__ = spec.loader
    if spec.has_location:
        module.__file__ = spec.origin
    spec.loader.exec_module(module)
    return module


class _HcguardFinder:
    """Finds nothing itself: for cuda.core and cuda.core._host_callback it
    asks the other finders, and makes the loader call back once the module
    has run. It leaves sys.meta_path once HOST_COPY_FN is registered, or
    both modules have been seen."""

    _hcguard_hook = True

    def __init__(self):
        self._pending = set(_TARGETS)
        self._addrs = set()  # registered already: each address once
        self._registrar = None

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in _TARGETS:
            return None
        try:
            for finder in list(sys.meta_path):
                find = getattr(finder, "find_spec", None)
                if finder is self or find is None:
                    continue
                spec = find(fullname, path, target)
                if spec is not None:
                    self._watch(spec.loader, fullname)
                    return spec
        except Exception:
            pass
        return None  # the import system asks the other finders itself

    def _watch(self, loader, name):
        exec_module = getattr(loader, "exec_module", None)
        finder = self

        def exec_then_register(module):
            if getattr(module, "__name__", None) != name:
                return exec_module(module)  # a loader shared with others
            try:
                del loader.exec_module
            except Exception:
                pass
            exec_module(module)  # its errors are the program's own
            # What the import returns, should the module have put another
            # object in its place.
            finder.done(name, sys.modules.get(name, module))

        try:
            # A class, or a loader patched already, is shared: leave it be.
            if (exec_module is None or isinstance(loader, type)
                    or "exec_module" in vars(loader)):
                raise TypeError("shared loader")
            loader.exec_module = exec_then_register
        except Exception:
            _say("cannot watch the import of %s (loader %r)" % (name, loader))

    def done(self, name, module):
        """name has been imported: register its HOST_COPY_FN, if any."""
        if name not in self._pending:
            return  # imported again (reloaded): registered once
        self._pending.discard(name)
        try:
            if self._registrar is None:
                spec = _path_finder().find_spec("_hcguard_register", [_HERE])
                self._registrar = _load(spec)
            got = self._registrar.register(module, _say, _warn, self._addrs)
        except Exception as exc:
            _warn("registering %s.HOST_COPY_FN failed: %s: %s"
                  % (name, type(exc).__name__, exc))
            got = "failed"
        if got != "absent":
            self._pending.clear()
        # The other module may be imported already (cuda.core imports it,
        # or a .pth file imported both before this hook ran).
        for other in list(self._pending):
            if _imported(other):
                self.done(other, sys.modules[other])
        if not self._pending:
            try:
                sys.meta_path.remove(self)
            except ValueError:
                pass


def _imported(name):
    """Whether name is in sys.modules and done running (a package that
    imports the other module is still running then: its loader calls back
    once it is done)."""
    module = sys.modules.get(name)
    spec = getattr(module, "__spec__", None)
    return module is not None and not getattr(spec, "_initializing", False)


def _install():
    if any(getattr(f, "_hcguard_hook", False) for f in sys.meta_path):
        return  # a second copy of this hook on sys.path
    finder = _HcguardFinder()
    sys.meta_path.insert(0, finder)
    for name in (_CORE, _CALLBACK):
        if _imported(name):  # imported before this hook ran
            finder.done(name, sys.modules[name])


def _same_file(a, b):
    """Whether two paths name one file; os.stat is cheaper than realpath."""
    try:
        sa, sb = os.stat(a), os.stat(b)
    except OSError:
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def _find_shadowed():
    """The next sitecustomize on sys.path after our directory's first entry
    (one before it would have been imported instead of this one)."""
    entries = [e for e in sys.path if isinstance(e, str)]
    for same in (lambda e: os.path.abspath(e or ".") == _HERE,
                 lambda e: _same_file(e or ".", _HERE)):
        marks = [i for i, e in enumerate(entries) if same(e)]
        if marks:
            entries = entries[marks[0] + 1:]
            break
    finder = _path_finder()
    for entry in entries:
        spec = finder.find_spec("sitecustomize", [entry])
        if spec is None or spec.loader is None:
            continue
        if not spec.origin or not _same_file(spec.origin, __file__):
            return spec  # else our own file by another name
    return None


def _report_failure(err):
    """What site.py says when a sitecustomize fails, so that the program
    sees what it would see without this hook."""
    try:
        if sys.flags.verbose:
            sys.excepthook(*sys.exc_info())
        else:
            sys.stderr.write(
                "Error in sitecustomize; set PYTHONVERBOSE for traceback:\n"
                "%s: %s\n" % (err.__class__.__name__, err))
    except Exception:
        pass


def _chain():
    try:
        spec = _find_shadowed()
    except Exception:
        return None
    if spec is None:
        return None
    try:
        return _load(spec)
    except Exception as err:
        _report_failure(err)
        return None


try:
    _install()
except Exception:
    pass
_shadowed = _chain()
