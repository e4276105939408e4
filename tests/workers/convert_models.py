"""Runs TFLite's and tf2onnx's converters in a process of their own, so a converter that
crashes fails one test instead of ending the run (TensorFlow 2.16's TFLite converter aborted
once inside a long test process, while it converts the same model in a fresh one).

Usage: python convert_models.py BUILTIN_EXPORT_DIR OUT_DIR [--onnx] [--no-keras-tflite]

Writes to OUT_DIR tflite_saved_model.tflite (from the export), tflite_keras.tflite and
tflite_concrete.tflite (traced in memory under ``tf_stopgrad.export.builtin_ops()``), and
with ``--onnx`` onnx_keras.onnx and onnx_function.onnx (tf2onnx, in memory, likewise).
"""

import sys
from pathlib import Path

import tensorflow as tf

import tf_stopgrad
import tf_stopgrad.keras
from tf_stopgrad import _compat, export

SPEC = tf.TensorSpec([None, 3], tf.float32)


def stop_only(x):
    """The stop-only computation the in-memory conversions trace."""
    return tf.reduce_sum(tf_stopgrad.stop_gradient(tf.square(x)) * x + x, axis=1)


def keras_model():
    keras = _compat.keras_package()
    inputs = keras.Input((3,))
    features = keras.layers.Dense(4, kernel_initializer="ones")(inputs)
    outputs = keras.layers.Dense(1, kernel_initializer="ones")(
        tf_stopgrad.keras.StopGradient()(features)
    )
    return keras.Model(inputs, outputs)


def convert_tflite(builtin_export: str, out: Path, keras: bool) -> None:
    converted = {
        "tflite_saved_model": tf.lite.TFLiteConverter.from_saved_model(builtin_export).convert()
    }
    model = keras_model()
    with export.builtin_ops():
        if keras:
            converted["tflite_keras"] = tf.lite.TFLiteConverter.from_keras_model(model).convert()
        concrete = tf.function(stop_only).get_concrete_function(SPEC)
        converted["tflite_concrete"] = tf.lite.TFLiteConverter.from_concrete_functions(
            [concrete]
        ).convert()
    for name, flatbuffer in converted.items():
        (out / f"{name}.tflite").write_bytes(flatbuffer)


def convert_onnx(out: Path) -> None:
    import tf2onnx

    model = keras_model()
    with export.builtin_ops():
        tf2onnx.convert.from_keras(
            model, input_signature=[SPEC], output_path=str(out / "onnx_keras.onnx")
        )
        tf2onnx.convert.from_function(
            tf.function(stop_only), input_signature=[SPEC],
            output_path=str(out / "onnx_function.onnx"),
        )  # fmt: skip


if __name__ == "__main__":
    out_dir = Path(sys.argv[2])
    convert_tflite(sys.argv[1], out_dir, keras="--no-keras-tflite" not in sys.argv[3:])
    if "--onnx" in sys.argv[3:]:
        convert_onnx(out_dir)
