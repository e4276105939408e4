"""The kernels registered for our ops match the built-in's, device by device.

The CUDA build of TensorFlow registers GPU kernels whether or not a GPU is present, so the
registry lists them and the GPU registrations are checked on any machine. A CPU-only wheel
(tensorflow-cpu) registers no GPU kernels to compare ours with.
"""

import pytest
import tensorflow as tf
from tensorflow.python.framework import kernels

import tf_stopgrad

pytestmark = pytest.mark.core

PAIRS = {
    "stop": (tf_stopgrad.STOP_GRADIENT_OP, "StopGradient"),
    "prevent": (tf_stopgrad.PREVENT_GRADIENT_OP, "PreventGradient"),
}


def registrations(op_type, device):
    """Each kernel as (type constraints, host-memory arguments)."""
    found = set()
    for kernel in kernels.get_registered_kernels_for_op(op_type).kernel:
        if kernel.device_type != device:
            continue
        constraints = tuple(
            (c.name, tuple(sorted(tf.as_dtype(t).name for t in c.allowed_values.list.type)))
            for c in kernel.constraint
        )
        found.add((constraints, tuple(sorted(kernel.host_memory_arg))))
    return found


@pytest.mark.parametrize("device", ["CPU", "GPU", "DEFAULT"])
@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_registrations_equal_builtin(pair, device):
    if device == "GPU" and not tf.test.is_built_with_gpu_support():
        pytest.skip("this TensorFlow is built without GPU support (tensorflow-cpu): no GPU kernels")
    ours, builtin = PAIRS[pair]
    assert registrations(builtin, device), f"the built-in {builtin} has no {device} kernels?"
    assert registrations(ours, device) == registrations(builtin, device)
