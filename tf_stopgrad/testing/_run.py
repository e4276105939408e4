"""One opcheck call, ``Run``: what checks ask of it, then the plumbing behind it; and the helpers
that compare values, tell errors and read TensorFlow's registries."""

from __future__ import annotations

import contextlib
import ctypes
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
from ._samples import OPAQUE, Sample, edge_samples, readable

# What a traced function holds besides the ops under test (unless it holds nothing else).
PLUMBING = {"Placeholder", "Const", "Identity", "IdentityN", "NoOp", "PartitionedCall",
            "StatefulPartitionedCall"}
# The words of TensorFlow's errors that say what is missing, without the graph dumps around them.
TOLD = (r"No registered '[^']+' OpKernel for \S+ devices", r"No pfor vectorization defined for \S+",
        r"Op type not registered '[^']+'")
MARKS = r"{{[^}]*}}\s*"  # TensorFlow's {{node ...}} and {{function_node ...}}
# The lines of a function's error that come before what it says: its heading and the traceback.
PREAMBLE = r"Graph execution error:|Detected at node|File \"|<stack traces unavailable>"
UNKNOWN = ("", "dimensions", "rank")  # the shapes fn is traced for: the sample's, then unknown
SHOWN = 4  # the problems a result's reason lists; its .problems holds them all


class Verdict(Exception):
    """Ends a check otherwise than ``ok``: ``Verdict("failed", reason or list of problems)``."""

    def __init__(self, status: str, reason: str | list[str]):
        self.status = status
        self.problems = list(dict.fromkeys([reason] if isinstance(reason, str) else reason))
        more = " (.problems lists them all)" if len(self.problems) > SHOWN else ""
        self.reason = listed(self.problems) + more
        super().__init__(status, self.reason)


def _visible_devices() -> list[str]:
    """The devices the checks run on: the CPU, and GPU:0 where TensorFlow sees a GPU."""
    return ["CPU:0"] + (["GPU:0"] if tf.config.list_logical_devices("GPU") else [])


class Run:
    """One opcheck call: what checks ask of it, each computed once, then (after
    ``differentiate``) the plumbing behind it."""

    def __init__(self, fn: Callable[..., Any], samples: list[Sample], library, rtol, atol,
                 table: Sequence[Any], names: Sequence[str]):
        self.fn, self.samples, self.rtol, self.atol = fn, samples, rtol, atol
        self.library = library  # as the fresh process takes it: path:FILE, module:NAME or None
        self.checks = [check for check in table if check.name in names]  # TABLE's rows to run
        self.reporters = [check for check in table if check.reports]  # run or not
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
        self.edges: list[Sample] = []  # derived by run_fresh_process, where a check runs them
        self.screen = _fresh_process.Ran()  # what the fresh process found, once it has run

    def run_fresh_process(self) -> None:
        """Runs each sample (edge samples too: derived from every sample fn builds its ops on)
        first in fresh processes, which a crash ends, not this one (_fresh_process.py)."""
        if any(check.runs_edge_samples for check in self.checks):
            self.edges = edge_samples([s for s in self.samples if not self.reported_by(s)],
                                      len(self.samples))
        calls = [_fresh_process.Call(s.index, s.arrays, s.dtypes, s.specs(unknown),
                                     jit=not self.untyped(s, "CPU:0"), graph=not unknown)
                 for s in self.samples + self.edges if (unknown := self.traceable(s)) is not None]
        try:
            self.screen = _fresh_process.run(self.fn, calls, self.libraries, self.op_types)
        except Exception as error:  # opcheck raises for no op
            self.screen = _fresh_process.Ran(f"fn's SavedModel cannot be written, or what the "
                                             f"fresh process wrote cannot be read: {told(error)}")
        said = self.screen.error
        said = told(said) if said and not said.startswith("it ended") else said
        if "registers no" in said and self.found_libraries:
            said += (f": its import must register them; library={self.found_libraries} (loaded "
                     "here, they registered them) does")
        self.screen.error = said

    def usable(self, skip: bool = True) -> list[Sample]:
        """The samples fn builds and runs its ops on without a crash; if none, a skip."""
        usable = [s for s in self.samples if not self.reported_by(s)]
        if skip and not usable:
            unbuilt = {self.reported_by(s) for s in self.samples
                       if isinstance(self.trace(s), Exception)}
            see = ", ".join(check.name for check in self.reporters if check.name in unbuilt)
            raise Verdict("skipped", "fn builds and runs its ops on no sample"
                          + (f" (see {see})" if see else "") + self.left_out)
        return usable

    def call(self, tensors: Sequence[tf.Tensor]) -> list[tf.Tensor]:
        return flat(self.fn(*tensors))

    @functools.cache  # noqa: B019 (a run lives as long as its opcheck call)
    def eager(self, sample: Sample) -> list[tf.Tensor]:
        """fn's outputs on ``sample``, run eagerly on the CPU."""
        with tf.device("CPU:0"):
            return self.guarded(sample, self.call, sample.tensors())

    def guarded(self, sample: Sample, call: Callable[..., Any], tensors: list) -> Any:
        """``call(tensors)``; the check fails, saying so, if fn raises."""
        try:
            return call(tensors)
        except Exception as error:
            raise Verdict("failed", f"{sample}: fn raised {told(error)}") from error

    def compare(self, sample: Sample, expected: list, actual: list, where: str) -> list[str]:
        """Two ways' outputs: values (an edge sample's may differ under the smallest normal
        number: subnormals flushed to zero, or not), but dtypes and ranks where fn's outputs
        vary, and dtypes and shapes on an Inf or a NaN, on which right ways may differ."""
        if len(expected) != len(actual):
            return [f"{sample}, {where}: {len(actual)} outputs, expected {len(expected)}"]
        if self.varies or not sample.finite:
            expected, actual = ([tf.zeros([0] * t.shape.rank if self.varies else t.shape, t.dtype)
                                 for t in side] for side in (expected, actual))
        found = []
        for e, a in zip(expected, actual):
            normal = sample.derived and differentiable(e.dtype) and float(ml_dtypes.finfo(
                e.dtype.real_dtype.as_numpy_dtype).tiny)
            found.append(difference(e, a, self.rtol, max(self.atol, normal or 0.0),
                                    bits=not sample.derived))
        return [f"{sample}, {where}: output {i}: {text}" for i, text in enumerate(found) if text]

    def gradients(self, sample: Sample, how: str) -> list[tf.Tensor | None]:
        """The gradients of fn's floating outputs with respect to its floating inputs, ``how``."""
        found = self.gradient_ways[how](*sample.tensors())
        return [None if g is None else tf.convert_to_tensor(g) for g in found]

    def gradient_differences(self, sample: Sample, expected: list, actual: list, how: str):
        """Gradients compared as values: a zero's sign may differ between a kernel and XLA."""
        found = (difference(e, a, self.rtol, self.atol, bits=False)
                 for e, a in zip(expected, actual))
        return [f"{sample}: the gradient of floating input {i} {how}: {text}"
                for i, text in enumerate(found) if text]

    @functools.cache  # noqa: B019
    def trace(self, sample: Sample, unknown: str = "") -> tuple[tf.Graph, list] | Exception:
        """(graph, outputs) of fn traced as a function (which may capture tensors and resources)
        for the sample's shapes, or ``unknown`` dimensions or rank; or the error."""
        graph = _compat.FuncGraph("opcheck")
        try:
            with graph.as_default():
                return graph, self.call([tf.compat.v1.placeholder(spec.dtype, spec.shape)
                                         for spec in sample.specs(unknown)])
        except Exception as error:
            return kept(error)

    @functools.cached_property
    def op_types(self) -> list[str]:
        return sorted({node.op for nodes in self.nodes.values() for node in nodes})

    @functools.cache  # noqa: B019
    def shape_problems(self, sample: Sample) -> tuple[list[str], list[str]]:
        """Where the shape function contradicts the kernel (dtypes, and ranks too with the shapes
        known), and where inference refused partial shapes. An edge sample's kernel is the fresh
        process's eager call, compared with shapes known, where a graph takes them."""
        problems: list[str] = []
        refused: list[str] = []
        real: Any = self.screen.outputs.get((sample.index, "eagerly"))
        cases: tuple[str, ...] = UNKNOWN[:1]
        if not sample.derived:
            real, cases = self.eager(sample), UNKNOWN
        elif not isinstance(real, list) or isinstance(self.trace(sample), Exception):
            return problems, refused
        for unknown in cases:
            case = f"unknown {unknown}" if unknown else "known shapes"
            if isinstance(trace := self.trace(sample, unknown), Exception):
                (refused if unknown else problems).append(f"{sample}, {case}: {told(trace)}")
                continue
            if len(trace[1]) != len(real):
                problems.append(f"{sample}, {case}: fn returns {len(trace[1])} tensors (its "
                                f"composites' included), against {len(real)} eagerly")
            for i, (static, kernel) in enumerate(zip(trace[1], real)):
                # The fresh process gives a variant or a resource as bools of its shape.
                dtype = tf.bool if sample.derived and static.dtype in OPAQUE else static.dtype
                # With the shapes known, a given sample's rank must be inferred too.
                if dtype != kernel.dtype or not static.shape.is_compatible_with(kernel.shape
                        ) or not (unknown or sample.derived or static.shape.rank is not None):
                    shape = " of unknown rank" if static.shape.rank is None else \
                        static.shape.as_list()
                    problems.append(f"{sample}, {case}: output {i}: the shape function says "
                                    f"{static.dtype.name}{shape}, the kernel gives "
                                    f"{kernel.dtype.name}{kernel.shape.as_list()}")
        return problems, refused

    @functools.cached_property
    def varies(self) -> list[Sample]:
        """The samples on which a second call gives other outputs. With one, fn's values are
        compared nowhere but in pure: another sample's two calls may have agreed by chance."""
        varying = []
        for sample in self.usable():
            with contextlib.suppress(Verdict), tf.device("CPU:0"):  # fn raises: others say so
                if any(map(difference, self.eager(sample), self.call(sample.tensors()))):
                    varying.append(sample)
        return varying

    @functools.cached_property
    def stateful(self) -> list[str]:
        """The ops under test declared stateful that make values (not Assert), which may vary."""
        op_defs = [_compat.registered_op_def(op) for op in self.op_types]
        return [d.name for d in op_defs if d is not None and d.is_stateful and d.output_arg]

    def why_no_gradient(self, sample: Sample) -> str:
        """Why fn has no gradients to compare on ``sample``: "no floating input", "no floating
        output", "wrong shapes" (shape_fn fails) or "no gradient registered"; '' if it has."""
        trace = self.trace(sample)
        if not any(map(differentiable, sample.dtypes)):
            return "no floating input"
        if isinstance(trace, Exception) or not any(differentiable(t.dtype) for t in trace[1]):
            return "no floating output"
        if self.shape_problems(sample)[0]:
            return "wrong shapes"
        return "no gradient registered" if self.ungradable else ""

    @functools.cached_property
    def ungradable(self) -> list[str]:
        """The ops under test with floating inputs and outputs that have no gradient registered."""
        floating = {node.op for nodes in self.nodes.values() for node in nodes
                    if all(any(map(differentiable, _arg_types(node, args)))
                           for args in ("input_arg", "output_arg"))}
        return [op for op in sorted(floating) if gradient_of(op) == "missing"]

    def ended(self, sample: Sample) -> str:
        """How ``sample`` ended a fresh process ('' if it did not)."""
        ended = self.screen.crashes.get(sample.index)
        return f"{sample} ends the process {ended}" if ended else ""

    def unscreened(self, what: str) -> None:
        """Skips the check, saying ``what`` and why, where no fresh process could run samples."""
        if self.usable() and self.screen.error:
            raise Verdict("skipped", f"{what} (see saved_model): {self.screen.error}")

    def differentiate(self, v1: bool, *tensors: tf.Tensor) -> list:
        """Gradients, times upstream gradients that are neither ones nor symmetric."""
        wrt = [t for t in tensors if differentiable(t.dtype)]
        with tf.GradientTape() as tape:
            tape.watch(wrt)
            targets = [out for out in self.call(tensors) if differentiable(out.dtype)]
        upstream = [tf.cast(tf.reshape(tf.range(tf.size(t)) % 7, tf.shape(t)), t.dtype) *
                    tf.cast(0.5, t.dtype) - tf.cast(1.25, t.dtype) for t in targets]
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
                if not _compat.has_kernel(node, kind):
                    types = [tf.as_dtype(value.type).name for value in node.attr.values()
                             if value.WhichOneof("value") == "type"]
                    gaps.setdefault(index, []).append(
                        (node.op, kind, ", ".join(types) or "no type attribute"))
        return gaps

    def reported_by(self, sample: Sample) -> str:
        """The first check that reports ``sample``, which the others leave out ('' if none)."""
        return next((check.name for check in self.reporters if check.reports(self, sample)), "")

    @functools.cached_property
    def left_out(self) -> str:
        """What the checks say of the samples fn builds its ops on but leaves out ('' if none)."""
        built = [s for s in self.samples if not isinstance(self.trace(s), Exception)]
        found = {check.name: [str(s) for s in built if self.reported_by(s) == check.name]
                 for check in self.reporters}
        return "".join(f" (see {name}: {listed(samples, 2)} left out)"
                       for name, samples in found.items() if samples)

    @functools.cached_property
    def libraries(self) -> list[str]:
        """What the fresh process loads: the libraries given, else those found."""
        return self.library if self.library is not None else [
            f"path:{path}" for path in self.found_libraries]

    @functools.cached_property
    def found_libraries(self) -> list[str]:
        return _fresh_process.loaded_op_libraries(self.op_types)

    def traceable(self, sample: Sample) -> str | None:
        """The first of ``UNKNOWN`` that fn can be traced for; None if none."""
        return next((u for u in UNKNOWN if not isinstance(self.trace(sample, u), Exception)), None)

    @functools.cache  # noqa: B019
    def untyped(self, sample: Sample, device: str) -> set[str]:
        """The dtypes of the sample's inputs and of fn's outputs (as traced) that XLA has no
        type for on ``device``: jit_compile is not tried there. XLA's types are those of its
        kernel for a function's arguments, which it registers at the process's first tensor."""
        tf.constant(0)
        unknown = self.traceable(sample)
        outputs = [] if unknown is None else self.trace(sample, unknown)[1]  # type: ignore[index]
        jit = f"XLA_{device.split(':')[0]}_JIT"
        xla = {tf.as_dtype(t).name for k in _compat.registered_kernels("_Arg")
               if k.device_type == jit for c in k.constraint for t in c.allowed_values.list.type}
        return {d.name for d in [*sample.dtypes, *(t.dtype for t in outputs)]} - xla


# --- comparing values, telling errors, reading the registries ----------------------------
def as_bits(tensor: tf.Tensor) -> tuple:
    """Everything that identifies a tensor's value exactly: dtype, shape and raw bytes (NaN
    payloads and -0.0 included)."""
    array = readable(tensor)
    payload = array.tolist() if array.dtype == object else array.tobytes()
    return tensor.dtype, tuple(tensor.shape), payload


def flat(outputs: Any) -> list[tf.Tensor]:
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


def told(error: BaseException | str) -> str:
    """What a TensorFlow error says went wrong, in one line, without its {{node ...}} marks (of
    an error, or of the fresh process's text of one: its type's name, a line, its message)."""
    kind, _, text = error.partition("\n") if isinstance(error, str) else (
        type(error).__name__, "", str(error))
    found = [m.group(0) for m in (re.search(pattern, text) for pattern in TOLD) if m]
    lines = [line.strip() for line in text.splitlines()
             if line.strip() and not re.match(PREAMBLE, line.strip())]
    line = (found or lines or [""])[0]
    return f"{kind}: {re.sub(MARKS, '', line)[:300]}"


def kept(error: Exception) -> Exception:
    """``error``, and what its traceback holds, kept for the process's life: a C++ exception that
    a shape function throws leaves the graph it was built in locked, which then waits forever to
    be deleted (tensorflow-text's NgramsStringJoin on a scalar)."""
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(error))
    return error


def listed(problems: Sequence[str], shown: int = SHOWN) -> str:
    problems = list(dict.fromkeys(problems))
    more = f"; and {len(problems) - shown} more" if len(problems) > shown else ""
    return "; ".join(problems[:shown]) + more


def differentiable(dtype: tf.DType) -> bool:
    return dtype.is_floating or dtype.is_complex


def difference(expected: Any, actual: Any, rtol=0.0, atol=0.0, bits=True) -> str:
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
    want, got = readable(expected), readable(actual)
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


def _arg_types(node: Any, args: str) -> list[tf.DType]:
    """The dtypes of a NodeDef's ``args`` (input_arg or output_arg), as its OpDef declares them."""
    types: list[int] = []
    for arg in getattr(_compat.registered_op_def(node.op), args, ()):
        attr = node.attr[arg.type_attr or arg.type_list_attr]
        types += [arg.type] if arg.type else [attr.type] if arg.type_attr else attr.list.type
    return [tf.as_dtype(t) for t in types if t]


def gradient_of(op_type: str) -> str:
    """``missing`` (no entry in the gradient registry), ``none`` (declared not differentiable)
    or ``registered``."""
    try:
        return "none" if _compat.gradient_function(op_type) is None else "registered"
    except LookupError:
        return "missing"
