"""The public ops: ``stop_gradient`` and ``prevent_gradient``."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Sequence
from typing import Any, Callable, Union

import numpy as np
import tensorflow as tf

from . import _compat, _dtensor

# The eager path's names as globals of this module: each costs one lookup, not two.
from ._compat import EagerTensor, eager_context, fast_path_execute, no_tape_can_record
from ._dtensor import is_dtensor
from ._loader import BUILTIN_OP_TYPES, PREVENT_GRADIENT_OP, STOP_GRADIENT_OP, load_op_library

_generated = load_op_library()

Composite = Union[tf.RaggedTensor, tf.SparseTensor, tf.IndexedSlices]
TensorInput = Union[
    tf.Tensor, tf.Variable, Composite, np.ndarray, Sequence[Any], bool, int, float, str, bytes
]
TensorOutput = Union[tf.Tensor, Composite]


def stop_gradient(input: TensorInput, name: str | None = None) -> TensorOutput:
    """Returns ``input`` unchanged, and treats it as a constant when gradients are computed.

    Going forward the op is an identity: the result shares the input's buffer, whatever
    its dtype or size. Going backward it contributes no gradient, so everything that
    produced ``input`` is invisible to ``tf.GradientTape``, ``tf.gradients`` and forward-mode
    autodiff alike. It behaves like ``tf.stop_gradient`` everywhere that op works.

    A common use is keeping a numerical-stability shift out of the gradient. Softmax is unchanged by
    subtracting any constant from the logits, and subtracting their maximum keeps ``exp`` from
    overflowing; the maximum is held constant so that no gradient is routed through ``reduce_max``:

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
    return _apply(_STOP, input, name)


def prevent_gradient(
    input: TensorInput, message: str | bytes | None = "", name: str | None = None
) -> TensorOutput:
    """Returns ``input`` unchanged, and makes differentiating through it an error.

    Use it to mark values whose gradient would be wrong or meaningless, so a silent zero gradient
    cannot creep in. Going forward it is an identity that shares the input's buffer. Asking any
    autodiff system for a gradient through it raises ``LookupError`` with ``message``.

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
      TypeError: ``message`` is neither text nor ``None``, or ``input`` cannot be converted
        to a tensor.
      ValueError: ``input`` cannot be converted to a tensor.
    """
    return _apply(_PREVENT, input, name, "message", _checked_message(message))


# Set by tf_stopgrad.export.builtin_ops: both functions then emit the built-in ops.
_builtin_ops_requested = False


def _checked_message(message: Any) -> str | bytes:
    """The one rule for a PreventGradient message, for the function and the Keras layer alike:
    text (``str`` or ``bytes``), or ``None`` for none, as ``tf.raw_ops.PreventGradient`` takes it.
    """
    if message is None:
        return ""
    if not isinstance(message, (str, bytes)):
        raise TypeError(
            f"PreventGradient's message must be text (str or bytes) or None, got "
            f"{type(message).__name__} "
            f"({message!r}). Pass the reason as text, e.g. message='sampled value'."
        )
    return message


def _message_of(node: Any) -> str:
    """The message of a PreventGradient node (an op, or pfor's view of one), as text."""
    message = node.get_attr("message")
    return message.decode("utf-8", "replace") if isinstance(message, bytes) else message


@dataclasses.dataclass(frozen=True)
class _Op:
    """What tells the two ops apart; everything else about running them is shared."""

    op_type: str
    builtin: Callable[..., Any]  # tf.raw_ops' function of the built-in op
    generated: Callable[..., Any]  # the op library's wrapper, for graphs
    api_name: str
    # PreventGradient must be seen by tapes to refuse the gradient; StopGradient's gradient is
    # always None, and like the built-in it keeps tapes from holding on to its output.
    tapes_record_it: bool


_STOP = _Op(
    STOP_GRADIENT_OP,
    tf.raw_ops.StopGradient,
    _generated.tf_stopgrad_stop_gradient,
    "stop_gradient",
    tapes_record_it=False,
)
_PREVENT = _Op(
    PREVENT_GRADIENT_OP,
    tf.raw_ops.PreventGradient,
    _generated.tf_stopgrad_prevent_gradient,
    "prevent_gradient",
    tapes_record_it=True,
)


def _apply(op: _Op, input: Any, name: str | None, *attrs: Any) -> Any:
    """Run ``op`` on ``input``; ``attrs`` are the op's attributes as name, value, name, ...

    The common case comes first, with the fewest steps: an eager tensor, executed eagerly,
    that is not handed to the built-in op (while exporting, or a DTensor)."""
    if type(input) is EagerTensor and not _builtin_ops_requested:
        ctx = eager_context()
        if ctx is not None and not is_dtensor(input):
            try:
                if op.tapes_record_it or no_tape_can_record():
                    return fast_path_execute(ctx, op.op_type, None, input, *attrs)
                with _compat.stop_recording():
                    return fast_path_execute(ctx, op.op_type, None, input, *attrs)
            except _compat.NotOkStatus as status:
                _compat.raise_from_not_ok_status(status, None)
    # Composites are decided per component. Variables are composite tensors too, but stop to a
    # plain tensor of their value.
    if isinstance(input, _compat.CompositeTensor) and not _compat.is_resource_variable(input):
        return tf.nest.map_structure(
            lambda component: _apply(op, component, None, *attrs), input, expand_composites=True
        )
    keywords = dict(zip(attrs[::2], attrs[1::2]))
    # The built-in op while exporting, and for DTensor, which has no layout rules for plugin ops
    # (see _dtensor.py).
    if _builtin_ops_requested or _dtensor.should_use_builtin(input):
        return op.builtin(input=input, name=name, **keywords)
    # The built-in's default name, so code that finds tensors by name works unchanged.
    node_name = BUILTIN_OP_TYPES[op.op_type] if name is None else name
    pause = not (op.tapes_record_it or _compat.no_tape_can_record())
    try:
        with _compat.stop_recording() if pause else contextlib.nullcontext():
            return op.generated(input, name=node_name, **keywords)
    except (TypeError, ValueError) as error:
        if type(error) not in (TypeError, ValueError):
            raise
        raise type(error)(
            f"tf_stopgrad.{op.api_name} cannot convert a {type(input).__name__} to a tensor: "
            f"{str(error).rstrip('.')}. Pass a tf.Tensor, a tf.Variable, a RaggedTensor, "
            f"SparseTensor or IndexedSlices, a NumPy array, or a Python scalar or rectangular "
            f"nested list."
        ) from error
