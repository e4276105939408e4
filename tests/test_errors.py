"""Bad input raises the built-in's exception type, with a message that says what to do."""

import pytest
import tensorflow as tf

import tf_stopgrad

BAD_INPUTS = {
    "object": object(),
    "ragged-nested-list": [[1, 2], [3]],
    "mixed-types": [1, "a"],
    "dict": {"a": 1},
    "none": None,
}


def exception_of(function, *args):
    with pytest.raises(Exception) as caught:
        function(*args)
    return caught.value


@pytest.mark.parametrize("mode", ["eager", "tf.function"])
@pytest.mark.parametrize("name", sorted(BAD_INPUTS))
def test_same_exception_type_as_builtin_with_guidance(name, mode):
    value = BAD_INPUTS[name]

    def run(stop):
        if mode == "eager":
            return stop(value)
        return tf.function(lambda: stop(value))()

    builtin = exception_of(run, tf.stop_gradient)
    ours = exception_of(run, tf_stopgrad.stop_gradient)
    assert type(ours) is type(builtin)
    assert "tf_stopgrad.stop_gradient" in str(ours)
    assert "Pass a tf.Tensor" in str(ours)


@pytest.mark.parametrize("name", sorted(BAD_INPUTS))
def test_prevent_gradient_bad_input_names_itself(name):
    builtin = exception_of(lambda: tf.raw_ops.PreventGradient(input=BAD_INPUTS[name]))
    ours = exception_of(lambda: tf_stopgrad.prevent_gradient(BAD_INPUTS[name]))
    assert type(ours) is type(builtin)
    assert "tf_stopgrad.prevent_gradient" in str(ours)


@pytest.mark.parametrize("message", [3, ["a"], 1.5, {"why": "x"}])
def test_prevent_gradient_message_must_be_text(message):
    with pytest.raises(TypeError, match=r"message must be a str.*message='sampled value'"):
        tf_stopgrad.prevent_gradient(tf.constant(1.0), message=message)


def test_none_message_means_empty_like_builtin():
    builtin = tf.raw_ops.PreventGradient(input=tf.constant([1.0]), message=None)
    ours = tf_stopgrad.prevent_gradient(tf.constant([1.0]), message=None)
    assert ours.numpy().tolist() == builtin.numpy().tolist()
    with tf.Graph().as_default():
        node = tf_stopgrad.prevent_gradient(tf.constant(1.0), message=None).op
        builtin_node = tf.raw_ops.PreventGradient(input=tf.constant(1.0), message=None).op
        assert node.get_attr("message") == builtin_node.get_attr("message") == b""


def test_bytes_message_is_accepted():
    out = tf_stopgrad.prevent_gradient(tf.constant([1.0]), message=b"bytes reason")
    assert out.numpy().tolist() == [1.0]
