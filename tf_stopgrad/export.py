"""Export models that use the plugin to TensorFlow's built-in ops, so they run without it.

The plugin's ops have exactly the built-in ops' interfaces (input, output, ``T`` and ``message``),
so a graph can be rewritten to ``StopGradient`` / ``PreventGradient`` without loss: forward values
are identical, a stop still gives no gradient, and a prevent still refuses one with its message. The
result runs where the plugin is not installed; the tests check ``tf.saved_model.load`` in a process
that cannot import ``tf_stopgrad``, TensorFlow's C API loader, ``saved_model_cli``, and conversion
by TFLite and (with ``inference=True``) tf2onnx, run by onnxruntime.

ONNX and TF.js converters reject even the built-in ``PreventGradient``; for them
``inference=True`` writes ``Identity`` for both ops instead.

* :func:`to_builtin_saved_model` rewrites a SavedModel directory into a new one.
* :func:`to_builtin_graph_def` rewrites a ``GraphDef``, its function library included.
* :func:`builtin_ops` makes tracing emit the built-in ops directly, for converters that trace
  Keras models and ``tf.function``s themselves.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Union

import tensorflow as tf
from google.protobuf import message as _protobuf_message
from google.protobuf import text_format
from tensorflow.core.framework import graph_pb2, node_def_pb2, op_def_pb2
from tensorflow.core.protobuf import saved_model_pb2

from . import _compat, _staging, ops

PathLike = Union[str, "os.PathLike[str]"]

SAVED_MODEL_FILE = "saved_model.pb"
SAVED_MODEL_TEXT_FILE = "saved_model.pbtxt"
FINGERPRINT_FILE = "fingerprint.pb"
WRITTEN_ANEW = (SAVED_MODEL_FILE, SAVED_MODEL_TEXT_FILE, FINGERPRINT_FILE)  # not copied
# A test hook (tests/test_export_safety.py): the export waits, staged but not yet renamed,
# while the file this names exists.
_PAUSE_WHILE_ENV = "_TF_STOPGRAD_EXPORT_PAUSE_WHILE"


def to_builtin_graph_def(
    graph_def: graph_pb2.GraphDef, *, inference: bool = False
) -> graph_pb2.GraphDef:
    """Returns a copy of ``graph_def`` with the plugin's ops replaced by the built-in ones.

    Every node of the graph and of every function in its library is rewritten;
    ``graph_def`` itself is left untouched.

    Args:
      graph_def: A ``tf.compat.v1.GraphDef``.
      inference: Write ``Identity`` for both ops instead of ``StopGradient`` and
        ``PreventGradient``. The forward values are the same, but gradients are then no
        longer refused or masked: use it only for runtimes that never differentiate and
        lack ``PreventGradient`` (ONNX, TF.js).

    Returns:
      The rewritten ``GraphDef``. :func:`count_plugin_nodes` on the input tells how many
      nodes it changed. Serialize it with ``SerializeToString(deterministic=True)`` to get
      the same bytes in every process, as :func:`to_builtin_saved_model` does.
    """
    rewritten = graph_pb2.GraphDef()
    rewritten.CopyFrom(graph_def)
    _rewrite_graph(rewritten, inference)
    return rewritten


def count_plugin_nodes(graph_def: graph_pb2.GraphDef) -> int:
    """How many nodes of ``graph_def`` and its function library use the plugin's ops."""
    return sum(node.op in ops.BUILTIN_OP_TYPES for node in _all_nodes(graph_def))


def to_builtin_saved_model(src_dir: PathLike, dst_dir: PathLike, *, inference: bool = False) -> int:
    """Writes a copy of the SavedModel ``src_dir`` at ``dst_dir`` that uses the built-in ops.

    The main graph and every library function of every MetaGraph are rewritten as by
    :func:`to_builtin_graph_def`, and ``stripped_op_list`` then names every op they use.
    Variables, assets and everything else in the directory are copied, and the fingerprint
    (``fingerprint.pb``) is computed anew by TensorFlow for the rewritten model.

    The source may be binary (``saved_model.pb``) or text (``saved_model.pbtxt``, as
    ``Builder.save(as_text=True)`` writes); the copy is always binary ``saved_model.pb``,
    serialized deterministically: the same source and options give the same bytes in any
    process. (``fingerprint.pb`` holds a random ``uuid`` by TensorFlow's design.)

    ``src_dir`` is only read. Every problem with the destination is found before anything
    is written. The copy is assembled in a hidden directory beside ``dst_dir`` (named
    ``.<name>.tf_stopgrad-export-XXXXXXXX``), locked while its export runs, and renamed to
    ``dst_dir`` at the end, so the new directory appears whole or not at all. If an export
    is killed, that hidden directory stays; the next export to the same ``dst_dir`` removes
    it once no live process holds its lock.

    Args:
      src_dir: A SavedModel directory, as written by ``tf.saved_model.save``,
        ``model.export`` or ``tf.compat.v1.saved_model.Builder``.
      dst_dir: Where to write; it must not exist, or be an empty directory. A symbolic link
        is refused, even to an empty directory: pass the directory it points to.
      inference: As for :func:`to_builtin_graph_def`.

    Returns:
      The number of nodes rewritten.

    Raises:
      FileNotFoundError: ``src_dir`` is not a SavedModel directory, or holds a broken
        symbolic link.
      FileExistsError: ``dst_dir`` exists and is not an empty directory, or is a symbolic
        link.
      NotADirectoryError: a parent of ``dst_dir`` is a file.
      PermissionError: ``dst_dir`` cannot be created there, or a source file cannot be read.
      ValueError: ``dst_dir`` is ``src_dir`` or inside it, the SavedModel file is not a
        readable SavedModel, or the source holds something other than files and directories.
      OSError: writing failed (a full disk, say); nothing is left at ``dst_dir``.
    """
    src, dst = Path(src_dir), Path(dst_dir)
    saved_model_path = _saved_model_path(src)
    _check_destination(src, dst)
    directories, files = _source_entries(src)
    saved_model = _read_saved_model(saved_model_path)

    rewritten_nodes = 0
    for meta_graph in saved_model.meta_graphs:
        rewritten, used = _rewrite_graph(meta_graph.graph_def, inference)
        rewritten_nodes += rewritten
        stripped = meta_graph.meta_info_def.stripped_op_list
        stripped.CopyFrom(_ops_used(meta_graph.graph_def, used, stripped))

    _write(saved_model, src, dst, directories, files)
    return rewritten_nodes


@contextlib.contextmanager
def builtin_ops() -> Iterator[None]:
    """Within this context, ``tf_stopgrad``'s functions and Keras layers emit the built-in ops.

    For converters that trace models themselves, such as
    ``tf.lite.TFLiteConverter.from_keras_model``, ``tf2onnx.convert.from_keras`` or Keras
    ``model.export``, so that what they trace has no plugin ops::

        with tf_stopgrad.export.builtin_ops():
            tflite_model = tf.lite.TFLiteConverter.from_keras_model(model).convert()

    It works at trace time: functions traced before entering keep the plugin's ops (a
    ``tf.function`` reuses its traces), so trace the concrete functions you convert inside
    the context. Gradients keep their meaning: the built-in ``StopGradient`` gives none and
    ``PreventGradient`` refuses. Contexts nest. The setting is process-wide, not per thread,
    while the context is active: don't trace plugin code in other threads meanwhile.
    """
    previous, ops._builtin_ops_requested = ops._builtin_ops_requested, True
    try:
        yield
    finally:
        ops._builtin_ops_requested = previous


def _all_nodes(graph_def: graph_pb2.GraphDef) -> Iterable[node_def_pb2.NodeDef]:
    yield from graph_def.node
    for function in graph_def.library.function:
        yield from function.node_def


def _rewrite_graph(graph_def: graph_pb2.GraphDef, inference: bool) -> tuple[int, set[str]]:
    """Rewrites the plugin's nodes in place, in one walk; returns how many there were and
    the op types the graph's nodes use afterwards."""
    rewritten, used = 0, set()
    for node in _all_nodes(graph_def):
        builtin = ops.BUILTIN_OP_TYPES.get(node.op)
        if builtin is not None:
            rewritten += 1
            node.op = "Identity" if inference else builtin
            if inference and "message" in node.attr:
                del node.attr["message"]
        used.add(node.op)
    return rewritten, used


def _ops_used(
    graph_def: graph_pb2.GraphDef, used: set[str], source: op_def_pb2.OpList
) -> op_def_pb2.OpList:
    """The OpDefs of the op types ``used`` by the graph's nodes, function calls left out.

    TensorFlow's own list covers only functions the main graph calls, which leaves out the
    functions of a TF2 SavedModel that only its object graph refers to. Ops this process has
    not registered (another plugin's, a newer TensorFlow's) keep the source list's OpDef,
    which loaders need for default attribute values.
    """
    from_source = {op_def.name: op_def for op_def in source.op}
    op_types = sorted(used - {function.signature.name for function in graph_def.library.function})
    op_defs = (_compat.registered_op_def(op) or from_source.get(op) for op in op_types)
    return op_def_pb2.OpList(op=[op_def for op_def in op_defs if op_def is not None])


def _saved_model_path(src: Path) -> Path:
    for name in (SAVED_MODEL_FILE, SAVED_MODEL_TEXT_FILE):  # TensorFlow's loaders' order
        if (src / name).is_file():
            return src / name
    raise FileNotFoundError(
        f"{src} is not a SavedModel directory: it has no {SAVED_MODEL_FILE} (or "
        f"{SAVED_MODEL_TEXT_FILE}). Pass the directory that tf.saved_model.save or "
        f"model.export wrote."
    )


def _read_saved_model(path: Path) -> saved_model_pb2.SavedModel:
    saved_model = saved_model_pb2.SavedModel()
    try:
        if path.name == SAVED_MODEL_TEXT_FILE:
            text_format.Parse(path.read_text(encoding="utf-8"), saved_model)
        else:
            saved_model.ParseFromString(path.read_bytes())
    except (_protobuf_message.DecodeError, text_format.ParseError, UnicodeDecodeError) as error:
        raise ValueError(
            f"{path} is not a readable SavedModel ({error}); the file is damaged. Save the "
            f"model again, then export that copy."
        ) from error
    if not saved_model.meta_graphs:
        raise ValueError(
            f"{path} holds no MetaGraph, so it is not a usable SavedModel. Save the model "
            f"again, then export that copy."
        )
    return saved_model


def _check_destination(src: Path, dst: Path) -> None:
    if dst.is_symlink():
        raise FileExistsError(
            f"The export destination {dst} is a symbolic link (to {os.readlink(dst)}), and the "
            f"export does not write through links. Pass the directory it points to, or a new path."
        )
    src_real, dst_real = src.resolve(), dst.resolve()
    if dst_real == src_real or src_real in dst_real.parents:
        raise ValueError(
            f"The export destination {dst} is the SavedModel {src} or inside it, and the source "
            f"must stay unchanged. Choose a directory outside {src}."
        )
    if dst.exists() and (not dst.is_dir() or any(dst.iterdir())):
        raise FileExistsError(
            f"The export destination {dst} already exists and is not an empty directory. "
            f"Choose a new path, or remove {dst} first."
        )
    existing = dst.parent
    while not os.path.lexists(existing):
        existing = existing.parent
    if not existing.is_dir():
        raise NotADirectoryError(
            f"The export destination {dst} cannot be created: {existing} is not a directory. "
            f"Choose a path whose parents are directories."
        )
    if not os.access(existing, os.W_OK | os.X_OK):
        raise PermissionError(
            f"The export destination {dst} cannot be created: this process may not write in "
            f"{existing} (its permissions, a read-only file system or an immutable flag). "
            f"Choose a directory it can write to."
        )


def _source_entries(src: Path) -> tuple[list[Path], list[Path]]:
    """The directories and files to copy, relative to ``src``, top down; checked before any
    work: all readable, and links and files only to files and directories."""

    def unreadable(error: OSError) -> None:
        raise PermissionError(
            f"{error.filename} in the SavedModel {src} cannot be read ({error.strerror}). Make "
            f"it readable, then export again."
        )

    directories: list[Path] = []
    files: list[Path] = []
    for directory, dirnames, filenames in os.walk(src, onerror=unreadable, followlinks=True):
        relative = Path(directory).relative_to(src)
        directories.extend(relative / name for name in dirnames)
        for name in filenames:
            path = Path(directory) / name
            try:
                mode = path.stat().st_mode
            except FileNotFoundError:
                raise FileNotFoundError(
                    f"{path} in the SavedModel {src} is a broken symbolic link. Restore what it "
                    f"points to, or remove it, then export again."
                ) from None
            if not stat.S_ISREG(mode):
                raise ValueError(
                    f"{path} in the SavedModel {src} is not a regular file (a named pipe, socket "
                    f"or device), so it cannot be copied. Move it out of {src}, then export again."
                )
            if not os.access(path, os.R_OK):
                unreadable(PermissionError(errno.EACCES, "permission denied", str(path)))
            if relative.parts or name not in WRITTEN_ANEW:
                files.append(relative / name)
    return directories, files


def _write(
    saved_model: saved_model_pb2.SavedModel,
    src: Path,
    dst: Path,
    directories: list[Path],
    files: list[Path],
) -> None:
    """Stages the export beside ``dst`` and renames it to ``dst``; every error is reported
    in the export's words, with the paths the user gave."""
    staging, lock = None, None
    try:
        dst.parent.mkdir(parents=True, exist_ok=True)
        staging, lock = _staging.new_staging_directory(dst, "export")
        for relative in directories:
            (staging / relative).mkdir()
        for relative in files:
            shutil.copy2(src / relative, staging / relative)
        for relative in reversed(directories):
            shutil.copystat(src / relative, staging / relative)
        (staging / SAVED_MODEL_FILE).write_bytes(saved_model.SerializeToString(deterministic=True))
        _compat.write_saved_model_fingerprint(str(staging))
        shutil.copystat(src, staging)  # last: a read-only source's mode would stop the writes
        while os.path.exists(os.environ.get(_PAUSE_WHILE_ENV, "")):
            time.sleep(0.05)
        os.rename(staging, dst)  # replaces dst if it is an empty directory
    except (OSError, tf.errors.OpError) as error:
        if isinstance(error, OSError) and error.errno in (errno.EEXIST, errno.ENOTEMPTY):
            raise FileExistsError(
                f"The export destination {dst} was filled by something else while the export "
                f"ran, and is left as it is. Remove it or choose a new path, then export again."
            ) from None
        reason = str(error.strerror if isinstance(error, OSError) else error.message)
        if staging is not None:
            reason = reason.replace(str(staging), str(dst))
        raise (type(error) if isinstance(error, OSError) else OSError)(
            f"Writing the export of {src} to {dst} failed: {reason}. Nothing was written to "
            f"{dst}; fix the cause, then export again."
        ) from None
    finally:
        if staging is not None and staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
        if lock is not None:
            os.close(lock)
