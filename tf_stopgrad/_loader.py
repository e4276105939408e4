"""Finds the op library, checks it was built for the running TensorFlow, and loads it."""

from __future__ import annotations

import importlib.resources
import os
import struct
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
    truncation = _truncation(path)
    if truncation:
        raise ImportError(f"tf_stopgrad's op library {path} is damaged: {truncation}. {remedy}")
    try:
        module = tf.load_op_library(path)
    except (tf.errors.NotFoundError, tf.errors.InvalidArgumentError, OSError) as error:
        raise ImportError(
            f"TensorFlow {tf.__version__} could not load tf_stopgrad's op library {path}: "
            f"{error}. {remedy}"
        ) from error
    if not all(hasattr(module, name) for name in _OP_WRAPPERS):
        raise ImportError(
            f"{path} loaded, but it does not define the ops {info['stop_gradient_op']} and "
            f"{info['prevent_gradient_op']}: it is not tf_stopgrad's op library. {remedy}"
        )
    return module


# The Python wrappers tf.load_op_library generates for the two ops (ops.py calls them).
_OP_WRAPPERS = ("tf_stopgrad_stop_gradient", "tf_stopgrad_prevent_gradient")


def _truncation(path: str) -> str | None:
    """Why the ELF file at ``path`` is shorter than its own headers say, or None.

    dlopen maps a truncated library without complaint, then dies of SIGBUS touching the
    missing pages, so TensorFlow must not be handed one. Files that are not ELF at all are
    left to dlopen, which rejects them with an error.
    """
    with open(path, "rb") as file:
        size = os.fstat(file.fileno()).st_size
        ident = file.read(16)
        if len(ident) < 16 or ident[:4] != b"\x7fELF" or not {ident[4], ident[5]} <= {1, 2}:
            return None
        is_64_bit, order = ident[4] == 2, "<" if ident[5] == 1 else ">"
        header_format = order + ("HHIQQQIHHHHHH" if is_64_bit else "HHIIIIIHHHHHH")
        header = file.read(struct.calcsize(header_format))
        if len(header) < struct.calcsize(header_format):
            return f"the file ends inside its ELF header, after {size} bytes"
        _, _, _, _, phoff, shoff, _, _, phentsize, phnum, shentsize, shnum, _ = struct.unpack(
            header_format, header
        )
        ends = {
            "the section header table": shoff + shnum * shentsize,
            "the program header table": phoff + phnum * phentsize,
        }
        segment_format = order + ("IIQQQQQQ" if is_64_bit else "IIIIIIII")
        if phoff + phnum * phentsize <= size and phentsize >= struct.calcsize(segment_format):
            for index in range(phnum):
                file.seek(phoff + index * phentsize)
                fields = struct.unpack(segment_format, file.read(struct.calcsize(segment_format)))
                offset, file_size = (fields[2], fields[5]) if is_64_bit else (fields[1], fields[4])
                ends[f"segment {index}"] = offset + file_size
    beyond = [f"{part} ends at byte {end}" for part, end in ends.items() if end > size]
    return f"it is truncated: {beyond[0]}, but the file has {size} bytes" if beyond else None
