"""pip's view of kolo (pyproject.toml) agrees with the build and the package.

The wheel itself is built by `pip install .` in scripts/run_main.sh and from the sdist in
scripts/test_torch_versions.sh (minutes each); these checks are the quick part: one version
everywhere, console scripts that resolve, the package folder the wheel takes, and the
kolo-bench/kolo-topo entry points exec'ing what the wheel puts in kolo/bin.
"""

import importlib
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tomllib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
SKBUILD = PYPROJECT["tool"]["scikit-build"]


def cmake_version():
    return re.search(r"project\(kolo VERSION ([0-9.]+)", (ROOT / "CMakeLists.txt").read_text())[1]


def test_version_comes_from_cmake_and_matches_the_package_and_the_c_header():
    meta = SKBUILD["metadata"]["version"]
    assert PYPROJECT["project"]["dynamic"] == ["version"]
    source = (ROOT / meta["input"]).read_text()
    assert re.search(meta["regex"], source)["value"] == cmake_version()
    init = (ROOT / "bindings/python/kolo/__init__.py").read_text()
    assert re.search(r'__version__ = "([0-9.]+)"', init)[1] == cmake_version()
    header = (ROOT / "bindings/c/include/kolo/kolo.h").read_text()
    parts = [re.search(r"#define KOLO_VERSION_%s (\d+)" % p, header)[1]
             for p in ("MAJOR", "MINOR", "PATCH")]
    assert ".".join(parts) == cmake_version()


@pytest.mark.parametrize("script", ["kolorun", "kolo-bench", "kolo-topo"])
def test_console_scripts_resolve_to_functions(script):
    target = PYPROJECT["project"]["scripts"][script]
    module, _, attr = target.partition(":")
    assert callable(getattr(importlib.import_module(module), attr))


def test_the_wheel_takes_the_package_folder_and_installs_cmake_into_it():
    (package,) = SKBUILD["wheel"]["packages"]
    assert (ROOT / package / "__init__.py").is_file()
    assert pathlib.PurePath(package).name == "kolo" == SKBUILD["wheel"]["install-dir"]
    # Build folders never go into the sdist.
    for folder in ("/build/", "/build-*/", "/.venv/"):
        assert folder in SKBUILD["sdist"]["exclude"]
    # torch is not needed to build: one wheel for every torch.
    assert not any("torch" in r for r in PYPROJECT["build-system"]["requires"])


def fake_installation(tmp_path, with_binary):
    """A kolo package with _tools.py and, optionally, a kolo/bin/kolo-bench that echoes."""
    package = tmp_path / "kolo"
    package.mkdir()
    shutil.copy(ROOT / "bindings/python/kolo/_tools.py", package / "_tools.py")
    if with_binary:
        (package / "bin").mkdir()
        binary = package / "bin" / "kolo-bench"
        binary.write_text('#!/bin/sh\necho "argv0=$0"; for a in "$@"; do echo "arg=$a"; done\n')
        binary.chmod(0o755)
    return package


def run_entry_point(tmp_path, *args):
    code = "import sys, kolo._tools as t; sys.exit(t.kolo_bench())"
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    return subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True,
                          text=True, timeout=60)


def test_kolo_bench_entry_point_execs_the_packaged_binary_with_its_arguments(tmp_path):
    package = fake_installation(tmp_path, with_binary=True)
    out = run_entry_point(tmp_path, "-b", "8", "--name with space")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "argv0=%s" % (package / "bin" / "kolo-bench"), "arg=-b", "arg=8",
        "arg=--name with space"]


def test_kolo_bench_entry_point_without_the_binary_says_so(tmp_path):
    fake_installation(tmp_path, with_binary=False)
    out = run_entry_point(tmp_path)
    assert out.returncode == 2
    assert "kolo-bench" in out.stderr and "not in this installation" in out.stderr
