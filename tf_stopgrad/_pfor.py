"""Vectorization (``tf.vectorized_map``, ``GradientTape.jacobian``) converters.

Without them pfor falls back to a ``while_loop`` over the batch. Both ops are elementwise
identities, so the vectorized op is the same op applied to the stacked input.
"""

from . import _compat
from .ops import PREVENT_GRADIENT_OP, STOP_GRADIENT_OP, _message_of, prevent_gradient, stop_gradient


def _convert_stop_gradient(pfor_input):
    return _compat.wrap_pfor_output(stop_gradient(pfor_input.stacked_input(0)), True)


def _convert_prevent_gradient(pfor_input):
    stacked = pfor_input.stacked_input(0)
    return _compat.wrap_pfor_output(prevent_gradient(stacked, _message_of(pfor_input)), True)


def register() -> None:
    for op_type, converter in (
        (STOP_GRADIENT_OP, _convert_stop_gradient),
        (PREVENT_GRADIENT_OP, _convert_prevent_gradient),
    ):
        _compat.register_pfor_converter(op_type, converter)
