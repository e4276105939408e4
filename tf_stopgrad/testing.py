"""``opcheck``: does a TensorFlow custom op behave as TensorFlow's own ops do?

    from tf_stopgrad.testing import opcheck
    results = opcheck(my_ops.my_op, [(np.ones([2, 3], np.float32),)], library="my_ops.so")
    results.raise_on_failure()        # in a test; assert_opcheck(...) does both in one call

Each check runs the op on the author's own samples and holds it to what TensorFlow's built-in
ops guarantee (docs/opcheck.md: what each check means, and what to do when it fails). A broken op
never makes opcheck raise: whatever goes wrong in a check becomes that check's ``failed``. A
sample whose failure one check reports (a missing kernel, a shape function that lies) is left
out of the checks it would also break, so that each defect fails one check.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import logging
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf
from tensorflow.core.framework.tensor_pb2 import TensorProto

from . import _compat

CHECKS = ("registered", "shape_fn", "gradient", "modes", "vmap", "retrace", "pure", "saved_model")
# What a traced function holds besides the ops under test, unless it holds nothing else.
PLUMBING = frozenset({"Placeholder", "Const", "Identity", "IdentityN", "NoOp", "PartitionedCall",
                      "StatefulPartitionedCall"})  # fmt: skip
FRESH_PROCESS_TIMEOUT_S = 300
# The words of TensorFlow's errors that say what is missing, without the graph dumps around them.
TOLD = (r"No registered '[^']+' OpKernel for \S+ devices", r"No pfor vectorization defined for \S+",
        r"Op type not registered '[^']+'")  # fmt: skip


@dataclasses.dataclass(frozen=True)
class CheckResult:
    """One check's verdict: ``status`` is ``ok``, ``skipped`` or ``failed``; ``reason`` says why."""

    status: str
    reason: str

    def __str__(self) -> str:
        return f"{self.status}: {self.reason}"


class OpcheckResults(dict):
    """Each check's name, mapped to its :class:`CheckResult`."""

    def failures(self) -> dict[str, CheckResult]:
        return {name: result for name, result in self.items() if result.status == "failed"}

    def raise_on_failure(self) -> None:
        """Raises ``AssertionError`` with every failed check and its reason."""
        if failures := self.failures():
            listed = "".join(f"\n  {name}: {result}" for name, result in failures.items())
            raise AssertionError(f"opcheck: {len(failures)} of {len(self)} checks failed{listed}")

    def __str__(self) -> str:
        return "\n".join(f"{name}: {result}" for name, result in self.items())


class _Verdict(Exception):
    """Ends a check other than with ``ok``: ``_Verdict("failed", reason)``."""


def as_bits(tensor: tf.Tensor) -> tuple:
    """Everything that identifies a tensor's value exactly: dtype, shape and raw bytes (NaN
    payloads and -0.0 included)."""
    array = np.asarray(tensor.numpy(), dtype=object if tensor.dtype == tf.string else None)
    payload = array.tolist() if array.dtype == object else array.tobytes()
    return tensor.dtype, tuple(tensor.shape), payload


def _flat(outputs: Any) -> list[tf.Tensor]:
    return [tf.convert_to_tensor(t) for t in tf.nest.flatten(outputs, expand_composites=True)]


def _told(error: BaseException) -> str:
    """What a TensorFlow error says went wrong, in one line."""
    text = str(error)
    found = [m.group(0) for p in TOLD if (m := re.search(p, text))]
    line = (found or [line.strip() for line in text.splitlines() if line.strip()] or [""])[0]
    line = re.sub(r"{{[^}]*}}\s*", "", line)  # TensorFlow's {{node ...}} and {{function_node ...}}
    return f"{type(error).__name__}: {line[:300]}"


def _listed(problems: Sequence[str], shown: int = 4) -> str:
    more = f"; and {len(problems) - shown} more" if len(problems) > shown else ""
    return "; ".join(dict.fromkeys(problems[:shown])) + more


def _shape(shape: tf.TensorShape) -> str:
    return "[?]" if shape.rank is None else str(shape.as_list()).replace("None", "?")


def _inference_error(error: Exception) -> bool:
    """Whether a graph could not be built because a shape function refused its input shapes."""
    return isinstance(error, ValueError) and " with input shapes: " in str(error)


def _differentiable(dtype: tf.DType) -> bool:
    return dtype.is_floating or dtype.is_complex


@dataclasses.dataclass(frozen=True, eq=False)  # hashed by identity: run caches are per sample
class _Sample:
    index: int
    arrays: tuple[np.ndarray, ...]
    dtypes: tuple[tf.DType, ...]

    def tensors(self, arrays: Sequence[np.ndarray] = ()) -> list[tf.Tensor]:
        """New tensors of the sample's values (or of ``arrays``), so that an op that writes into
        its input spoils no other call. TensorFlow may share a NumPy array's memory: copied."""
        pairs = zip(arrays or self.arrays, self.dtypes)
        return [tf.constant(np.array(array, copy=True), dtype) for array, dtype in pairs]

    def __str__(self) -> str:
        pairs = zip(self.arrays, self.dtypes)
        return f"sample {self.index} ({', '.join(f'{d.name}{list(a.shape)}' for a, d in pairs)})"


def _difference(expected: tf.Tensor, actual: tf.Tensor, rtol=0.0, atol=0.0, bits=True) -> str:
    """How ``actual`` differs from ``expected`` ('' if it does not): bit for bit, or as values
    (a zero's sign aside) when ``bits`` is false, or within the tolerances when one is given."""
    if expected.dtype != actual.dtype or expected.shape != actual.shape:
        return f"{actual.dtype.name}{actual.shape.as_list()}, expected " \
               f"{expected.dtype.name}{expected.shape.as_list()}"  # fmt: skip
    if as_bits(expected) == as_bits(actual):
        return ""
    want, got = np.asarray(expected.numpy()), np.asarray(actual.numpy())
    if want.dtype.kind not in "fc":
        same = got == want
    elif rtol or atol:
        same = np.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
    elif bits:
        same = np.reshape([a.tobytes() == b.tobytes() for a, b in zip(got.flat, want.flat)], got.shape)
    else:
        same = (got == want) | (np.isnan(got) & np.isnan(want))
    if np.all(same):
        return ""
    at = tuple(int(i) for i in np.argwhere(~np.asarray(same))[0])
    return f"at {list(at)} {got[at]!r}, expected {want[at]!r}"


class _Run:
    """One opcheck call: the op, its samples, and what several checks share, computed once."""

    def __init__(self, fn: Callable[..., Any], samples: list[_Sample], library, rtol, atol):
        self.fn, self.samples, self.library, self.rtol, self.atol = fn, samples, library, rtol, atol
        self.devices = ["CPU:0"] + (["GPU:0"] if tf.config.list_logical_devices("GPU") else [])
        self.function = tf.function(fn, autograph=False)
        self.jit = tf.function(fn, autograph=False, jit_compile=True)
        self.vectorized = tf.function(autograph=False)(lambda *batch: tf.vectorized_map(
            lambda example: fn(*example), batch, fallback_to_while_loop=False))  # fmt: skip
        by_tape = tf.function(self.tape_gradients, autograph=False)
        self.gradient_ways = {"eagerly": self.tape_gradients, "in tf.function": by_tape,
                              "with jit_compile": tf.function(self.tape_gradients,
                                                              autograph=False, jit_compile=True),
                              "by v1 gradients": self.v1_gradients}  # fmt: skip

    @functools.cached_property
    def xla_types(self) -> set[str]:
        """The dtypes XLA can compile for: those of its kernels for function arguments."""
        return {tf.as_dtype(t).name for kernel in _compat.registered_kernels("_Arg")
                if kernel.device_type == "XLA_CPU_JIT" for c in kernel.constraint
                for t in c.allowed_values.list.type}  # fmt: skip

    def call(self, tensors: Sequence[tf.Tensor]) -> list[tf.Tensor]:
        return _flat(self.fn(*tensors))

    @functools.cache  # noqa: B019 (a run lives as long as its opcheck call)
    def trace(self, sample: _Sample, unknown: str = "") -> tuple[tf.Graph, list] | Exception:
        """fn in a graph of its own, for placeholders of the sample's shapes, or of ``unknown``
        dimensions or rank: (graph, outputs), or the error."""
        shapes = {"": [a.shape for a in sample.arrays], "rank": [None] * len(sample.arrays),
                  "dimensions": [[None] * a.ndim for a in sample.arrays]}[unknown]  # fmt: skip
        graph = tf.Graph()
        try:
            with graph.as_default():
                placeholders = map(tf.compat.v1.placeholder, sample.dtypes, shapes)
                return graph, self.call(list(placeholders))
        except Exception as error:
            return error

    @functools.cached_property
    def nodes(self) -> dict[int, list[Any]]:
        """Each traceable sample's NodeDefs of the ops under test, in function bodies too."""
        found = {}
        for sample in self.samples:
            if not isinstance(trace := self.trace(sample), Exception):
                graph = trace[0].as_graph_def()
                nodes = [*graph.node, *(n for f in graph.library.function for n in f.node_def)]
                nodes = [node for node in nodes if node.op != "Placeholder"]
                found[sample.index] = [n for n in nodes if n.op not in PLUMBING] or nodes
        return found

    @functools.cached_property
    def op_types(self) -> list[str]:
        return sorted({node.op for nodes in self.nodes.values() for node in nodes})

    @functools.cached_property
    def kernel_gaps(self) -> dict[int, list[tuple[str, str, str]]]:
        """For each sample, the (op, device type, dtypes) that no registered kernel runs."""
        gaps: dict[int, list[tuple[str, str, str]]] = {}
        for index, nodes in self.nodes.items():
            for node in nodes:
                for device in dict.fromkeys(d.split(":")[0] for d in self.devices):
                    if not any(kernel.device_type == device and _kernel_runs(kernel, node)
                               for kernel in _compat.registered_kernels(node.op)):  # fmt: skip
                        gaps.setdefault(index, []).append((node.op, device, _types_of(node)))
        return gaps

    def reported_by(self, sample: _Sample) -> str:
        """The check that fails for ``sample`` on which fn cannot build or run its ops, if any:
        ``shape_fn`` for an inference error, else ``registered``. The others leave it out."""
        if isinstance(trace := self.trace(sample), Exception):
            return "shape_fn" if _inference_error(trace) else "registered"
        return "registered" if any(g[1] == "CPU" for g in self.kernel_gaps.get(sample.index, [])) else ""

    def usable(self) -> list[_Sample]:
        if not (usable := [s for s in self.samples if not self.reported_by(s)]):
            raise _Verdict("skipped", "fn builds and runs its ops on no sample (see registered)")
        return usable

    @functools.cache  # noqa: B019
    def eager(self, sample: _Sample) -> list[tf.Tensor]:
        """fn's outputs on ``sample``, run eagerly on the CPU; the check fails if fn raises."""
        try:
            with tf.device("CPU:0"):
                return self.call(sample.tensors())
        except Exception as error:
            raise _Verdict("failed", f"{sample}: fn raised {_told(error)}") from error

    @functools.cache  # noqa: B019
    def deterministic(self, sample: _Sample) -> bool:
        with tf.device("CPU:0"):
            again = self.call(sample.tensors())
        return all(not _difference(a, b) for a, b in zip(self.eager(sample), again))

    @functools.cache  # noqa: B019
    def shape_problems(self, sample: _Sample) -> tuple[list[str], list[str]]:
        """Where inferred shapes and dtypes contradict the kernel's, and where inference refused
        partial shapes; with known shapes a refusal is a contradiction, and ranks must agree."""
        problems, refused = [], []
        for unknown in ("", "dimensions", "rank"):
            case = f"unknown {unknown}" if unknown else "known shapes"
            if isinstance(trace := self.trace(sample, unknown), Exception):
                (refused if unknown else problems).append(f"{sample}, {case}: {_told(trace)}")
                continue
            for i, (static, real) in enumerate(zip(trace[1], self.eager(sample))):
                agree = static.shape.is_compatible_with(real.shape) and (
                    unknown or static.shape.rank == real.shape.rank)
                if static.dtype != real.dtype or not agree:
                    problems.append(f"{sample}, {case}: output {i} is inferred {static.dtype.name}"
                                    f"{_shape(static.shape)}, the kernel gives {real.dtype.name}"
                                    f"{real.shape.as_list()}")  # fmt: skip
            if len(trace[1]) != len(self.eager(sample)):
                problems.append(f"{sample}, {case}: {len(trace[1])} outputs inferred, the kernel "
                                f"gives {len(self.eager(sample))}")  # fmt: skip
        return problems, refused

    def compare(self, sample: _Sample, expected: list, actual: list, where: str, bits=True):
        """Values where fn is deterministic on ``sample``, else dtypes and shapes only."""
        if len(expected) != len(actual):
            return [f"{sample}, {where}: {len(actual)} outputs, expected {len(expected)}"]
        tolerance = (self.rtol, self.atol, bits) if self.deterministic(sample) else None
        return [f"{sample}, {where}: output {i}: {text}" for i, (e, a) in enumerate(zip(expected, actual))
                if (text := _difference(e, a, *tolerance) if tolerance else _difference(
                    tf.zeros(e.shape, e.dtype), tf.zeros(a.shape, a.dtype)))]  # fmt: skip

    @functools.cached_property
    def ungradable(self) -> list[str]:
        """Why gradients cannot be taken: an op under test missing from the gradient registry."""
        return [f"no gradient is registered for {op}" for op in self.op_types if not _has_gradient(op)]

    def gradients(self, sample: _Sample, how: str) -> list[tf.Tensor | None]:
        """The gradients of fn's floating outputs (times upstream gradients that are neither ones
        nor symmetric) with respect to its floating inputs, taken ``how``."""
        found = self.gradient_ways[how](*sample.tensors())
        return [None if g is None else tf.convert_to_tensor(g) for g in found]

    def tape_gradients(self, *tensors: tf.Tensor) -> list:
        wrt = [t for t in tensors if _differentiable(t.dtype)]
        with tf.GradientTape() as tape:
            tape.watch(wrt)
            targets = [out for out in self.call(tensors) if _differentiable(out.dtype)]
        return tape.gradient(targets, wrt, output_gradients=list(map(_cotangent, targets)))

    def v1_gradients(self, *tensors: tf.Tensor) -> list:
        graph = tf.Graph()
        with graph.as_default():
            inputs = [tf.compat.v1.placeholder(t.dtype, t.shape) for t in tensors]
            targets = [out for out in self.call(inputs) if _differentiable(out.dtype)]
            wrt = [t for t in inputs if _differentiable(t.dtype)]
            found = tf.compat.v1.gradients(targets, wrt, grad_ys=list(map(_cotangent, targets)))
            with tf.compat.v1.Session(graph=graph) as session:
                values = iter(session.run([g for g in found if g is not None],
                                          {i: t.numpy() for i, t in zip(inputs, tensors)}))  # fmt: skip
        return [None if g is None else tf.constant(next(values)) for g in found]


def _row(batch: Any, k: int) -> Any:
    """Example ``k`` of a batch; sliced in NumPy for tensors, as TensorFlow cannot slice all dtypes."""
    return tf.constant(batch.numpy()[k], batch.dtype) if isinstance(batch, tf.Tensor) else batch[k]


def _kernel_runs(kernel: Any, node: Any) -> bool:
    """Whether a KernelDef's label and type constraints admit a NodeDef."""
    if kernel.label and node.attr["_kernel"].s.decode() != kernel.label:
        return False
    for constraint in kernel.constraint:
        allowed, value = set(constraint.allowed_values.list.type), node.attr[constraint.name]
        kind = value.WhichOneof("value")
        if (kind == "type" and value.type not in allowed) or (
                kind == "list" and not allowed.issuperset(value.list.type)):  # fmt: skip
            return False
    return True


def _types_of(node: Any) -> str:
    types = [tf.as_dtype(v.type).name for v in node.attr.values() if v.WhichOneof("value") == "type"]
    return ", ".join(types) or "no type attribute"


def _has_gradient(op_type: str) -> bool:
    try:
        _compat.gradient_function(op_type)
        return True
    except LookupError:
        return False


def _cotangent(output: tf.Tensor) -> tf.Tensor:
    """-1.25, -0.75, ..., 1.75, repeated over ``output``'s shape."""
    steps = tf.reshape(tf.math.floormod(tf.range(tf.size(output)), 7), tf.shape(output))
    return tf.cast(steps, output.dtype) * tf.cast(0.5, output.dtype) - tf.cast(1.25, output.dtype)


# --- the checks: each returns its reason for ok, or raises _Verdict --------------------------


def _check_registered(run: _Run) -> str:
    unbuilt = [f"{s}: fn cannot build its ops: {_told(run.trace(s))}" for s in run.samples
               if isinstance(run.trace(s), Exception) and run.reported_by(s) == "registered"]  # fmt: skip
    missing = [f"no OpDef for {op}" for op in run.op_types if _compat.registered_op_def(op) is None]
    gaps = sorted({gap for gaps in run.kernel_gaps.values() for gap in gaps})
    if unbuilt or missing or gaps:
        raise _Verdict("failed", _listed(unbuilt + missing + [f"no kernel for ({', '.join(g)})" for g in gaps]))
    devices = ", ".join(dict.fromkeys(d.split(":")[0] for d in run.devices))
    return f"{', '.join(run.op_types)}: an OpDef, and a kernel on {devices} for every sample"


def _check_shape_fn(run: _Run) -> str:
    found = [run.shape_problems(s) for s in run.samples if run.reported_by(s) in ("", "shape_fn")]
    if not found:
        raise _Verdict("skipped", "fn builds and runs its ops on no sample (see registered)")
    if problems := [p for sample_problems, _ in found for p in sample_problems]:
        raise _Verdict("failed", _listed(problems))
    refused = [r for _, sample_refused in found for r in sample_refused]
    note = f"; inference refuses partial shapes: {_listed(refused, 1)}" if refused else ""
    return f"inferred shapes and dtypes agree with the kernel's{note}"


def _check_gradient(run: _Run) -> str:
    samples = [s for s in run.usable() if any(map(_differentiable, s.dtypes))]
    if not samples:
        raise _Verdict("skipped", "no sample has a floating input")
    if run.ungradable:
        raise _Verdict("failed", _listed([f"{text}: register one with @tf.RegisterGradient, or "
                                          "declare that it has none with tf.no_gradient"
                                          for text in run.ungradable]))  # fmt: skip
    notes = [f"{op} is declared not differentiable" for op in run.op_types
             if _compat.gradient_function(op) is None]  # fmt: skip
    problems, skipped = [], [s for s in samples if run.shape_problems(s)[0]]
    for sample in (s for s in samples if s not in skipped):
        found: dict[str, Any] = {}
        for how in ("eagerly", "in tf.function", "by v1 gradients"):
            try:
                found[how] = run.gradients(sample, how)
            except LookupError as error:  # a gradient function that refuses
                found[how] = _told(error)
        if refused := [how for how, grads in found.items() if isinstance(grads, str)]:
            notes.append(f"the gradient refuses by design ({found[refused[0]]})")
            if len(refused) < len(found):
                problems.append(f"{sample}: the gradient is refused {', '.join(refused)} only")
            continue
        floating = [i for i, dtype in enumerate(sample.dtypes) if _differentiable(dtype)]
        for i, grad in zip(floating, found["eagerly"]):
            if grad is not None and (grad.dtype, grad.shape) != (sample.dtypes[i], sample.arrays[i].shape):
                problems.append(f"{sample}: the gradient of input {i} is {grad.dtype.name}"
                                f"{grad.shape.as_list()}, not the input's dtype and shape")  # fmt: skip
        for how in ("in tf.function", "by v1 gradients"):
            problems += _gradient_differences(run, sample, found["eagerly"], found[how], how)
    if problems:
        raise _Verdict("failed", _listed(problems))
    if skipped:
        left_out = f"{len(skipped)} of {len(samples)} samples, whose inferred shapes are wrong (see shape_fn)"
        if len(skipped) == len(samples):
            raise _Verdict("skipped", f"no sample to differentiate: {left_out}")
        notes.append(f"left out: {left_out}")
    return "; ".join(dict.fromkeys(notes)) or "registered; the tape, tf.function and v1 gradients agree"


def _gradient_differences(run: _Run, sample: _Sample, expected: list, actual: list, how: str):
    """Gradients compared as values: a zero's sign may differ between kernels and XLA."""
    return [f"{sample}: the gradient of floating input {i} {how}: {text}"
            for i, (a, b) in enumerate(zip(expected, actual))
            if (text := ("" if a is None and b is None else "None against a tensor"
                         if a is None or b is None else _difference(a, b, run.rtol, run.atol, False)))]  # fmt: skip


def _check_modes(run: _Run) -> str:
    problems, notes = [], []
    for device in run.devices:
        for sample in run.usable():
            with tf.device(device):
                expected = run.call(sample.tensors())
                found = {"tf.function": _flat(run.function(*sample.tensors()))}
                if untyped := {t.dtype.name for t in [*sample.tensors(), *expected]} - run.xla_types:
                    notes.append(f"XLA has no type for {', '.join(sorted(untyped))}: jit_compile not tried")
                else:
                    try:
                        found["jit_compile"] = _flat(run.jit(*sample.tensors()))
                    except Exception as error:
                        raise _Verdict("failed", f"{sample} on {device}: jit_compile=True fails: "
                                       f"{_told(error)}. Register an XLA kernel (REGISTER_XLA_OP), "
                                       "and load the library before TensorFlow runs its first op: "
                                       "TensorFlow makes XLA's kernels once") from error  # fmt: skip
            for how, outputs in found.items():
                problems += run.compare(sample, expected, outputs, f"{device}, {how}")
            if run.ungradable or run.shape_problems(sample)[0] or not any(map(_differentiable, sample.dtypes)):
                continue
            try:
                with tf.device(device):
                    eager = run.gradients(sample, "eagerly")
                    for how in ("in tf.function", "with jit_compile")[: len(found)]:
                        grads = run.gradients(sample, how)
                        problems += _gradient_differences(run, sample, eager, grads, f"on {device} {how}")
            except LookupError:
                notes.append("the gradient refuses by design, so only outputs are compared")
    if problems:
        raise _Verdict("failed", _listed(problems))
    note = f" ({_listed(notes)})" if notes else ""
    return f"eager, tf.function and jit_compile agree on {', '.join(run.devices)}{note}"


def _check_vmap(run: _Run) -> str:
    problems = []
    for sample in run.usable():
        # A batch of three: the sample, and its values rotated by one and by two.
        examples = [[np.roll(a.reshape(-1), k).reshape(a.shape) for a in sample.arrays] for k in range(3)]
        try:
            vectorized = run.vectorized(*sample.tensors([np.stack(c) for c in zip(*examples)]))
        except Exception as error:
            raise _Verdict("failed", f"{sample}: tf.vectorized_map fails without its while_loop "
                           f"fallback: {_told(error)}. Register a pfor converter "
                           "(tensorflow.python.ops.parallel_for.pfor.RegisterPFor)") from error  # fmt: skip
        for k, example in enumerate(examples):
            one = _flat(tf.nest.map_structure(lambda t, k=k: _row(t, k), vectorized))
            problems += run.compare(sample, run.call(sample.tensors(example)), one, f"example {k}")
    if problems:
        raise _Verdict("failed", f"tf.vectorized_map differs from a loop: {_listed(problems)}")
    return "tf.vectorized_map vectorizes fn, with the results of a loop over the batch"


def _check_retrace(run: _Run) -> str:
    signatures = {}
    for sample in run.usable():
        size = next((a.shape[0] for a in sample.arrays if a.ndim), 0)
        batched = [a.ndim > 0 and a.shape[0] == size > 0 for a in sample.arrays]
        specs = [tf.TensorSpec([None, *a.shape[1:]] if b else a.shape, d)
                 for a, b, d in zip(sample.arrays, batched, sample.dtypes)]  # fmt: skip
        if any(batched):
            signatures.setdefault(str(specs), (sample, specs, batched, size))
    if not signatures:
        raise _Verdict("skipped", "no sample has an input with a batch dimension (size 1 or more)")
    for sample, specs, batched, size in signatures.values():
        traces = []
        traced = tf.function(lambda *args: traces.append(args) or run.fn(*args),
                             input_signature=specs, autograph=False)  # fmt: skip
        for batch in (size, size + 1, 2 * size + 1):
            rows = np.arange(batch) % size
            try:
                traced(*sample.tensors([a[rows] if b else a for a, b in zip(sample.arrays, batched)]))
            except Exception as error:
                raise _Verdict("failed", f"{sample}: fn cannot be traced for an unknown batch "
                               f"dimension ({', '.join(_shape(s.shape) for s in specs)}): "
                               f"{_told(error)}. A tf.function that calls it traces again for "
                               "every batch size") from error  # fmt: skip
        if len(traces) != 1:
            raise _Verdict("failed", f"{sample}: {len(traces)} traces for {len(specs)} signature")
    return f"one trace served batch sizes n, n+1 and 2n+1, for each of {len(signatures)} signatures"


def _check_pure(run: _Run) -> str:
    problems = []
    for sample in run.usable():
        for how, call in (("eagerly", run.call), ("in tf.function", lambda t: run.function(*t))):
            call(inputs := sample.tensors())
            problems += [f"{sample}: called {how}, fn changed its input {i} ({text}): a kernel "
                         "must never write into an input" for i, (before, after)
                         in enumerate(zip(sample.tensors(), inputs)) if (text := _difference(before, after))]  # fmt: skip
    stateful = [op for op in run.op_types if getattr(_compat.registered_op_def(op), "is_stateful", 0)]
    if not stateful and (random := [s for s in run.usable() if not run.deterministic(s)]):
        problems.append(f"{', '.join(run.op_types)} is declared stateless, yet two calls on "
                        f"{random[0]} gave other outputs: Grappler may fold it into a constant or "
                        "merge two calls. Declare it SetIsStateful(), or make it deterministic")  # fmt: skip
    if problems:
        raise _Verdict("failed", _listed(problems))
    if stateful:
        return f"inputs unchanged; {', '.join(stateful)} is stateful: outputs may vary"
    return "inputs unchanged, and the same outputs for the same inputs"


# A fresh process: writes which op types of the SavedModel in DIRECTORY TensorFlow alone does not
# register (without them it cannot load), then loads LIBRARY (path:FILE, module:NAME, or nothing)
# and the SavedModel, and calls it on each sample's inputs, writing the outputs beside them.
# Tensors are stored as TensorProtos, which need no kernel (SerializeTensor has none for quantized
# dtypes).
_FRESH_PROCESS = """
import importlib, pathlib, sys
import tensorflow as tf
from tensorflow.core.framework.tensor_pb2 import TensorProto
from tensorflow.core.protobuf.saved_model_pb2 import SavedModel
from tensorflow.python.framework import op_def_registry
directory, library = pathlib.Path(sys.argv[1]), sys.argv[2]
saved = SavedModel.FromString((directory / "model" / "saved_model.pb").read_bytes())
graph = saved.meta_graphs[0].graph_def
types = {n.op for n in graph.node} | {n.op for f in graph.library.function for n in f.node_def}
unregistered = sorted(t for t in types if op_def_registry.get(t) is None)
(directory / "unregistered").write_text("\\n".join(unregistered))
kind, _, name = library.partition(":")
if kind == "path":
    tf.load_op_library(name)
elif kind == "module":
    importlib.import_module(name)
model = tf.saved_model.load(str(directory / "model"))
for sample in sorted((directory / "inputs").iterdir()):
    protos = (TensorProto.FromString(path.read_bytes()) for path in sorted(sample.iterdir()))
    inputs = [tf.constant(tf.make_ndarray(proto), proto.dtype) for proto in protos]
    for i, output in enumerate(tf.nest.flatten(model.call(*inputs), expand_composites=True)):
        path = directory / "outputs" / sample.name / f"{i:04d}"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(tf.make_tensor_proto(output.numpy(), output.dtype).SerializeToString())
"""


def _tensors_in(folder: Path) -> list[tf.Tensor]:
    protos = (TensorProto.FromString(path.read_bytes()) for path in sorted(folder.iterdir()))
    return [tf.constant(tf.make_ndarray(proto), proto.dtype) for proto in protos]


def _fresh_process(directory: str, library: str) -> str:
    """Runs _FRESH_PROCESS; returns the error it ended with ('' if none), in one line."""
    environment = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    try:
        ran = subprocess.run([sys.executable, "-c", _FRESH_PROCESS, directory, library],
                             cwd=directory, env=environment, capture_output=True, text=True,
                             timeout=FRESH_PROCESS_TIMEOUT_S)  # fmt: skip
    except subprocess.TimeoutExpired:
        return f"TimeoutError: it did not finish in {FRESH_PROCESS_TIMEOUT_S} s"
    lines = ran.stderr.splitlines()
    told = [line for line in lines if re.match(r"\w*(Error|Exception)\b", line)] or lines
    found = [m.group(0) for p in TOLD for line in told[-1:] if (m := re.search(p, line))]
    return (found or told[-1:] or [f"exit status {ran.returncode}"])[0][:300] if ran.returncode else ""


def _check_saved_model(run: _Run) -> str:
    samples = run.usable()
    with tempfile.TemporaryDirectory(prefix="opcheck-") as directory:
        module = tf.Module()
        module.call = tf.function(run.fn, autograph=False)
        for sample in samples:
            module.call.get_concrete_function(*sample.tensors())
            for i, (array, dtype) in enumerate(zip(sample.arrays, sample.dtypes)):
                path = Path(directory, "inputs", f"{sample.index:04d}", f"{i:04d}")
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(tf.make_tensor_proto(array, dtype).SerializeToString())
        tf.saved_model.save(module, str(Path(directory, "model")))
        if error := _fresh_process(directory, run.library or ""):
            raise _Verdict("failed", f"in a fresh process that loads {_loaded(run)}, the SavedModel "
                           f"does not load and run: {error}")  # fmt: skip
        unregistered = Path(directory, "unregistered").read_text().split()
        problems = [problem for sample in samples for problem in run.compare(
            sample, run.eager(sample), _tensors_in(Path(directory, "outputs", f"{sample.index:04d}")),
            "the loaded model")]  # fmt: skip
    if problems:
        raise _Verdict("failed", _listed(problems))
    without = f"; without it, it cannot load: TensorFlow alone registers no {', '.join(unregistered)}" \
        if unregistered else "; it needs no op that TensorFlow alone lacks"  # fmt: skip
    return f"a fresh process that loads {_loaded(run)} gives the same outputs{without}"


def _loaded(run: _Run) -> str:
    return run.library.partition(":")[2] if run.library else "only TensorFlow"


def opcheck(fn: Callable[..., Any], samples: Sequence[tuple], *, checks: Sequence[str] | None = None,
            library: str | os.PathLike | None = None, rtol: float = 0.0, atol: float = 0.0) -> OpcheckResults:
    """Checks the TensorFlow op(s) that ``fn`` builds, on each of ``samples``.

    Args:
      fn: Builds the op(s) under test from tensors: ``my_ops.my_op``, ``tf.nn.relu``,
        ``lambda x: my_ops.my_op(x, attr=2)``.
      samples: A list of tuples of positional arguments for ``fn``: tensors or NumPy arrays.
      checks: The names of the checks to run (``CHECKS``); all of them by default.
      library: What a fresh process must load to have the op: the path of an op library, as
        ``tf.load_op_library`` takes it, or the name of a module to import. None for TensorFlow's
        own ops.
      rtol, atol: Tolerances for values compared across modes, vectorization and processes.
        Zero (the default) compares outputs bit for bit, and gradients as values.

    Returns:
      :class:`OpcheckResults`: each check's name, mapped to a result whose ``str()`` starts with
      ``ok``, ``skipped`` or ``failed`` and says why; ``raise_on_failure()`` raises with every
      failure listed.

    Raises:
      TypeError, ValueError: the arguments are not of that form. Nothing has run then.
    """
    if not callable(fn):
        raise TypeError(f"opcheck: fn must be a callable that builds the op from tensors, such as "
                        f"my_ops.my_op or lambda x: my_ops.my_op(x); got a {type(fn).__name__}")  # fmt: skip
    if isinstance(samples, (str, tf.Tensor, np.ndarray)) or not isinstance(samples, Sequence) or not samples:
        raise ValueError("opcheck: samples must be a non-empty list of tuples of arguments, such "
                         "as [(np.ones([2, 3], np.float32),)]")  # fmt: skip
    if isinstance(checks, str) or (unknown := sorted(set(checks or ()) - set(CHECKS))):
        raise ValueError(f"opcheck: unknown check {checks if isinstance(checks, str) else unknown}: "
                         f"the checks are {', '.join(CHECKS)}")  # fmt: skip
    run = _Run(fn, _checked_samples(samples), _checked_library(library), rtol, atol)
    results = OpcheckResults()
    # Tracing for every sample's signature is the point: TensorFlow's warning of it is not.
    tf.get_logger().addFilter(_retracing_warnings)
    try:
        for name in (name for name in CHECKS if checks is None or name in checks):
            try:
                results[name] = CheckResult("ok", globals()[f"_check_{name}"](run))
            except _Verdict as verdict:
                results[name] = CheckResult(*verdict.args)
            except Exception as error:  # the op under test broke the check itself
                results[name] = CheckResult("failed", f"the check crashed: {_told(error)}")
    finally:
        tf.get_logger().removeFilter(_retracing_warnings)
    return results


def _retracing_warnings(record: logging.LogRecord) -> bool:
    return "triggered tf.function retracing" not in record.getMessage()


def assert_opcheck(fn: Callable[..., Any], samples: Sequence[tuple], **options: Any) -> OpcheckResults:
    """:func:`opcheck`, then ``raise_on_failure()``: a test in one call."""
    results = opcheck(fn, samples, **options)
    results.raise_on_failure()
    return results


def _checked_samples(samples: Sequence[tuple]) -> list[_Sample]:
    checked = []
    for index, sample in enumerate(samples):
        if not isinstance(sample, tuple):
            raise TypeError(f"opcheck: sample {index} is a {type(sample).__name__}, not a tuple of "
                            "arguments: write (x,) for one argument")  # fmt: skip
        for position, value in enumerate(sample):
            if not isinstance(value, (tf.Tensor, np.ndarray, np.generic)) or (
                    isinstance(value, tf.Tensor) and value.dtype in (tf.resource, tf.variant)):  # fmt: skip
                raise TypeError(f"opcheck: sample {index}, argument {position} is a "
                                f"{type(value).__name__}: give a tf.Tensor or a NumPy array of "
                                "numbers, bools or strings")  # fmt: skip
        tensors = [tf.convert_to_tensor(value) for value in sample]
        arrays = tuple(np.array(t.numpy(), copy=True) for t in tensors)
        checked.append(_Sample(index, arrays, tuple(t.dtype for t in tensors)))
    return checked


def _checked_library(library: str | os.PathLike | None) -> str | None:
    """``path:FILE`` or ``module:NAME``, as the fresh process takes it, or None."""
    if library is None:
        return None
    if Path(library).is_file():
        return f"path:{Path(library).resolve()}"
    try:
        found = isinstance(library, str) and importlib.util.find_spec(library) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise ValueError(f"opcheck: library {str(library)!r} is neither an op library file nor a "
                         "module that can be imported: give the path tf.load_op_library takes, "
                         "or a module name such as 'tensorflow_text'")  # fmt: skip
    return f"module:{library}"
