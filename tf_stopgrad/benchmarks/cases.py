"""The timed cases: what is timed against what, how many calls per sample, and the targets."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator, Mapping
from typing import Callable

import numpy as np
import tensorflow as tf

import tf_stopgrad
from tf_stopgrad import _compat
from tf_stopgrad.benchmarks.timing import TimedGroup, Timing

StopGradient = Callable[[tf.Tensor], tf.Tensor]


@dataclasses.dataclass(frozen=True)
class Sizes:
    """How big and how long the measurements are: the full benchmark, or a quick smoke run."""

    calls_divisor: int  # Divides every group's calls per sample.
    large_log2_elements: int  # The large tensor of the size-independence case has 2**this.
    chain_length: int  # Ops in the graph case's chain.
    tape_intermediate_bytes: int  # The intermediate of the tape-memory measurement.
    export_functions: int  # tf.functions in the exported module,
    export_links: int  # links in each one's chain,
    export_repeats: int  # runs of the save and of the export, best one kept.
    import_processes: int  # Fresh processes timing the import, median kept.


FULL = Sizes(
    calls_divisor=1, large_log2_elements=26, chain_length=200, tape_intermediate_bytes=64 << 20,
    export_functions=120, export_links=300, export_repeats=3, import_processes=15,
)  # fmt: skip
QUICK = Sizes(
    calls_divisor=10, large_log2_elements=16, chain_length=200, tape_intermediate_bytes=1 << 20,
    export_functions=3, export_links=10, export_repeats=1, import_processes=2,
)  # fmt: skip


def _no_note(timings: Mapping[str, Timing]) -> str:
    return ""


@dataclasses.dataclass(frozen=True)
class Comparison:
    """One table row: variant ``ours`` of a group against its variant ``reference``.

    ``note`` turns the group's timings into a remark printed under the table. With
    ``per_round`` the row shows median samples and the median of the per-round ratios instead
    of the best samples and their ratio.
    """

    case: str
    ours: str
    reference: str
    target: float | None
    note: Callable[[Mapping[str, Timing]], str] = _no_note
    per_round: bool = False


Case = tuple[TimedGroup, list[Comparison]]


def _calls(full: int, sizes: Sizes) -> int:
    """Calls per sample: ``full`` scaled down for quick runs, at least one."""
    return max(1, full // sizes.calls_divisor)


def _eager(sizes: Sizes) -> Case:
    """A one-element eager call without a tape, against the built-in and against the floor:
    ``TFE_Py_FastPathExecute``, the C++ call every eager op ends in, timed alone. The built-in
    dispatches and pauses the tape even when no tape exists; ours checks once whether any tape
    could record, calls the fast path directly, and pauses tapes only when one is active. What
    no wrapper can skip is the check whether this thread executes eagerly, without which an
    eager tensor captured in a ``tf.function`` would be computed eagerly instead of becoming a
    graph op; TensorFlow's generated wrapper for our op makes the same check."""
    small = tf.constant([1.0])
    ctx = _compat.context()
    op_library = tf.load_op_library(tf_stopgrad.library_path())
    ours_op, prevent_op = tf_stopgrad.STOP_GRADIENT_OP, tf_stopgrad.PREVENT_GRADIENT_OP
    fast_path = _compat.fast_path_execute
    group = TimedGroup(
        "eager",
        {
            "ours": lambda: tf_stopgrad.stop_gradient(small),
            "builtin": lambda: tf.stop_gradient(small),
            "prevent": lambda: tf_stopgrad.prevent_gradient(small),
            "ours_floor": lambda: fast_path(ctx, ours_op, None, small),
            "prevent_floor": lambda: fast_path(ctx, prevent_op, None, small, "message", ""),
            "builtin_floor": lambda: fast_path(ctx, "StopGradient", None, small),
            "wrapper": lambda: op_library.tf_stopgrad_stop_gradient(small),
            "raw_op": lambda: tf.raw_ops.StopGradient(input=small),
        },
        calls=_calls(500, sizes),
    )

    def above_floor(timings: Mapping[str, Timing]) -> str:
        ours = timings["ours"].best_us - timings["ours_floor"].best_us
        builtin = timings["builtin"].best_us - timings["builtin_floor"].best_us
        return (
            f"Python above the TFE_Py_FastPathExecute floor: ours {ours:+.2f} µs, "
            f"built-in {builtin:+.2f} µs (dispatch, composite check, tape pause)."
        )

    floor = "against its floor (TFE_Py_FastPathExecute of our op)"
    return group, [
        Comparison("Eager call, no tape", "ours", "builtin", 0.8, above_floor),
        Comparison(f"Eager stop_gradient {floor}", "ours", "ours_floor", 1.1),
        Comparison(f"Eager prevent_gradient {floor}", "prevent", "prevent_floor", 1.1),
        Comparison("Floor: TFE_Py_FastPathExecute direct", "ours_floor", "builtin_floor", None),
        Comparison(
            "Floor: generated op wrapper / tf.raw_ops.StopGradient", "wrapper", "raw_op", None
        ),
    ]


def _eager_under_tape(sizes: Sizes) -> Case:
    """A one-element eager call while a tape watches a different tensor."""
    small = tf.constant([1.0])
    watched = tf.constant(2.0)

    @contextlib.contextmanager
    def tape_watching_something_else() -> Iterator[None]:
        with tf.GradientTape() as tape:
            tape.watch(watched)
            yield

    group = TimedGroup(
        "tape",
        {
            "ours": lambda: tf_stopgrad.stop_gradient(small),
            "builtin": lambda: tf.stop_gradient(small),
        },
        calls=_calls(500, sizes),
        context=tape_watching_something_else,
    )
    case = "Eager call inside an active GradientTape (watching another tensor)"
    return group, [Comparison(case, "ours", "builtin", 1.0)]


def _size_independence(sizes: Sizes) -> Case:
    """A large eager input against a one-element one: forwarding must not copy."""
    small = tf.constant([1.0])
    large = tf.zeros([2**sizes.large_log2_elements])
    group = TimedGroup(
        "size",
        {
            "ours_large": lambda: tf_stopgrad.stop_gradient(large),
            "ours_small": lambda: tf_stopgrad.stop_gradient(small),
            "builtin_large": lambda: tf.stop_gradient(large),
            "builtin_small": lambda: tf.stop_gradient(small),
        },
        calls=_calls(500, sizes),
    )
    elements = f"2^{sizes.large_log2_elements} vs 1 float32 elements"
    return group, [
        Comparison(f"Size independence, ours: {elements}", "ours_large", "ours_small", 1.1),
        Comparison(
            f"Size independence, built-in: {elements}", "builtin_large", "builtin_small", None
        ),
    ]


def _chain(stop_gradient: StopGradient, length: int) -> Callable[[tf.Tensor, tf.Tensor], tf.Tensor]:
    """A tf.function of ``length`` steps ``x = stop_gradient(x) * scale``.

    ``scale`` is an argument rather than a constant so that Grappler cannot fold or reorder
    the multiplications of either chain; the chains then differ only in the stop-gradient
    nodes.
    """

    @tf.function
    def chain(x: tf.Tensor, scale: tf.Tensor) -> tf.Tensor:
        for _ in range(length):
            x = stop_gradient(x) * scale
        return x

    return chain


def _graph(sizes: Sizes) -> Case:
    """Chains of stop-gradient nodes in a tf.function, and the same chain of Identity nodes.
    Grappler deletes nodes whose type is exactly ``StopGradient`` or ``PreventGradient`` before
    a graph runs. So that it prunes ours alike, the op library's graph optimization pass
    (``cc/graph_pass.cc``) replaces each plugin node, before placement, by a built-in node with
    the same name, attributes, device and edges, in every graph the runtime is about to run
    (function and session graphs). Gradients were built before, from the client's graph."""
    x = tf.constant([1.0])
    scale = tf.constant(1.0001)
    length = sizes.chain_length
    ours = _chain(tf_stopgrad.stop_gradient, length)
    builtin = _chain(tf.stop_gradient, length)
    plain = _chain(tf.identity, length)
    group = TimedGroup(
        "graph",
        {
            "ours": lambda: ours(x, scale),
            "builtin": lambda: builtin(x, scale),
            "identity": lambda: plain(x, scale),
        },
        calls=_calls(20, sizes),
    )

    def per_op(timings: Mapping[str, Timing]) -> str:
        extra = (timings["ours"].best_us - timings["builtin"].best_us) / length
        return (
            f"Per stop-gradient node: ours costs {extra:+.3f} µs more than the built-in. "
            f"The same chain with tf.identity runs in {timings['identity'].best_us:.1f} µs: "
            f"Grappler removes built-in StopGradient and Identity nodes, and the plugin's, to "
            f"which the op library's graph pass gives the built-in type."
        )

    case = f"Graph: tf.function chain of {length} x = stop_gradient(x) * scale"
    return group, [Comparison(case, "ours", "builtin", 1.25, per_op)]


_ROWS = 64  # of the vectorized_map cases' batch


def _vectorized(stop_gradient: StopGradient) -> Callable[[], tf.Tensor]:
    """``tf.vectorized_map`` of a small per-row function using ``stop_gradient``."""
    batch = tf.reshape(tf.range(_ROWS * 16, dtype=tf.float32), [-1, 16])

    def per_row(row: tf.Tensor) -> tf.Tensor:
        return stop_gradient(row) * 2.0 + row

    return lambda: tf.vectorized_map(per_row, batch)


def _ours_against_builtin(
    name: str,
    make: Callable[[StopGradient], Callable[[], object]],
    calls: int,
    case: str,
    target: float,
    per_round: bool = False,
) -> Case:
    """A group ``name`` timing ``make(tf_stopgrad.stop_gradient)`` against
    ``make(tf.stop_gradient)``, and its one table row (see :class:`Comparison`)."""
    variants = {"ours": make(tf_stopgrad.stop_gradient), "builtin": make(tf.stop_gradient)}
    group = TimedGroup(name, variants, calls=calls)
    return group, [Comparison(case, "ours", "builtin", target, per_round=per_round)]


def _vectorized_map_eager(sizes: Sizes) -> Case:
    """Eager ``tf.vectorized_map``: every call traces and vectorizes (pfor) afresh."""
    case = f"vectorized_map over {_ROWS} rows, eager (traces and vectorizes every call)"
    return _ours_against_builtin("vectorized_map_eager", _vectorized, _calls(1, sizes), case, 1.1)


def _vectorized_map_in_function(sizes: Sizes) -> Case:
    """``tf.vectorized_map`` inside a tf.function: the vectorized graph, run repeatedly."""
    case = f"vectorized_map over {_ROWS} rows, inside tf.function (steady state)"
    return _ours_against_builtin(
        "vectorized_map_function",
        lambda stop_gradient: tf.function(_vectorized(stop_gradient)),
        _calls(30, sizes),
        case,
        1.1,
    )


def _xla(sizes: Sizes) -> Case:
    """A small ``jit_compile=True`` function, called after it has been compiled."""
    values = tf.reshape(tf.range(256, dtype=tf.float32), [16, 16])

    def compiled(stop_gradient: StopGradient) -> Callable[[], tf.Tensor]:
        @tf.function(jit_compile=True)
        def function(x: tf.Tensor) -> tf.Tensor:
            return tf.reduce_sum(stop_gradient(x) * x, axis=1)

        return lambda: function(values)

    case = "XLA: jit_compile=True function, steady state"
    return _ours_against_builtin("xla", compiled, _calls(30, sizes), case, 1.05)


def _in_session(
    make_step: Callable[[StopGradient], tuple[object, dict[tf.Tensor, object]]],
) -> Callable[[StopGradient], Callable[[], object]]:
    """``make(stop_gradient)``: a v1 Session over the graph that ``make_step`` builds with it,
    variables initialized; calling the result runs the step's fetch with its feeds once."""

    def make(stop_gradient: StopGradient) -> Callable[[], object]:
        graph = tf.Graph()
        with graph.as_default():
            fetch, feeds = make_step(stop_gradient)
            initialize = tf.compat.v1.global_variables_initializer()
        session = tf.compat.v1.Session(graph=graph)
        session.run(initialize)
        return lambda: session.run(fetch, feeds)

    return make


def _session_chain(sizes: Sizes) -> Case:
    """The graph case's chain, in a v1 graph run by ``tf.compat.v1.Session.run``.

    The start and the scale are fed: Grappler folds a chain on a placeholder_with_default into
    one Const, and fuses a chain of ``sin`` into one _UnaryOpsComposition once the stops are
    gone. Fed, the 200 multiplications stay, in both graphs alike.
    """
    length = sizes.chain_length

    def chain(stop_gradient: StopGradient) -> tuple[tf.Tensor, dict[tf.Tensor, object]]:
        x = start = tf.compat.v1.placeholder(tf.float32, [1])
        scale = tf.compat.v1.placeholder(tf.float32, [])
        for _ in range(length):
            x = stop_gradient(x) * scale
        return x, {start: np.ones([1], np.float32), scale: np.float32(1.0001)}

    case = f"v1 Session.run: chain of {length} x = stop_gradient(x) * scale"
    make = _in_session(chain)
    return _ours_against_builtin(
        "session_chain", make, _calls(20, sizes), case, 1.05, per_round=True
    )


def _weights(name: str, shape: list[int]) -> tf.Variable:
    """A v1 variable of the training-step case, Glorot-initialized."""
    return tf.compat.v1.get_variable(
        name, shape, initializer=tf.compat.v1.glorot_uniform_initializer()
    )


def _session_training_step(sizes: Sizes) -> Case:
    """One v1 training step on a fed batch: a two-layer model regressing on a stopped target
    made from its own prediction, stepped by GradientDescentOptimizer."""
    batch = np.linspace(-1.0, 1.0, 64 * 16, dtype=np.float32).reshape(64, 16)

    def training_step(stop_gradient: StopGradient) -> tuple[object, dict[tf.Tensor, object]]:
        inputs = tf.compat.v1.placeholder(tf.float32, [None, 16])
        hidden = tf.nn.relu(inputs @ _weights("w1", [16, 32]) + _weights("b1", [32]))
        prediction = hidden @ _weights("w2", [32, 1]) + _weights("b2", [1])
        target = stop_gradient(tf.reduce_mean(prediction) + tf.reduce_sum(inputs, 1, True))
        loss = tf.reduce_mean(tf.square(prediction - target))
        step = tf.compat.v1.train.GradientDescentOptimizer(0.01).minimize(loss)
        return step, {inputs: batch}

    case = "v1 Session.run: GradientDescentOptimizer step of a two-layer model, stopped target"
    make = _in_session(training_step)
    return _ours_against_builtin(
        "session_training", make, _calls(20, sizes), case, 1.05, per_round=True
    )


# In table order.
CASES: tuple[Callable[[Sizes], Case], ...] = (
    _eager,
    _eager_under_tape,
    _size_independence,
    _graph,
    _vectorized_map_eager,
    _vectorized_map_in_function,
    _xla,
    _session_chain,
    _session_training_step,
)
