"""Forward pass: identical to tf.stop_gradient / PreventGradient for every dtype and shape (in
tf.function and XLA identical to eager: tests/test_opcheck.py)."""

import pytest
import tensorflow as tf
from support import (
    ALL_PLAIN_DTYPES,
    NUMERIC_DTYPES,
    QUANTIZED_DTYPES,
    QUANTIZED_STORAGE,
    as_bits,
    buffer_address,
    needs_gpu,
    sample,
)

import tf_stopgrad

pytestmark = pytest.mark.core

SHAPES = [(), (0,), (4, 0, 3), (7,), (2, 3, 4)]
LARGE_SHAPE = ((1 << 22) + 3,)

IMPLEMENTATIONS = {
    "stop_gradient": (tf_stopgrad.stop_gradient, tf.stop_gradient),
    "prevent_gradient": (
        lambda x: tf_stopgrad.prevent_gradient(x, message="m"),
        lambda x: tf.raw_ops.PreventGradient(input=x, message="m"),
    ),
}


@pytest.fixture(params=sorted(IMPLEMENTATIONS))
def ours_and_builtin(request):
    return IMPLEMENTATIONS[request.param]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", ALL_PLAIN_DTYPES, ids=lambda d: d.name)
def test_eager_values_match_builtin_bit_for_bit(ours_and_builtin, dtype, shape):
    ours, builtin = ours_and_builtin
    x = sample(dtype, shape)
    assert as_bits(ours(x)) == as_bits(builtin(x)) == as_bits(x)


@pytest.mark.parametrize("dtype", [tf.int8, tf.float32, tf.complex128], ids=lambda d: d.name)
def test_tensor_of_over_4_million_elements(ours_and_builtin, dtype):
    ours, builtin = ours_and_builtin
    x = sample(dtype, LARGE_SHAPE)
    assert as_bits(ours(x)) == as_bits(builtin(x))


def test_nan_payloads_and_signed_zero_survive():
    payloads = tf.constant([0x7FC00001, 0xFFC0BEEF, 0x7F800001, 0x80000000, 0x00000001], tf.uint32)
    x = tf.bitcast(payloads, tf.float32)
    out = tf.bitcast(tf_stopgrad.stop_gradient(x), tf.uint32)
    assert out.numpy().tolist() == payloads.numpy().tolist()


# Aliasing is checked where TensorFlow places the ops, on a GPU when one is visible, by the
# address of each buffer on its device. A string tensor has no such address to read: DLPack
# cannot carry it and _numpy() converts its elements, so only its values are checked (above).
ALIASED_DTYPES = [*NUMERIC_DTYPES, *QUANTIZED_DTYPES, tf.bool]


def device_address(tensor):
    """The address of ``tensor``'s buffer on its device: buffer_address, DLPack's data pointer.
    DLPack carries no quantized dtype, so those are first bitcast, on their device, to the
    integers that store them: Bitcast's output shares its input's buffer."""
    if tensor.dtype.is_quantized:
        with tf.device(tensor.device):
            tensor = tf.bitcast(tensor, tf.as_dtype(QUANTIZED_STORAGE[tensor.dtype]))
    return buffer_address(tensor)


def deep_copy(tensor):
    """``tensor``'s values in a buffer of their own (DeepCopy has no quantized kernels: those
    are copied as the integers that store them, on the CPU, since a GPU takes no qint16 or
    quint16 argument: "does not have registered OpKernel support for _Arg")."""
    if not tensor.dtype.is_quantized:
        return tf.raw_ops.DeepCopy(x=tensor)
    with tf.device("CPU:0"):
        storage = tf.bitcast(tensor, tf.as_dtype(QUANTIZED_STORAGE[tensor.dtype]))
        return tf.bitcast(tf.raw_ops.DeepCopy(x=storage), tensor.dtype)


@pytest.mark.parametrize("shape", [(1,), (1000,), LARGE_SHAPE], ids=str)
@pytest.mark.parametrize("dtype", ALIASED_DTYPES, ids=lambda d: d.name)
def test_output_aliases_input_buffer(ours_and_builtin, dtype, shape):
    ours, builtin = ours_and_builtin
    x = sample(dtype, shape)
    assert device_address(ours(x)) == device_address(builtin(x)) == device_address(x)


@pytest.mark.parametrize("dtype", ALIASED_DTYPES, ids=lambda d: d.name)
def test_the_address_read_is_the_buffers_own(dtype):
    # Pinned to the CPU, where _numpy() is a view of the tensor's buffer rather than a copy.
    with tf.device("/CPU:0"):
        x = sample(dtype, (1000,))
        assert device_address(x) == x._numpy().__array_interface__["data"][0]


@pytest.mark.parametrize("dtype", ALIASED_DTYPES, ids=lambda d: d.name)
def test_the_aliasing_check_fails_for_an_op_that_copies(dtype):
    x = sample(dtype, (1000,))
    copied = deep_copy(x)
    assert as_bits(copied) == as_bits(x)
    assert device_address(copied) != device_address(x)


@needs_gpu
def test_output_aliases_input_buffer_on_the_gpu(ours_and_builtin):
    ours, builtin = ours_and_builtin
    with tf.device("/GPU:0"):
        x = sample(tf.float32, LARGE_SHAPE)
        out, builtin_out, copied = ours(x), builtin(x), tf.raw_ops.DeepCopy(x=x)
    assert all(t.device.endswith("/device:GPU:0") for t in (x, out, builtin_out, copied))
    assert device_address(out) == device_address(builtin_out) == device_address(x)
    assert device_address(copied) != device_address(x)


def test_variant_tensor_list_passes_through():
    elements = tf.constant([[1.0, 2.0], [3.0, 4.0]])
    handle = tf.raw_ops.TensorListFromTensor(tensor=elements, element_shape=[2])

    def unstack(h):
        return tf.raw_ops.TensorListStack(
            input_handle=h, element_shape=[2], element_dtype=tf.float32
        )

    for ours, builtin in IMPLEMENTATIONS.values():
        assert ours(handle).dtype == tf.variant
        assert as_bits(unstack(ours(handle))) == as_bits(unstack(builtin(handle)))


def test_resource_handle_passes_through():
    variable = tf.Variable([1.5, 2.5])
    handle = tf_stopgrad.stop_gradient(variable.handle)
    assert handle.dtype == tf.resource
    read = tf.raw_ops.ReadVariableOp(resource=handle, dtype=tf.float32)
    assert as_bits(read) == as_bits(tf.stop_gradient(variable))


@pytest.mark.parametrize(
    "value", [3, 2.5, True, "text", [1, 2, 3], [[1.0], [2.0]], [b"a", b"b\x00"]], ids=repr
)
def test_python_values_convert_like_builtin(value):
    assert as_bits(tf_stopgrad.stop_gradient(value)) == as_bits(tf.stop_gradient(value))


def test_numpy_arrays_convert_like_builtin():
    array = sample(tf.float64, (3, 2)).numpy()
    assert as_bits(tf_stopgrad.stop_gradient(array)) == as_bits(tf.stop_gradient(array))


def test_named_op_in_graph():
    graph = tf.Graph()
    with graph.as_default():
        out = tf_stopgrad.stop_gradient(tf.constant(1.0), name="frozen")
        prevented = tf_stopgrad.prevent_gradient(tf.constant(1.0), message="why", name="blocked")
    assert out.op.name == "frozen" and out.op.type == tf_stopgrad.STOP_GRADIENT_OP
    assert prevented.op.type == tf_stopgrad.PREVENT_GRADIENT_OP
    assert prevented.op.get_attr("message") == b"why"


def test_eager_tensor_captured_by_tf_function_is_staged_into_the_graph():
    captured = sample(tf.float32, (4,))

    @tf.function
    def uses_capture():
        return tf_stopgrad.stop_gradient(captured) + 0.0

    op_types = {op.type for op in uses_capture.get_concrete_function().graph.get_operations()}
    assert tf_stopgrad.STOP_GRADIENT_OP in op_types
    assert as_bits(uses_capture()) == as_bits(captured)
