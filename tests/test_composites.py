"""Composite tensors and variables are handled like tf.stop_gradient handles them."""

import numpy as np
import pytest
import tensorflow as tf

import tf_stopgrad

pytestmark = pytest.mark.core


def composites():
    return {
        "ragged": tf.ragged.constant([[1.0, 2.0], [], [3.0]]),
        "ragged-2-levels": tf.ragged.constant([[[1], [2, 3]], [[4]]]),
        "sparse": tf.sparse.SparseTensor([[0, 1], [2, 0]], [5.0, 6.0], dense_shape=[3, 2]),
        "indexed-slices": tf.IndexedSlices(
            tf.constant([[1.0, 2.0]]), tf.constant([1]), tf.constant([3, 2])
        ),
    }


def components(value):
    return [t.numpy().tolist() for t in tf.nest.flatten(value, expand_composites=True)]


@pytest.mark.parametrize("kind", sorted(composites()))
def test_composite_keeps_type_and_components(kind):
    value = composites()[kind]
    ours, builtin = tf_stopgrad.stop_gradient(value), tf.stop_gradient(value)
    assert type(ours) is type(builtin) is type(value)
    assert components(ours) == components(builtin)


@pytest.mark.parametrize("kind", sorted(composites()))
def test_every_component_is_stopped(kind):
    graph = tf.function(tf_stopgrad.stop_gradient).get_concrete_function(composites()[kind]).graph
    op_types = [op.type for op in graph.get_operations()]
    flat = tf.nest.flatten(composites()[kind], expand_composites=True)
    assert op_types.count(tf_stopgrad.STOP_GRADIENT_OP) == len(flat)


def test_ragged_values_gradient_is_masked_like_builtin():
    values = tf.constant([1.0, 2.0, 3.0])

    def gradient(stop):
        with tf.GradientTape() as tape:
            tape.watch(values)
            ragged = tf.RaggedTensor.from_row_lengths(values, [2, 1])
            y = tf.reduce_sum(stop(ragged * ragged).flat_values * values)
        return tape.gradient(y, values)

    np.testing.assert_array_equal(
        gradient(tf_stopgrad.stop_gradient).numpy(), gradient(tf.stop_gradient).numpy()
    )


def test_prevent_gradient_keeps_composite_type():
    ragged = composites()["ragged"]
    out = tf_stopgrad.prevent_gradient(ragged, message="ragged")
    assert isinstance(out, tf.RaggedTensor) and components(out) == components(ragged)


@pytest.mark.parametrize("stop", [tf_stopgrad.stop_gradient, tf.stop_gradient])
def test_variable_becomes_plain_tensor_of_its_value(stop):
    variable = tf.Variable([[1.0, 2.0]], dtype=tf.float64)
    out = stop(variable)
    assert not isinstance(out, tf.Variable)
    assert isinstance(out, tf.Tensor) and out.dtype == tf.float64
    assert out.numpy().tolist() == [[1.0, 2.0]]


def test_variable_in_tf_function_matches_builtin():
    variable = tf.Variable([3.0, 4.0])
    ours = tf.function(lambda: tf_stopgrad.stop_gradient(variable))()
    builtin = tf.function(lambda: tf.stop_gradient(variable))()
    assert ours.numpy().tolist() == builtin.numpy().tolist()


def test_nested_python_structures_are_not_composites():
    # Like the built-in, a list of tensors is one value converted with tf.convert_to_tensor.
    pair = [tf.constant(1.0), tf.constant(2.0)]
    ours, builtin = tf_stopgrad.stop_gradient(pair), tf.stop_gradient(pair)
    assert ours.numpy().tolist() == builtin.numpy().tolist()
