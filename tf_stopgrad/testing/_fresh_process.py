"""opcheck's fresh processes, which a crashing kernel ends instead of opcheck's: fn's SavedModel
and the samples' inputs written to a directory (``run``), then processes forked on them, one after
another, until one has run every sample or crashed. This file, run by path (``serve``), forks
them once it has imported TensorFlow: one for each line on its stdin, ``[TIMEOUT_S, DIRECTORY,
null, LIBRARY..., "--", OP_TYPE...]`` in JSON (or, for opcheck_library's process of an op,
``"MODULE:FUNCTION"`` and its arguments after DIRECTORY), each answered by a line: how that
process ended, as subprocess says it (-N for signal N), or ``timeout``.

Each imports each LIBRARY (``path:FILE`` or ``module:NAME``), never tf_stopgrad (its op library
would hide what TensorFlow alone lacks, which it notes in DIRECTORY/unregistered), then calls the
SavedModel in DIRECTORY on each DIRECTORY/inputs/NNNN-WAYS, in the WAYS below, on inputs made as
TensorFlow's ops make them. Before each call it notes it in DIRECTORY/progress, so a crash leaves
there the call that ended it; what each gives goes to DIRECTORY/outputs/WAY/NNNN (.error for an
error) as a list of TensorProtos, which need no kernel; what it prints, to DIRECTORY/stderr.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import dataclasses
import functools
import importlib
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf
from tensorflow.core.framework.attr_value_pb2 import AttrValue

if __package__:
    from .. import _compat
else:  # run by path: tf_stopgrad's private TensorFlow APIs, without its op library
    _spec = importlib.util.spec_from_file_location(
        "_compat", Path(__file__).resolve().parents[1] / "_compat.py")
    assert _spec is not None and _spec.loader is not None
    _compat = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_compat)

TIMEOUT_S = 300
# What a CHECK or glibc prints as it aborts: "Check failed: ...", "free(): invalid pointer",
# "double free or corruption (!prev)", "corrupted size vs. prev_size", "*** ... detected ***".
ABORTED = r"Check failed: .*|^\S*\(\): .*|^double free or corruption.*|^corrupted .*|.*detected.*"
TUNABLES = ":".join(filter(None, [os.environ.get("GLIBC_TUNABLES"), "glibc.malloc.tcache_count=0"]))
OPAQUE = (tf.variant, tf.resource)  # dtypes whose values cannot be read, only their shapes
WAYS = {"e": "eagerly", "a": "eagerly again", "t": "eagerly a third time", "f": "in tf.function",
        "j": "with jit_compile"}
# The byte glibc fills freed memory with, and new memory with its complement.
PERTURB = {"eagerly": 0x5A, "eagerly again": 0xA5, "eagerly a third time": 0x5A}
M_PERTURB = -6  # mallopt's option for it, as MALLOC_PERTURB_ sets it at startup


@dataclasses.dataclass
class Call:
    """A sample as the fresh process runs it: its inputs; fn traced for ``specs``, its own shapes
    (``graph``) or unknown ones, where the shape function refuses them; ``jit`` where XLA has its
    types."""

    index: int
    arrays: Sequence[np.ndarray]
    dtypes: Sequence[tf.DType]
    specs: list[tf.TensorSpec]
    jit: bool
    graph: bool


@dataclasses.dataclass
class Ran:
    """What the fresh processes did: ``error`` if none could run the samples, each crash (sample:
    how the process ended, and where), each call's outputs or error text by (sample, way), and
    the ops TensorFlow alone does not register."""

    error: str = ""
    outputs: dict[tuple[int, str], Any] = dataclasses.field(default_factory=dict)
    crashes: dict[int, str] = dataclasses.field(default_factory=dict)
    unregistered: list[str] = dataclasses.field(default_factory=list)


def run(fn: Callable[..., Any], calls: list[Call], libraries: list[str], op_types: list[str]
        ) -> Ran:
    """Saves fn and ``calls`` to a directory, and runs them there in fresh processes: another
    starts past each sample that crashes one, after calling in tf.function first a sample that
    crashed its first eager call, where a graph takes its shapes."""
    ran, graphs, eager = Ran(), {call.index: call.graph for call in calls}, []
    if not calls:
        return ran
    with tempfile.TemporaryDirectory(prefix="opcheck-") as directory:
        save(fn, calls, directory)
        inputs, outputs = Path(directory, "inputs"), Path(directory, "outputs")
        while any(inputs.iterdir()):
            ended, said = forked(directory, [*libraries, "--", *op_types])
            done = Path(directory, "progress").read_text().splitlines()
            if not ended or not done:  # it ended well, raised, or crashed before a sample
                ran.error = f"it ended {ended} before it ran a sample" if ended else said
                break
            name, way = done[-1].split(" ", 1)
            index = int(name[:4])
            ran.crashes[index] = f"{ran.crashes[index]}, and {way} too" if index in eager else \
                f"{ended} {way}{said}"
            if way == "eagerly":
                eager.append(index)
                if graphs[index]:
                    Path(inputs, name).rename(Path(inputs, f"{index:04d}-f"))
            for line in done:
                Path(inputs, line.split()[0]).unlink(missing_ok=True)
            Path(directory, "progress").write_text("")
        for index in (i for i in eager if not ran.crashes[i].endswith(" too")):
            graph = Path(outputs, "in tf.function", f"{index:04d}")
            raised = graph.with_suffix(".error")
            ran.crashes[index] += "; eagerly only: " + (
                "the shape function refuses it in a graph" if not graphs[index] else
                f"in tf.function it raises {raised.read_text().partition(chr(10))[0]}"
                if raised.exists() else "in tf.function it gives outputs" if graph.exists()
                else "no process called it in tf.function")
        if not ran.error:
            ran.unregistered = sorted(Path(directory, "unregistered").read_text().split())
        for path in outputs.glob("*/*"):  # outputs/WAY/SAMPLE[.error]
            key = int(path.name[:4]), path.parent.name
            if key[0] in ran.crashes:
                continue  # what a crash or the time limit cut short
            if path.suffix == ".error":
                ran.outputs[key] = path.read_text()
            else:
                protos = AttrValue.ListValue.FromString(path.read_bytes()).tensor
                ran.outputs[key] = [tf.constant(tf.make_ndarray(p), p.dtype) for p in protos]
    return ran


def save(fn: Callable[..., Any], calls: list[Call], directory: str) -> None:
    """fn's SavedModel, with ``call`` traced for each sample and each trace as ``sample_NNNN``,
    and each sample's inputs, in a file named for the sample and the ways to call it."""
    module = tf.Module()
    module.call = tf.function(fn, autograph=False)
    module.held = held(fn, set())  # what the model must save too: a tokenizer's tables
    Path(directory, "inputs").mkdir()
    for call in calls:
        setattr(module, f"sample_{call.index:04d}", module.call.get_concrete_function(*call.specs))
        protos = map(tf.make_tensor_proto, call.arrays, call.dtypes)
        ways = "eatf" + "j" * call.jit  # letters of WAYS
        Path(directory, "inputs", f"{call.index:04d}-{ways}").write_bytes(
            AttrValue.ListValue(tensor=protos).SerializeToString())
    tf.saved_model.save(module, str(Path(directory, "model")))
    Path(directory, "progress").write_text("")


def loaded_op_libraries(op_types: list[str]) -> list[str]:
    """The op libraries mapped into this process (Linux's /proc/self/maps) that registered any of
    ``op_types``: shared objects outside TensorFlow's directory that name its framework library,
    each asked again for the ops it registered when it was loaded."""
    maps, own = Path("/proc/self/maps"), Path(tf.__file__).parent
    paths = {line.split()[-1] for line in (maps.read_text().splitlines() if maps.exists() else ())
             if ".so" in line.rsplit("/", 1)[-1]}
    found = []
    for path in sorted(paths):
        if Path(path).is_relative_to(own) or not Path(path).is_file():
            continue
        with contextlib.suppress(OSError):
            if b"libtensorflow_framework" not in Path(path).read_bytes():
                continue
            found += [path] if _compat.op_library_ops(path) & set(op_types) else []
    return found


def held(thing: Any, seen: set[int]) -> list[Any]:
    """The trackable objects (tables, variables) that ``thing`` is or reaches: a function, through
    its object, closure and the globals it names, and the functions (or partials) those are."""
    thing = getattr(thing, "python_function", thing)  # a tf.function's Python function
    if isinstance(thing, _compat.Trackable):
        return [thing]
    if id(thing) in seen or str(getattr(thing, "__module__", "")).startswith("tensorflow"):
        return []
    seen.add(id(thing))
    parts = [getattr(thing, name, None) for name in ("__self__", "__func__", "func")]
    if code := getattr(thing, "__code__", None):
        parts += [cell.cell_contents for cell in thing.__closure__ or ()]
        parts += [thing.__globals__.get(name) for name in code.co_names]
    return [found for part in parts if part is not None for found in held(part, seen)]


def forked(directory: str, arguments: list[str], call: str | None = None,
           timeout: float | None = None) -> tuple[str, str]:
    """Runs a fresh process in ``directory``, ``main`` on ``arguments`` or ``call``
    (MODULE:FUNCTION) on them: ('', '') if it ends well, ('', its error's text) if it raises, or
    how it ended otherwise (with a signal, or none in time) and what a CHECK or glibc said."""
    timeout = timeout or TIMEOUT_S  # read now: opcheck_library's op process lowers it
    with _one_at_a_time:  # a request and its answer, which other threads' must not split
        server = start_server()
        assert server.stdin is not None and server.stdout is not None
        server.stdin.write(json.dumps([timeout, directory, call, *arguments]) + "\n")
        server.stdin.flush()
        if not (answer := server.stdout.readline().strip()):
            raise RuntimeError(f"the process that forks the fresh ones ended ({server.wait()})")
    if answer == "timeout":
        return f"without finishing within {timeout} s", ""
    code, printed = int(answer), Path(directory, "stderr").read_text(errors="replace")
    if code < 0:
        said = re.search(ABORTED, printed, re.MULTILINE)
        return f"with {signal.Signals(-code).name}", f" ({said[0]})" if said else ""
    if not code or not (error := Path(directory, "error")).exists():
        return "", f"exit status {code}: {printed[-300:]}" if code else ""
    return "", error.read_text()


class Forked:
    """A server that ``fresh`` forked for its process, with the part of Popen's API used here."""

    def __init__(self, pid: int, requests: int, answers: int):
        self.pid, self.stdin, self.stdout = pid, os.fdopen(requests, "w"), os.fdopen(answers)
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None and (ended := os.waitpid(self.pid, os.WNOHANG))[0]:
            self.returncode = os.waitstatus_to_exitcode(ended[1])
        return self.returncode

    def wait(self) -> int:
        if self.returncode is None:
            self.returncode = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])
        return self.returncode

    def kill(self) -> None:
        if self.poll() is None:
            os.kill(self.pid, signal.SIGKILL)

    def communicate(self) -> None:
        self.stdin.close()
        self.wait()
        self.stdout.close()


_servers: dict[tuple[str, ...], subprocess.Popen | Forked] = {}
_one_at_a_time = threading.Lock()
FORKED = "OPCHECK_FORKED_SERVER"  # its pid and pipes, for a process that fresh forked one for


def start_server() -> subprocess.Popen | Forked:
    """This file run by path, serving this process's environment (PYTHONPATH finds the
    libraries' modules), started anew if that changed, or the one fresh forked for it. Its
    allocator keeps no per-thread cache (tcache), so glibc fills every block it hands out."""
    forked = os.environ.pop(FORKED, "")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", GLIBC_TUNABLES=TUNABLES)
    key = (sys.executable, *sorted(f"{name}={value}" for name, value in env.items()))
    if forked:
        _servers[key] = Forked(*map(int, forked.split()))
    if key not in _servers or _servers[key].poll() is not None:
        stop_servers()
        _servers[key] = subprocess.Popen([sys.executable, __file__], env=env, text=True,
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.DEVNULL)
    return _servers[key]


@atexit.register
def stop_servers() -> None:
    """Ends each, and waits for it, so that its CPU time, and its forks', is counted as this
    process's children's."""
    while _servers:  # a fresh process it forked ends by itself, within its time
        server = _servers.popitem()[1]
        server.kill()
        server.communicate()


# --- run by path: the process that forks the fresh ones, and what they run -------------------
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


def main(directory: Path, libraries: list[str], op_types: list[str]) -> None:
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
                fresh(Path(place), call, arguments)
            finally:  # never back in this loop, reading requests, if something escapes fresh()
                os._exit(1)
        deadline = time.monotonic() + timeout
        while not (ended := os.waitpid(pid, os.WNOHANG))[0] and time.monotonic() < deadline:
            time.sleep(0.01)
        if not ended[0]:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(ended[1]) if ended[0] else "timeout", flush=True)


def fresh(place: Path, call: str, arguments: list[str]) -> None:
    """The forked process, in DIRECTORY: main, or ``call`` (MODULE:FUNCTION) on the arguments;
    what it prints goes to DIRECTORY/stderr, an error it raises to DIRECTORY/error."""
    output = os.open(place / "stderr", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(output, 1)
    os.dup2(output, 2)
    os.chdir(place)
    try:
        if call:  # it may ask for fresh processes: a server forked while it has run nothing
            requests, answers = os.pipe(), os.pipe()
            if not (pid := os.fork()):
                os.dup2(requests[0], 0)
                os.dup2(answers[1], 1)
                for end in (*requests, *answers):
                    os.close(end)
                serve()
                os._exit(0)
            os.environ[FORKED] = f"{pid} {requests[1]} {answers[0]}"
            os.close(requests[0])
            os.close(answers[1])
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
