"""The console scripts ``kolo-bench``, ``kolo-topo`` and ``kolo-scale`` of a pip installation.

pip installs console scripts as Python entry points, so each of these replaces the Python process
with the C++ executable the wheel carries in ``kolo/bin`` (it finds ``kolo/lib/libkolo.so``
through its RPATH). Under mpirun every rank runs the entry point and then the executable, with
the same arguments and environment.
"""

import os
import sys


def _exec(name):
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", name)
    if not os.access(path, os.X_OK):
        print("%s: %s is not in this installation of kolo (a build tree has it in build/)"
              % (name, path), file=sys.stderr)
        return 2
    os.execv(path, [name] + sys.argv[1:])
    return 2  # not reached: execv replaces the process or raises


def kolo_bench():
    return _exec("kolo-bench")


def kolo_topo():
    return _exec("kolo-topo")


def kolo_scale():
    return _exec("kolo-scale")
