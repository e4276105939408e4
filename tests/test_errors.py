"""Bad input raises the built-in's exception type, with a message that says what to do."""

import re

import pytest
import tensorflow as tf
from support import builtin_prevent_gradient

import tf_stopgrad
import tf_stopgrad.keras

ACCEPTED = (
    "Pass a tf.Tensor, a tf.Variable, a RaggedTensor, SparseTensor or IndexedSlices, a NumPy "
    "array, or a Python scalar or rectangular nested list."
)
# Each bad input, and the exception TensorFlow's conversion raises for it, eagerly and when
# a tf.function is traced.
BAD_INPUTS = {
    "object": (object(), {"eager": ValueError, "tf.function": TypeError}),
    "ragged-nested-list": ([[1, 2], [3]], {"eager": ValueError, "tf.function": ValueError}),
    "mixed-types": ([1, "a"], {"eager": ValueError, "tf.function": TypeError}),
    "dict": ({"a": 1}, {"eager": ValueError, "tf.function": TypeError}),
    "none": (None, {"eager": ValueError, "tf.function": ValueError}),
}
FUNCTIONS = {
    "stop_gradient": (tf_stopgrad.stop_gradient, tf.stop_gradient),
    "prevent_gradient": (tf_stopgrad.prevent_gradient, builtin_prevent_gradient),
}


def run(function, value, mode):
    if mode == "eager":
        return function(value)
    return tf.function(lambda: function(value))()


def conversion_message(error: Exception) -> str:
    """What the conversion said; in a tf.function, autograph puts user-code frames before it."""
    text = str(error).strip()
    if text.startswith("in user code:"):
        text = text.rsplit(f"{type(error).__name__}: ", 1)[1]
    return text.rstrip(".")


@pytest.mark.parametrize("mode", ["eager", "tf.function"])
@pytest.mark.parametrize("input_name", sorted(BAD_INPUTS))
@pytest.mark.parametrize("function_name", sorted(FUNCTIONS))
def test_bad_input_raises_the_builtins_type_and_says_what_to_pass(function_name, input_name, mode):
    ours, builtin = FUNCTIONS[function_name]
    value, raised = BAD_INPUTS[input_name]
    expected_type = raised[mode]
    with pytest.raises(expected_type) as builtin_error:
        run(builtin, value, mode)
    assert builtin_error.type is expected_type

    expected_message = (
        f"tf_stopgrad.{function_name} cannot convert a {type(value).__name__} to a tensor: "
        f"{conversion_message(builtin_error.value)}. {ACCEPTED}"
    )
    whole_message = rf"(^|{expected_type.__name__}: ){re.escape(expected_message)}\s*$"
    with pytest.raises(expected_type, match=whole_message) as our_error:
        run(ours, value, mode)
    assert our_error.type is expected_type


# The rule for a PreventGradient message is one, whichever entry point is given it.
# Each gives the function that applies the op with a message.
MESSAGE_ENTRY_POINTS = {
    "prevent_gradient": lambda message: lambda x: tf_stopgrad.prevent_gradient(x, message),
    "keras.PreventGradient": lambda message: tf_stopgrad.keras.PreventGradient(message),
}


@pytest.mark.parametrize("entry_point", sorted(MESSAGE_ENTRY_POINTS))
@pytest.mark.parametrize("message", [3, ["a"], 1.5, {"why": "x"}], ids=repr)
def test_message_that_is_not_text_is_refused_alike_by_every_entry_point(message, entry_point):
    expected = (
        f"PreventGradient's message must be text (str or bytes) or None, got "
        f"{type(message).__name__} "
        f"({message!r}). Pass the reason as text, e.g. message='sampled value'."
    )
    with pytest.raises(TypeError, match=f"^{re.escape(expected)}$") as error:
        MESSAGE_ENTRY_POINTS[entry_point](message)(tf.constant(1.0))
    assert error.type is TypeError


@pytest.mark.parametrize("entry_point", sorted(MESSAGE_ENTRY_POINTS))
@pytest.mark.parametrize("message", ["text", b"bytes", None], ids=repr)
def test_text_bytes_or_none_gives_the_message_the_builtin_op_gets(message, entry_point):
    function = MESSAGE_ENTRY_POINTS[entry_point](message)
    ours = tf.function(function).get_concrete_function(tf.TensorSpec([1]))
    builtin = tf.function(
        lambda x: builtin_prevent_gradient(x, message=message)
    ).get_concrete_function(tf.TensorSpec([1]))

    def messages(concrete, op_type):
        return [node.attr["message"].s for node in concrete.graph.as_graph_def().node
                if node.op == op_type]  # fmt: skip

    assert messages(ours, tf_stopgrad.PREVENT_GRADIENT_OP) == messages(builtin, "PreventGradient")
    assert len(messages(builtin, "PreventGradient")) == 1


def test_none_message_means_empty_like_builtin():
    builtin = builtin_prevent_gradient(tf.constant([1.0]), message=None)
    ours = tf_stopgrad.prevent_gradient(tf.constant([1.0]), message=None)
    assert ours.numpy().tolist() == builtin.numpy().tolist()
    assert tf_stopgrad.keras.PreventGradient(None).message == ""
    with tf.Graph().as_default():
        node = tf_stopgrad.prevent_gradient(tf.constant(1.0), message=None).op
        builtin_node = builtin_prevent_gradient(tf.constant(1.0), message=None).op
        assert node.get_attr("message") == builtin_node.get_attr("message") == b""


def test_bytes_message_is_the_reason_the_gradient_error_gives():
    x = tf.constant([1.0])
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = tf_stopgrad.prevent_gradient(x, message=b"bytes reason")
    assert y.numpy().tolist() == [1.0]
    expected = (
        f"Gradient explicitly disabled. Reason: bytes reason (op {tf_stopgrad.PREVENT_GRADIENT_OP})"
    )
    with pytest.raises(LookupError, match=f"^{re.escape(expected)}$") as error:
        tape.gradient(y, x)
    assert error.type is LookupError
