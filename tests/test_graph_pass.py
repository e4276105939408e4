"""The op library's graph pass, in function graphs: the runtime treats ours like the built-in.

Before placement, cc/graph_pass.cc gives the plugin's nodes the built-in op types, so that
Grappler prunes them exactly where it prunes the built-in StopGradient/PreventGradient, and
keeps them where it keeps those. Session graphs:
tests/test_session.py.
"""

import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf
from support import as_bits, sample

import tf_stopgrad

pytestmark = pytest.mark.core

PAIRS = {
    "stop": (tf_stopgrad.stop_gradient, tf.stop_gradient),
    "prevent": (
        lambda x: tf_stopgrad.prevent_gradient(x, "m"),
        lambda x: tf.raw_ops.PreventGradient(input=x, message="m"),
    ),
}

DUMP_SCRIPT = textwrap.dedent(
    """
    import tensorflow as tf
    import tf_stopgrad

    def programs(stop, prevent):
        @tf.function
        def chain(x):
            for _ in range(3):
                x = stop(x) * 2.0
            return prevent(x)

        @tf.function
        def guarded(x):
            with tf.control_dependencies([tf.debugging.assert_positive(x)]):
                return stop(x)

        @tf.function
        def branched(x):
            return tf.cond(x > 0, lambda: stop(x) * 2.0, lambda: prevent(x))

        @tf.function
        def looped(x):
            return tf.while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, stop(y) * 2.0), [0, x])[1]

        called = tf.function(lambda y: stop(y) * 3.0)

        @tf.function
        def calling(x):
            return called(x) + x

        return chain, guarded, branched, looped, calling

    builtin_prevent = lambda x: tf.raw_ops.PreventGradient(input=x, message="m")
    ours = programs(tf_stopgrad.stop_gradient, lambda x: tf_stopgrad.prevent_gradient(x, "m"))
    builtin = programs(tf.stop_gradient, builtin_prevent)
    for functions in (ours, builtin):
        print(*[function(tf.constant(1.0)).numpy() for function in functions])
    """
)
FUNCTIONS = [
    f"__inference_{name}" for name in ("chain", "guarded", "branched", "looped", "calling")
]
STOP_NODE = re.compile(
    r'node \{\n  name: "([^"]*(?:StopGradient|PreventGradient)[^"]*)"\n  op: "([^"]+)"'
)


def stop_nodes(path):
    """{name: op type} of the graph dump's nodes named like the stop-gradient ops."""
    return dict(STOP_NODE.findall(path.read_text()))


def dumps(dump_dir, function, stage):
    """The two dumps of ``function`` at ``stage``: ours (traced first), then the built-in's."""
    paths = [p for p in dump_dir.iterdir() if p.name.startswith(function) and stage in p.name]
    return sorted(paths, key=lambda p: int(re.search(r"_(\d+)\.", p.name).group(1)))


@pytest.mark.slow
def test_function_graphs_keep_exactly_the_nodes_the_builtin_keeps(tmp_path):
    dump_dir = tmp_path / "graphs"
    dump_dir.mkdir()
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", TF_DUMP_GRAPH_PREFIX=str(dump_dir),
               TF_DUMP_GRAPH_NAME_FILTER="*")  # fmt: skip
    result = subprocess.run(
        [sys.executable, "-c", DUMP_SCRIPT],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["8.0", "1.0", "2.0", "8.0", "4.0"] * 2

    ours_traced, _ = dumps(dump_dir, "__inference_chain", "before_pre_placement_passes")
    assert set(stop_nodes(ours_traced).values()) == {
        tf_stopgrad.STOP_GRADIENT_OP, tf_stopgrad.PREVENT_GRADIENT_OP}  # fmt: skip
    for function in FUNCTIONS:
        ours_run, builtin_run = dumps(dump_dir, function, "before_partition.")
        assert stop_nodes(ours_run) == stop_nodes(builtin_run), function
    # Grappler prunes them all here: the one with a control input too (it moves the edge), and
    # those of tf.cond's branches, tf.while_loop's body and a called function, which the
    # runtime inlines into the function before the plugin's pass runs.
    for function in FUNCTIONS:
        assert stop_nodes(dumps(dump_dir, function, "before_partition.")[0]) == {}, function


@pytest.mark.parametrize("pair", sorted(PAIRS))
@pytest.mark.parametrize("dtype", [tf.float32, tf.int32, tf.string, tf.complex64, tf.bool])
def test_chains_give_the_builtins_values(pair, dtype):
    ours, builtin = PAIRS[pair]

    def chain(op):
        @tf.function
        def run(x):
            outputs = [x]
            for _ in range(5):
                outputs.append(op(outputs[-1]))
            return outputs

        return run

    x = sample(dtype, (3, 4))
    assert [as_bits(t) for t in chain(ours)(x)] == [as_bits(t) for t in chain(builtin)(x)]


@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_control_inputs_still_run_first(pair):
    for op in PAIRS[pair]:

        @tf.function
        def guarded(x, op=op):
            with tf.control_dependencies([tf.debugging.assert_positive(x, message="negative")]):
                return op(x)

        assert guarded(tf.constant(2.0)).numpy() == 2.0
        with pytest.raises(tf.errors.InvalidArgumentError, match="negative"):
            guarded(tf.constant(-1.0))


def test_node_used_as_a_control_input_still_orders_its_dependents():
    counter = tf.Variable(0)

    @tf.function
    def ordered(x):
        stopped = tf_stopgrad.stop_gradient(x)
        with tf.control_dependencies([stopped]):
            counter.assign_add(1)
        return stopped

    assert ordered(tf.constant(4.0)).numpy() == 4.0
    assert counter.numpy() == 1


@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_inside_cond_and_while_loop_bodies(pair):
    def program(op):
        @tf.function
        def run(x, flag):
            branch = tf.cond(flag, lambda: op(x) * 2.0, lambda: op(-x))
            _, total = tf.while_loop(
                lambda i, acc: i < 4, lambda i, acc: (i + 1, acc + op(x)), (0, tf.zeros_like(x))
            )
            return branch, total

        return run

    x = sample(tf.float64, (5,))
    for flag in (True, False):
        ours = program(PAIRS[pair][0])(x, tf.constant(flag))
        builtin = program(PAIRS[pair][1])(x, tf.constant(flag))
        assert [as_bits(t) for t in ours] == [as_bits(t) for t in builtin]


def test_node_with_its_own_device_request():
    @tf.function
    def placed(x):
        with tf.device("/CPU:0"):
            return tf_stopgrad.stop_gradient(x) + 1.0

    np.testing.assert_array_equal(placed(tf.constant([1.0, 2.0])).numpy(), [2.0, 3.0])


def test_gradients_traced_inside_functions_are_unaffected():
    @tf.function
    def gradient(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.reduce_sum(tf_stopgrad.stop_gradient(x * x) * x)
        return tape.gradient(y, x)

    x = tf.constant([1.0, -2.0, 3.0])
    np.testing.assert_array_equal(gradient(x).numpy(), (x * x).numpy())


# --- Where the graph pass does not reach: TensorFlow's Python, which special-cases the built-in
# by its op type's name (the README's limits, parity.md's last rows).


def test_get_static_value_sees_through_the_builtin_only():
    with tf.Graph().as_default():
        constant = tf.constant([1.0, 2.0])
        builtin, ours = tf.stop_gradient(constant), tf_stopgrad.stop_gradient(constant)
        np.testing.assert_array_equal(tf.get_static_value(builtin), [1.0, 2.0])
        assert tf.get_static_value(ours) is None


def test_remove_training_nodes_keeps_ours_and_removes_the_builtin_where_tensorflow_does():
    with tf.Graph().as_default() as graph:
        constant = tf.constant([1.0, 2.0])
        tf.stop_gradient(constant, name="builtin")
        tf_stopgrad.stop_gradient(constant, name="ours")
    kept = tf.compat.v1.graph_util.remove_training_nodes(graph.as_graph_def())
    ops = {node.name: node.op for node in kept.node if node.name in ("builtin", "ours")}
    assert ops["ours"] == tf_stopgrad.STOP_GRADIENT_OP
    # TensorFlow removes its own StopGradient from 2.17 on; 2.15 and 2.16 keep both.
    removes_the_builtin = tuple(int(part) for part in tf.__version__.split(".")[:2]) >= (2, 17)
    assert ("builtin" not in ops) == removes_the_builtin
