"""Keras layers around tf_stopgrad's ops: ``StopGradient`` and ``PreventGradient``.

The layers are registered with Keras under the package name ``tf_stopgrad``, so a model
saved with them (``model.save("model.keras")``) loads back in any process that has run
``import tf_stopgrad.keras`` first.

They work with the Keras that ``tf.keras`` stands for (Keras 2 on TF 2.15, Keras 3 after),
on the TensorFlow backend.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from . import _compat
from .ops import _checked_message, prevent_gradient, stop_gradient

_keras = _compat.keras_package()
_Layer: Any = _keras.layers.Layer  # Keras 2 or 3, known only at run time.

if _keras.backend.backend() != "tensorflow":
    raise ImportError(
        f"tf_stopgrad.keras needs the TensorFlow backend, but Keras is using "
        f"{_keras.backend.backend()!r}. Set KERAS_BACKEND=tensorflow before importing Keras."
    )


@_keras.saving.register_keras_serializable(package="tf_stopgrad")
class StopGradient(_Layer):
    """Passes its inputs through unchanged and lets no gradient flow back through them.

    Use it like ``tf.stop_gradient``, e.g. to freeze a branch of a model inside a larger graph.

    Example: training never updates the first ``Dense``, which gets no gradient.

      >>> import keras
      >>> import tensorflow as tf
      >>> import tf_stopgrad.keras
      >>> inputs = keras.Input((4,))
      >>> features = keras.layers.Dense(8)(inputs)
      >>> outputs = keras.layers.Dense(1)(tf_stopgrad.keras.StopGradient()(features))
      >>> model = keras.Model(inputs, outputs)
      >>> with tf.GradientTape() as tape:
      ...     loss = tf.reduce_sum(model(tf.ones((2, 4))))
      >>> [gradient is None for gradient in tape.gradient(loss, model.trainable_variables)]
      [True, True, False, False]

    Args:
      **kwargs: Standard layer arguments such as ``name``.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.supports_masking = True

    def call(self, inputs: Any) -> Any:
        return tf.nest.map_structure(stop_gradient, inputs)


@_keras.saving.register_keras_serializable(package="tf_stopgrad")
class PreventGradient(_Layer):
    """Passes its inputs through unchanged and makes differentiating through them an error.

    Computing a gradient that would flow through the layer raises ``LookupError`` with
    ``message``, as with ``tf_stopgrad.prevent_gradient``.

    Args:
      message: Why the gradient is disabled; included in the error and saved in the config.
      **kwargs: Standard layer arguments such as ``name``.

    Raises:
      TypeError: ``message`` is neither text nor ``None``.
    """

    def __init__(self, message: str | bytes | None = "", **kwargs: Any) -> None:
        checked = _checked_message(message)  # before Keras sets anything up
        super().__init__(**kwargs)
        self.message = checked
        self.supports_masking = True

    def call(self, inputs: Any) -> Any:
        return tf.nest.map_structure(lambda v: prevent_gradient(v, message=self.message), inputs)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "message": self.message}
