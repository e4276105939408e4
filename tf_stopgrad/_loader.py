"""Picks the op library built for the running TensorFlow, checks it, and loads it.

``_build_record.json``, written by the build, lists every op library in the package, one
per TensorFlow minor release, with what each was compiled against. A library is loaded only
into the minor release it was built for; any other TensorFlow gets an ImportError with the
command that builds one for it.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.resources
import json
import os
import struct
import types
from typing import Any
from urllib.parse import unquote, urlparse

import tensorflow as tf

BUILD_RECORD = "_build_record.json"
# The op types the op library registers (cc/op_names.h), and the built-in op each stands for.
STOP_GRADIENT_OP = "TfStopgrad>StopGradient"
PREVENT_GRADIENT_OP = "TfStopgrad>PreventGradient"
BUILTIN_OP_TYPES = {STOP_GRADIENT_OP: "StopGradient", PREVENT_GRADIENT_OP: "PreventGradient"}


@functools.cache
def build_record() -> dict[str, Any]:
    """The whole build record: the package's facts, and ``libraries`` by TensorFlow minor."""
    try:
        text = (importlib.resources.files(__package__) / BUILD_RECORD).read_text()
    except FileNotFoundError as error:  # A source tree, or a broken install.
        raise ImportError(
            "tf_stopgrad's compiled parts are missing: the package was imported from a source "
            "tree or from an incomplete install. Install it: pip install . (from the "
            "tf_stopgrad source directory), or pip install tf_stopgrad-*.whl."
        ) from error
    return json.loads(text)


def build_info() -> dict[str, Any]:
    """What the op library loaded for the running TensorFlow was compiled against: versions,
    C++ ABI, compiler, op names, and the TensorFlow releases the package has libraries for."""
    record = build_record()
    library = _library_for(tf.__version__)
    return {
        "version": record["version"],
        "tf_version": library["tf_version"],
        "cxx11_abi": library["cxx11_abi"],
        "compiler": record["compiler"],
        "library_name": library["file"],
        "tf_versions": [entry["tf_version"] for entry in _libraries_by_minor().values()],
        # The supported range this version is tested with (X.A-X.B); "" from a bare CMake build.
        "tested_tf_versions": record.get("tested", ""),
        "stop_gradient_op": STOP_GRADIENT_OP,
        "prevent_gradient_op": PREVENT_GRADIENT_OP,
        "builtin_op_types": dict(BUILTIN_OP_TYPES),
    }


def library_path() -> str:
    """The path of the op library for the running TensorFlow, for ``tf.load_op_library`` or
    for linking C++ programs."""
    return str(importlib.resources.files(__package__) / _library_for(tf.__version__)["file"])


def include_dir() -> str:
    """The directory holding ``tf_stopgrad/stop_gradient.h``, for C++ programs."""
    return str(importlib.resources.files(__package__) / "include")


def _libraries_by_minor() -> dict[str, dict[str, Any]]:
    libraries = build_record()["libraries"]
    return dict(sorted(libraries.items(), key=lambda item: tuple(map(int, item[0].split(".")))))


def covered_releases() -> str:
    """The TensorFlow releases this install has op libraries for: the release (``2.18.1``) of
    a source build; else the minors, runs of them joined (``2.15-2.16, 2.18``)."""
    libraries = _libraries_by_minor()
    if len(libraries) == 1:
        return next(iter(libraries.values()))["tf_version"]
    runs: list[list[tuple[int, int]]] = []
    for major, minor in (tuple(map(int, key.split("."))) for key in libraries):
        if runs and runs[-1][-1] == (major, minor - 1):
            runs[-1].append((major, minor))
        else:
            runs.append([(major, minor)])
    return ", ".join(
        "{}.{}".format(*run[0]) + ("-{}.{}".format(*run[-1]) if len(run) > 1 else "")
        for run in runs
    )


def _library_for(tf_version: str) -> dict[str, Any]:
    library = build_record()["libraries"].get(".".join(tf_version.split(".")[:2]))
    if library is None:
        raise ImportError(
            f"tf_stopgrad has op libraries for TensorFlow {covered_releases()}, but TensorFlow "
            f"{tf_version} is installed; a custom op loads only into the TensorFlow minor "
            f"release it was compiled for. Build tf_stopgrad for this TensorFlow: "
            f"{build_command()}"
        )
    return library


def build_command() -> str:
    """The command that builds and installs tf_stopgrad from source for the installed
    TensorFlow, from the source directory or sdist pip installed it from if that still exists."""
    command = "pip install --force-reinstall --no-deps --no-cache-dir"
    installed_from = _installed_from()
    if installed_from is not None:
        return f"{command} {installed_from}"
    return (
        f"{command} --no-binary tf_stopgrad tf_stopgrad (with the --index-url or --find-links "
        "that has tf_stopgrad's sdist), or the same command with a source checkout's path "
        "in place of the last word"
    )


def _installed_from() -> str | None:
    """The local source directory or sdist pip installed the package from (PEP 610), if it
    still exists, with -e if it was an editable install; not a wheel, which would bring back the
    same libraries."""
    try:
        direct_url = importlib.metadata.distribution("tf_stopgrad").read_text("direct_url.json")
    except importlib.metadata.PackageNotFoundError:
        return None
    found = json.loads(direct_url or "{}")
    url, editable = urlparse(found.get("url", "")), found.get("dir_info", {}).get("editable")
    path = unquote(url.path)
    if url.scheme != "file" or path.endswith(".whl") or not os.path.exists(path):
        return None
    return f"-e {path}" if editable else path


def check_compatible(library: dict[str, Any], tf_version: str, tf_cxx11_abi: int) -> None:
    """Raise ImportError unless ``library`` (a build record entry) uses TensorFlow's C++ ABI."""
    if library["cxx11_abi"] != tf_cxx11_abi:
        raise ImportError(
            f"tf_stopgrad was compiled with _GLIBCXX_USE_CXX11_ABI={library['cxx11_abi']}, but "
            f"TensorFlow {tf_version} uses {tf_cxx11_abi}. Build tf_stopgrad for it: "
            f"{build_command()}"
        )


def load_op_library() -> types.ModuleType:
    """Pick the op library for the running TensorFlow, check it, then load it."""
    library = _library_for(tf.__version__)
    check_compatible(library, tf.__version__, tf.sysconfig.CXX11_ABI_FLAG)
    path = library_path()
    remedy = f"Reinstall tf_stopgrad: {build_command()}"
    if not os.path.isfile(path):
        raise ImportError(f"tf_stopgrad's op library is missing: {path} does not exist. {remedy}")
    if truncation := _truncation(path):
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
            f"{path} loaded, but it does not define the ops {STOP_GRADIENT_OP} and "
            f"{PREVENT_GRADIENT_OP}: it is not tf_stopgrad's op library. {remedy}"
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
