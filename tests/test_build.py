"""The build: configure-time checks, and rebuilding after TensorFlow changes in place."""

from __future__ import annotations

import json
import os
import re
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


@pytest.mark.core
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


@pytest.mark.core
@needs_cmake
def test_the_installed_tensorflow_passes_the_header_check(tmp_path):
    script = fake_tensorflow_config(tmp_path, tf.__version__, tmp_path / "no_extra_headers")

    configured = configure(tmp_path, script)

    assert f"TensorFlow {tf.__version__}'s headers: the" in configured.stdout, configured.stderr
    assert "cannot be compiled" not in configured.stderr


NEWEST_SUPPORTED_MINOR = 21
REBUILD_TIMEOUT_S = 900
INPUT = [1.0, -2.0, 3.5]
USE_AFTER_REBUILD = f"""
import json, tensorflow as tf, tf_stopgrad
x = tf.constant({INPUT})
with tf.GradientTape() as tape:
    tape.watch(x)
    y = tf.reduce_sum(tf_stopgrad.stop_gradient(x * x) * x)
print(json.dumps({{
    "tensorflow": tf.__version__,
    "built_against": tf_stopgrad.build_info()["tf_version"],
    "forward": tf_stopgrad.stop_gradient(x).numpy().tolist(),
    "gradient": tape.gradient(y, x).numpy().tolist(),
}}))
"""


def other_tensorflow_minor() -> str:
    """The next TensorFlow minor release we support, or the previous one for the newest."""
    major, minor = (int(part) for part in tf.__version__.split(".")[:2])
    other = minor + 1 if minor < NEWEST_SUPPORTED_MINOR else minor - 1
    return f"{major}.{other}"


def layered_venv(path: Path) -> Path:
    """A virtual environment that sees this one's packages (tf_stopgrad built for the running
    TensorFlow included) behind its own, like this environment after more installs. Returns
    its interpreter."""
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, timeout=120)
    python = path / "bin" / "python"
    own_site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    (Path(own_site) / "outer_environment.pth").write_text(
        "\n".join(p for p in sys.path if p.endswith("site-packages")) + "\n"
    )
    return python


@pytest.mark.rebuild
def test_changing_tensorflow_in_place_asks_for_the_rebuild_that_then_works(tmp_path):
    other_minor = other_tensorflow_minor()
    venv = tmp_path / "venv"
    python = layered_venv(venv)
    env = dict(os.environ, PATH=f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}",
               TF_CPP_MIN_LOG_LEVEL="2", PIP_DISABLE_PIP_VERSION_CHECK="1")  # fmt: skip
    env.pop("PYTHONPATH", None)

    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", f"tensorflow=={other_minor}.*"],
        env=env, check=True, timeout=REBUILD_TIMEOUT_S,
    )  # fmt: skip
    refused = subprocess.run(
        [str(python), "-c", "import tf_stopgrad"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip

    assert refused.returncode != 0
    last_line = refused.stderr.strip().splitlines()[-1]
    assert last_line.startswith("ImportError: tf_stopgrad was built against TensorFlow "
                                f"{tf.__version__}, but TensorFlow {other_minor}.")  # fmt: skip
    command = re.search(r"Rebuild tf_stopgrad against the installed TensorFlow: (.+)$", last_line)
    assert command, last_line

    subprocess.run(command.group(1), shell=True, env=env, cwd=tmp_path, check=True,
                   capture_output=True, timeout=REBUILD_TIMEOUT_S)  # fmt: skip
    used = subprocess.run(
        [str(python), "-c", USE_AFTER_REBUILD],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip

    assert used.returncode == 0, used.stderr[-3000:]
    result = json.loads(used.stdout.strip().splitlines()[-1])
    assert result["tensorflow"].startswith(f"{other_minor}.")
    assert result["built_against"] == result["tensorflow"]
    assert result["forward"] == INPUT
    x = tf.constant(INPUT)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = tf.reduce_sum(tf.stop_gradient(x * x) * x)
    assert result["gradient"] == tape.gradient(y, x).numpy().tolist()
