"""vectorized_map and jacobians (pfor) vectorize our ops, with the built-in's results (without
the while_loop fallback, as a loop over the batch: tests/test_opcheck.py)."""

import logging

import numpy as np
import pytest
import tensorflow as tf
from support import OP_PAIRS, PREVENT_MESSAGE

import tf_stopgrad

pytestmark = pytest.mark.core

FALLBACK_LOG = "Using a while_loop for converting"
LOOP_OPS = {"While", "StatelessWhile"}
ours_prevent, builtin_prevent = OP_PAIRS["prevent_gradient"]


def stopped_product(stop):
    return lambda v: stop(v) * v + stop(tf.reduce_max(v))


def per_example_softmax_gradient(stop):
    """Per-example gradient of a stable softmax: pfor must vectorize a tape using the op too."""

    def gradient(logits):
        with tf.GradientTape() as tape:
            tape.watch(logits)
            exps = tf.exp(logits - stop(tf.reduce_max(logits)))
            loss = tf.reduce_sum(tf.range(3.0) * exps / tf.reduce_sum(exps))
        return tape.gradient(loss, logits)

    return gradient


@pytest.fixture
def tf_log():
    """What TensorFlow's Python logger emits, at every level: pfor may log fallbacks at DEBUG."""
    messages = []

    class Collect(logging.Handler):
        def emit(self, record):
            messages.append(record.getMessage())

    logger = tf.get_logger()
    handler = Collect(logging.DEBUG)
    previous_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    yield messages
    logger.setLevel(previous_level)
    logger.removeHandler(handler)


def fallbacks(messages):
    return [message for message in messages if FALLBACK_LOG in message]


def graph_op_types(concrete_function):
    """Op types in a traced graph and in every function of its library."""
    graph_def = concrete_function.graph.as_graph_def()
    types = {node.op for node in graph_def.node}
    for function in graph_def.library.function:
        types.update(node.op for node in function.node_def)
    return types


def batch():
    return tf.constant([[1e4, 1e4 + 1.0, 1e4 - 2.0], [-3.0, 0.5, 2.0], [0.0, -0.0, 7.25]])


@pytest.mark.parametrize("build", [stopped_product, per_example_softmax_gradient])
def test_vectorized_stop_gradient_matches_builtin_without_fallback(build, tf_log):
    ours = tf.vectorized_map(build(tf_stopgrad.stop_gradient), batch())
    assert fallbacks(tf_log) == []
    builtin = tf.vectorized_map(build(tf.stop_gradient), batch())

    np.testing.assert_array_equal(ours.numpy(), builtin.numpy())


@pytest.mark.parametrize("dtype", [tf.float64, tf.int32, tf.bool, tf.complex64], ids=str)
@pytest.mark.parametrize("op_name", OP_PAIRS)
def test_vectorized_identity_matches_builtin_per_dtype(op_name, dtype, tf_log):
    ours_op, builtin_op = OP_PAIRS[op_name]
    elems = tf.cast(tf.constant([[1, 0, -2], [3, 0, 5]]), dtype)

    ours = tf.vectorized_map(ours_op, elems)
    assert fallbacks(tf_log) == []  # checked before the built-in PreventGradient falls back
    builtin = tf.vectorized_map(builtin_op, elems)

    assert ours.dtype == dtype
    np.testing.assert_array_equal(ours.numpy(), builtin.numpy())
    np.testing.assert_array_equal(ours.numpy(), elems.numpy())


@pytest.mark.parametrize("op_name", OP_PAIRS)
def test_traced_vectorized_map_contains_our_op_and_no_loop(op_name, tf_log):
    ours_op, _ = OP_PAIRS[op_name]
    vectorized = tf.function(lambda x: tf.vectorized_map(stopped_product(ours_op), x))

    op_types = graph_op_types(vectorized.get_concrete_function(batch()))

    assert getattr(tf_stopgrad, f"{op_name.upper()}_OP") in op_types
    assert op_types.isdisjoint(LOOP_OPS)
    assert fallbacks(tf_log) == []


def test_checks_detect_a_while_loop_fallback(tf_log):
    # Control for the checks above: TensorFlow has no pfor converter for its own
    # PreventGradient (ours has one), so vectorizing it falls back to a while_loop.
    vectorized = tf.function(lambda x: tf.vectorized_map(stopped_product(builtin_prevent), x))

    op_types = graph_op_types(vectorized.get_concrete_function(batch()))

    assert not op_types.isdisjoint(LOOP_OPS)
    assert fallbacks(tf_log)
    with pytest.raises(ValueError, match="No pfor vectorization defined for PreventGradient"):
        tf.vectorized_map(builtin_prevent, batch(), fallback_to_while_loop=False)


def test_vectorized_prevent_gradient_keeps_its_message():
    vectorized = tf.function(lambda x: tf.vectorized_map(ours_prevent, x))
    graph = vectorized.get_concrete_function(batch()).graph

    prevents = [op for op in graph.get_operations() if op.type == tf_stopgrad.PREVENT_GRADIENT_OP]

    # One traced on a single example, and the one pfor emits for the whole stacked batch.
    assert sorted(op.inputs[0].shape.as_list() for op in prevents) == [[3], [3, 3]]
    assert {op.get_attr("message") for op in prevents} == {PREVENT_MESSAGE.encode()}


@pytest.mark.parametrize("op_name", ["ours", "builtin"])
def test_gradient_through_vectorized_prevent_gradient_is_refused(op_name):
    prevent = {"ours": ours_prevent, "builtin": builtin_prevent}[op_name]
    x = batch()

    # vectorized_map runs a tf.function, which builds its gradient as soon as it is called
    # under a tape: both ops refuse there already.
    with pytest.raises(LookupError, match=PREVENT_MESSAGE):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.vectorized_map(lambda v: prevent(v) * v, x)
        tape.gradient(y, x)


def stopped_square_plus_sine(stop, x):
    return stop(x * x) * x + tf.sin(x) * stop(tf.reduce_sum(x, axis=-1, keepdims=True))


@pytest.mark.parametrize("method", ["jacobian", "batch_jacobian"])
def test_jacobian_equals_builtin(method, tf_log):
    x = tf.constant([[0.5, -1.0, 2.0], [1.5, 0.25, -3.0]])

    def jacobian(stop):
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(x)
            y = stopped_square_plus_sine(stop, x)
        return getattr(tape, method)(y, x)

    ours = jacobian(tf_stopgrad.stop_gradient)
    assert fallbacks(tf_log) == []
    builtin = jacobian(tf.stop_gradient)

    np.testing.assert_array_equal(ours.numpy(), builtin.numpy())
    # Readable reference: only the unstopped factors are differentiated, so the jacobian is
    # diagonal with stop(x*x) + cos(x) * stop(sum(x)).
    diagonal = x * x + tf.cos(x) * tf.reduce_sum(x, axis=-1, keepdims=True)
    expected = tf.linalg.diag(diagonal)  # [batch, 3, 3]
    if method == "jacobian":
        expected = tf.einsum("bij,bc->bicj", expected, tf.eye(2))
    np.testing.assert_allclose(ours.numpy(), expected.numpy(), rtol=1e-6)
