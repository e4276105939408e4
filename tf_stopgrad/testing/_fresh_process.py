"""opcheck's fresh process, from opcheck's side: fn's SavedModel and the samples' inputs written
to a directory, then a process forked by _child.py run on them, until one has run every sample or
crashed; _child.py, run by path, imports TensorFlow once for every fresh process of this one."""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf
from tensorflow.core.framework.attr_value_pb2 import AttrValue

from .. import _compat

TIMEOUT_S = 300
# What a CHECK or glibc prints as it aborts: "Check failed: ...", "free(): invalid pointer",
# "double free or corruption (!prev)", "corrupted size vs. prev_size", "*** ... detected ***".
ABORTED = r"Check failed: .*|^\S*\(\): .*|^double free or corruption.*|^corrupted .*|.*detected.*"
TUNABLES = ":".join(filter(None, [os.environ.get("GLIBC_TUNABLES"), "glibc.malloc.tcache_count=0"]))
CHILD = Path(__file__).with_name("_child.py")


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
        ways = "eatf" + "j" * call.jit  # _child.py's WAYS
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
           timeout: float = TIMEOUT_S) -> tuple[str, str]:
    """Runs a process forked by _child.py in ``directory``, _child.py's main on ``arguments`` or
    ``call`` (MODULE:FUNCTION) on them: ('', '') if it ends well, ('', its error's text) if it
    raises, or how it ended otherwise (with a signal, or none in time) and what a CHECK or glibc
    said."""
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


_servers: dict[tuple[str, ...], subprocess.Popen] = {}
_one_at_a_time = threading.Lock()


def start_server() -> subprocess.Popen:
    """_child.py, serving this process's environment (PYTHONPATH finds the libraries' modules),
    started anew if that changed. Its allocator keeps no per-thread cache (tcache), so glibc fills
    every block it hands out."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", GLIBC_TUNABLES=TUNABLES)
    key = (sys.executable, *sorted(f"{name}={value}" for name, value in env.items()))
    if key not in _servers or _servers[key].poll() is not None:
        stop_servers()
        _servers[key] = subprocess.Popen([sys.executable, str(CHILD)], env=env, text=True,
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
