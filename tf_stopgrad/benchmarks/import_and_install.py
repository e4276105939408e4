"""How fast the plugin reaches a program: the import, and installing the prebuilt wheel.

* ``import tf_stopgrad`` on top of ``import tensorflow``, in fresh processes: the median of
  a few processes (target: 53 ms).
* With ``--wheel WHEEL``: ``pip install --no-deps`` of that wheel into a fresh venv that sees
  this environment's TensorFlow (target: 10 s), with the compilers of PATH hidden.

The wheel's build time and the source install are measured by ``.ci/run`` (its summary).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

from tf_stopgrad.benchmarks.report import Row

_PURELIB = "import sysconfig; print(sysconfig.get_path('purelib'))"
_IMPORT_TIMING = (
    "import time, tensorflow; start = time.perf_counter(); import tf_stopgrad; "
    "print((time.perf_counter() - start) * 1000)"
)


def import_overhead_ms(processes: int) -> float:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    command = [sys.executable, "-c", _IMPORT_TIMING]
    samples = [
        subprocess.run(
            command, env=env, cwd=tempfile.gettempdir(), capture_output=True, text=True, check=True
        ).stdout.split()[-1]  # fmt: skip
        for _ in range(processes)
    ]
    return statistics.median(float(sample) for sample in samples)


def wheel_install_s(wheel: Path) -> float:
    with tempfile.TemporaryDirectory() as scratch:
        venv = Path(scratch) / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        python = venv / "bin" / "python"
        site = subprocess.run([str(python), "-c", _PURELIB], capture_output=True, text=True,
                              check=True).stdout.strip()  # fmt: skip
        (Path(site) / "outer.pth").write_text(sysconfig.get_path("purelib") + "\n")
        no_compilers = Path(scratch) / "bin"
        no_compilers.mkdir()
        for tool in ("cc", "c++", "gcc", "g++", "clang++", "cmake"):
            (no_compilers / tool).write_text("#!/bin/sh\nexit 1\n")
            (no_compilers / tool).chmod(0o755)
        env = dict(os.environ, PATH=f"{no_compilers}{os.pathsep}{os.environ['PATH']}",
                   PIP_DISABLE_PIP_VERSION_CHECK="1")  # fmt: skip
        start = time.perf_counter()
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
                        str(wheel)], env=env, check=True)  # fmt: skip
        return time.perf_counter() - start


def import_row(quick: bool) -> Row:
    processes = 2 if quick else 15
    case = f"`import tf_stopgrad` after `import tensorflow` (median of {processes} processes)"
    return Row(case, import_overhead_ms(processes), "ms", target=53.0)


def wheel_install_row(wheel: Path) -> Row:
    case = f"`pip install` of the wheel {wheel.name}, TensorFlow present, no compiler"
    return Row(case, wheel_install_s(wheel), "s", target=10.0)
