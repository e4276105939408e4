"""Gradient functions for the plugin's ops, registered with TensorFlow's gradient registry.

The masking comes from these registrations, so it holds wherever TensorFlow differentiates:
eager tapes, ``tf.function``, ``tf.compat.v1.gradients``, higher-order and forward mode.
"""

import contextlib

import tensorflow as tf

from .ops import PREVENT_GRADIENT_OP, STOP_GRADIENT_OP, _message_of


def _stop_gradient_grad(op, grad):
    return None


def _prevent_gradient_grad(op, grad):
    message = _message_of(op)
    where = f"op {PREVENT_GRADIENT_OP}"
    node = getattr(op, "name", None)  # Eager tapes pass a stand-in op without a name.
    if node:
        where += f", node {node!r}"
    # The built-in's wording first: code and tests match on "explicitly disabled".
    reason = message or "(none given)"
    raise LookupError(f"Gradient explicitly disabled. Reason: {reason} ({where})")


def register() -> None:
    for op_type, gradient in (
        (STOP_GRADIENT_OP, _stop_gradient_grad),
        (PREVENT_GRADIENT_OP, _prevent_gradient_grad),
    ):
        with contextlib.suppress(KeyError):  # Registered already by an earlier load.
            tf.RegisterGradient(op_type)(gradient)
