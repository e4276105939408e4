"""opcheck's fresh processes, forked by ``python _child.py`` (run by path) once it has imported
TensorFlow, one for each line on its stdin, ``[TIMEOUT_S, DIRECTORY, null, LIBRARY..., "--",
OP_TYPE...]`` in JSON (or, for opcheck_library's process of an op, ``"MODULE:FUNCTION"`` and its
arguments after DIRECTORY), each answered by a line: how that process ended, as subprocess says
it (-N for signal N), or ``timeout``.

Each imports each LIBRARY (``path:FILE`` or ``module:NAME``), never tf_stopgrad (its op library
would hide what TensorFlow alone lacks, which it notes in DIRECTORY/unregistered), then calls the
SavedModel in DIRECTORY on each DIRECTORY/inputs/NNNN-WAYS, in the WAYS below, on inputs made as
TensorFlow's ops make them. Before each call it notes it in DIRECTORY/progress, so a crash leaves
there the call that ended it; what each gives goes to DIRECTORY/outputs/WAY/NNNN (.error for an
error) as a list of TensorProtos, which need no kernel; what it prints, to DIRECTORY/stderr.
"""

import contextlib
import ctypes
import functools
import importlib
import importlib.util
import json
import os
import pathlib
import signal
import sys
import time
from collections.abc import Callable

import tensorflow as tf
from tensorflow.core.framework.attr_value_pb2 import AttrValue

# tf_stopgrad's private TensorFlow APIs, loaded by path: importing tf_stopgrad would load its op
# library.
_spec = importlib.util.spec_from_file_location(
    "_compat", pathlib.Path(__file__).resolve().parents[1] / "_compat.py")
assert _spec is not None and _spec.loader is not None
_compat = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_compat)

OPAQUE = (tf.variant, tf.resource)  # dtypes whose values cannot be read, only their shapes
WAYS = {"e": "eagerly", "a": "eagerly again", "t": "eagerly a third time", "f": "in tf.function",
        "j": "with jit_compile"}
# The byte glibc fills freed memory with, and new memory with its complement.
PERTURB = {"eagerly": 0x5A, "eagerly again": 0xA5, "eagerly a third time": 0x5A}
M_PERTURB = -6  # mallopt's option for it, as MALLOC_PERTURB_ sets it at startup


def eagerly(function, inputs: list) -> list:
    """Runs the ops of a traced function one by one, as eager execution runs them: with no shape
    function, so each kernel gets inputs that its shape function would refuse."""
    graph = function.graph
    made = {t.name: v for t, v in zip(graph.inputs, [*inputs, *function.captured_inputs])}
    for op in graph.get_operations():
        if op.type == "Const":  # its value attribute is a tensor, which eager attributes lack
            proto = op.get_attr("value")
            made[op.outputs[0].name] = tf.constant(tf.make_ndarray(proto), proto.dtype)
        elif op.type != "Placeholder":
            attrs = [part for key, value in op.node_def.attr.items() if not key.startswith("_")
                     for part in (key, attribute(value))]  # not the graph's annotations
            outputs = _compat.execute_op(op.type, len(op.outputs),
                                         [made[t.name] for t in op.inputs], tuple(attrs))
            made.update(zip((t.name for t in op.outputs), outputs))
    return [made[t.name] for t in graph.outputs]


def attribute(value: AttrValue):
    """An AttrValue as eager execution takes it."""
    kind = value.WhichOneof("value")
    if kind == "list":
        kind = next((k for k in ("s", "i", "f", "b", "type", "shape", "func")
                     if getattr(value.list, k)), "s")
        return [attribute(AttrValue(**{kind: v})) for v in getattr(value.list, kind)]
    if kind == "shape":
        shape = value.shape
        return None if shape.unknown_rank else [d.size if d.size >= 0 else None for d in shape.dim]
    return value.func.name if kind == "func" else getattr(value, kind)


def made(array, dtype) -> tf.Tensor:
    """An input as TensorFlow's ops make one: in a buffer of its own (a kernel that reads past it
    reads what glibc filled it with), and with none where it has no element."""
    if not array.size:
        return tf.zeros(array.shape, dtype)
    with contextlib.suppress(tf.errors.InvalidArgumentError):  # no kernel for quantized dtypes
        return tf.raw_ops.DeepCopy(x=tf.constant(array, dtype))
    return tf.constant(array, dtype)


def main(directory: pathlib.Path, libraries: list[str], op_types: list[str]) -> None:
    unregistered = [op_type for op_type in op_types if _compat.registered_op_def(op_type) is None]
    (directory / "unregistered").write_text(" ".join(unregistered))
    for kind, _, name in (library.partition(":") for library in libraries):
        (tf.load_op_library if kind == "path" else importlib.import_module)(name)
    if missing := [op_type for op_type in op_types if _compat.registered_op_def(op_type) is None]:
        raise LookupError(f"loading {', '.join(libraries) or 'only TensorFlow'} registers no "
                          f"{', '.join(missing)}")
    model = tf.saved_model.load(str(directory / "model"))
    jitted = tf.function(lambda *inputs: model.call(*inputs), autograph=False, jit_compile=True)
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)  # glibc's; absent elsewhere
    for sample in sorted((directory / "inputs").iterdir()):
        protos = AttrValue.ListValue.FromString(sample.read_bytes()).tensor
        index, _, letters = sample.name.partition("-")
        traced = functools.partial(eagerly, getattr(model, f"sample_{index}"))
        ways: dict[str, Callable] = dict.fromkeys(PERTURB, traced)
        ways["in tf.function"] = lambda inputs: model.call(*inputs)
        ways["with jit_compile"] = lambda inputs: jitted(*inputs)
        for way in (WAYS[letter] for letter in letters):
            if mallopt:
                mallopt(M_PERTURB, PERTURB.get(way, 0))
            inputs = [made(tf.make_ndarray(proto), proto.dtype) for proto in protos]
            with open(directory / "progress", "a") as progress:
                progress.write(f"{sample.name} {way}\n")
            folder = directory / "outputs" / way
            folder.mkdir(parents=True, exist_ok=True)
            try:
                outputs = tf.nest.flatten(ways[way](inputs), expand_composites=True)
            except Exception as error:
                (folder / f"{index}.error").write_text(f"{type(error).__name__}\n{error}")
                continue
            readable = [tf.zeros(t.shape, tf.bool) if t.dtype in OPAQUE else t for t in outputs]
            written = AttrValue.ListValue(tensor=[tf.make_tensor_proto(t.numpy(), t.dtype)
                                                  for t in readable])
            (folder / index).write_bytes(written.SerializeToString())


def serve() -> None:
    """A fresh process for each request: forked before TensorFlow has run anything, as a new one
    would be, without the seconds its import takes; killed if it runs past its time."""
    for line in sys.stdin:
        timeout, place, call, *arguments = json.loads(line)
        pid = os.fork()
        if not pid:
            try:
                fresh(pathlib.Path(place), call, arguments)
            finally:  # never back in this loop, reading requests, if something escapes fresh()
                os._exit(1)
        deadline = time.monotonic() + timeout
        while not (ended := os.waitpid(pid, os.WNOHANG))[0] and time.monotonic() < deadline:
            time.sleep(0.01)
        if not ended[0]:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(ended[1]) if ended[0] else "timeout", flush=True)


def fresh(place: pathlib.Path, call: str, arguments: list[str]) -> None:
    """The forked process, in DIRECTORY: main, or ``call`` (MODULE:FUNCTION) on the arguments;
    what it prints goes to DIRECTORY/stderr, an error it raises to DIRECTORY/error."""
    output = os.open(place / "stderr", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(output, 1)
    os.dup2(output, 2)
    os.chdir(place)
    try:
        if call:
            module, _, function = call.partition(":")
            getattr(importlib.import_module(module), function)(*arguments)
        else:
            main(place, arguments[:arguments.index("--")], arguments[arguments.index("--") + 1:])
    except Exception as failure:
        (place / "error").write_text(f"{type(failure).__name__}\n{failure}")
        os._exit(1)
    # Its work is written: a kernel's error can leave TensorFlow's locks held, hanging exit.
    os._exit(0)


if __name__ == "__main__":
    serve()
