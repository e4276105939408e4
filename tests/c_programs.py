"""Builds C programs against TensorFlow's C API (``tensorflow/c/c_api.h``), as the Java, Go,
Rust and C# bindings use it.

The programs link TensorFlow's own libraries only, never the plugin's op library: whatever
they know of tf_stopgrad they must get at run time (``TF_LoadLibrary``) or not at all.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import tensorflow as tf

C_SOURCES = Path(__file__).resolve().parent / "c"
COMPILE_TIMEOUT_S = 120

needs_gcc = pytest.mark.needs("gcc")


def build_c_program(name: str, output_dir: Path) -> Path:
    """Compiles ``tests/c/<name>.c`` with gcc into ``output_dir``; returns the executable.

    The wheel's ``libtensorflow_cc.so.2`` exports the C API; ``libtensorflow_framework.so.2``
    is its dependency.
    """
    tf_lib = tf.sysconfig.get_lib()
    executable = output_dir / name
    command = [
        "gcc", "-std=c11", "-Wall", "-Wextra", "-Werror",
        "-isystem", tf.sysconfig.get_include(),
        str(C_SOURCES / f"{name}.c"), "-o", str(executable),
        os.path.join(tf_lib, "libtensorflow_cc.so.2"),
        os.path.join(tf_lib, "libtensorflow_framework.so.2"),
        f"-Wl,-rpath,{tf_lib}",
    ]  # fmt: skip
    compiled = subprocess.run(command, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S)
    assert compiled.returncode == 0, f"{' '.join(command)}\n{compiled.stderr[-5000:]}"
    return executable


def run_c_program(executable: Path, *args: str, timeout: float = 120) -> dict[str, str]:
    """Runs a program built by :func:`build_c_program`; returns its ``label: value`` lines.

    The program must exit 0; its output and error output are in the assertion otherwise.
    """
    ran = subprocess.run(
        [str(executable), *args],
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
        capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
    assert ran.returncode == 0, f"exit {ran.returncode}\n{ran.stdout}\n{ran.stderr[-5000:]}"
    return dict(line.split(": ", 1) for line in ran.stdout.splitlines() if ": " in line)
