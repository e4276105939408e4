"""The build: configure-time checks, and rebuilding after TensorFlow changes in place."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import tensorflow as tf

REPO_ROOT = Path(__file__).resolve().parent.parent
CONFIGURE_TIMEOUT_S = 180

needs_cmake = pytest.mark.skipif(shutil.which("cmake") is None, reason="needs cmake on PATH")


def fake_tensorflow_config(tmp_path: Path, version: str, extra_include_dir: Path) -> Path:
    """A stand-in for build_backend/tensorflow_config.py: the installed TensorFlow's real
    flags, but with ``version`` and ``extra_include_dir`` searched before its headers."""
    include_dirs = [str(extra_include_dir)] + [
        flag[2:] for flag in tf.sysconfig.get_compile_flags() if flag.startswith("-I")
    ]
    options = [flag for flag in tf.sysconfig.get_compile_flags() if not flag.startswith("-I")]
    script = tmp_path / "fake_tensorflow_config.py"
    script.write_text(
        textwrap.dedent(f"""\
            print('set(TF_VERSION "{version}")')
            print('set(TF_INCLUDE_DIRS "{";".join(include_dirs)}")')
            print('set(TF_COMPILE_OPTIONS "{";".join(options)}")')
        """)
    )
    return script


def configure(tmp_path: Path, tensorflow_config: Path) -> subprocess.CompletedProcess:
    """Runs CMake's configure step on the repository with ``tensorflow_config`` as its
    source of TensorFlow's flags."""
    return subprocess.run(
        [
            "cmake", "-S", str(REPO_ROOT), "-B", str(tmp_path / "build"),
            f"-DTF_STOPGRAD_PYTHON={sys.executable};{tensorflow_config}",
            "-DSKBUILD_PROJECT_VERSION=0.0.0",
        ],
        capture_output=True, text=True, timeout=CONFIGURE_TIMEOUT_S,
    )  # fmt: skip


@needs_cmake
def test_unusable_tensorflow_headers_stop_the_configure_step_with_the_remedy(tmp_path):
    # Like TensorFlow 2.19's wheels: a header the plugin needs includes one that is not shipped.
    broken = tmp_path / "include" / "tensorflow" / "core" / "framework"
    broken.mkdir(parents=True)
    (broken / "op.h").write_text('#include "llvm/ADT/ArrayRef.h"\n')
    script = fake_tensorflow_config(tmp_path, "2.99.0", tmp_path / "include")

    configured = configure(tmp_path, script)

    assert configured.returncode != 0
    message = " ".join(configured.stderr.split())  # CMake wraps long messages
    assert "TensorFlow 2.99.0's C++ headers cannot be compiled" in message
    assert "llvm/ADT/ArrayRef.h" in message
    assert "install a TensorFlow release whose headers are complete" in message
    assert "pip install --upgrade" in message
    assert not (tmp_path / "build" / "Makefile").exists(), "nothing may be generated to build"


@needs_cmake
def test_the_installed_tensorflow_passes_the_header_check(tmp_path):
    script = fake_tensorflow_config(tmp_path, tf.__version__, tmp_path / "no_extra_headers")

    configured = configure(tmp_path, script)

    assert f"TensorFlow {tf.__version__}'s headers: the" in configured.stdout, configured.stderr
    assert "cannot be compiled" not in configured.stderr

