"""DTensor: the plugin's ops hand DTensor work to the built-in ops.

DTensor places each op by layout rules kept in a C++ registry. The TensorFlow wheel exports
that registry's symbols from ``libtensorflow_cc.so.2`` but ships none of its headers
(``spmd_expander.h``, ``layout.h``), so a plugin op cannot have rules: given a DTensor it fails,
or returns a plain tensor on one device. The built-in ``StopGradient`` and ``PreventGradient``
have the same forward value and gradient, and DTensor keeps their layouts.

Eagerly, a DTensor input is recognized. A ``tf.function`` is traced before DTensor sees it,
and its inputs carry no layout, so once the process uses DTensor every function traced from
then on gets the built-in ops.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from . import _compat


def is_dtensor(value: Any) -> bool:
    """Whether ``value`` is a DTensor; asks DTensor only once this process uses it."""
    return _compat.dtensor_device_exists() and _compat.is_dtensor(value)


def should_use_builtin(value: Any) -> bool:
    if not _compat.dtensor_device_exists():
        return False
    if _compat.executing_eagerly():
        return _compat.is_dtensor(value)
    return tf.inside_function()
