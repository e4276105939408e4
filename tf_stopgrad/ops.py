"""The public ops: ``stop_gradient`` and ``prevent_gradient``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Union

import numpy as np
import tensorflow as tf

from . import _compat, _dtensor
from ._loader import build_info, load_op_library

_generated = load_op_library()
STOP_GRADIENT_OP: str = build_info()["stop_gradient_op"]
PREVENT_GRADIENT_OP: str = build_info()["prevent_gradient_op"]

Composite = Union[tf.RaggedTensor, tf.SparseTensor, tf.IndexedSlices]
TensorInput = Union[
    tf.Tensor, tf.Variable, Composite, np.ndarray, Sequence[Any], bool, int, float, str, bytes
]
TensorOutput = Union[tf.Tensor, Composite]

_ACCEPTED = (
    "Pass a tf.Tensor, a tf.Variable, a RaggedTensor, SparseTensor or IndexedSlices, a NumPy "
    "array, or a Python scalar or rectangular nested list"
)


def stop_gradient(input: TensorInput, name: str | None = None) -> TensorOutput:
    """Returns ``input`` unchanged, and treats it as a constant when gradients are computed.

    Going forward the op is an identity: the result shares the input's buffer, whatever
    its dtype or size. Going backward it contributes no gradient, so everything that
    produced ``input`` is invisible to ``tf.GradientTape``, ``tf.gradients`` and forward-mode
    autodiff alike. It behaves like ``tf.stop_gradient`` everywhere that op works.

    A common use is keeping a numerical-stability shift out of the gradient. Softmax is
    unchanged by subtracting any constant from the logits, and subtracting their maximum
    keeps ``exp`` from overflowing; the maximum is held constant so that no gradient is
    routed through ``reduce_max``:

    >>> import tensorflow as tf
    >>> import tf_stopgrad
    >>> def stable_softmax(logits):
    ...     shifted = logits - tf_stopgrad.stop_gradient(tf.reduce_max(logits))
    ...     exps = tf.exp(shifted)
    ...     return exps / tf.reduce_sum(exps)
    >>> logits = tf.constant([1e4, 1e4 + 1.0, 1e4 - 1.0])
    >>> with tf.GradientTape() as tape:
    ...     tape.watch(logits)
    ...     probs = stable_softmax(logits)
    ...     loss = probs[1]
    >>> bool(tf.reduce_all(tf.abs(probs - tf.nn.softmax(logits)) < 1e-6))
    True
    >>> grad = tape.gradient(loss, logits)
    >>> bool(tf.reduce_all(tf.math.is_finite(grad)))
    True

    Args:
      input: A tensor or anything ``tf.convert_to_tensor`` accepts. A ``tf.Variable`` gives
        a plain tensor holding its value. ``RaggedTensor``, ``SparseTensor`` and
        ``IndexedSlices`` give the same type, with every component stopped.
      name: A name for the operation in graph mode (optional).

    Returns:
      A tensor (or composite tensor) equal to ``input``, with the same dtype and shape.

    Raises:
      TypeError, ValueError: ``input`` cannot be converted to a tensor.
    """
    if _emits_builtin_op(input):
        return tf.stop_gradient(input, name=name)
    if type(input) is _compat.EagerTensor and _compat.executing_eagerly():
        if _compat.no_tape_can_record():
            return _execute_eagerly(STOP_GRADIENT_OP, input)
        # Like the built-in, keep active tapes from recording the op: a tape that saw it
        # would hold on to the output for a gradient that is always None.
        with _compat.stop_recording():
            return _execute_eagerly(STOP_GRADIENT_OP, input)
    if _is_composite(input):
        return tf.nest.map_structure(stop_gradient, input, expand_composites=True)
    with _compat.stop_recording():
        return _convert_errors(
            _generated.tf_stopgrad_stop_gradient, "stop_gradient", input, name, "StopGradient"
        )


def prevent_gradient(
    input: TensorInput,
    message: str = "",
    name: str | None = None,
) -> TensorOutput:
    """Returns ``input`` unchanged, and makes differentiating through it an error.

    Use it to mark values whose gradient would be wrong or meaningless, so a silent zero
    gradient cannot creep in. Going forward it is an identity that shares the input's
    buffer. Asking any autodiff system for a gradient through it raises ``LookupError``
    with ``message``.

    >>> import tensorflow as tf
    >>> import tf_stopgrad
    >>> x = tf.constant(3.0)
    >>> with tf.GradientTape() as tape:
    ...     tape.watch(x)
    ...     y = tf_stopgrad.prevent_gradient(x * x, message="x is sampled, not learned")
    >>> tape.gradient(y, x)
    Traceback (most recent call last):
    ...
    LookupError: Gradient explicitly disabled. Reason: x is sampled, not learned ...

    Args:
      input: As for :func:`stop_gradient`.
      message: Explains why the gradient is disabled; included in the error. ``None`` means
        no message, as for the built-in op.
      name: A name for the operation in graph mode (optional).

    Returns:
      A tensor (or composite tensor) equal to ``input``.

    Raises:
      TypeError: ``message`` is not a string, or ``input`` cannot be converted to a tensor.
      ValueError: ``input`` cannot be converted to a tensor.
    """
    if message is None:  # As tf.raw_ops.PreventGradient treats it.
        message = ""
    if not isinstance(message, (str, bytes)):
        raise TypeError(
            f"tf_stopgrad.prevent_gradient: message must be a str, got "
            f"{type(message).__name__} ({message!r}). Pass the reason as text, e.g. "
            f"message='sampled value'."
        )
    if _emits_builtin_op(input):
        return tf.raw_ops.PreventGradient(input=input, message=message, name=name)
    if type(input) is _compat.EagerTensor and _compat.executing_eagerly():
        return _execute_eagerly(PREVENT_GRADIENT_OP, input, "message", message)
    if _is_composite(input):
        return tf.nest.map_structure(
            lambda component: prevent_gradient(component, message), input, expand_composites=True
        )
    return _convert_errors(
        _generated.tf_stopgrad_prevent_gradient,
        "prevent_gradient",
        input,
        name,
        "PreventGradient",
        message=message,
    )


_builtin_ops_requested = False


def emit_builtin_ops(requested: bool) -> bool:
    """Make both functions emit the built-in ops, or not (see
    ``tf_stopgrad.export.builtin_ops``); returns the previous setting, to restore."""
    global _builtin_ops_requested
    previous, _builtin_ops_requested = _builtin_ops_requested, requested
    return previous


def _emits_builtin_op(input: Any) -> bool:
    """Whether to emit TensorFlow's built-in op instead of ours: while exporting, or for
    DTensor, which has no layout rules for plugin ops (see _dtensor.py). Composites are
    decided per component."""
    return (_builtin_ops_requested or _dtensor.should_use_builtin(input)) and not _is_composite(
        input
    )


def _execute_eagerly(op_type: str, tensor: tf.Tensor, *attrs: Any) -> tf.Tensor:
    try:
        return _compat.fast_path_execute(_compat.context(), op_type, None, tensor, *attrs)
    except _compat.NotOkStatus as status:
        _compat.raise_from_not_ok_status(status, None)


def _is_composite(value: Any) -> bool:
    # Variables are composite tensors too, but stop to a plain tensor of their value.
    return isinstance(value, _compat.CompositeTensor) and not _compat.is_resource_variable(value)


def _convert_errors(
    op_wrapper,
    api_name: str,
    input: Any,
    name: str | None,
    default_name: str,
    **attrs: Any,
):
    """Call a generated op wrapper; explain conversion failures in the same exception type.

    Graph nodes get the built-in op's default name (``StopGradient``, ``StopGradient_1``, ...)
    rather than the namespaced op type, so code that finds tensors by name works unchanged.
    """
    try:
        return op_wrapper(input, name=default_name if name is None else name, **attrs)
    except (TypeError, ValueError) as error:
        if type(error) not in (TypeError, ValueError):
            raise
        raise type(error)(
            f"tf_stopgrad.{api_name} cannot convert a {type(input).__name__} to a tensor: "
            f"{str(error).rstrip('.')}. {_ACCEPTED}."
        ) from error
