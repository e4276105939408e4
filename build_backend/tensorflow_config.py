"""Describes a TensorFlow release for CMake, as JSON: its version, compile options, include
directories and the two libraries an op library links.

Run as a script by an interpreter that imports TensorFlow, it prints a one-element JSON list
describing that TensorFlow as ``tf.sysconfig`` reports it. ``describe_unpacked`` gives the
same description from a release's files, without importing it: unpacked from its wheel,
which cannot be imported, or installed (the build backend's case: an import takes seconds);
tests/test_build.py checks that both agree on the installed TensorFlow.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

FRAMEWORK_LIBRARY = "libtensorflow_framework.so.2"
# The XLA and C++ client API symbols live here, not in the framework library.
CC_LIBRARY = "libtensorflow_cc.so.2"

# What tf.sysconfig.get_compile_flags() gives on every supported Linux wheel besides
# -I and the ABI flag. Its source, pywrap_tf_session, cannot be imported from an unpacked wheel.
WHEEL_LANGUAGE_FLAGS = ["--std=c++17", "-DEIGEN_MAX_ALIGN_BYTES=64"]


def describe_installed() -> dict:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    compile_flags = tf.sysconfig.get_compile_flags()
    link_dirs = [flag[2:] for flag in tf.sysconfig.get_link_flags() if flag.startswith("-L")]
    return {
        "version": tf.__version__,
        "include_dirs": [flag[2:] for flag in compile_flags if flag.startswith("-I")],
        "compile_options": [flag for flag in compile_flags if not flag.startswith("-I")],
        "libraries": [
            os.path.join(link_dirs[0], FRAMEWORK_LIBRARY),
            os.path.join(tf.sysconfig.get_lib(), CC_LIBRARY),
        ],
    }


def describe_unpacked(package_dir: Path, version: str) -> dict:
    """``package_dir`` holds a release's ``include/`` and its two libraries: an unpacked wheel's
    files, or an installed ``tensorflow`` package."""
    framework = package_dir / FRAMEWORK_LIBRARY
    return {
        "version": version,
        "include_dirs": [str(package_dir / "include")],
        "compile_options": [f"-D_GLIBCXX_USE_CXX11_ABI={cxx11_abi_of(framework)}"]
        + WHEEL_LANGUAGE_FLAGS,
        "libraries": [str(framework), str(package_dir / CC_LIBRARY)],
    }


def cxx11_abi_of(library: Path) -> int:
    """1 if ``library`` was compiled with libstdc++'s C++11 ABI: its std::string symbols are
    then mangled inside ``std::__cxx11``."""
    with open(library, "rb") as file:
        return int(b"St7__cxx11" in file.read())


if __name__ == "__main__":
    print(json.dumps([describe_installed()], indent=1))
