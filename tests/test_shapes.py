"""Static shape inference passes shapes through unchanged, like the built-in's."""

import pytest
import tensorflow as tf

import tf_stopgrad

pytestmark = pytest.mark.core

SIGNATURES = [
    tf.TensorSpec([], tf.float32),
    tf.TensorSpec([2, 3], tf.float32),
    tf.TensorSpec([None, 3], tf.int64),
    tf.TensorSpec([None, None, 0], tf.string),
    tf.TensorSpec(None, tf.float32),
]

OPS = {
    "stop_gradient": (tf_stopgrad.stop_gradient, tf.stop_gradient),
    "prevent_gradient": (
        lambda x: tf_stopgrad.prevent_gradient(x, "m"),
        lambda x: tf.raw_ops.PreventGradient(input=x),
    ),
}


def traced_shape(op, spec):
    graph = tf.function(op).get_concrete_function(spec).graph
    return graph.outputs[0].shape


@pytest.mark.parametrize("op_name", sorted(OPS))
@pytest.mark.parametrize("spec", SIGNATURES, ids=lambda s: str(s.shape))
def test_static_shape_equals_builtin(op_name, spec):
    ours, builtin = OPS[op_name]
    ours_shape, builtin_shape = traced_shape(ours, spec), traced_shape(builtin, spec)
    assert ours_shape.as_list() == builtin_shape.as_list() if ours_shape.rank is not None else True
    assert ours_shape.rank == builtin_shape.rank == spec.shape.rank


def test_v1_placeholder_partial_shape():
    with tf.Graph().as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, 4, None])
        assert tf_stopgrad.stop_gradient(x).shape.as_list() == [None, 4, None]


def test_resource_handle_shape_and_dtype_data_pass_through():
    variable = tf.Variable(tf.zeros([2, 5]))

    @tf.function
    def read_through_stop():
        handle = tf_stopgrad.stop_gradient(variable.handle)
        return tf.raw_ops.ReadVariableOp(resource=handle, dtype=tf.float32)

    assert read_through_stop.get_concrete_function().graph.outputs[0].shape.as_list() == [2, 5]
