"""Export models that use the plugin to TensorFlow's built-in ops, so they run without it.

The plugin's ops have exactly the built-in ops' interfaces (input, output, ``T`` and
``message``), so a graph can be rewritten to ``StopGradient`` / ``PreventGradient`` without
loss: forward values are identical, a stop still gives no gradient, and a prevent still
refuses one with its message. The result loads in any TensorFlow runtime: a process without
``import tf_stopgrad``, TF Serving and the C API under the Java and Go bindings,
``saved_model_cli``, TFLite.

ONNX and TF.js converters reject even the built-in ``PreventGradient``; for them
``inference=True`` writes ``Identity`` for both ops instead.

* :func:`to_builtin_saved_model` rewrites a SavedModel directory into a new one.
* :func:`to_builtin_graph_def` rewrites a ``GraphDef``, its function library included.
* :func:`builtin_ops` makes tracing emit the built-in ops directly, for converters that trace
  Keras models and ``tf.function``s themselves.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Union

from google.protobuf import message as _protobuf_message
from tensorflow.core.framework import graph_pb2, node_def_pb2, op_def_pb2
from tensorflow.core.protobuf import saved_model_pb2

from . import _compat, ops

PathLike = Union[str, "os.PathLike[str]"]

SAVED_MODEL_FILE = "saved_model.pb"
FINGERPRINT_FILE = "fingerprint.pb"
BUILTIN_OP_TYPES = {
    ops.STOP_GRADIENT_OP: "StopGradient",
    ops.PREVENT_GRADIENT_OP: "PreventGradient",
}


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
      nodes it changed.
    """
    rewritten = graph_pb2.GraphDef()
    rewritten.CopyFrom(graph_def)
    _rewrite_nodes(_all_nodes(rewritten), inference)
    return rewritten


def count_plugin_nodes(graph_def: graph_pb2.GraphDef) -> int:
    """How many nodes of ``graph_def`` and its function library use the plugin's ops."""
    return sum(node.op in BUILTIN_OP_TYPES for node in _all_nodes(graph_def))


def to_builtin_saved_model(src_dir: PathLike, dst_dir: PathLike, *, inference: bool = False) -> int:
    """Writes a copy of the SavedModel ``src_dir`` at ``dst_dir`` that uses the built-in ops.

    The main graph and every library function of every MetaGraph are rewritten as by
    :func:`to_builtin_graph_def`; ``stripped_op_list`` then names every op the model uses,
    in the main graph and in all its functions. Variables, assets and everything else in
    the directory are copied, and the fingerprint (``fingerprint.pb``) is computed anew by
    TensorFlow for the rewritten model.
    ``src_dir`` is only read. The new directory appears whole or not at all.

    Args:
      src_dir: A SavedModel directory, as written by ``tf.saved_model.save``,
        ``model.export`` or ``tf.compat.v1.saved_model.Builder``.
      dst_dir: Where to write; it must not exist, or be an empty directory.
      inference: Write ``Identity`` for both ops. Gradients are then no longer masked or
        refused, so use it only for runtimes that never differentiate (ONNX, TF.js).

    Returns:
      The number of nodes rewritten.

    Raises:
      FileNotFoundError: ``src_dir`` is not a SavedModel directory.
      FileExistsError: ``dst_dir`` exists and is not an empty directory.
      ValueError: ``dst_dir`` is ``src_dir`` or inside it, or ``saved_model.pb`` is not a
        readable SavedModel.
    """
    src, dst = Path(src_dir), Path(dst_dir)
    saved_model = _read_saved_model(src)
    _check_destination(src, dst)

    rewritten_nodes = 0
    for meta_graph in saved_model.meta_graphs:
        rewritten_nodes += count_plugin_nodes(meta_graph.graph_def)
        _rewrite_nodes(_all_nodes(meta_graph.graph_def), inference)
        stripped = meta_graph.meta_info_def.stripped_op_list
        stripped.CopyFrom(_ops_used(meta_graph.graph_def, stripped))

    dst.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{dst.name}.", dir=dst.parent))
    try:
        shutil.copytree(src, staging, dirs_exist_ok=True, ignore=_files_written_anew(src))
        (staging / SAVED_MODEL_FILE).write_bytes(saved_model.SerializeToString())
        _compat.write_saved_model_fingerprint(str(staging))
        if dst.exists():
            dst.rmdir()  # empty, as checked
        staging.rename(dst)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
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
    previous = ops._emit_builtin_ops(True)
    try:
        yield
    finally:
        ops._emit_builtin_ops(previous)


def _all_nodes(graph_def: graph_pb2.GraphDef) -> Iterable[node_def_pb2.NodeDef]:
    yield from graph_def.node
    for function in graph_def.library.function:
        yield from function.node_def


def _ops_used(graph_def: graph_pb2.GraphDef, source: op_def_pb2.OpList) -> op_def_pb2.OpList:
    """The OpDefs of every op that a node of the graph or of any library function uses.

    TensorFlow's own list covers only functions the main graph calls, which leaves out the
    functions of a TF2 SavedModel that only its object graph refers to. Ops this process has
    not registered (another plugin's, a newer TensorFlow's) keep the source list's OpDef,
    which loaders need for default attribute values.
    """
    functions = {function.signature.name for function in graph_def.library.function}
    used = sorted({node.op for node in _all_nodes(graph_def)} - functions)
    from_source = {op_def.name: op_def for op_def in source.op}
    op_defs = (_compat.registered_op_def(op) or from_source.get(op) for op in used)
    return op_def_pb2.OpList(op=[op_def for op_def in op_defs if op_def is not None])


def _rewrite_nodes(nodes: Iterable[node_def_pb2.NodeDef], inference: bool) -> None:
    for node in nodes:
        builtin = BUILTIN_OP_TYPES.get(node.op)
        if builtin is None:
            continue
        node.op = "Identity" if inference else builtin
        if inference and "message" in node.attr:
            del node.attr["message"]


def _read_saved_model(src: Path) -> saved_model_pb2.SavedModel:
    path = src / SAVED_MODEL_FILE
    if not path.is_file():
        raise FileNotFoundError(
            f"{src} is not a SavedModel directory: it has no {SAVED_MODEL_FILE}. Pass the "
            f"directory that tf.saved_model.save or model.export wrote."
        )
    saved_model = saved_model_pb2.SavedModel()
    try:
        saved_model.ParseFromString(path.read_bytes())
    except _protobuf_message.DecodeError as error:
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


def _files_written_anew(src: Path):
    """A ``copytree`` ignore function: skip what the export writes itself, at the top only."""

    def ignore(directory: str, entries: list[str]) -> list[str]:
        if Path(directory) != src:
            return []
        return [name for name in entries if name in (SAVED_MODEL_FILE, FINGERPRINT_FILE)]

    return ignore
