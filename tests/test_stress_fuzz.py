"""Property test: for any dtype, shape and bit pattern, ours equals the built-in bit for bit.

Values are drawn as raw bit patterns, biased towards the special ones: NaNs with payloads
(quiet and signalling, either sign), ±inf, ±0.0, subnormals, the extremes; strings with NUL
bytes; empty dimensions. Inputs arrive as EagerTensors, NumPy arrays or tf.Variables, and run
eagerly or through a shared tf.function, with a fuzzed PreventGradient message.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes, arrays
from stress_support import report, scaled
from support import QUANTIZED_STORAGE, as_bits

import tf_stopgrad

MAX_EXAMPLES = scaled(short=200, long=5_000)

FLOAT_LAYOUT = {  # dtype: (unsigned storage, exponent bits, mantissa bits)
    tf.float16: (np.uint16, 5, 10),
    tf.bfloat16: (np.uint16, 8, 7),
    tf.float32: (np.uint32, 8, 23),
    tf.float64: (np.uint64, 11, 52),
}
COMPLEX_PART = {tf.complex64: tf.float32, tf.complex128: tf.float64}
INTEGER_DTYPES = [tf.int8, tf.int16, tf.int32, tf.int64, tf.uint8, tf.uint16, tf.uint32, tf.uint64]
DTYPES = [*FLOAT_LAYOUT, *COMPLEX_PART, *INTEGER_DTYPES, *QUANTIZED_STORAGE, tf.bool, tf.string]
KINDS = ["EagerTensor", "NumPy array", "tf.Variable"]
MODES = ["eager", "shared tf.function"]
STRING_ELEMENTS = st.one_of(
    st.sampled_from([b"", b"\x00", b"\x00\x00", b"a\x00b", b"\xff\xfe\x00"]),
    st.binary(max_size=12),
)
MESSAGES = st.one_of(
    st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=20),  # no lone surrogates
    st.binary(max_size=20),
)


def special_bit_patterns(exponent_bits, mantissa_bits):
    """±0, ±inf, NaNs (quiet, signalling, with payloads), subnormals, smallest normal, largest."""
    sign = 1 << (exponent_bits + mantissa_bits)
    infinity = ((1 << exponent_bits) - 1) << mantissa_bits
    all_mantissa = (1 << mantissa_bits) - 1
    quiet = 1 << (mantissa_bits - 1)
    unsigned = [
        0, infinity, infinity | quiet, infinity | 1, infinity | all_mantissa,
        infinity | (quiet >> 1) | 1, 1, all_mantissa, 1 << mantissa_bits, infinity - 1,
    ]  # fmt: skip
    return [pattern | s for pattern in unsigned for s in (0, sign)]


def bit_pattern_arrays(storage, shape, specials):
    """Arrays of unsigned bit patterns: any pattern at all, or one of ``specials``."""
    bits = 8 * np.dtype(storage).itemsize
    elements = st.one_of(st.sampled_from(specials), st.integers(0, (1 << bits) - 1))
    return arrays(storage, shape, elements=elements)


@st.composite
def arrays_of(draw, dtype):
    """A NumPy array holding a value of ``dtype`` (quantized ones in their storage type)."""
    shape = draw(array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=6))
    if dtype == tf.string:
        items = draw(
            st.lists(STRING_ELEMENTS, min_size=int(np.prod(shape)), max_size=int(np.prod(shape)))
        )
        return np.array(items, dtype=object).reshape(shape)
    if dtype == tf.bool:
        return draw(arrays(np.bool_, shape))
    if dtype in QUANTIZED_STORAGE:
        return draw(arrays(QUANTIZED_STORAGE[dtype], shape))
    if dtype in INTEGER_DTYPES:
        numpy_dtype = dtype.as_numpy_dtype
        unsigned = np.dtype(f"u{np.dtype(numpy_dtype).itemsize}")
        bits = 8 * unsigned.itemsize
        extremes = [0, 1, (1 << (bits - 1)) - 1, 1 << (bits - 1), (1 << bits) - 1]
        return draw(bit_pattern_arrays(unsigned, shape, extremes)).view(numpy_dtype)
    part = COMPLEX_PART.get(dtype, dtype)
    storage, exponent_bits, mantissa_bits = FLOAT_LAYOUT[part]
    specials = special_bit_patterns(exponent_bits, mantissa_bits)
    if dtype in COMPLEX_PART:  # real and imaginary parts side by side
        pairs = draw(bit_pattern_arrays(storage, (*shape, 2), specials))
        return pairs.view(dtype.as_numpy_dtype).reshape(shape)
    return draw(bit_pattern_arrays(storage, shape, specials)).view(dtype.as_numpy_dtype)


@st.composite
def fuzzed_inputs(draw):
    dtype = draw(st.sampled_from(DTYPES))
    kinds = KINDS[:1] if dtype in QUANTIZED_STORAGE else KINDS  # NumPy has no quantized types
    return dtype, draw(arrays_of(dtype)), draw(st.sampled_from(kinds))


def reference_bits(array):
    """What the output must hold: the shape and the bytes (or byte strings) of the source array."""
    if array.dtype == object:
        return tuple(array.shape), np.asarray(array, dtype=object).tolist()
    return tuple(array.shape), array.tobytes()


def as_input(dtype, array, kind):
    if kind == "NumPy array":
        return array
    tensor = tf.constant(array, dtype=dtype)
    return tf.Variable(tensor) if kind == "tf.Variable" else tensor


def all_four(x, message):
    return (
        tf_stopgrad.stop_gradient(x),
        tf.stop_gradient(x),
        tf_stopgrad.prevent_gradient(x, message=message),
        tf.raw_ops.PreventGradient(input=x, message=message),
    )


def messages_in_graph(function, x, message):
    """The message attributes of ours and of the built-in PreventGradient in the traced graph."""
    graph = function.get_concrete_function(x, message).graph
    by_type = {
        op.type: op.get_attr("message")
        for op in graph.get_operations()
        if op.type in (tf_stopgrad.PREVENT_GRADIENT_OP, "PreventGradient")
    }
    return by_type[tf_stopgrad.PREVENT_GRADIENT_OP], by_type["PreventGradient"]


def test_any_value_passes_through_bit_for_bit_like_the_builtin():
    shared_function = tf.function(all_four, reduce_retracing=True)
    tried = []

    @settings(
        max_examples=MAX_EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(value=fuzzed_inputs(), mode=st.sampled_from(MODES), message=MESSAGES)
    def ours_equals_builtin_and_input(value, mode, message):
        dtype, array, kind = value
        tried.append((dtype, kind, mode))
        x = as_input(dtype, array, kind)
        call = shared_function if mode == "shared tf.function" else all_four
        ours_stop, builtin_stop, ours_prevent, builtin_prevent = (
            as_bits(out) for out in call(x, message)
        )
        assert ours_stop == builtin_stop
        assert ours_prevent == builtin_prevent
        assert ours_stop[0] == ours_prevent[0] == dtype
        assert ours_stop[1:] == ours_prevent[1:] == reference_bits(array)
        if mode == "shared tf.function":
            ours_message, builtin_message = messages_in_graph(shared_function, x, message)
            assert ours_message == builtin_message

    ours_equals_builtin_and_input()
    report(
        f"fuzz: {len(tried)} examples tried (max_examples={MAX_EXAMPLES}); "
        f"{len({d for d, _, _ in tried})} dtypes, kinds {sorted({k for _, k, _ in tried})}"
    )
    assert len(tried) >= MAX_EXAMPLES
