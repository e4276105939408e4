"""What tf_stopgrad's CMake package needs from Python.

``python -m tf_stopgrad --cmake-dir`` prints ``cmake_dir()``, the directory holding
``tf_stopgradConfig.cmake``, which a C++ project passes to ``find_package(tf_stopgrad CONFIG)``
as ``tf_stopgrad_DIR``. That config runs this module with the Python it found; the JSON it
prints describes the imported targets: ``tf_stopgrad::tf_stopgrad``, the op library for the
TensorFlow this Python imports and the header directory, and ``tf_stopgrad::tensorflow``,
TensorFlow's own compile and link flags as ``tf.sysconfig`` gives them. Each list is a CMake
list (``;``-separated).
"""

from __future__ import annotations

import importlib.resources
import json
import os
from collections.abc import Iterable

import tensorflow as tf

import tf_stopgrad

# TensorFlow's C++ client API (tensorflow/cc), which tf.sysconfig.get_link_flags() leaves out.
CC_LIBRARY = "libtensorflow_cc.so.2"


def cmake_dir() -> str:
    """The directory holding ``tf_stopgradConfig.cmake`` and its version file."""
    return str(importlib.resources.files(__package__) / "share" / "cmake" / "tf_stopgrad")


def cmake_list(items: Iterable[str]) -> str:
    return ";".join(item.replace(";", "\\;") for item in items)


def target_description() -> dict[str, str]:
    library = tf_stopgrad.library_path()
    tf_lib = tf.sysconfig.get_lib()
    compile_flags = tf.sysconfig.get_compile_flags()
    link_flags = tf.sysconfig.get_link_flags()
    runtime_dirs = [
        os.path.dirname(library),
        *(flag[2:] for flag in link_flags if flag.startswith("-L")),
        tf_lib,
    ]
    return {
        "cmake_dir": cmake_dir(),
        "version": tf_stopgrad.__version__,
        "tensorflow_version": tf.__version__,
        "library": library,
        "include_dir": tf_stopgrad.include_dir(),
        "include_dirs": cmake_list(flag[2:] for flag in compile_flags if flag[:2] == "-I"),
        "compile_options": cmake_list(flag for flag in compile_flags if flag[:2] != "-I"),
        "link_libraries": cmake_list([os.path.join(tf_lib, CC_LIBRARY), *link_flags]),
        "runtime_dirs": cmake_list(dict.fromkeys(runtime_dirs)),
    }


if __name__ == "__main__":
    print(json.dumps(target_description()))
