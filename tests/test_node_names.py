"""Graph node names: the plugin's nodes are named as the built-in's would be.

The op types stay namespaced (``TfStopgrad>StopGradient``), but code that looks tensors up
by default name (``StopGradient:0``, ``scope/StopGradient_1:0``) must find ours too.
"""

import pytest
import tensorflow as tf
from support import builtin_prevent_gradient

import tf_stopgrad

pytestmark = pytest.mark.core


OURS = {"stop": tf_stopgrad.stop_gradient, "prevent": tf_stopgrad.prevent_gradient}
BUILTIN = {"stop": tf.stop_gradient, "prevent": builtin_prevent_gradient}


def names_in_graph(ops):
    """Names of the tensors a fixed sequence of calls creates, in a fresh v1 graph."""
    with tf.Graph().as_default():
        x = tf.constant([1.0, 2.0])
        names = [ops["stop"](x).name, ops["stop"](x).name, ops["prevent"](x).name]
        with tf.name_scope("block"):
            names += [ops["stop"](x).name, ops["prevent"](x).name, ops["prevent"](x).name]
        names += [ops["stop"](x, name="held").name, ops["stop"](x, name="held").name]
        return names


def names_in_function(ops):
    """The same sequence traced into a tf.function's graph."""
    names = []

    @tf.function
    def trace(x):
        names.extend([ops["stop"](x).name, ops["prevent"](x).name])
        with tf.name_scope("block"):
            names.append(ops["stop"](x).name)
        return x

    trace(tf.constant([1.0]))
    return names


@pytest.mark.parametrize("names_of", [names_in_graph, names_in_function])
def test_default_and_given_names_are_the_builtins(names_of):
    assert names_of(OURS) == names_of(BUILTIN)
    assert names_of(OURS)[0] == "StopGradient:0"


def test_names_are_shared_with_the_builtin_in_one_graph():
    with tf.Graph().as_default():
        x = tf.constant(1.0)
        builtin = tf.stop_gradient(x)
        ours = tf_stopgrad.stop_gradient(x)
    assert (builtin.name, ours.name) == ("StopGradient:0", "StopGradient_1:0")


@pytest.mark.parametrize("kind", ["stop", "prevent"])
def test_op_type_stays_namespaced_while_the_name_is_the_builtin_type(kind):
    with tf.Graph().as_default():
        ours = OURS[kind](tf.constant(1.0))
        builtin = BUILTIN[kind](tf.constant(1.0))
    namespaced = {"stop": tf_stopgrad.STOP_GRADIENT_OP, "prevent": tf_stopgrad.PREVENT_GRADIENT_OP}
    assert ours.op.type == namespaced[kind]
    assert ours.op.name.startswith(builtin.op.type)  # as tf_keras's backend test expects
