"""Helpers shared by the tests: the checkout's root, running the command, sample data per
dtype (random bits, and values chosen to catch any conversion), bitwise comparison and buffer
address on the device (the package's own, which its self-check uses too), the built-in
PreventGradient as a function, our ops paired with the built-ins, and the marks of the tests that
need a GPU or CMake."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

import tf_stopgrad
from tf_stopgrad._compat import buffer_address
from tf_stopgrad.testing import as_bits

__all__ = ["as_bits", "buffer_address"]  # the package's own, shared with its self-check

REPO_ROOT = Path(__file__).resolve().parent.parent

needs_gpu = pytest.mark.skipif(
    not tf.config.list_physical_devices("GPU"), reason="no GPU visible to this TensorFlow"
)
# CMake's configure step looks for make, its default generator's build program, too.
needs_cmake = pytest.mark.needs("cmake", "make")


def environment_with_tensorflow_logging() -> dict[str, str]:
    """This process's environment without the log level conftest.py sets, as a user's is."""
    return {key: value for key, value in os.environ.items() if key != "TF_CPP_MIN_LOG_LEVEL"}


def run_command(*args: str, cwd: Path | None = None, timeout: float = 300):
    """``python -m tf_stopgrad ARGS`` as a user runs it: a fresh process, TensorFlow's logging
    as the user left it."""
    return subprocess.run(
        [sys.executable, "-m", "tf_stopgrad", *args],
        cwd=cwd, env=environment_with_tensorflow_logging(), capture_output=True, text=True,
        timeout=timeout,
    )  # fmt: skip


NUMERIC_DTYPES = [
    tf.float16, tf.bfloat16, tf.float32, tf.float64,
    tf.int8, tf.int16, tf.int32, tf.int64,
    tf.uint8, tf.uint16, tf.uint32, tf.uint64,
    tf.complex64, tf.complex128,
]  # fmt: skip
QUANTIZED_STORAGE = {
    tf.qint8: np.int8, tf.quint8: np.uint8, tf.qint16: np.int16, tf.quint16: np.uint16,
    tf.qint32: np.int32,
}  # fmt: skip
QUANTIZED_DTYPES = list(QUANTIZED_STORAGE)
ALL_PLAIN_DTYPES = [*NUMERIC_DTYPES, *QUANTIZED_DTYPES, tf.bool, tf.string]


def sample(dtype: tf.DType, shape: tuple[int, ...], seed: int = 0) -> tf.Tensor:
    """A tensor of random bits: for floats that includes NaN payloads, -0.0, inf, subnormals."""
    rng = np.random.default_rng(seed)
    count = int(np.prod(shape, dtype=np.int64))
    if dtype == tf.string:
        lengths = rng.integers(0, 6, size=count)
        values = [rng.integers(0, 256, size=n, dtype=np.uint8).tobytes() for n in lengths]
        return tf.constant(np.array(values, dtype=object).reshape(shape), dtype=tf.string)
    if dtype == tf.bool:
        return tf.constant(rng.integers(0, 2, size=shape).astype(bool))
    if dtype.is_quantized:
        storage = QUANTIZED_STORAGE[dtype]
        info = np.iinfo(storage)
        return tf.constant(rng.integers(info.min, info.max, size=shape, dtype=storage), dtype)
    itemsize = np.dtype(dtype.as_numpy_dtype).itemsize
    raw = rng.integers(0, 256, size=count * itemsize, dtype=np.uint8)
    return tf.constant(raw.view(dtype.as_numpy_dtype).reshape(shape))


def builtin_prevent_gradient(x, message="", name=None):
    """The built-in PreventGradient, which TensorFlow exposes only as a raw op."""
    return tf.raw_ops.PreventGradient(input=x, message=message, name=name)


PREVENT_MESSAGE = "sampled, not learned"
# (ours, built-in) pairs of the forward-identity ops; PreventGradient's with PREVENT_MESSAGE.
OP_PAIRS = {
    "stop_gradient": (tf_stopgrad.stop_gradient, tf.stop_gradient),
    "prevent_gradient": (
        functools.partial(tf_stopgrad.prevent_gradient, message=PREVENT_MESSAGE),
        functools.partial(builtin_prevent_gradient, message=PREVENT_MESSAGE),
    ),
}


# Values meant to catch any conversion or rounding: signed zeros, infinities, NaN, extremes.
SPECIAL_VALUES = {
    "float": [0.0, -0.0, 1.5, -2.25, np.inf, -np.inf, np.nan, 1e-40, 6e4, -1e-3],
    "int": [0, 1, -1, 7, -(2**31), 2**31 - 1],
    "complex": [0, -0.0 - 0.0j, 1.5 - 2j, np.inf + 1j, complex(np.nan, -3.0), -1e-3j],
    "bool": [True, False, False, True],
}
DTYPE_KINDS = {
    tf.float16: "float",
    tf.bfloat16: "float",
    tf.float32: "float",
    tf.float64: "float",
    tf.int32: "int",
    tf.int64: "int",
    tf.complex64: "complex",
    tf.complex128: "complex",
    tf.bool: "bool",
}


def special_tensor(dtype):
    values = np.array(SPECIAL_VALUES[DTYPE_KINDS[dtype]])
    values = np.stack([values, values[::-1]])  # rank 2, so layout matters too
    if dtype == tf.bool:
        return tf.constant(values)
    if dtype.is_integer:
        return tf.constant(values.astype(dtype.as_numpy_dtype))
    return tf.cast(tf.constant(values), dtype)
