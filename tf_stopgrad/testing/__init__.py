"""``opcheck``: does a TensorFlow custom op behave as TensorFlow's own ops do?

    from tf_stopgrad.testing import opcheck
    results = opcheck(my_ops.my_op, [(np.ones([2, 3], np.float32),)], library="my_ops.so")
    results.raise_on_failure()        # in a test; assert_opcheck(...) does both in one call

Each check holds the op, on the author's samples and on edge samples derived from them, to what
TensorFlow's built-in ops guarantee (docs/opcheck.md: what each means, what to do when it fails).
A broken op never makes opcheck raise, and a kernel that crashes ends a fresh process
(_fresh_process.py, _child.py), not this one.

This file, in order: the API; the samples; ``_Run``, what the checks share; the checks, and
``TABLE``, which lists them in order with what each needs; the fresh process's samples; and the
comparisons. A new check is a function that takes the ``_Run``, returns its reason for ``ok`` or
raises ``_Verdict``, and a row in ``TABLE``: it takes ``run.usable()`` samples, calls fn as
``run.ways`` do, and compares with ``run.eager(sample)`` through ``run.compare``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib.util
import itertools
import logging
import os
import re
import tempfile
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import tensorflow as tf

from .. import _compat
from . import _fresh_process

# What a traced function holds besides the ops under test (unless it holds nothing else).
PLUMBING = {"Placeholder", "Const", "Identity", "IdentityN", "NoOp", "PartitionedCall",
            "StatefulPartitionedCall"}
FRESH_PROCESS_TIMEOUT_S = 300
# The words of TensorFlow's errors that say what is missing, without the graph dumps around them.
TOLD = (r"No registered '[^']+' OpKernel for \S+ devices", r"No pfor vectorization defined for \S+",
        r"Op type not registered '[^']+'")
MARKS = r"{{[^}]*}}\s*"  # TensorFlow's {{node ...}} and {{function_node ...}}
# The lines of a function's error that come before what it says: its heading and the traceback.
PREAMBLE = r"Graph execution error:|Detected at node|File \"|<stack traces unavailable>"
OPAQUE = (tf.variant, tf.resource)  # dtypes whose values cannot be read, only their shapes


# --- the API ---------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class CheckResult:
    """One check's verdict: ``status`` is ``ok``, ``skipped`` or ``failed``; ``reason`` says why;
    ``traceback``, where the check itself raised, says where."""

    status: str
    reason: str
    traceback: str = dataclasses.field(default="", repr=False)

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


def opcheck(fn: Callable[..., Any], samples: Sequence[tuple], *,
            checks: Sequence[str] | None = None, library: str | os.PathLike | None = None,
            rtol: float = 0.0, atol: float = 0.0, expect: Mapping[str, str] | None = None
            ) -> OpcheckResults:
    """Checks the TensorFlow op(s) that ``fn`` builds, on each of ``samples`` (docs/opcheck.md).

    Args:
      fn: Builds the op(s) from tensors: ``my_ops.my_op``, ``lambda x: my_ops.my_op(x, attr=2)``.
      samples: A list of tuples of positional arguments for ``fn``: tensors or NumPy arrays.
      checks: The names of the checks to run (``CHECKS``); all of them by default.
      library: What a fresh process loads to have the op: an op library's path, as
        ``tf.load_op_library`` takes it, or a module's name. None for TensorFlow's own ops.
      rtol, atol: Tolerances for values compared across ways and processes. Zero (the
        default) compares outputs bit for bit, and gradients as values.
      expect: Failures by design: a check's name, mapped to words its failure says. That check
        is ``ok`` if it fails with those words and for no other reason, else ``failed``.

    Returns:
      :class:`OpcheckResults`: each check's :class:`CheckResult`, ``ok``, ``skipped`` or
      ``failed`` and why. Raises TypeError or ValueError, before anything runs, on bad arguments.
    """
    if not callable(fn):
        raise TypeError(f"opcheck: fn must be a callable that builds the op from tensors, such as "
                        f"my_ops.my_op or lambda x: my_ops.my_op(x); got a {type(fn).__name__}")
    if not isinstance(samples, (list, tuple)) or not samples:
        raise ValueError("opcheck: samples must be a non-empty list of tuples of arguments, such "
                         "as [(np.ones([2, 3], np.float32),)]")
    if isinstance(checks, str):
        raise TypeError(f"opcheck: checks must be a list of check names, such as [{checks!r}]; "
                        f"got the string {checks!r}")
    expect = dict(expect or {})
    if not all(isinstance(words, str) and words for words in expect.values()):
        raise TypeError("opcheck: expect maps a check to words its failure says, such as "
                        "{'vmap': 'No pfor vectorization'}")
    if unknown := sorted((set(checks or ()) | set(expect)) - set(CHECKS)):
        raise ValueError(f"opcheck: unknown check {unknown}: the checks are {', '.join(CHECKS)}")
    if checks is not None and (unrun := sorted(set(expect) - set(checks))):
        raise ValueError(f"opcheck: expect names {unrun}, which checks leaves out")
    names = [name for name in CHECKS if checks is None or name in checks]
    run = _Run(fn, _checked_samples(samples), _checked_library(library), rtol, atol, names)
    results = OpcheckResults()
    # Tracing for every sample's signature is the point: TensorFlow's warning of it is not.
    tf.get_logger().addFilter(_not_retracing)
    try:
        for check in (check for check in TABLE if check.name in names):
            results[check.name] = _result(check, run, expect.get(check.name))
    finally:
        tf.get_logger().removeFilter(_not_retracing)
    return results


def assert_opcheck(fn: Callable[..., Any], samples: Sequence[tuple], **options: Any
                   ) -> OpcheckResults:
    """:func:`opcheck`, then ``raise_on_failure()``: a test in one call."""
    results = opcheck(fn, samples, **options)
    results.raise_on_failure()
    return results


def _result(check: Check, run: _Run, expected: str | None) -> CheckResult:
    """What ``check`` says of the run, with the note of the crashed samples it leaves out, held
    to the words of ``expect`` where there are any."""
    try:
        result, said = CheckResult("ok", check.function(run)), []
    except _Verdict as verdict:
        result, said = CheckResult(*verdict.args), verdict.problems
    except Exception as error:  # the op under test broke the check itself: keep the story
        result = CheckResult("failed", f"the check raised {_told(error)}", traceback.format_exc())
        said = [result.reason]
    if check.runs_given_samples and run.left_out not in result.reason:
        result = dataclasses.replace(result, reason=result.reason + run.left_out)
    return result if expected is None else _as_expected(result, said, expected)


def _as_expected(result: CheckResult, problems: list[str], words: str) -> CheckResult:
    """A failure by design, whose every problem says ``words``, is ``ok``; else ``failed``."""
    if len(others := [p for p in problems if words not in p]) == len(problems):  # none says it
        return CheckResult("failed", f"expected to fail with {words!r}, but {result}")
    if others:
        return CheckResult("failed", _listed(others))
    return CheckResult("ok", f"fails as expected, with {words!r}: {result.reason}",
                       result.traceback)


def _not_retracing(record: logging.LogRecord) -> bool:
    return "triggered tf.function retracing" not in record.getMessage()


def _checked_samples(samples: Sequence[tuple]) -> list[_Sample]:
    checked = []
    for index, sample in enumerate(samples):
        if not isinstance(sample, tuple):
            raise TypeError(f"opcheck: sample {index} is a {type(sample).__name__}, not a tuple of "
                            "arguments: write (x,) for one argument")
        for position, value in enumerate(sample):
            if not isinstance(value, (tf.Tensor, np.ndarray, np.generic)) or (
                    isinstance(value, tf.Tensor) and value.dtype in OPAQUE):
                raise TypeError(f"opcheck: sample {index}, argument {position} is a "
                                f"{type(value).__name__}: give a tf.Tensor or a NumPy array of "
                                "numbers, bools or strings")
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
    with contextlib.suppress(ImportError, ValueError):  # find_spec on a name no module can have
        if isinstance(library, str) and importlib.util.find_spec(library) is not None:
            return f"module:{library}"
    raise ValueError(f"opcheck: library {str(library)!r} is neither an op library file nor a "
                     "module that can be imported: give the path tf.load_op_library takes, or a "
                     "module name such as 'tensorflow_text'")


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

    def __str__(self) -> str:
        args = ", ".join(f"{d.name}{list(a.shape)}" for a, d in zip(self.arrays, self.dtypes))
        return f"edge sample {self.index} ({args}: {self.derived})" if self.derived else \
            f"sample {self.index} ({args})"


def _edge_samples(samples: Sequence[_Sample], first_index: int) -> list[_Sample]:
    """The inputs that op authors forget, derived from the first sample of each signature (its
    dtypes and ranks): an empty batch, a batch of one, extreme values in every input at once,
    each input empty in each axis in turn, each input a scalar, and each input's extreme values
    with the others as given; none a copy of a sample."""
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


# --- what the checks share ------------------------------------------------------------------
class _Verdict(Exception):
    """Ends a check otherwise than ``ok``: ``_Verdict("failed", reason or list of problems)``."""

    def __init__(self, status: str, reason: str | list[str]):
        super().__init__(status, reason if isinstance(reason, str) else _listed(reason))
        self.problems = [reason] if isinstance(reason, str) else reason


def _visible_devices() -> list[str]:
    """The devices the checks run on: the CPU, and GPU:0 where TensorFlow sees a GPU."""
    return ["CPU:0"] + (["GPU:0"] if tf.config.list_logical_devices("GPU") else [])


class _Run:
    """One opcheck call: the op, its samples, and what several checks share, computed once."""

    def __init__(self, fn: Callable[..., Any], samples: list[_Sample], library, rtol, atol,
                 checks: Sequence[str]):
        self.fn, self.samples, self.library, self.rtol, self.atol = fn, samples, library, rtol, atol
        self.checks = checks
        self.devices = _visible_devices()
        self.kinds = [device.split(":")[0] for device in self.devices]
        self.function = tf.function(fn, autograph=False)
        self.ways = {"eagerly": fn, "in tf.function": self.function,
                     "with jit_compile": tf.function(fn, autograph=False, jit_compile=True)}
        tape, v1 = (functools.partial(self.differentiate, v1) for v1 in (False, True))
        self.gradient_ways = {
            "eagerly": tape, "by v1 gradients": tf.function(v1, autograph=False),
            "in tf.function": tf.function(tape, autograph=False),
            "with jit_compile": tf.function(tape, autograph=False, jit_compile=True)}

    @functools.cache  # noqa: B019 (a run lives as long as its opcheck call)
    def xla_types(self, device: str) -> set[str]:
        """The dtypes XLA compiles on ``device``: those of its kernel for a function's arguments,
        which XLA registers when the process makes its first eager tensor."""
        tf.constant(0)
        jit = f"XLA_{device.split(':')[0]}_JIT"
        return {tf.as_dtype(t).name for k in _compat.registered_kernels("_Arg")
                if k.device_type == jit for c in k.constraint for t in c.allowed_values.list.type}

    def call(self, tensors: Sequence[tf.Tensor]) -> list[tf.Tensor]:
        return _flat(self.fn(*tensors))

    def untyped(self, sample: _Sample, device: str) -> set[str]:
        """The dtypes of the sample's inputs and of fn's outputs (as traced, for unknown shapes
        where need be) that XLA has no type for on ``device``: jit_compile is not tried there."""
        traces = (self.trace(sample, unknown) for unknown in ("", "dimensions", "rank"))
        outputs = next((trace[1] for trace in traces if not isinstance(trace, Exception)), [])
        dtypes = {d.name for d in [*sample.dtypes, *(t.dtype for t in outputs)]}
        return dtypes - self.xla_types(device)

    def differentiable(self, sample: _Sample) -> bool:
        """Whether fn has gradients to compare on ``sample``: a floating input and output, a
        gradient registered for every op, and shapes inferred right (else shape_fn fails)."""
        trace = self.trace(sample)
        return (not self.ungradable and any(map(_differentiable, sample.dtypes))
                and not isinstance(trace, Exception)
                and any(_differentiable(t.dtype) for t in trace[1])
                and not self.shape_problems(sample)[0])

    @functools.cache  # noqa: B019
    def trace(self, sample: _Sample, unknown: str = "") -> tuple[tf.Graph, list] | Exception:
        """fn in a graph of its own (a function's, which may capture tensors and resources), on
        placeholders of the sample's shapes, or of ``unknown`` dimensions or rank: (graph,
        outputs), or the error."""
        shapes = [None if unknown == "rank" else [None] * a.ndim if unknown else a.shape
                  for a in sample.arrays]
        graph = _compat.FuncGraph("opcheck")
        try:
            with graph.as_default():
                return graph, self.call([tf.compat.v1.placeholder(dtype, shape)
                                         for dtype, shape in zip(sample.dtypes, shapes)])
        except Exception as error:
            return error

    @functools.cached_property
    def nodes(self) -> dict[int, list[Any]]:
        """Each traced sample's NodeDefs of the ops under test, in function bodies too."""
        found = {}
        for sample in self.samples:
            if not isinstance(trace := self.trace(sample), Exception):
                graph = trace[0].as_graph_def()
                nodes = [n for n in [*graph.node, *(n for f in graph.library.function
                                                    for n in f.node_def)] if n.op != "Placeholder"]
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

    def usable(self, skip: bool = True) -> list[_Sample]:
        """The samples fn builds and runs its ops on without a crash; if none, a skip."""
        usable = [s for s in self.samples
                  if not self.reported_by(s) and s.index not in self.crashes]
        if skip and not usable:
            reported = {self.reported_by(s) for s in self.samples} - set(self.left_out_by)
            see = ", ".join(name for name in CHECKS if name in reported)
            raise _Verdict("skipped", "fn builds and runs its ops on no sample"
                           + (f" (see {see})" if see else "") + self.left_out)
        return usable

    @functools.cached_property
    def left_out_by(self) -> dict[str, list[str]]:
        """The samples that fn builds its ops on but that the checks leave out, by the check
        that reports them: registered (no CPU kernel for their dtypes), crash."""
        found: dict[str, list[str]] = {}
        for sample in self.samples:
            if sample.index in self.crashes:
                found.setdefault("crash", []).append(str(sample))
            elif not isinstance(self.trace(sample), Exception) and self.reported_by(sample):
                found.setdefault("registered", []).append(str(sample))
        return dict(sorted(found.items(), key=lambda item: CHECKS.index(item[0])))

    @functools.cached_property
    def left_out(self) -> str:
        """What the checks say of the samples they leave out ('' if none)."""
        return "".join(f" (see {name}: {_listed(samples, 2)} left out)"
                       for name, samples in self.left_out_by.items())

    @functools.cached_property
    def edges(self) -> list[_Sample]:
        built = [s for s in self.samples if not self.reported_by(s)]
        return _edge_samples(built, len(self.samples)) if "edges" in self.checks else []

    @functools.cached_property
    def screen(self) -> _fresh_process.Ran:
        try:
            return _screen(self)
        except Exception as error:  # opcheck raises for no op
            return _fresh_process.Ran(f"fn's SavedModel cannot be written, or what the fresh "
                                      f"process wrote cannot be read: {_told(error)}")

    def unscreened(self, what: str) -> None:
        """Skips the check, saying ``what`` and why, where no fresh process could run the
        samples (and there are samples to run)."""
        if self.usable() and self.screen.error:
            raise _Verdict("skipped", f"{what} (see saved_model): {self.screen.error}")

    def ended(self, sample: _Sample) -> str:
        """How ``sample`` ended a fresh process ('' if it did not)."""
        ended = self.crashes.get(sample.index)
        return f"{sample} ends the process {ended}" if ended else ""

    @functools.cached_property
    def crashes(self) -> dict[int, str]:
        fresh = any(check.fresh_process for check in TABLE if check.name in self.checks)
        return self.screen.crashes if fresh else {}

    @functools.cache  # noqa: B019
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

    @functools.cache  # noqa: B019
    def shape_problems(self, sample: _Sample) -> tuple[list[str], list[str]]:
        """Where the inferred shapes and dtypes contradict the kernel's (ranks too, with the
        shapes known), and where inference refused partial shapes."""
        problems: list[str] = []
        refused: list[str] = []
        for unknown in ("", "dimensions", "rank"):
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

    @functools.cached_property
    def ungradable(self) -> list[str]:
        """The ops under test with floating inputs and outputs that have no gradient registered."""
        floating = {node.op for nodes in self.nodes.values() for node in nodes
                    if all(any(map(_differentiable, _arg_types(node, args)))
                           for args in ("input_arg", "output_arg"))}
        return [op for op in sorted(floating) if _gradient_of(op) == "missing"]

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

    def differentiate(self, v1: bool, *tensors: tf.Tensor) -> list:
        wrt = [t for t in tensors if _differentiable(t.dtype)]
        with tf.GradientTape() as tape:
            tape.watch(wrt)
            targets = [out for out in self.call(tensors) if _differentiable(out.dtype)]
        upstream = list(map(_cotangent, targets))
        if v1:
            return tf.compat.v1.gradients(targets, wrt, grad_ys=upstream)
        return tape.gradient(targets, wrt, output_gradients=upstream)


# --- the checks, in the order of CHECKS: each returns its reason for ok, or raises _Verdict -
def _check_registered(run: _Run) -> str:
    unbuilt = [f"{s}: fn cannot build its ops: {_told(run.trace(s))}"  # type: ignore[arg-type]
               for s in run.samples if run.reported_by(s) == "registered" and isinstance(
                   run.trace(s), Exception)]
    missing = [f"no OpDef for {op}" for op in run.op_types if _compat.registered_op_def(op) is None]
    gaps = sorted({gap for gaps in run.kernel_gaps.values() for gap in gaps})
    # TensorFlow's placer runs an op on a device that has a kernel for it: a gap is a defect only
    # on every device. The checks after this one run on the CPU, and leave its gaps out.
    notes: dict[str, list[str]] = {}
    for op, kind, types in gaps:
        if all((op, other, types) in gaps for other in run.kinds):
            missing.append(f"no kernel for ({op}, {kind}, {types})")
        else:
            where = "the CPU" if kind == "GPU" else "the GPU only, and is left out"
            notes.setdefault(f"on {kind}, {op} runs on {where}", []).append(types)
    if unbuilt + missing:
        raise _Verdict("failed", unbuilt + missing)
    full = ", ".join(k for k in run.kinds if all(gap[1] != k for gap in gaps)) or "a device"
    noted = "".join(f"; {where} for {', '.join(types)}" for where, types in notes.items())
    return f"{', '.join(run.op_types)}: an OpDef, and a kernel on {full} for every sample{noted}"


def _check_shape_fn(run: _Run) -> str:
    # A sample the shape function refuses is the caller's error: the kernel is not run on it.
    rejected = [f"{s} ({_told(run.trace(s))})" for s in run.samples  # type: ignore[arg-type]
                if run.reported_by(s) == "shape_fn"]
    found = [run.shape_problems(s) for s in run.usable(skip=not rejected)]
    if problems := [problem for sample_problems, _ in found for problem in sample_problems]:
        raise _Verdict("failed", problems)
    refused = [refusal for _, refusals in found for refusal in refusals]
    note = f"; inference refuses partial shapes: {_listed(refused, 1)}" if refused else ""
    if rejected:
        note += f"; the shape function refuses {_listed(rejected, 1)}, so it is left out, and " \
                "its kernel not run on it"
    agree = "inferred shapes and dtypes agree with the kernel's" if found else "no sample to run"
    return agree + note


def _check_crash(run: _Run) -> str:
    if crashed := [run.ended(s) for s in run.samples if run.ended(s)]:
        raise _Verdict("failed", crashed)
    run.unscreened("no fresh process could run the samples, so they run in this one unscreened")
    return "no sample ends a fresh process, eagerly, in tf.function or with jit_compile"


def _check_gradient(run: _Run) -> str:
    if not (samples := [s for s in run.usable() if any(map(_differentiable, s.dtypes))]):
        raise _Verdict("skipped", "no sample has a floating input")
    # No gradient flows through an op without a floating output: the tape gives None.
    if not (samples := [s for s in samples if any(
            _differentiable(t.dtype) for t in run.trace(s)[1])]):  # type: ignore[index]
        raise _Verdict("skipped", "no output is floating: a gradient through fn is None, as "
                       "through tf.math.is_nan")
    if run.ungradable:
        raise _Verdict("failed", [f"no gradient is registered for {op}: register one with "
                                  "@tf.RegisterGradient, or declare that it has none with "
                                  "tf.no_gradient" for op in run.ungradable])
    notes = [f"{op} is declared not differentiable" for op in run.op_types
             if _gradient_of(op) == "none"]
    problems, wrong_shapes = [], [s for s in samples if run.shape_problems(s)[0]]
    for sample in (s for s in samples if s not in wrong_shapes):
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
        problems += [f"{sample}: the gradient of input {i} is {g.dtype.name}{g.shape.as_list()}, "
                     "not the input's dtype and shape" for i, g in zip(floating, found["eagerly"])
                     if g is not None and (g.dtype, g.shape) != (sample.dtypes[i],
                                                                 sample.arrays[i].shape)]
        for how in ("in tf.function", "by v1 gradients"):
            problems += run.gradient_differences(sample, found["eagerly"], found[how], how)
    if problems:
        raise _Verdict("failed", problems)
    if wrong_shapes:
        left_out = f"{len(wrong_shapes)} of {len(samples)} samples, whose inferred shapes are " \
                   "wrong (see shape_fn)"
        if len(wrong_shapes) == len(samples):
            raise _Verdict("skipped", f"no sample to differentiate: {left_out}")
        notes.append(f"left out: {left_out}")
    return _listed(notes) or "registered; the tape, tf.function and v1 gradients agree"


def _check_modes(run: _Run) -> str:
    problems, notes, jitted = [], [], []
    for device, sample in ((d, s) for d in run.devices for s in run.usable()):
        # Every way, on every device, must give the CPU's eager outputs: where a device has no
        # kernel for a dtype, TensorFlow runs the op on the CPU, as these calls do.
        expected = run.eager(sample)
        ways = {how: way for how, way in run.ways.items() if how != "eagerly" or device != "CPU:0"}
        if untyped := run.untyped(sample, device):
            notes.append(f"XLA has no type for {', '.join(sorted(untyped))}: jit_compile not tried")
            del ways["with jit_compile"]
        jitted.append("with jit_compile" in ways)
        found = {}
        for how, way in ways.items():
            try:
                with tf.device(device):
                    found[how] = _flat(way(*sample.tensors()))
            except Exception as error:
                problems.append(f"{sample} on {device}: {how} fails: {_told(error)}" + (
                    ". Register an XLA kernel (REGISTER_XLA_OP), and load the library before "
                    "TensorFlow runs its first op: TensorFlow makes XLA's kernels once"
                    if how == "with jit_compile" else ""))
        for how, outputs in found.items():
            problems += run.compare(sample, expected, outputs, f"{device}, {how}")
        if not run.differentiable(sample):
            continue
        try:
            with tf.device("CPU:0"):
                eager = run.gradients(sample, "eagerly")
            with tf.device(device):
                for how in found:
                    problems += run.gradient_differences(
                        sample, eager, run.gradients(sample, how), f"on {device} {how}")
        except LookupError:
            notes.append("the gradient refuses by design, so only outputs are compared")
    if problems:
        raise _Verdict("failed", problems)
    note = f" ({_listed(notes)})" if notes else ""
    if all(jitted):
        agreeing = "eager, tf.function and jit_compile"
    elif any(jitted):
        agreeing = "eager, tf.function and, where tried, jit_compile"
    else:
        agreeing = "eager and tf.function"
    return f"{agreeing} agree on {', '.join(run.devices)}{note}"


def _check_edges(run: _Run) -> str:
    run.unscreened("edge samples run only in a fresh process, and none could run them")
    problems, failing, outputs = [], 0, run.screen.outputs
    for sample in run.edges:
        if run.ended(sample):
            problems.append(run.ended(sample))
            continue
        eager, again = (outputs.get((sample.index, how)) for how in ("eagerly", "eagerly again"))
        if eager is None:  # fn cannot be traced for it, whatever its shapes: a clean error
            failing += 1
            continue
        failing += isinstance(eager, str)
        if isinstance(eager, list) and isinstance(again, list) and not run.varies:
            problems += [f"{problem}: an output depends on memory the kernel never wrote (two "
                         "eager calls, with the allocator's memory filled differently)"
                         for problem in run.compare(sample, eager, again, "eagerly twice")]
        if sample.index in run.screen.refused:
            continue  # a graph refuses it, as the shape function does: a clean error (shape_fn)
        for how in ("in tf.function", "with jit_compile"):
            found, on_base = (outputs.get((i, how)) for i in (sample.index, sample.base))
            if found is None or isinstance(on_base, str):  # not tried, or failing anyway (modes)
                continue
            if isinstance(eager, list) and isinstance(found, list):
                problems += run.compare(sample, eager, found, how)
            elif isinstance(eager, list) or isinstance(found, list):
                said = [f"fails: {_told(x)}" if isinstance(x, str) else "gives outputs"
                        for x in (eager, found)]
                problems.append(f"{sample}: eagerly, fn {said[0]}; {how}, it {said[1]}")
    if problems:
        raise _Verdict("failed", problems)
    return f"{len(run.edges)} edge samples (empty axes, scalars, a batch of one, extreme " \
        "values), run in a fresh process: none ends it, and each gives the same outputs, or " \
        "fails, eagerly (twice), in tf.function and, where XLA has its types, with " \
        f"jit_compile; {failing} fail"


def _check_vmap(run: _Run) -> str:
    if not (samples := [s for s in run.usable() if s.arrays]):
        raise _Verdict("skipped", "fn takes no argument to batch")
    vectorized = tf.function(autograph=False)(lambda *batch: tf.vectorized_map(
        lambda example: run.fn(*example), batch, fallback_to_while_loop=False))
    problems = []
    for sample in samples:
        # A batch of three: the sample, and its values rotated by one and by two.
        examples = [[np.roll(a.reshape(-1), k).reshape(a.shape) for a in sample.arrays]
                    for k in range(3)]
        try:
            batch = vectorized(*sample.tensors([np.stack(c) for c in zip(*examples)]))
        except Exception as error:
            advice = ". Register a pfor converter (tensorflow.python.ops.parallel_for.pfor." \
                     "RegisterPFor)" if "No pfor vectorization" in str(error) else ""
            raise _Verdict("failed", f"{sample}: tf.vectorized_map fails without its while_loop "
                           f"fallback: {_told(error)}{advice}") from error
        for k, example in enumerate(examples):
            one = _flat(tf.nest.map_structure(lambda t, k=k: _row(t, k), batch))
            loop = run.guarded(sample, run.call, sample.tensors(example))
            problems += run.compare(sample, loop, one, f"example {k}")
    if problems:
        raise _Verdict("failed", f"tf.vectorized_map differs from a loop: {_listed(problems)}")
    return "tf.vectorized_map vectorizes fn, with the results of a loop over the batch"


def _check_retrace(run: _Run) -> str:
    signatures: dict[str, tuple] = {}
    for sample in run.usable():
        size = next((a.shape[0] for a in sample.arrays if a.ndim), 0)
        batched = _batched(sample.arrays, empty_too=False)
        specs = [tf.TensorSpec([None, *a.shape[1:]] if b else a.shape, d)
                 for a, b, d in zip(sample.arrays, batched, sample.dtypes)]
        if any(batched):
            signatures.setdefault(str(specs), (sample, specs, batched, size))
    if not signatures:
        raise _Verdict("skipped", "no sample has an input with a batch dimension (size 1 or more)")
    refused, served = [], 0
    for sample, specs, batched, size in signatures.values():
        traced = tf.function(run.fn, input_signature=specs, autograph=False)
        try:
            traced.get_concrete_function()
        except Exception as error:
            raise _Verdict("failed", f"{sample}: fn cannot be traced for an unknown batch "
                           f"dimension ({', '.join(_shape(s.shape) for s in specs)}): "
                           f"{_told(error)}. A tf.function that calls it traces again for "
                           "every batch size") from error
        for rows in (np.arange(batch) % size for batch in (size, size + 1, 2 * size + 1)):
            try:
                traced(*sample.tensors([a[rows] if b else a
                                        for a, b in zip(sample.arrays, batched)]))
                served += len(rows) > size
            except tf.errors.OpError as error:  # inputs tied otherwise than by their first axis
                refused.append(f"a batch of {len(rows)} made from {sample}: {_told(error)}")
        if (traces := traced.experimental_get_tracing_count()) != 1:
            raise _Verdict("failed", f"{sample}: {traces} traces for one signature")
    if not served:
        raise _Verdict("skipped", "fn refused every batch larger than its sample, so no other "
                       f"batch size was tried: {_listed(refused, 1)}")
    note = f" (fn refused {_listed(refused, 1)})" if refused else ""
    return f"one trace serves batch sizes n, n+1 and 2n+1, for each of {len(signatures)} " \
           f"signatures{note}"


def _check_pure(run: _Run) -> str:
    problems = []
    for sample in run.usable():
        for how, call in (("eagerly", run.call), ("in tf.function", lambda t: run.function(*t))):
            inputs = sample.tensors()
            run.guarded(sample, call, inputs)
            for i, (before, after) in enumerate(zip(sample.tensors(), inputs)):
                if text := _difference(before, after):
                    problems.append(f"{sample}: called {how}, fn changed its input {i} ({text}): "
                                    "a kernel must never write into an input")
    # Only stateful ops that make values may make them vary (not Assert, which makes none).
    op_defs = [_compat.registered_op_def(op) for op in run.op_types]
    stateful = [d.name for d in op_defs if d is not None and d.is_stateful and d.output_arg]
    if run.varies and not stateful:
        problems.append(f"{', '.join(run.op_types)} is declared stateless, yet two calls on "
                        f"{run.varies[0]} gave other outputs: Grappler may fold it into a constant "
                        "or merge two calls. Declare it SetIsStateful(), or make it deterministic")
    if problems:
        raise _Verdict("failed", problems)
    if run.varies:
        return f"inputs unchanged; outputs vary, as stateful {', '.join(stateful)} may make them"
    return "inputs unchanged, and the same outputs for the same inputs"


def _check_saved_model(run: _Run) -> str:
    samples, screen = run.usable(), run.screen
    loads = run.library.partition(":")[2] if run.library else "only TensorFlow"
    if screen.error:
        raise _Verdict("failed", f"in a fresh process that loads {loads}, the SavedModel does "
                       f"not load and run: {screen.error}")
    problems = []
    for sample in samples:
        if isinstance(outputs := screen.outputs.get((sample.index, "in tf.function"), []), str):
            problems.append(f"{sample}: the loaded model raised {_told(outputs)}")
        else:
            problems += run.compare(sample, run.eager(sample), outputs, "the loaded model")
    if problems:
        raise _Verdict("failed", problems)
    without = ("it needs no op that TensorFlow alone lacks" if not screen.unregistered else
               f"without it, it cannot load: TensorFlow alone registers no "
               f"{', '.join(screen.unregistered)}")
    return f"a fresh process that loads {loads} gives the same outputs; {without}"


@dataclasses.dataclass(frozen=True)
class Check:
    """A check: its ``name`` in ``checks`` and in the results; the ``function`` that returns its
    reason for ``ok`` or raises ``_Verdict``; whether it reads what the fresh process found
    (``fresh_process``); and whether it runs the samples given, leaving out, with a note, those
    that crashed (``runs_given_samples``)."""

    name: str
    function: Callable[[_Run], str]
    fresh_process: bool
    runs_given_samples: bool


# The checks, in the order they run and are reported.
TABLE = (
    Check("registered", _check_registered, fresh_process=False, runs_given_samples=False),
    Check("shape_fn", _check_shape_fn, fresh_process=False, runs_given_samples=True),
    Check("crash", _check_crash, fresh_process=True, runs_given_samples=False),
    Check("gradient", _check_gradient, fresh_process=False, runs_given_samples=True),
    Check("modes", _check_modes, fresh_process=False, runs_given_samples=True),
    Check("edges", _check_edges, fresh_process=True, runs_given_samples=False),
    Check("vmap", _check_vmap, fresh_process=False, runs_given_samples=True),
    Check("retrace", _check_retrace, fresh_process=False, runs_given_samples=True),
    Check("pure", _check_pure, fresh_process=False, runs_given_samples=True),
    Check("saved_model", _check_saved_model, fresh_process=True, runs_given_samples=True),
)
CHECKS = tuple(check.name for check in TABLE)
IN_PROCESS = tuple(check.name for check in TABLE if not check.fresh_process)


# --- the fresh process ------------------------------------------------------------------------
def _screen(run: _Run) -> _fresh_process.Ran:
    """Runs each sample (edge samples too) first in a fresh process that loads fn's SavedModel:
    eagerly (twice), in tf.function and with jit_compile. A sample the shape function refuses
    runs too, traced for unknown shapes: eagerly, no shape function runs. A crash ends that
    process, not this one, and the next starts past the sample."""
    calls, refused = [], set()
    for sample in run.samples + run.edges:
        specs = _specs(run, sample)
        if specs is None:
            continue  # fn cannot build its ops on it (registered)
        if isinstance(run.trace(sample), Exception):
            refused.add(sample.index)
        jit = not run.untyped(sample, "CPU:0")
        calls.append(_fresh_process.Call(sample.index, sample.arrays, sample.dtypes, specs, jit))
    if not calls:
        return _fresh_process.Ran()
    with tempfile.TemporaryDirectory(prefix="opcheck-") as directory:
        _fresh_process.save(run.fn, calls, directory)
        ran = _fresh_process.run(calls, run.library or "", run.op_types, directory)
    if ran.error and not ran.error.startswith("it ended"):
        ran.error = _told(ran.error)
    ran.refused = refused
    return ran


def _specs(run: _Run, sample: _Sample) -> list[tf.TensorSpec] | None:
    """The signature to trace fn for: the sample's shapes, or where the shape function refuses
    them, unknown dimensions, else an unknown rank; None if fn cannot be traced for either."""
    for unknown in ("", "dimensions", "rank"):
        if not isinstance(run.trace(sample, unknown), Exception):
            return [tf.TensorSpec(None if unknown == "rank" else [None] * a.ndim if unknown
                                  else a.shape, d) for a, d in zip(sample.arrays, sample.dtypes)]
    return None


# --- comparing values, telling errors, reading the registries ----------------------------
def as_bits(tensor: tf.Tensor) -> tuple:
    """Everything that identifies a tensor's value exactly: dtype, shape and raw bytes (NaN
    payloads and -0.0 included)."""
    array = np.asarray(tensor.numpy(), dtype=object if tensor.dtype == tf.string else None)
    payload = array.tolist() if array.dtype == object else array.tobytes()
    return tensor.dtype, tuple(tensor.shape), payload


def _flat(outputs: Any) -> list[tf.Tensor]:
    return [tf.convert_to_tensor(t) for t in tf.nest.flatten(outputs, expand_composites=True)]


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
    want, got = np.asarray(expected.numpy()), np.asarray(actual.numpy())
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
