"""hcguard's Python hook.

`hcguard run` puts this directory first on PYTHONPATH, so Python's site
module imports this `sitecustomize` at start-up. It waits for cuda.core to
be imported, then has _hcguard_register.py hand the address of
cuda.core.HOST_COPY_FN to the preloaded libhcguard (which then knows the
copy function even in a cuda.core stripped of its symbol table); and it
runs the sitecustomize it shadows, the next one on sys.path.

Kept small, since Python compiles it at every start where it cannot write
__pycache__: it imports nothing, costs one string comparison per import
until cuda.core is imported, never raises, and is silent unless
HCGUARD_DEBUG is set.
"""

import os
import sys

_TARGET = "cuda.core"
_HERE = os.path.dirname(os.path.abspath(__file__))
_DEBUG = os.environ.get("HCGUARD_DEBUG", "") not in ("", "0")


def _say(text):
    if _DEBUG:
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
    """Finds nothing itself: for cuda.core it asks the other finders, and
    makes the loader call back once the module has run."""

    _hcguard_hook = True

    def find_spec(self, fullname, path=None, target=None):
        if fullname != _TARGET:
            return None
        try:
            for finder in list(sys.meta_path):
                find = getattr(finder, "find_spec", None)
                if finder is self or find is None:
                    continue
                spec = find(fullname, path, target)
                if spec is not None:
                    self._watch(spec.loader)
                    return spec
        except Exception:
            pass
        return None  # the import system asks the other finders itself

    def _watch(self, loader):
        exec_module = getattr(loader, "exec_module", None)
        finder = self

        def exec_then_register(module):
            if getattr(module, "__name__", None) != _TARGET:
                return exec_module(module)  # a loader shared with others
            try:
                del loader.exec_module
            except Exception:
                pass
            exec_module(module)  # its errors are the program's own
            # What `import cuda.core` returns, should the module have put
            # another object in its place.
            finder.done(sys.modules.get(_TARGET, module))

        try:
            # A class, or a loader patched already, is shared: leave it be.
            if (exec_module is None or isinstance(loader, type)
                    or "exec_module" in vars(loader)):
                raise TypeError("shared loader")
            loader.exec_module = exec_then_register
        except Exception:
            _say("cannot watch the import of cuda.core (loader %r)" % loader)

    def done(self, module):
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
        try:
            spec = _path_finder().find_spec("_hcguard_register", [_HERE])
            _load(spec).register(module, _say)
        except Exception as exc:
            _say("registering HOST_COPY_FN failed: %s: %s"
                 % (type(exc).__name__, exc))


def _install():
    if any(getattr(f, "_hcguard_hook", False) for f in sys.meta_path):
        return  # a second copy of this hook on sys.path
    finder = _HcguardFinder()
    if _TARGET in sys.modules:
        finder.done(sys.modules[_TARGET])
    else:
        sys.meta_path.insert(0, finder)


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
