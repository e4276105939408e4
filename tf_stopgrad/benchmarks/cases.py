"""The timed cases: what is timed against what, how many calls per sample, and the targets."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Callable

import numpy as np
import tensorflow as tf

import tf_stopgrad
from tf_stopgrad import _compat
from tf_stopgrad.benchmarks.timing import TimedCase

StopGradient = Callable[[tf.Tensor], tf.Tensor]
CHAIN_LENGTH = 200  # Ops in the chains of the graph and Session cases.


def _calls(full: int, quick: bool) -> int:
    return max(1, full // 10) if quick else full


def _eager(quick: bool) -> TimedCase:
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

    def above_floor(best: Mapping[str, float]) -> str:
        ours = best["ours"] - best["ours_floor"]
        builtin = best["builtin"] - best["builtin_floor"]
        return (
            f"Python above the TFE_Py_FastPathExecute floor: ours {ours:+.2f} µs, "
            f"built-in {builtin:+.2f} µs (dispatch, composite check, tape pause)."
        )

    floor = "against its floor (TFE_Py_FastPathExecute of our op)"
    return TimedCase(
        variants={
            "ours": lambda: tf_stopgrad.stop_gradient(small),
            "builtin": lambda: tf.stop_gradient(small),
            "prevent": lambda: tf_stopgrad.prevent_gradient(small),
            "ours_floor": lambda: fast_path(ctx, ours_op, None, small),
            "prevent_floor": lambda: fast_path(ctx, prevent_op, None, small, "message", ""),
            "builtin_floor": lambda: fast_path(ctx, "StopGradient", None, small),
            "wrapper": lambda: op_library.tf_stopgrad_stop_gradient(small),
            "raw_op": lambda: tf.raw_ops.StopGradient(input=small),
        },
        calls=_calls(500, quick),
        rows=[
            ("Eager call, no tape", "ours", "builtin", 0.8),
            (f"Eager stop_gradient {floor}", "ours", "ours_floor", 1.1),
            (f"Eager prevent_gradient {floor}", "prevent", "prevent_floor", 1.1),
            ("Floor: TFE_Py_FastPathExecute direct", "ours_floor", "builtin_floor", None),
            ("Floor: generated op wrapper / tf.raw_ops.StopGradient", "wrapper", "raw_op", None),
        ],
        note=above_floor,
    )


def _eager_under_tape(quick: bool) -> TimedCase:
    """A one-element eager call while a tape watches a different tensor."""
    small = tf.constant([1.0])
    watched = tf.constant(2.0)

    @contextlib.contextmanager
    def tape_watching_something_else() -> Iterator[None]:
        with tf.GradientTape() as tape:
            tape.watch(watched)
            yield

    case = "Eager call inside an active GradientTape (watching another tensor)"
    return TimedCase(
        variants={
            "ours": lambda: tf_stopgrad.stop_gradient(small),
            "builtin": lambda: tf.stop_gradient(small),
        },
        calls=_calls(500, quick),
        rows=[(case, "ours", "builtin", 1.0)],
        context=tape_watching_something_else,
    )


def _size_independence(quick: bool) -> TimedCase:
    """A large eager input against a one-element one: forwarding must not copy."""
    log2_elements = 16 if quick else 26
    small = tf.constant([1.0])
    large = tf.zeros([2**log2_elements])
    elements = f"2^{log2_elements} vs 1 float32 elements"
    return TimedCase(
        variants={
            "ours_large": lambda: tf_stopgrad.stop_gradient(large),
            "ours_small": lambda: tf_stopgrad.stop_gradient(small),
            "builtin_large": lambda: tf.stop_gradient(large),
            "builtin_small": lambda: tf.stop_gradient(small),
        },
        calls=_calls(500, quick),
        rows=[
            (f"Size independence, ours: {elements}", "ours_large", "ours_small", 1.1),
            (f"Size independence, built-in: {elements}", "builtin_large", "builtin_small", None),
        ],
    )


def _chain(stop_gradient: StopGradient) -> Callable[[tf.Tensor, tf.Tensor], tf.Tensor]:
    """A tf.function of ``CHAIN_LENGTH`` steps ``x = stop_gradient(x) * scale``.

    ``scale`` is an argument rather than a constant so that Grappler cannot fold or reorder the
    multiplications of either chain; the chains then differ only in the stop-gradient nodes.
    """

    @tf.function
    def chain(x: tf.Tensor, scale: tf.Tensor) -> tf.Tensor:
        for _ in range(CHAIN_LENGTH):
            x = stop_gradient(x) * scale
        return x

    return chain


def _graph(quick: bool) -> TimedCase:
    """Chains of stop-gradient nodes in a tf.function, and the same chain of Identity nodes.
    Grappler deletes nodes whose type is exactly ``StopGradient`` or ``PreventGradient`` before
    a graph runs. So that it prunes ours alike, the op library's graph optimization pass
    (``cc/graph_pass.cc``) replaces each plugin node, before placement, by a built-in node with
    the same name, attributes, device and edges, in every graph the runtime is about to run
    (function and session graphs). Gradients were built before, from the client's graph."""
    x = tf.constant([1.0])
    scale = tf.constant(1.0001)
    ours = _chain(tf_stopgrad.stop_gradient)
    builtin = _chain(tf.stop_gradient)
    plain = _chain(tf.identity)

    def per_op(best: Mapping[str, float]) -> str:
        extra = (best["ours"] - best["builtin"]) / CHAIN_LENGTH
        return (
            f"Per stop-gradient node: ours costs {extra:+.3f} µs more than the built-in. "
            f"The same chain with tf.identity runs in {best['identity']:.1f} µs: "
            f"Grappler removes built-in StopGradient and Identity nodes, and the plugin's, to "
            f"which the op library's graph pass gives the built-in type."
        )

    case = f"Graph: tf.function chain of {CHAIN_LENGTH} x = stop_gradient(x) * scale"
    return TimedCase(
        variants={
            "ours": lambda: ours(x, scale),
            "builtin": lambda: builtin(x, scale),
            "identity": lambda: plain(x, scale),
        },
        calls=_calls(20, quick),
        rows=[(case, "ours", "builtin", 1.25)],
        note=per_op,
    )


_ROWS = 64  # of the vectorized_map cases' batch


def _vectorized(stop_gradient: StopGradient) -> Callable[[], tf.Tensor]:
    batch = tf.reshape(tf.range(_ROWS * 16, dtype=tf.float32), [-1, 16])

    def per_row(row: tf.Tensor) -> tf.Tensor:
        return stop_gradient(row) * 2.0 + row

    return lambda: tf.vectorized_map(per_row, batch)


def _against_builtin(
    make: Callable[[StopGradient], Callable[[], object]],
    calls: int,
    case: str,
    target: float,
    per_round: bool = False,
) -> TimedCase:
    variants = {"ours": make(tf_stopgrad.stop_gradient), "builtin": make(tf.stop_gradient)}
    return TimedCase(variants, calls, [(case, "ours", "builtin", target)], per_round=per_round)


def _vectorized_map_eager(quick: bool) -> TimedCase:
    """Eager ``tf.vectorized_map``: every call traces and vectorizes (pfor) afresh."""
    case = f"vectorized_map over {_ROWS} rows, eager (traces and vectorizes every call)"
    return _against_builtin(_vectorized, _calls(1, quick), case, 1.1)


def _vectorized_map_in_function(quick: bool) -> TimedCase:
    """``tf.vectorized_map`` inside a tf.function: the vectorized graph, run repeatedly."""
    case = f"vectorized_map over {_ROWS} rows, inside tf.function (steady state)"
    return _against_builtin(
        lambda stop_gradient: tf.function(_vectorized(stop_gradient)), _calls(30, quick), case, 1.1
    )


def _xla(quick: bool) -> TimedCase:
    """A small ``jit_compile=True`` function, called after it has been compiled."""
    values = tf.reshape(tf.range(256, dtype=tf.float32), [16, 16])

    def compiled(stop_gradient: StopGradient) -> Callable[[], tf.Tensor]:
        @tf.function(jit_compile=True)
        def function(x: tf.Tensor) -> tf.Tensor:
            return tf.reduce_sum(stop_gradient(x) * x, axis=1)

        return lambda: function(values)

    case = "XLA: jit_compile=True function, steady state"
    return _against_builtin(compiled, _calls(30, quick), case, 1.05)


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


def _session_chain(quick: bool) -> TimedCase:
    """The graph case's chain, in a v1 graph run by ``tf.compat.v1.Session.run``.

    The start and the scale are fed: Grappler folds a chain on a placeholder_with_default into
    one Const, and fuses a chain of ``sin`` into one _UnaryOpsComposition once the stops are
    gone. Fed, the 200 multiplications stay, in both graphs alike.
    """

    def chain(stop_gradient: StopGradient) -> tuple[tf.Tensor, dict[tf.Tensor, object]]:
        x = start = tf.compat.v1.placeholder(tf.float32, [1])
        scale = tf.compat.v1.placeholder(tf.float32, [])
        for _ in range(CHAIN_LENGTH):
            x = stop_gradient(x) * scale
        return x, {start: np.ones([1], np.float32), scale: np.float32(1.0001)}

    case = f"v1 Session.run: chain of {CHAIN_LENGTH} x = stop_gradient(x) * scale"
    return _against_builtin(_in_session(chain), _calls(20, quick), case, 1.05, per_round=True)


def _weights(name: str, shape: list[int]) -> tf.Variable:
    return tf.compat.v1.get_variable(
        name, shape, initializer=tf.compat.v1.glorot_uniform_initializer()
    )


def _session_training_step(quick: bool) -> TimedCase:
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
    return _against_builtin(make, _calls(20, quick), case, 1.05, per_round=True)


# In table order.
CASES: tuple[Callable[[bool], TimedCase], ...] = (
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
