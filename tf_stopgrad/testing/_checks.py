"""opcheck's checks: one function each, which takes the ``Run`` and returns its reason for
``ok`` or raises ``Verdict``; then ``TABLE``, which lists them in the order they run and says
all that opcheck needs to know of each. A new check is a function here and a row in ``TABLE``."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf

from .. import _compat
from ._run import Run, Verdict, difference, differentiable, flat, gradient_of, kept, listed, told
from ._samples import Sample, batch_size, in_batch

# What modes says where XLA has the types of no sample: a failure of jit_compile is not tried.
UNJITTED = "eager and tf.function agree"


def _check_registered(run: Run) -> str:
    unbuilt = [f"{s}: fn cannot build its ops: {told(run.trace(s))}"  # type: ignore[arg-type]
               for s in run.samples if isinstance(run.trace(s), Exception)
               and not _refused_by_shape_function(run, s)]
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
        raise Verdict("failed", unbuilt + missing)
    if not run.op_types:
        raise Verdict("skipped", "fn builds no op on any sample, whatever its shapes")
    full = ", ".join(k for k in run.kinds if all(gap[1] != k for gap in gaps)) or "a device"
    noted = "".join(f"; {where} for {', '.join(types)}" for where, types in notes.items())
    return f"{', '.join(run.op_types)}: an OpDef, and a kernel on {full} for every sample{noted}"


def _check_shape_fn(run: Run) -> str:
    # A sample the shape function refuses is the caller's error: the kernel is not run on it.
    rejected = [f"{s} ({told(run.trace(s))})" for s in run.samples  # type: ignore[arg-type]
                if _refused_by_shape_function(run, s)]
    found = [run.shape_problems(s) for s in [*run.usable(skip=not rejected), *run.edges]]
    if problems := [problem for sample_problems, _ in found for problem in sample_problems]:
        raise Verdict("failed", problems)
    refused = [refusal for _, refusals in found for refusal in refusals]
    note = f"; inference refuses partial shapes: {listed(refused, 1)}" if refused else ""
    if rejected:
        note += f"; the shape function refuses {listed(rejected, 1)}, so it is left out, and " \
                "its kernel not run on it in this process (the fresh process calls it eagerly)"
    agree = "inferred shapes and dtypes agree with the kernel's" if found else "no sample to run"
    return agree + note


def _check_crash(run: Run) -> str:
    if crashed := [run.ended(s) for s in run.samples if run.ended(s)]:
        raise Verdict("failed", crashed)
    run.unscreened("no fresh process could run the samples, so they run in this one unscreened")
    count = f"{len(run.samples)} given sample{'s' if len(run.samples) > 1 else ''}"
    edges = "; edge samples: see edges" if run.edges else ""
    return f"the {count}: none ends a fresh process, eagerly, in tf.function or with " \
           f"jit_compile{edges}"


def _check_gradient(run: Run) -> str:
    why = {sample: run.why_no_gradient(sample) for sample in run.usable()}
    if set(why.values()) == {"no floating input"}:
        raise Verdict("skipped", "no sample has a floating input")
    # No gradient flows through an op without a floating output: the tape gives None.
    if set(why.values()) <= {"no floating input", "no floating output"}:
        raise Verdict("skipped", "no output is floating: a gradient through fn is None, as "
                      "through tf.math.is_nan")
    if run.ungradable:
        raise Verdict("failed", [f"no gradient is registered for {op}: register one with "
                                 "@tf.RegisterGradient, or declare that it has none with "
                                 "tf.no_gradient" for op in run.ungradable])
    wrong = [sample for sample, reason in why.items() if reason == "wrong shapes"]
    left_out = f"{len(wrong)} of {len(wrong) + list(why.values()).count('')} samples, whose " \
               "inferred shapes are wrong (see shape_fn)"
    if "" not in why.values():
        raise Verdict("skipped", f"no sample to differentiate: {left_out}")
    notes = [f"{op} is declared not differentiable" for op in run.op_types
             if gradient_of(op) == "none"]
    problems = []
    for sample in (sample for sample, reason in why.items() if not reason):
        found: dict[str, Any] = {}
        for how in ("eagerly", "in tf.function", "by v1 gradients"):
            try:
                found[how] = run.gradients(sample, how)
            except LookupError as error:  # a gradient function that refuses
                found[how] = told(error)
        if refused := [how for how, grads in found.items() if isinstance(grads, str)]:
            notes.append(f"the gradient refuses by design ({found[refused[0]]})")
            if len(refused) < len(found):
                problems.append(f"{sample}: the gradient is refused {', '.join(refused)} only")
            continue
        floating = [i for i, dtype in enumerate(sample.dtypes) if differentiable(dtype)]
        problems += [f"{sample}: the gradient of input {i} is {g.dtype.name}{g.shape.as_list()}, "
                     "not the input's dtype and shape" for i, g in zip(floating, found["eagerly"])
                     if g is not None and (g.dtype, g.shape) != (sample.dtypes[i],
                                                                 sample.arrays[i].shape)]
        # Both in a graph: the ways (eager, tf.function, jit_compile) are compared by modes.
        problems += run.gradient_differences(sample, found["in tf.function"],
                                             found["by v1 gradients"], "by v1 gradients")
    if problems:
        raise Verdict("failed", problems)
    return listed(notes + [f"left out: {left_out}"] * bool(wrong)) or \
        "registered, of the inputs' dtypes and shapes; in a graph, a tape and v1 gradients agree"


def _check_modes(run: Run) -> str:
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
                    found[how] = flat(way(*sample.tensors()))
            except Exception as error:
                problems.append(f"{sample} on {device}: {how} fails: {told(error)}" + (
                    ". Register an XLA kernel (REGISTER_XLA_OP), and load the library before "
                    "TensorFlow runs its first op: TensorFlow makes XLA's kernels once"
                    if "OpKernel for XLA_" in str(error) else ""))
        for how, outputs in found.items():
            problems += run.compare(sample, expected, outputs, f"{device}, {how}")
        if run.why_no_gradient(sample):
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
        raise Verdict("failed", problems)
    note = f" ({listed(notes)})" if notes else ""
    agreeing = "eager, tf.function and jit_compile agree" if all(jitted) else \
        "eager, tf.function and, where tried, jit_compile agree" if any(jitted) else UNJITTED
    return f"{agreeing} on {', '.join(run.devices)}{note}"


def _check_edges(run: Run) -> str:
    run.unscreened("edge samples run only in a fresh process, and none could run them")
    problems, failing, contradicted, outputs = [], 0, 0, run.screen.outputs
    for sample in run.edges:
        if run.ended(sample):
            problems.append(run.ended(sample))
            continue
        eager, again, third = (outputs.get((sample.index, how)) for how in (
            "eagerly", "eagerly again", "eagerly a third time"))
        failing += eager is None or isinstance(eager, str)
        if eager is None:  # fn cannot be traced for it, whatever its shapes: a clean error
            continue
        if isinstance(eager, list) and isinstance(again, list) and not run.varies:
            varied = False
            thirds = third if isinstance(third, list) else again
            for i, (first, second, last) in enumerate(zip(eager, again, thirds)):
                twice, thrice = difference(first, second), difference(first, last)
                varied |= bool(twice or thrice)
                if twice and not thrice:  # the third call fills memory as the first did
                    problems.append(f"{sample}, eagerly twice: output {i}: {twice}: an output "
                                    "depends on memory no one wrote, left unwritten by the kernel "
                                    "or read past an input (two calls differ where glibc fills "
                                    "new memory otherwise, and agree where it fills it alike)")
                elif (twice or thrice) and not run.stateful:
                    problems.append(f"{sample}, eagerly three times: output {i}: {twice or thrice}"
                                    ": outputs vary, though the op is declared stateless: it draws "
                                    "random numbers, or reads memory it does not own")
            if varied:
                continue  # its values are not the kernel's to compare in other ways
        # A graph refuses it, as the shape function does (a clean error), or computes with
        # shapes that the kernel's contradict (shape_fn fails): compared eagerly only.
        if isinstance(run.trace(sample), Exception) or run.shape_problems(sample)[0]:
            contradicted += not isinstance(run.trace(sample), Exception)
            continue
        for how in ("in tf.function", "with jit_compile"):
            found, on_base = (outputs.get((i, how)) for i in (sample.index, sample.base))
            if found is None or not isinstance(on_base, list):  # not tried; or its given sample
                continue  # fails anyway (modes), or ended the process before this way (crash)
            if isinstance(eager, list) and isinstance(found, list):
                problems += run.compare(sample, eager, found, how)
            elif isinstance(eager, list) or isinstance(found, list):
                said = [f"fails: {told(x)}" if isinstance(x, str) else "gives outputs"
                        for x in (eager, found)]
                problems.append(f"{sample}: eagerly, fn {said[0]}; {how}, it {said[1]}")
    if problems:
        raise Verdict("failed", problems)
    note = f"; {contradicted} whose shapes the shape function contradicts, compared eagerly " \
           "only (see shape_fn)" if contradicted else ""
    return f"{len(run.edges)} edge samples (empty axes, scalars, a batch of one, extreme " \
        "values), run in a fresh process: none ends it, and each gives the same outputs, or " \
        "fails, eagerly (three times), in tf.function and, where XLA has its types, with " \
        f"jit_compile; {failing} fail{note}"


def _check_vmap(run: Run) -> str:
    if not (samples := [s for s in run.usable() if s.arrays]):
        raise Verdict("skipped", "fn takes no argument to batch")
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
            raise Verdict("failed", f"{sample}: tf.vectorized_map fails without its while_loop "
                          f"fallback: {told(error)}{advice}") from error
        for k, example in enumerate(examples):
            # Example k of the batch, sliced in NumPy where TensorFlow cannot (quantized dtypes).
            one = flat(tf.nest.map_structure(lambda t, k=k: tf.constant(t.numpy()[k], t.dtype)
                                             if isinstance(t, tf.Tensor) else t[k], batch))
            loop = run.guarded(sample, run.call, sample.tensors(example))
            problems += [f"tf.vectorized_map differs from a loop: {problem}"
                         for problem in run.compare(sample, loop, one, f"example {k}")]
    if problems:
        raise Verdict("failed", problems)
    return "tf.vectorized_map vectorizes fn, with the results of a loop over the batch"


def _check_retrace(run: Run) -> str:
    signatures: dict[str, tuple] = {}
    for sample in run.usable():
        batched = in_batch(sample.arrays, empty_too=False)
        specs = [tf.TensorSpec([None, *a.shape[1:]] if b else a.shape, d)
                 for a, b, d in zip(sample.arrays, batched, sample.dtypes)]
        if any(batched):
            signatures.setdefault(str(specs), (sample, specs, batched))
    if not signatures:
        raise Verdict("skipped", "no sample has an input with a batch dimension (size 1 or more)")
    refused, served = [], 0
    for sample, specs, batched in signatures.values():
        traced = tf.function(run.fn, input_signature=specs, autograph=False)
        try:
            traced.get_concrete_function()
        except Exception as error:
            raise Verdict("failed", f"{sample}: fn cannot be traced for an unknown batch "
                          f"dimension ({', '.join(str(s.shape.as_list()) for s in specs)}): "
                          f"{told(error)}. A tf.function that calls it traces again for "
                          "every batch size") from kept(error)
        size = batch_size(sample.arrays)
        for rows in (np.arange(batch) % size for batch in (size, size + 1, 2 * size + 1)):
            try:
                traced(*sample.tensors([a[rows] if b else a
                                        for a, b in zip(sample.arrays, batched)]))
                served += len(rows) > size
            except tf.errors.OpError as error:  # inputs tied otherwise than by their first axis
                refused.append(f"a batch of {len(rows)} made from {sample}: {told(error)}")
        if (traces := traced.experimental_get_tracing_count()) != 1:
            raise Verdict("failed", f"{sample}: {traces} traces for one signature")
    if not served:
        raise Verdict("skipped", "fn refused every batch larger than its sample, so no other "
                      f"batch size was tried: {listed(refused, 1)}")
    note = f" (fn refused {listed(refused, 1)})" if refused else ""
    return f"one trace serves batch sizes n, n+1 and 2n+1, for each of {len(signatures)} " \
           f"signatures{note}"


def _check_pure(run: Run) -> str:
    problems = []
    for sample in run.usable():
        for how, call in (("eagerly", run.call), ("in tf.function", lambda t: run.function(*t))):
            inputs = sample.tensors()
            run.guarded(sample, call, inputs)
            for i, (before, after) in enumerate(zip(sample.tensors(), inputs)):
                if text := difference(before, after):
                    problems.append(f"{sample}: called {how}, fn changed its input {i} ({text}): "
                                    "a kernel must never write into an input")
    if run.varies and not run.stateful:
        problems.append(f"{', '.join(run.op_types)} is declared stateless, yet two calls on "
                        f"{run.varies[0]} gave other outputs: Grappler may fold it into a constant "
                        "or merge two calls. Declare it SetIsStateful(), or make it deterministic")
    if problems:
        raise Verdict("failed", problems)
    if run.varies:
        return f"inputs unchanged; outputs vary, as stateful {', '.join(run.stateful)} may " \
               "make them"
    return "inputs unchanged, and the same outputs for the same inputs"


def _check_saved_model(run: Run) -> str:
    samples, screen = run.usable(), run.screen
    loads = ", ".join(name.partition(":")[2] for name in run.libraries) or "only TensorFlow"
    if screen.error:
        raise Verdict("failed", f"in a fresh process that loads {loads}, the SavedModel does "
                      f"not load and run: {screen.error}")
    problems = []
    for sample in samples:
        if isinstance(outputs := screen.outputs.get((sample.index, "in tf.function"), []), str):
            problems.append(f"{sample}: the loaded model raised {told(outputs)}")
        else:
            problems += run.compare(sample, run.eager(sample), outputs, "the loaded model")
    if problems:
        raise Verdict("failed", problems)
    without = ("it needs no op that TensorFlow alone lacks" if not screen.unregistered else
               f"without it, it cannot load: TensorFlow alone registers no "
               f"{', '.join(screen.unregistered)}")
    same = "outputs of the same dtypes and ranks (fn's vary: see pure)" if run.varies else \
        "the same outputs"
    return f"a fresh process that loads {loads} gives {same}; {without}"


# --- the samples a check reports, which the others leave out ---------------------------------
def _refused_by_shape_function(run: Run, sample: Sample) -> bool:
    trace = run.trace(sample)
    return isinstance(trace, ValueError) and " with input shapes: " in str(trace)


def _cannot_build_or_run_on_the_cpu(run: Run, sample: Sample) -> bool:
    if isinstance(run.trace(sample), Exception):
        return not _refused_by_shape_function(run, sample)
    return any(gap[1] == "CPU" for gap in run.kernel_gaps.get(sample.index, []))


@dataclasses.dataclass(frozen=True)
class Check:
    """A check, and all that opcheck needs to know of it."""

    name: str  # in ``checks`` and in the results
    function: Callable[[Run], str]  # returns its reason for ok, or raises Verdict
    fresh_process: bool = False  # reads what the fresh process found, which then runs first
    runs_given_samples: bool = True  # and so notes those that the others report, left out
    reports: Callable[[Run, Sample], bool] | None = None  # samples the others then leave out
    runs_edge_samples: bool = False  # which the fresh process then derives and runs
    # (words, start): an expect's words hold untried where its ok starts so (tried none of them).
    untried: tuple[str, str] = ("", "")


# The checks, in the order they run and are reported.
TABLE = (
    Check("registered", _check_registered, runs_given_samples=False,
          reports=_cannot_build_or_run_on_the_cpu),
    Check("shape_fn", _check_shape_fn, reports=_refused_by_shape_function),
    Check("crash", _check_crash, fresh_process=True, runs_given_samples=False,
          reports=lambda run, sample: sample.index in run.screen.crashes),
    Check("gradient", _check_gradient),
    Check("modes", _check_modes, untried=("jit_compile", UNJITTED)),
    Check("edges", _check_edges, fresh_process=True, runs_given_samples=False,
          runs_edge_samples=True),
    Check("vmap", _check_vmap),
    Check("retrace", _check_retrace),
    Check("pure", _check_pure),
    Check("saved_model", _check_saved_model, fresh_process=True),
)
CHECKS = tuple(check.name for check in TABLE)
IN_PROCESS = tuple(check.name for check in TABLE if not check.fresh_process)
