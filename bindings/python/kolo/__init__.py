"""kolo: a collective-communication runtime for data-parallel training, in the style of Horovod.

``kolo._kolo`` is the extension over kolo's C API (see bindings/python/README.md);
``kolo.torch`` is Horovod's ``horovod.torch`` API on top of it.
"""

__version__ = "0.1.0"  # KOLO_VERSION_MAJOR.MINOR.PATCH of bindings/c/include/kolo/kolo.h

try:
    from kolo._kolo import KoloError  # noqa: F401  (re-exported)
except ImportError as _e:  # pragma: no cover - only without a build
    raise ImportError(
        "kolo: the extension kolo._kolo is missing or does not load (%s). Install kolo with "
        "`pip install <kolo clone>` for this interpreter, or build it with CMake "
        "(scripts/setup.sh) and put build/python on PYTHONPATH, using the interpreter it was "
        "built for (Debian's /usr/bin/python3 by default)." % (_e,)) from _e

__all__ = ["KoloError", "__version__"]
