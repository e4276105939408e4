"""Shared test setup: run against the installed tf_stopgrad (an editable install included);
check that each test keeps the promises of its markers, skip (or under CI fail) a test whose
tools are missing, and that no file named on the command line is left without a test."""

import contextlib
import os
import platform
import shutil
import sys
import tempfile
import warnings
from pathlib import Path

import pytest

# `python -m pytest` puts the working directory on sys.path, where ./tf_stopgrad would shadow
# a regular install (the source tree has no op library). Without any install, the import
# fails (no module named tf_stopgrad): install the package first.
_checkout = Path(__file__).resolve().parent.parent
sys.path[:] = [p for p in sys.path if Path(p or os.curdir).resolve() != _checkout]
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# Keras imports matplotlib with TensorFlow when it is installed (the examples extra). On Python
# 3.9, pip's matplotlib (3.9) calls names that pyparsing 3.3 deprecates, and warnings are errors:
# ignored here for this import, and by pytest_configure for the tests that plot.
MATPLOTLIB_DEPRECATIONS = "ignore::DeprecationWarning:matplotlib.*"
warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"matplotlib\.")

import tensorflow as tf  # noqa: E402

import tf_stopgrad  # noqa: E402

__all__ = ["tf", "tf_stopgrad"]


# --- what the markers promise (pyproject.toml), checked on every test ----------------------
# A test without `slow` starts no process; one without `compiler` runs no compiler or CMake,
# even in a process it starts. Processes show as audit events; compilers, as their use of
# logging stand-ins put first on PATH while a test without `compiler` runs.

# What libraries start once per machine or process is started before any test: matplotlib's
# font cache runs fc-list, platform.processor() runs uname -p where /proc has no CPU name, and
# numpy 1.26's numpy.testing runs lscpu. (Whatever matplotlib's import says or raises, its own
# tests say again.)
platform.processor()
import numpy.testing  # noqa: E402, F401

with contextlib.suppress(Exception), warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import matplotlib.font_manager  # noqa: F401

_PROCESS_EVENTS = {"subprocess.Popen", "os.posix_spawn", "os.fork", "os.forkpty", "os.system"}
_COMPILERS = ("cc", "c++", "gcc", "g++", "clang", "clang++", "cmake")
_processes_started: list[str] = []
sys.addaudithook(lambda event, _: event in _PROCESS_EVENTS and _processes_started.append(event))
_stand_ins = Path(tempfile.mkdtemp(prefix="tf_stopgrad-compilers-"))
for _name in _COMPILERS:
    _real = shutil.which(_name)
    (_stand_ins / _name).write_text(
        f'#!/bin/sh\necho {_name} >>"{_stand_ins}/used"\n'
        + (f'exec "{_real}" "$@"\n' if _real else f"echo '{_name}: not found' >&2; exit 127\n")
    )
    (_stand_ins / _name).chmod(0o755)


def pytest_configure(config):
    config.addinivalue_line("filterwarnings", MATPLOTLIB_DEPRECATIONS)


def pytest_unconfigure(config):
    shutil.rmtree(_stand_ins, ignore_errors=True)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _processes_started.clear()
    (_stand_ins / "used").unlink(missing_ok=True)
    path = os.environ["PATH"]
    if item.get_closest_marker("compiler") is None:
        os.environ["PATH"] = f"{_stand_ins}{os.pathsep}{path}"
    try:
        yield
    finally:
        os.environ["PATH"] = path


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    report = (yield).get_result()
    if call.when != "call" or not report.passed:
        return
    broken = []
    if _processes_started and item.get_closest_marker("slow") is None:
        broken.append(f"starts a process ({', '.join(sorted(set(_processes_started)))}) but is "
                      "not marked slow")  # fmt: skip
    used = _stand_ins / "used"
    if used.exists() and item.get_closest_marker("compiler") is None:
        tools = sorted(set(used.read_text().split()))
        broken.append(f"runs {', '.join(tools)} but is not marked compiler")
    if broken:
        report.outcome = "failed"
        report.longrepr = f"{item.nodeid} {'; '.join(broken)} (pyproject.toml's markers)"


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """A test marked needs(TOOL, ...) skips where a TOOL is not on PATH, saying which: a
    contributor may lack one. Under CI (CI set, as GitHub sets it) it fails instead: CI's lanes
    install what their tests run, and a skip there would hide the tests it leaves out."""
    tools = {tool for marker in item.iter_markers("needs") for tool in marker.args}
    real_path = os.environ["PATH"].replace(f"{_stand_ins}{os.pathsep}", "")
    missing = sorted(tool for tool in tools if shutil.which(tool, path=real_path) is None)
    if not missing:
        return
    message = f"needs {', '.join(missing)}, not found on PATH"
    if os.environ.get("CI"):
        pytest.fail(f"{message} (CI is set: CI's lanes have every tool their tests run)",
                    pytrace=False)  # fmt: skip
    item.add_marker(pytest.mark.skip(reason=message))  # which pytest's skipping then reads


def pytest_collection_finish(session):
    """A test file named on the command line of which the selection (-m, -k) keeps no test is
    an error, not a pass: CI's lanes name files."""
    named = {Path(arg.split("::")[0]).resolve() for arg in session.config.args
             if arg.split("::")[0].endswith(".py")}  # fmt: skip
    kept = {Path(item.path).resolve() for item in session.items}
    if named - kept:
        empty = ", ".join(sorted(os.path.relpath(path) for path in named - kept))
        pytest.exit(f"the selection keeps no test of {empty}", pytest.ExitCode.USAGE_ERROR)
