"""Writes the SavedModels that the Java tests load, and what Python computes with them.

    python save_models.py OUT_DIR

OUT_DIR/plugin is a SavedModel whose serving signature uses tf_stopgrad's ops (a stable
softmax, and a prevent on a second output); OUT_DIR/export is tf_stopgrad.export's copy with
the built-in ops. x.bin is the input, and softmax.bin and prevented.bin the outputs Python got
from the plugin SavedModel after loading it back: raw little-endian float32, shape [3, 4].
"""

import sys
from pathlib import Path

import numpy as np
import tensorflow as tf

import tf_stopgrad
from tf_stopgrad import export


class StableSoftmax(tf.Module):
    @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x")])
    def __call__(self, x):
        shifted = x - tf_stopgrad.stop_gradient(tf.reduce_max(x, axis=-1, keepdims=True))
        exponentials = tf.exp(shifted)
        return {
            "softmax": exponentials / tf.reduce_sum(exponentials, axis=-1, keepdims=True),
            "prevented": tf_stopgrad.prevent_gradient(x * 2.0, message="from Python"),
        }


def main(out: Path) -> None:
    module = StableSoftmax()
    tf.saved_model.save(module, str(out / "plugin"), signatures=module.__call__)
    export.to_builtin_saved_model(out / "plugin", out / "export")
    x = np.random.default_rng(7).normal(scale=30.0, size=(3, 4)).astype("<f4")
    outputs = tf.saved_model.load(str(out / "plugin")).signatures["serving_default"](x=x)
    (out / "x.bin").write_bytes(x.tobytes())
    for name in ("softmax", "prevented"):
        (out / f"{name}.bin").write_bytes(outputs[name].numpy().astype("<f4").tobytes())


if __name__ == "__main__":
    main(Path(sys.argv[1]))
