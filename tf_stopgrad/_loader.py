"""Finds the op library, checks it was built for the running TensorFlow, and loads it."""

from __future__ import annotations

import importlib.resources
import os
import types
from typing import Any

import tensorflow as tf

try:
    from . import _build_info
except ImportError as error:  # Running from a source checkout, or a broken install.
    raise ImportError(
        "tf_stopgrad's compiled parts are missing: the package was imported from a source tree "
        "or from an incomplete install. Install it with `pip install .` from the tf_stopgrad "
        "source directory (the tests must run against that install)."
    ) from error


def build_info() -> dict[str, Any]:
    """What the op library was compiled against: versions, C++ ABI, compiler, op names."""
    return {
        "version": _build_info.version,
        "tf_version": _build_info.tf_version,
        "cxx11_abi": int(_build_info.cxx11_abi),
        "compiler": _build_info.compiler,
        "source_dir": _build_info.source_dir,
        "library_name": _build_info.library_name,
        "stop_gradient_op": _build_info.stop_gradient_op,
        "prevent_gradient_op": _build_info.prevent_gradient_op,
    }


def library_path() -> str:
    """The path of the op library, for ``tf.load_op_library`` or for linking C++ programs."""
    return str(importlib.resources.files(__package__) / _build_info.library_name)


def include_dir() -> str:
    """The directory holding ``tf_stopgrad/stop_gradient.h``, for C++ programs."""
    return str(importlib.resources.files(__package__) / "include")


def rebuild_command(info: dict[str, Any]) -> str:
    source = info["source_dir"]
    if not os.path.isdir(source):
        source = "<path to the tf_stopgrad source directory>"
    return f"pip install --force-reinstall --no-deps --no-cache-dir {source}"


def _minor(version: str) -> tuple[str, ...]:
    return tuple(version.split(".")[:2])


def check_compatible(info: dict[str, Any], tf_version: str, tf_cxx11_abi: int) -> None:
    """Raise ImportError unless a library built as ``info`` says can run in this TensorFlow."""
    remedy = f"Rebuild tf_stopgrad against the installed TensorFlow: {rebuild_command(info)}"
    if _minor(info["tf_version"]) != _minor(tf_version):
        raise ImportError(
            f"tf_stopgrad was built against TensorFlow {info['tf_version']}, but TensorFlow "
            f"{tf_version} is installed; custom ops only load in the TensorFlow minor version "
            f"they were compiled for. {remedy}"
        )
    if info["cxx11_abi"] != tf_cxx11_abi:
        raise ImportError(
            f"tf_stopgrad was compiled with _GLIBCXX_USE_CXX11_ABI={info['cxx11_abi']}, but "
            f"TensorFlow {tf_version} uses {tf_cxx11_abi}. {remedy}"
        )


def load_op_library() -> types.ModuleType:
    """Check the build against the running TensorFlow, then load the op library."""
    info = build_info()
    check_compatible(info, tf.__version__, tf.sysconfig.CXX11_ABI_FLAG)
    path = library_path()
    remedy = f"Reinstall tf_stopgrad: {rebuild_command(info)}"
    if not os.path.isfile(path):
        raise ImportError(f"tf_stopgrad's op library is missing: {path} does not exist. {remedy}")
    try:
        return tf.load_op_library(path)
    except (tf.errors.NotFoundError, tf.errors.InvalidArgumentError, OSError) as error:
        raise ImportError(
            f"TensorFlow {tf.__version__} could not load tf_stopgrad's op library {path}: "
            f"{error}. {remedy}"
        ) from error
