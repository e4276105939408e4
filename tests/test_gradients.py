"""Gradients are masked exactly like the built-in's, in every way TensorFlow differentiates."""

import re

import numpy as np
import pytest
import tensorflow as tf
from support import builtin_prevent_gradient
from tensorflow.python.autograph.impl.api import StagingError

import tf_stopgrad

pytestmark = pytest.mark.core

STOPS = {"builtin": tf.stop_gradient, "tf_stopgrad": tf_stopgrad.stop_gradient}
X = np.array([0.5, -1.5, 2.0], np.float32)


def loss(stop, x):
    """With stop(x*x) held constant, d/dx = x*x + cos(x); unmasked it would be 3*x*x + cos(x)."""
    return tf.reduce_sum(stop(x * x) * x + tf.sin(x))


def eager_tape_gradient(stop):
    x = tf.constant(X)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = loss(stop, x)
    return tape.gradient(y, x)


def function_tape_gradient(stop):
    @tf.function
    def gradient(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = loss(stop, x)
        return tape.gradient(y, x)

    return gradient(tf.constant(X))


def symbolic_function_gradient(stop):
    """A tape outside a tf.function: TF differentiates the function's graph symbolically."""
    forward = tf.function(lambda x: loss(stop, x))
    x = tf.constant(X)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = forward(x)
    return tape.gradient(y, x)


def v1_graph_gradient(stop):
    """tf.compat.v1.gradients in a v1 Graph: no tape exists, only the registered gradient."""
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [3])
        (gradient,) = tf.compat.v1.gradients(loss(stop, x), [x])
    with tf.compat.v1.Session(graph=graph) as session:
        value = session.run(gradient, {x: X})
    return tf.constant(value)


def second_order_gradient(stop):
    x = tf.constant(X)
    with tf.GradientTape() as outer:
        outer.watch(x)
        with tf.GradientTape() as inner:
            inner.watch(x)
            y = tf.reduce_sum(stop(x * x) * x * x)
        first = inner.gradient(y, x)
    return outer.gradient(first, x)


def forward_mode_jvp(stop):
    x = tf.constant(X)
    with tf.autodiff.ForwardAccumulator(x, tf.ones_like(x)) as accumulator:
        y = stop(x * x) * x + tf.sin(x)
    return accumulator.jvp(y)


def forward_over_backward_hessian_vector(stop):
    x = tf.constant(X)
    with tf.autodiff.ForwardAccumulator(x, tf.ones_like(x)) as accumulator:
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.reduce_sum(stop(x * x) * x * x)
        gradient = tape.gradient(y, x)
    return accumulator.jvp(gradient)


DIFFERENTIATIONS = [
    eager_tape_gradient,
    function_tape_gradient,
    symbolic_function_gradient,
    v1_graph_gradient,
    second_order_gradient,
    forward_mode_jvp,
    forward_over_backward_hessian_vector,
]


@pytest.mark.parametrize("differentiate", DIFFERENTIATIONS, ids=lambda f: f.__name__)
def test_gradient_equals_builtin(differentiate):
    ours = differentiate(STOPS["tf_stopgrad"])
    builtin = differentiate(STOPS["builtin"])
    np.testing.assert_array_equal(ours.numpy(), builtin.numpy())


@pytest.mark.parametrize("differentiate", DIFFERENTIATIONS[:4], ids=lambda f: f.__name__)
def test_gradient_is_that_of_a_constant(differentiate):
    # loss = c * x + sin(x) with c = x*x held constant  ->  gradient = x*x + cos(x)
    np.testing.assert_allclose(
        differentiate(STOPS["tf_stopgrad"]).numpy(), X * X + np.cos(X), rtol=1e-6
    )


@pytest.mark.parametrize("stop", STOPS.values(), ids=STOPS.keys())
def test_fully_stopped_output_has_no_gradient(stop):
    x = tf.constant(X)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = tf.reduce_sum(stop(x))
    assert tape.gradient(y, x) is None
    assert tape.gradient(y, x, unconnected_gradients="zero").numpy().tolist() == [0, 0, 0]


def test_v1_gradients_of_fully_stopped_output_is_none_like_builtin():
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [3])
        ours = tf.compat.v1.gradients(tf_stopgrad.stop_gradient(x), [x])
        builtin = tf.compat.v1.gradients(tf.stop_gradient(x), [x])
    assert ours == builtin == [None]


def test_variable_gradient_is_masked():
    variable = tf.Variable(X)
    with tf.GradientTape() as tape:
        y = tf.reduce_sum(tf_stopgrad.stop_gradient(variable) * variable)
    np.testing.assert_array_equal(tape.gradient(y, variable).numpy(), X)


def stable_softmax(stop, logits):
    shifted = logits - stop(tf.reduce_max(logits, axis=-1, keepdims=True))
    exps = tf.exp(shifted)
    return exps / tf.reduce_sum(exps, axis=-1, keepdims=True)


@pytest.mark.parametrize("scale", [1.0, 1e4], ids=["moderate", "logits-1e4"])
def test_stable_softmax_gradient_equals_tf_nn_softmax(scale):
    logits = tf.constant([[0.3, -1.2, 2.5, 2.5], [1.0, 0.0, -1.0, 0.5]], tf.float32) * scale
    weights = tf.constant([[1.0, 2.0, -1.0, 0.5], [0.0, 1.0, 3.0, -2.0]])

    def value_and_gradient(softmax):
        with tf.GradientTape() as tape:
            tape.watch(logits)
            probabilities = softmax(logits)
            objective = tf.reduce_sum(probabilities * weights)
        return probabilities, tape.gradient(objective, logits)

    ours_p, ours_g = value_and_gradient(lambda z: stable_softmax(tf_stopgrad.stop_gradient, z))
    ref_p, ref_g = value_and_gradient(tf.nn.softmax)
    assert np.isfinite(ours_p.numpy()).all() and np.isfinite(ours_g.numpy()).all()
    np.testing.assert_allclose(ours_p.numpy(), ref_p.numpy(), atol=1e-6)
    np.testing.assert_allclose(ours_g.numpy(), ref_g.numpy(), atol=1e-5)


PREVENT_DIFFERENTIATIONS = [
    eager_tape_gradient,
    function_tape_gradient,
    symbolic_function_gradient,
    v1_graph_gradient,
    second_order_gradient,
]


# The built-in's wording, which TensorFlow's tests match on; ours adds the message after it.
BUILTIN_WORDING = "Gradient explicitly disabled. Reason: "
# Inside a tf.function that autograph converts, it re-raises the LookupError as its
# StagingError (the built-in's too), with the user-code frames before the original message.
# Where autograph cannot convert the function (seen with Python 3.13), the
# LookupError comes through as it is. Either way, ours must raise what the built-in raises.
RAISED = {differentiate: (LookupError,) for differentiate in PREVENT_DIFFERENTIATIONS}
RAISED[function_tape_gradient] = (StagingError, LookupError)


@pytest.mark.parametrize("differentiate", PREVENT_DIFFERENTIATIONS, ids=lambda f: f.__name__)
def test_prevent_gradient_raises_like_builtin_with_message(differentiate):
    raised = RAISED[differentiate]
    with pytest.raises(raised, match=re.escape(f"{BUILTIN_WORDING}b'built-in reason'")) as builtin:
        differentiate(lambda x: builtin_prevent_gradient(x, message="built-in reason"))
    assert builtin.type in raised

    ours_message = f"{BUILTIN_WORDING}no E-step grads (op {tf_stopgrad.PREVENT_GRADIENT_OP}"
    with pytest.raises(raised, match=re.escape(ours_message)) as ours:
        differentiate(lambda x: tf_stopgrad.prevent_gradient(x, "no E-step grads"))
    assert ours.type is builtin.type


@pytest.mark.parametrize("differentiate", [eager_tape_gradient, function_tape_gradient],
                         ids=lambda f: f.__name__)  # fmt: skip
def test_prevent_gradient_error_on_a_tape_names_the_op_alone(differentiate):
    # A tape's gradient function gets no node name: docs/parity.md quotes both forms.
    expected = f"{BUILTIN_WORDING}sampled (op {tf_stopgrad.PREVENT_GRADIENT_OP})"
    with pytest.raises(RAISED[differentiate], match=re.escape(expected)):
        differentiate(lambda x: tf_stopgrad.prevent_gradient(x, "sampled", name="labels"))


def test_prevent_gradient_error_names_the_op_and_node_in_graphs():
    expected = f"{BUILTIN_WORDING}sampled (op {tf_stopgrad.PREVENT_GRADIENT_OP}, node 'labels')"
    with tf.Graph().as_default():
        x = tf.constant(X)
        y = tf_stopgrad.prevent_gradient(x, "sampled", name="labels")
        with pytest.raises(LookupError, match=f"^{re.escape(expected)}$"):
            tf.compat.v1.gradients(y, x)


def test_prevent_gradient_without_message_still_explains():
    expected = f"{BUILTIN_WORDING}(none given) (op {tf_stopgrad.PREVENT_GRADIENT_OP})"
    with pytest.raises(LookupError, match=f"^{re.escape(expected)}$"):
        eager_tape_gradient(tf_stopgrad.prevent_gradient)


def test_prevent_gradient_only_fails_when_its_gradient_is_needed():
    x = tf.constant(X)
    with tf.GradientTape() as tape:
        tape.watch(x)
        blocked = tf_stopgrad.prevent_gradient(x * x, "not needed below")
        y = tf.reduce_sum(2.0 * x)
    np.testing.assert_array_equal(blocked.numpy(), X * X)
    np.testing.assert_array_equal(tape.gradient(y, x).numpy(), [2.0, 2.0, 2.0])
