"""What opcheck's checks share: the samples (the author's, and the edge samples derived from
them), ``_Run`` (one opcheck call: what checks ask of it, then the plumbing behind it), and the
helpers that compare values, tell errors and read TensorFlow's registries."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import os
import re
import tempfile
from collections.abc import Callable, Sequence
from typing import Any

import ml_dtypes
import numpy as np
import tensorflow as tf

from .. import _compat
from . import _fresh_process

# What a traced function holds besides the ops under test (unless it holds nothing else).
PLUMBING = {"Placeholder", "Const", "Identity", "IdentityN", "NoOp", "PartitionedCall",
            "StatefulPartitionedCall"}
# The words of TensorFlow's errors that say what is missing, without the graph dumps around them.
TOLD = (r"No registered '[^']+' OpKernel for \S+ devices", r"No pfor vectorization defined for \S+",
        r"Op type not registered '[^']+'")
MARKS = r"{{[^}]*}}\s*"  # TensorFlow's {{node ...}} and {{function_node ...}}
# The lines of a function's error that come before what it says: its heading and the traceback.
PREAMBLE = r"Graph execution error:|Detected at node|File \"|<stack traces unavailable>"
# The checks that report a sample the others leave out, in the order they run.
REPORTERS = ("registered", "shape_fn", "crash")
OPAQUE = (tf.variant, tf.resource)  # dtypes whose values cannot be read, only their shapes
UNKNOWN = ("", "dimensions", "rank")  # the shapes fn is traced for: the sample's, then unknown


# --- the samples -----------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, eq=False)  # hashed by identity, for the run's caches
class _Sample:
    index: int
    arrays: tuple[np.ndarray, ...]
    dtypes: tuple[tf.DType, ...]
    derived: str = ""  # for an edge sample: the sample it comes from, and how
    base: int = -1  # for an edge sample: the index of that sample

    def tensors(self, arrays: Sequence[np.ndarray] = ()) -> list[tf.Tensor]:
        """New tensors of the sample's values (or of ``arrays``), copied: TensorFlow may share a
        NumPy array's memory, and an op that writes into its input must spoil no other call."""
        pairs = zip(arrays or self.arrays, self.dtypes)
        return [tf.constant(np.array(array, copy=True), dtype) for array, dtype in pairs]

    def specs(self, unknown: str = "") -> list[tf.TensorSpec]:
        """The sample's signature: its shapes, or ``unknown`` dimensions or rank."""
        return [tf.TensorSpec(None if unknown == "rank" else [None] * a.ndim if unknown
                              else a.shape, d) for a, d in zip(self.arrays, self.dtypes)]

    def __str__(self) -> str:
        args = ", ".join(f"{d.name}{list(a.shape)}" for a, d in zip(self.arrays, self.dtypes))
        if self.derived:
            return f"edge sample {self.index} ({args}: {self.derived})"
        return f"sample {self.index} ({args})"


def _edge_samples(samples: Sequence[_Sample], first_index: int) -> list[_Sample]:
    """The inputs that op authors forget, derived from the first sample of each signature (its
    dtypes and ranks): an empty batch, a batch of one, extreme values in every input at once,
    each input empty in each axis in turn, each input a scalar, and each input's extreme values
    with the others as given; none a copy of a sample. So a signature of n inputs of ranks r
    gives at most 3 + Σ(r + 3) edge samples."""
    bases: dict[tuple, _Sample] = {}
    for sample in samples:
        bases.setdefault((sample.dtypes, tuple(a.ndim for a in sample.arrays)), sample)

    def values(arrays):  # an object array's bytes are its pointers: the same strings, or not
        return tuple((a.shape, a.tobytes()) for a in arrays)

    seen, edges = {values(s.arrays) for s in samples}, list[_Sample]()
    for base in bases.values():
        arrays = base.arrays
        batched = _batched(arrays, empty_too=True)
        derived = {"an empty batch": [a[:0] if b else a for a, b in zip(arrays, batched)],
                   "a batch of one": [a[:1] if b else a for a, b in zip(arrays, batched)],
                   "extreme values": [next(iter(_extremes(a, d)), ("", a))[1]
                                      for a, d in zip(arrays, base.dtypes)]}
        for i, array in enumerate(arrays):
            changed = {f"input {i} empty in axis {axis}": np.take(array, np.zeros(0, int), axis)
                       for axis in range(array.ndim)}
            if array.ndim and array.size:
                changed[f"input {i} a scalar"] = array.reshape(-1)[:1].reshape(())
            for what, extreme in _extremes(array, base.dtypes[i]):
                changed[f"input {i} {what}"] = extreme
            for how, new in changed.items():
                derived[how] = [new if j == i else a for j, a in enumerate(arrays)]
        for how, inputs in derived.items():
            if values(inputs) not in seen:
                seen.add(values(inputs))
                edges.append(_Sample(first_index + len(edges), tuple(inputs), base.dtypes,
                                     f"sample {base.index} with {how}", base.index))
    return edges


def _batched(arrays: Sequence[np.ndarray], empty_too: bool) -> list[bool]:
    """Which inputs have the batch dimension: those whose first axis has the size of the first
    input that has an axis (a size of zero too, if ``empty_too``)."""
    size = next((a.shape[0] for a in arrays if a.ndim), 0)
    return [a.ndim > 0 and a.shape[0] == size and (empty_too or size > 0) for a in arrays]


def _extremes(array: np.ndarray, dtype: tf.DType) -> list[tuple[str, np.ndarray]]:
    """``array``'s shape filled with extreme values, each fill named: NaN, ±Inf, -0.0 and
    subnormals in turn (floats and complex numbers); the minimum and maximum in turn (a scalar
    gets the minimum), then the maximum alone (integers); empty and blank strings; none for
    other dtypes (bools). The first is what every input gets at once."""
    def filled(*values: Any) -> np.ndarray:
        return np.resize(np.array(values, array.dtype), array.shape)

    if dtype.is_floating or dtype.is_complex:
        real = dtype.real_dtype.as_numpy_dtype
        tiny = ml_dtypes.finfo(real).smallest_subnormal
        values = np.array([np.nan, np.inf, -np.inf, -0.0, tiny, -tiny], real)
        return [("extreme values", np.resize(values, array.shape).astype(array.dtype))]
    if dtype.is_integer and not dtype.is_quantized:
        return [("at its limits", filled(dtype.min, dtype.max)),
                ("at its maximum", filled(dtype.max))]
    if dtype == tf.string:
        return [("blank strings", filled(b"", b" ", b"\t\n "))]
    return []


# --- one opcheck call -------------------------------------------------------------------------
class _Verdict(Exception):
    """Ends a check otherwise than ``ok``: ``_Verdict("failed", reason or list of problems)``."""

    def __init__(self, status: str, reason: str | list[str]):
        super().__init__(status, reason if isinstance(reason, str) else _listed(reason))
        self.problems = [reason] if isinstance(reason, str) else reason


def _visible_devices() -> list[str]:
    """The devices the checks run on: the CPU, and GPU:0 where TensorFlow sees a GPU."""
    return ["CPU:0"] + (["GPU:0"] if tf.config.list_logical_devices("GPU") else [])


class _Run:
    """One opcheck call, and what checks ask of it, each computed once. A check takes the
    samples that ``usable()`` gives; calls fn as ``ways`` (or ``gradient_ways``) do; compares
    with ``eager(sample)`` through ``compare`` (``gradient_differences``); reads the op through
    ``trace``, ``op_types``, ``shape_problems``, ``varies`` and ``differentiable``; and reads
    the fresh process's findings through ``screen``, ``edges``, ``ended`` and ``unscreened``.
    The plumbing behind them comes after ``differentiate``."""

    def __init__(self, fn: Callable[..., Any], samples: list[_Sample], library, rtol, atol,
                 checks: Sequence[str], fresh: bool):
        self.fn = fn
        self.samples = samples
        self.library = library  # as the fresh process takes it: path:FILE, module:NAME or None
        self.rtol = rtol
        self.atol = atol
        self.checks = checks
        self.fresh = fresh  # whether a check reads the fresh process: it then screens the samples
        self.devices = _visible_devices()
        self.kinds = [device.split(":")[0] for device in self.devices]
        self.function = tf.function(fn, autograph=False)
        self.ways = {"eagerly": fn, "in tf.function": self.function,
                     "with jit_compile": _quiet(tf.function(fn, autograph=False, jit_compile=True))}
        tape, v1 = (functools.partial(self.differentiate, v1) for v1 in (False, True))
        self.gradient_ways = {
            "eagerly": tape, "by v1 gradients": tf.function(v1, autograph=False),
            "in tf.function": tf.function(tape, autograph=False),
            "with jit_compile": _quiet(tf.function(tape, autograph=False, jit_compile=True))}

    def usable(self, skip: bool = True) -> list[_Sample]:
        """The samples fn builds and runs its ops on without a crash; if none, a skip."""
        usable = [s for s in self.samples
                  if not self.reported_by(s) and s.index not in self.crashes]
        if skip and not usable:
            unbuilt = {self.reported_by(s) for s in self.samples
                       if isinstance(self.trace(s), Exception)}
            see = ", ".join(name for name in REPORTERS if name in unbuilt)
            raise _Verdict("skipped", "fn builds and runs its ops on no sample"
                           + (f" (see {see})" if see else "") + self.left_out)
        return usable

    def call(self, tensors: Sequence[tf.Tensor]) -> list[tf.Tensor]:
        return _flat(self.fn(*tensors))

    @functools.cache  # noqa: B019 (a run lives as long as its opcheck call)
    def eager(self, sample: _Sample) -> list[tf.Tensor]:
        """fn's outputs on ``sample``, run eagerly on the CPU."""
        with tf.device("CPU:0"):
            return self.guarded(sample, self.call, sample.tensors())

    def guarded(self, sample: _Sample, call: Callable[..., Any], tensors: list) -> Any:
        """``call(tensors)``; the check fails, saying so, if fn raises."""
        try:
            return call(tensors)
        except Exception as error:
            raise _Verdict("failed", f"{sample}: fn raised {_told(error)}") from error

    def compare(self, sample: _Sample, expected: list, actual: list, where: str) -> list[str]:
        """Values where fn's outputs do not vary (on any sample given), else dtypes and ranks
        only, which tf.zeros([0] * rank) stands for. An edge sample's as values, where a
        difference under the smallest normal number is none: XLA and a kernel may flush
        subnormals to zero, or not."""
        if len(expected) != len(actual):
            return [f"{sample}, {where}: {len(actual)} outputs, expected {len(expected)}"]
        if self.varies:
            expected, actual = ([tf.zeros([0] * t.shape.rank, t.dtype) for t in side]
                                for side in (expected, actual))
        found = []
        for e, a in zip(expected, actual):
            normal = sample.derived and _differentiable(e.dtype) and float(ml_dtypes.finfo(
                e.dtype.real_dtype.as_numpy_dtype).tiny)
            found.append(_difference(e, a, self.rtol, max(self.atol, normal or 0.0),
                                     bits=not sample.derived))
        return [f"{sample}, {where}: output {i}: {text}" for i, text in enumerate(found) if text]

    def gradients(self, sample: _Sample, how: str) -> list[tf.Tensor | None]:
        """The gradients of fn's floating outputs (times upstream gradients neither ones nor
        symmetric) with respect to its floating inputs, taken ``how``."""
        found = self.gradient_ways[how](*sample.tensors())
        return [None if g is None else tf.convert_to_tensor(g) for g in found]

    def gradient_differences(self, sample: _Sample, expected: list, actual: list, how: str):
        """Gradients compared as values: a zero's sign may differ between a kernel and XLA."""
        found = (_difference(e, a, self.rtol, self.atol, bits=False)
                 for e, a in zip(expected, actual))
        return [f"{sample}: the gradient of floating input {i} {how}: {text}"
                for i, text in enumerate(found) if text]

    @functools.cache  # noqa: B019
    def trace(self, sample: _Sample, unknown: str = "") -> tuple[tf.Graph, list] | Exception:
        """fn in a graph of its own (a function's, which may capture tensors and resources), on
        placeholders of the sample's shapes, or of ``unknown`` dimensions or rank: (graph,
        outputs), or the error."""
        graph = _compat.FuncGraph("opcheck")
        try:
            with graph.as_default():
                return graph, self.call([tf.compat.v1.placeholder(spec.dtype, spec.shape)
                                         for spec in sample.specs(unknown)])
        except Exception as error:
            return error

    @functools.cached_property
    def op_types(self) -> list[str]:
        return sorted({node.op for nodes in self.nodes.values() for node in nodes})

    @functools.cache  # noqa: B019
    def shape_problems(self, sample: _Sample) -> tuple[list[str], list[str]]:
        """Where the inferred shapes and dtypes contradict the kernel's (ranks too, with the
        shapes known), and where inference refused partial shapes."""
        problems: list[str] = []
        refused: list[str] = []
        for unknown in UNKNOWN:
            case, real = f"unknown {unknown}" if unknown else "known shapes", self.eager(sample)
            if isinstance(trace := self.trace(sample, unknown), Exception):
                (refused if unknown else problems).append(f"{sample}, {case}: {_told(trace)}")
                continue
            if len(trace[1]) != len(real):
                problems.append(f"{sample}, {case}: fn returns {len(trace[1])} tensors (its "
                                f"composites' included), against {len(real)} eagerly")
            for i, (static, kernel) in enumerate(zip(trace[1], real)):
                if static.dtype != kernel.dtype or not static.shape.is_compatible_with(
                        kernel.shape) or not (unknown or static.shape.rank == kernel.shape.rank):
                    problems.append(f"{sample}, {case}: output {i} is inferred "
                                    f"{static.dtype.name}{_shape(static.shape)}, the kernel gives "
                                    f"{kernel.dtype.name}{kernel.shape.as_list()}")
        return problems, refused

    @functools.cached_property
    def varies(self) -> list[_Sample]:
        """The samples on which a second call gives other outputs. With one, fn's values are
        compared nowhere but in pure: another sample's two calls may have agreed by chance."""
        varying = []
        for sample in self.usable():
            with contextlib.suppress(_Verdict), tf.device("CPU:0"):  # fn raises: others say so
                if any(map(_difference, self.eager(sample), self.call(sample.tensors()))):
                    varying.append(sample)
        return varying

    def differentiable(self, sample: _Sample) -> bool:
        """Whether fn has gradients to compare on ``sample``: a floating input and output, a
        gradient registered for every op, and shapes inferred right (else shape_fn fails)."""
        trace = self.trace(sample)
        return (not self.ungradable and any(map(_differentiable, sample.dtypes))
                and not isinstance(trace, Exception)
                and any(_differentiable(t.dtype) for t in trace[1])
                and not self.shape_problems(sample)[0])

    @functools.cached_property
    def ungradable(self) -> list[str]:
        """The ops under test with floating inputs and outputs that have no gradient registered."""
        floating = {node.op for nodes in self.nodes.values() for node in nodes
                    if all(any(map(_differentiable, _arg_types(node, args)))
                           for args in ("input_arg", "output_arg"))}
        return [op for op in sorted(floating) if _gradient_of(op) == "missing"]

    @functools.cached_property
    def edges(self) -> list[_Sample]:
        built = [s for s in self.samples if not self.reported_by(s)]
        return _edge_samples(built, len(self.samples)) if "edges" in self.checks else []

    @functools.cached_property
    def screen(self) -> _fresh_process.Ran:
        """Each sample (edge samples too) run first in a fresh process that loads fn's
        SavedModel: eagerly (twice), in tf.function and with jit_compile. A sample the shape
        function refuses runs too, traced for unknown shapes: eagerly, no shape function runs.
        A crash ends that process, not this one, and the next starts past the sample."""
        calls = [_fresh_process.Call(s.index, s.arrays, s.dtypes, s.specs(unknown),
                                     jit=not self.untyped(s, "CPU:0"))
                 for s in self.samples + self.edges if (unknown := self.traceable(s)) is not None]
        try:
            ran = _fresh_process.run(self.fn, calls, self.libraries, self.op_types)
        except Exception as error:  # opcheck raises for no op
            return _fresh_process.Ran(f"fn's SavedModel cannot be written, or what the fresh "
                                      f"process wrote cannot be read: {_told(error)}")
        if ran.error and not ran.error.startswith("it ended"):
            ran.error = _told(ran.error)
        if "registers no" in ran.error and (
                found := _fresh_process.loaded_op_libraries(self.op_types)):
            ran.error += (f": its import must register them; library={found} (loaded here, "
                          "they registered them) does")
        return ran

    def ended(self, sample: _Sample) -> str:
        """How ``sample`` ended a fresh process ('' if it did not)."""
        ended = self.crashes.get(sample.index)
        return f"{sample} ends the process {ended}" if ended else ""

    def unscreened(self, what: str) -> None:
        """Skips the check, saying ``what`` and why, where no fresh process could run the
        samples (and there are samples to run)."""
        if self.usable() and self.screen.error:
            raise _Verdict("skipped", f"{what} (see saved_model): {self.screen.error}")

    def differentiate(self, v1: bool, *tensors: tf.Tensor) -> list:
        wrt = [t for t in tensors if _differentiable(t.dtype)]
        with tf.GradientTape() as tape:
            tape.watch(wrt)
            targets = [out for out in self.call(tensors) if _differentiable(out.dtype)]
        upstream = list(map(_cotangent, targets))
        if v1:
            return tf.compat.v1.gradients(targets, wrt, grad_ys=upstream)
        return tape.gradient(targets, wrt, output_gradients=upstream)

    # --- the plumbing: what the calls above are made of ----------------------------------
    @functools.cached_property
    def nodes(self) -> dict[int, list[Any]]:
        """Each traced sample's NodeDefs of the ops under test, in function bodies too."""
        found = {}
        for sample in self.samples:  # traced for unknown shapes where the shape function refuses
            if (unknown := self.traceable(sample)) is not None:
                graph = self.trace(sample, unknown)[0].as_graph_def()  # type: ignore[index]
                nodes = [n for n in [*graph.node, *(n for f in graph.library.function
                                                    for n in f.node_def)] if n.op != "Placeholder"]
                found[sample.index] = [n for n in nodes if n.op not in PLUMBING] or nodes
        return found

    @functools.cached_property
    def kernel_gaps(self) -> dict[int, list[tuple[str, str, str]]]:
        """For each sample, the (op, device type, dtypes) that no registered kernel runs."""
        gaps: dict[int, list[tuple[str, str, str]]] = {}
        for index, nodes in self.nodes.items():
            for node, kind in itertools.product(nodes, self.kinds):
                if not any(kernel.device_type in (kind, "DEFAULT") and _kernel_runs(kernel, node)
                           for kernel in _compat.registered_kernels(node.op)):
                    gaps.setdefault(index, []).append((node.op, kind, _types_of(node)))
        return gaps

    def reported_by(self, sample: _Sample) -> str:
        """The check that reports ``sample`` if fn cannot build or run its ops on it: shape_fn
        for an inference error, else registered; '' if it can."""
        if isinstance(trace := self.trace(sample), Exception):
            inference = isinstance(trace, ValueError) and " with input shapes: " in str(trace)
            return "shape_fn" if inference else "registered"
        gaps = self.kernel_gaps.get(sample.index, [])
        return "registered" if any(gap[1] == "CPU" for gap in gaps) else ""

    @functools.cached_property
    def left_out(self) -> str:
        """What the checks say of the samples that fn builds its ops on but that they leave out
        ('' if none): those with no CPU kernel for their dtypes (registered), and crashed ones."""
        built = [s for s in self.samples if not isinstance(self.trace(s), Exception)]
        found = {"registered": [str(s) for s in built if self.reported_by(s)],
                 "crash": [str(s) for s in built if not self.reported_by(s) and self.ended(s)]}
        return "".join(f" (see {name}: {_listed(samples, 2)} left out)"
                       for name, samples in found.items() if samples)

    @functools.cached_property
    def crashes(self) -> dict[int, str]:
        return self.screen.crashes if self.fresh else {}

    @functools.cached_property
    def libraries(self) -> list[str]:
        """What the fresh process loads: the libraries given, else those found."""
        if self.library is not None:
            return self.library
        return [f"path:{path}" for path in _fresh_process.loaded_op_libraries(self.op_types)]

    def traceable(self, sample: _Sample) -> str | None:
        """The first of ``UNKNOWN`` that fn can be traced for (the sample's shapes, unless the
        shape function refuses them); None if none."""
        return next((u for u in UNKNOWN if not isinstance(self.trace(sample, u), Exception)), None)

    @functools.cache  # noqa: B019
    def xla_types(self, device: str) -> set[str]:
        """The dtypes XLA compiles on ``device``: those of its kernel for a function's arguments,
        which XLA registers when the process makes its first eager tensor."""
        tf.constant(0)
        jit = f"XLA_{device.split(':')[0]}_JIT"
        return {tf.as_dtype(t).name for k in _compat.registered_kernels("_Arg")
                if k.device_type == jit for c in k.constraint for t in c.allowed_values.list.type}

    def untyped(self, sample: _Sample, device: str) -> set[str]:
        """The dtypes of the sample's inputs and of fn's outputs (as traced) that XLA has no
        type for on ``device``: jit_compile is not tried there."""
        unknown = self.traceable(sample)
        outputs = [] if unknown is None else self.trace(sample, unknown)[1]  # type: ignore[index]
        dtypes = {d.name for d in [*sample.dtypes, *(t.dtype for t in outputs)]}
        return dtypes - self.xla_types(device)


# --- comparing values, telling errors, reading the registries ----------------------------
def as_bits(tensor: tf.Tensor) -> tuple:
    """Everything that identifies a tensor's value exactly: dtype, shape and raw bytes (NaN
    payloads and -0.0 included)."""
    array = np.asarray(tensor.numpy(), dtype=object if tensor.dtype == tf.string else None)
    payload = array.tolist() if array.dtype == object else array.tobytes()
    return tensor.dtype, tuple(tensor.shape), payload


def _flat(outputs: Any) -> list[tf.Tensor]:
    return [tf.convert_to_tensor(t) for t in tf.nest.flatten(outputs, expand_composites=True)]


def _quiet(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function``, with what TensorFlow's C++ code writes to stderr while it runs dropped: a
    failed XLA compilation's traceback, whose error the check reports."""
    def quietly(*args: Any) -> Any:
        saved = os.dup(2)
        with tempfile.TemporaryFile() as dropped:
            os.dup2(dropped.fileno(), 2)
            try:
                return function(*args)
            finally:
                os.dup2(saved, 2)
                os.close(saved)
    return quietly


def _told(error: BaseException | str) -> str:
    """What a TensorFlow error says went wrong, in one line, without its {{node ...}} marks (of
    an error, or of the fresh process's text of one: its type's name, a line, its message)."""
    kind, _, text = error.partition("\n") if isinstance(error, str) else (
        type(error).__name__, "", str(error))
    found = [m.group(0) for m in (re.search(pattern, text) for pattern in TOLD) if m]
    lines = [line.strip() for line in text.splitlines()
             if line.strip() and not re.match(PREAMBLE, line.strip())]
    line = (found or lines or [""])[0]
    return f"{kind}: {re.sub(MARKS, '', line)[:300]}"


def _listed(problems: Sequence[str], shown: int = 4) -> str:
    problems = list(dict.fromkeys(problems))
    more = f"; and {len(problems) - shown} more" if len(problems) > shown else ""
    return "; ".join(problems[:shown]) + more


def _shape(shape: tf.TensorShape) -> str:
    return " of unknown rank" if shape.rank is None else str(shape.as_list()).replace("None", "?")


def _differentiable(dtype: tf.DType) -> bool:
    return dtype.is_floating or dtype.is_complex


def _difference(expected: Any, actual: Any, rtol=0.0, atol=0.0, bits=True) -> str:
    """How ``actual`` differs from ``expected`` ('' if it does not): bit for bit, or as values
    when ``bits`` is false (a zero's sign aside), or within the tolerances when one is given."""
    if expected is None or actual is None:
        return "" if expected is actual else "None against a tensor"
    expected, actual = (tf.zeros(t.shape, tf.bool) if t.dtype in OPAQUE else t
                        for t in (expected, actual))
    if expected.dtype != actual.dtype or expected.shape != actual.shape:
        return (f"{actual.dtype.name}{actual.shape.as_list()}, expected "
                f"{expected.dtype.name}{expected.shape.as_list()}")
    if as_bits(expected) == as_bits(actual):
        return ""
    want, got = (np.asarray(t.numpy(), object if t.dtype == tf.string else None)  # NULs kept
                 for t in (expected, actual))
    if want.dtype.kind not in "fc":
        same = got == want
    elif rtol or atol:
        same = np.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
    elif bits:
        same = np.reshape([a.tobytes() == b.tobytes() for a, b in zip(got.flat, want.flat)],
                          got.shape)
    else:
        same = (got == want) | (np.isnan(got) & np.isnan(want))
    if np.all(same):
        return ""
    at = tuple(int(i) for i in np.argwhere(~np.asarray(same))[0])
    return f"at {list(at)} {got[at]!r}, expected {want[at]!r}"


def _kernel_runs(kernel: Any, node: Any) -> bool:
    """Whether a KernelDef's label and type constraints admit a NodeDef."""
    if kernel.label and node.attr["_kernel"].s.decode() != kernel.label:
        return False
    for constraint in kernel.constraint:
        allowed, value = set(constraint.allowed_values.list.type), node.attr[constraint.name]
        kind = value.WhichOneof("value")
        if (kind == "type" and value.type not in allowed) or (
                kind == "list" and not allowed.issuperset(value.list.type)):
            return False
    return True


def _arg_types(node: Any, args: str) -> list[tf.DType]:
    """The dtypes of a NodeDef's ``args`` (input_arg or output_arg), as its OpDef declares them."""
    types: list[int] = []
    for arg in getattr(_compat.registered_op_def(node.op), args, ()):
        attr = node.attr[arg.type_attr or arg.type_list_attr]
        types += [arg.type] if arg.type else [attr.type] if arg.type_attr else attr.list.type
    return [tf.as_dtype(t) for t in types if t]


def _types_of(node: Any) -> str:
    types = [tf.as_dtype(value.type).name for value in node.attr.values()
             if value.WhichOneof("value") == "type"]
    return ", ".join(types) or "no type attribute"


def _gradient_of(op_type: str) -> str:
    """``missing`` (no entry in the gradient registry), ``none`` (declared not differentiable)
    or ``registered``."""
    try:
        return "none" if _compat.gradient_function(op_type) is None else "registered"
    except LookupError:
        return "missing"


def _cotangent(output: tf.Tensor) -> tf.Tensor:
    """-1.25, -0.75, ..., 1.75, repeated over ``output``'s shape."""
    steps = tf.reshape(tf.math.floormod(tf.range(tf.size(output)), 7), tf.shape(output))
    return tf.cast(steps, output.dtype) * tf.cast(0.5, output.dtype) - tf.cast(1.25, output.dtype)


def _row(batch: Any, k: int) -> Any:
    """Example ``k`` of a batch, sliced in NumPy where TensorFlow cannot (quantized dtypes)."""
    return tf.constant(batch.numpy()[k], batch.dtype) if isinstance(batch, tf.Tensor) else batch[k]
