"""XLA: jit-compiled gradients, HLO and kernel registrations match the built-in ops (jit_compile's
forward values against eager: tests/test_opcheck.py)."""

import json
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf
from support import OP_PAIRS, PREVENT_MESSAGE, special_tensor
from tensorflow.python.framework import kernels

import tf_stopgrad

pytestmark = pytest.mark.core

ours_prevent, builtin_prevent = OP_PAIRS["prevent_gradient"]

def jit(fn):
    return tf.function(fn, jit_compile=True, autograph=False)


def stable_softmax_and_gradient(stop, logits, weights):
    with tf.GradientTape() as tape:
        tape.watch(logits)
        exps = tf.exp(logits - stop(tf.reduce_max(logits, axis=-1, keepdims=True)))
        loss = tf.reduce_sum(weights * exps / tf.reduce_sum(exps, axis=-1, keepdims=True))
    return loss, tape.gradient(loss, logits)


def stopped_product_and_gradient(stop, x, weights):
    with tf.GradientTape() as tape:
        tape.watch(x)
        loss = tf.reduce_sum(weights * stop(x) * x)
    return loss, tape.gradient(loss, x)


def stopped_tensor_list(stop, x):
    """A TensorList (a variant tensor) through ``stop``, stacked back into a tensor."""
    element_shape = x.shape[1:]
    tensor_list = tf.raw_ops.TensorListFromTensor(tensor=x, element_shape=element_shape)
    stopped = stop(tensor_list)
    return (
        tf.raw_ops.TensorListStack(
            input_handle=stopped, element_shape=element_shape, element_dtype=x.dtype
        )
        * 2.0
    )


def test_jit_forwards_a_tensor_list_like_builtin():
    x = special_tensor(tf.float32)

    ours = jit(lambda a: stopped_tensor_list(tf_stopgrad.stop_gradient, a))(x)
    builtin = jit(lambda a: stopped_tensor_list(tf.stop_gradient, a))(x)

    np.testing.assert_array_equal(ours.numpy(), builtin.numpy())
    # Compiled too: a GPU's eager kernels flush subnormals (1e-40) to zero, XLA keeps them.
    np.testing.assert_array_equal(ours.numpy(), jit(lambda a: a * 2.0)(x).numpy())


@pytest.mark.parametrize("computation", [stable_softmax_and_gradient, stopped_product_and_gradient])
def test_jit_gradient_equals_builtin(computation):
    x = tf.constant([[1e4, 1e4 + 1.0, 1e4 - 2.0], [-3.0, 0.5, 2.0]])
    weights = tf.constant([[0.5, -1.0, 2.0], [1.0, 3.0, -0.25]])

    ours = jit(lambda a, w: computation(tf_stopgrad.stop_gradient, a, w))(x, weights)
    builtin = jit(lambda a, w: computation(tf.stop_gradient, a, w))(x, weights)

    for ours_part, builtin_part in zip(ours, builtin):
        np.testing.assert_array_equal(ours_part.numpy(), builtin_part.numpy())
        assert np.all(np.isfinite(ours_part.numpy()))


def test_jit_gradient_of_stopped_product_is_the_weighted_input():
    # d/dx sum(w * stop(x) * x) = w * x: the stopped factor is a constant.
    x = tf.constant([2.0, -3.0, 0.5])
    weights = tf.constant([1.0, 4.0, -2.0])
    compute = jit(lambda a, w: stopped_product_and_gradient(tf_stopgrad.stop_gradient, a, w))

    _, gradient = compute(x, weights)

    np.testing.assert_allclose(gradient.numpy(), (weights * x).numpy())


@pytest.mark.parametrize(
    ("prevent", "error_match"),
    [(ours_prevent, PREVENT_MESSAGE), (builtin_prevent, PREVENT_MESSAGE)],
    ids=["ours", "builtin"],
)
def test_jit_gradient_through_prevent_gradient_is_refused(prevent, error_match):
    @tf.function(jit_compile=True, autograph=False)  # autograph would wrap the LookupError
    def gradient(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = prevent(x) * x
        return tape.gradient(y, x)

    with pytest.raises(LookupError, match=error_match):
        gradient(tf.constant([1.0, 2.0]))


def normalized_hlo(hlo_text):
    """HLO text without source metadata, and with every name replaced by its first-use order.

    XLA's GPU scheduler tags each module with a hash of it, the frontend attribute
    ``fingerprint_before_lhs`` (on the module, or on the entry's root in older XLA); its value
    is left out.
    """
    text = re.sub(r",? ?metadata=\{[^}]*\}", "", hlo_text)
    text = re.sub(r'(\bfingerprint_before_lhs=)"[0-9a-fA-F]*"', r'\1""', text)
    names = {}
    return re.sub(
        r"(?<=HloModule )[\w.\-]+|(?<=ENTRY )%?[\w.\-]+|%[\w.\-]+",
        lambda match: names.setdefault(match.group(0), f"%n{len(names)}"),
        text,
    )


def model(op):
    def compute(x, w):
        with tf.GradientTape() as tape:
            tape.watch(x)
            hidden = tf.tanh(x @ w)
            loss = tf.reduce_sum(hidden * op(hidden) + op(tf.reduce_max(x)))
        return loss, tape.gradient(loss, x)

    return compute


@pytest.mark.parametrize("stage", ["hlo", "optimized_hlo"])
@pytest.mark.parametrize(
    ("ours", "builtin"),
    [
        (tf_stopgrad.stop_gradient, tf.stop_gradient),
        # No gradient flows into these, so PreventGradient's refusal is never triggered.
        (
            lambda v: tf.stop_gradient(ours_prevent(v)),
            lambda v: tf.stop_gradient(builtin_prevent(v)),
        ),
    ],
    ids=["stop_gradient", "prevent_gradient"],
)
def test_hlo_is_identical_to_builtin(ours, builtin, stage):
    x = tf.constant([[1.0, -2.0, 0.5], [3.0, 0.25, -1.0]])
    w = tf.constant([[0.5, 1.0], [-1.5, 2.0], [0.75, -0.25]])

    ours_hlo = jit(model(ours)).experimental_get_compiler_ir(x, w)(stage=stage)
    builtin_hlo = jit(model(builtin)).experimental_get_compiler_ir(x, w)(stage=stage)

    assert "tanh" in ours_hlo  # the comparison below looks at a real module
    assert normalized_hlo(ours_hlo) == normalized_hlo(builtin_hlo)


def xla_kernel_defs(op_type, device):
    defs = []
    for kernel_def in kernels.get_registered_kernels_for_op(op_type).kernel:
        if kernel_def.device_type == device:
            kernel_def.ClearField("op")
            defs.append(kernel_def.SerializeToString(deterministic=True))
    return sorted(defs)


@pytest.fixture(scope="module")
def xla_kernels_registered():
    """TensorFlow creates the XLA compilation kernels lazily; a jit compile has surely done it."""
    jit(lambda x: tf_stopgrad.stop_gradient(x) + tf.stop_gradient(x))(tf.constant(1.0))


def xla_devices(op_type):
    kernel_defs = kernels.get_registered_kernels_for_op(op_type).kernel
    return {kernel_def.device_type for kernel_def in kernel_defs
            if kernel_def.device_type.startswith("XLA_")}  # fmt: skip


@pytest.mark.usefixtures("xla_kernels_registered")
@pytest.mark.parametrize(
    ("ours", "builtin"),
    [
        (tf_stopgrad.STOP_GRADIENT_OP, "StopGradient"),
        (tf_stopgrad.PREVENT_GRADIENT_OP, "PreventGradient"),
    ],
)
def test_xla_kernel_registrations_equal_builtin(ours, builtin):
    # The XLA backends this TensorFlow has: CPU everywhere, GPU too in the x86_64 wheels.
    devices = xla_devices(builtin)

    assert "XLA_CPU_JIT" in devices
    assert xla_devices(ours) == devices
    for device in devices:
        assert xla_kernel_defs(ours, device) == xla_kernel_defs(builtin, device), device


# TensorFlow turns XLA op registrations into compilation kernels once per process, the first
# time it creates a tensor or runs an op on a device, not only at the first jit compile.
# Importing tf_stopgrad after that makes the op library register its XLA kernels itself.
IMPORT_ORDERS = {
    "before_any_op": "",
    "after_first_eager_op": "tf.constant(1.0) + 1.0",
    "after_first_jit": "softmax_gradient(tf.stop_gradient, builtin_prevent)",
}

# Prints, as JSON, jit results with our ops and the built-ins, the XLA devices the built-in
# StopGradient had kernels for when tf_stopgrad was imported, and the XLA kernel registrations.
IMPORT_ORDER_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import tensorflow as tf
    from tensorflow.python.framework import kernels

    def xla_kernels(op_type):
        return sorted(
            (k.device_type, str(k.constraint))
            for k in kernels.get_registered_kernels_for_op(op_type).kernel
            if k.device_type.startswith("XLA_")
        )

    def softmax_gradient(stop, prevent):
        @tf.function(jit_compile=True)
        def compute(logits):
            with tf.GradientTape() as tape:
                tape.watch(logits)
                shift = stop(tf.reduce_max(logits, axis=-1, keepdims=True))
                exps = tf.exp(logits - shift)
                loss = tf.reduce_sum(tf.range(3.0) * exps / tf.reduce_sum(exps, -1, True))
            return loss, tape.gradient(loss, logits), tf.stop_gradient(prevent(logits))
        x = tf.constant([[1e4, 1e4 + 1.0, 1e4 - 2.0], [-3.0, 0.5, 2.0]])
        return [t.numpy().tolist() for t in compute(x)]

    def builtin_prevent(v):
        return tf.raw_ops.PreventGradient(input=v, message="late")

    exec(sys.argv[1])
    report = {"xla_devices_before_import": sorted({d for d, _ in xla_kernels("StopGradient")})}
    import tf_stopgrad
    report["ours"] = softmax_gradient(
        tf_stopgrad.stop_gradient, lambda v: tf_stopgrad.prevent_gradient(v, "late"))
    report["builtin"] = softmax_gradient(tf.stop_gradient, builtin_prevent)
    report["kernels"] = {
        op: xla_kernels(op)
        for op in ("StopGradient", "PreventGradient",
                   tf_stopgrad.STOP_GRADIENT_OP, tf_stopgrad.PREVENT_GRADIENT_OP)
    }
    print(json.dumps(report))
    """
)


@pytest.mark.slow
@pytest.mark.parametrize("order", IMPORT_ORDERS)
def test_jit_works_whatever_ran_before_the_import(order, tmp_path):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    completed = subprocess.run(
        [sys.executable, "-c", IMPORT_ORDER_SCRIPT, IMPORT_ORDERS[order]],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    report = json.loads(completed.stdout.strip().splitlines()[-1])

    if order == "before_any_op":
        # Ours get registered together with the built-ins' (REGISTER_XLA_OP).
        assert report["xla_devices_before_import"] == []
    else:
        # The built-ins' kernels already existed: ours come from the library's own registration.
        assert "XLA_CPU_JIT" in report["xla_devices_before_import"]
    assert report["ours"] == report["builtin"]
    registered = report["kernels"]
    assert registered["StopGradient"], "no XLA kernels registered at all"
    assert registered[tf_stopgrad.STOP_GRADIENT_OP] == registered["StopGradient"]
    assert registered[tf_stopgrad.PREVENT_GRADIENT_OP] == registered["PreventGradient"]
