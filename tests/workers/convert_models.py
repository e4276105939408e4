"""Runs TFLite's and tf2onnx's converters in a process of their own, so a converter that
crashes fails one test instead of ending the run (TensorFlow 2.16's TFLite converter aborted
once inside a long test process, while it converts the same model in a fresh one).

Usage: python convert_models.py BUILTIN_EXPORT_DIR INFERENCE_EXPORT_DIR OUT_DIR [--no-keras-tflite]

Writes to OUT_DIR tflite_saved_model.tflite (from the export), tflite_keras.tflite and
tflite_concrete.tflite (traced in memory under ``tf_stopgrad.export.builtin_ops()``); then
onnx_cli.onnx (tf2onnx's command line on the inference export), onnx_keras.onnx and
onnx_function.onnx (tf2onnx, in memory, likewise), or, where tf2onnx and onnxruntime cannot be
imported, onnx_missing.txt, which says why.
"""

from __future__ import annotations

import sys
from pathlib import Path
from unittest import mock

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


def onnx_tools_missing() -> str | None:
    """Why tf2onnx and onnxruntime cannot be used with this TensorFlow, or None."""
    try:
        import onnxruntime  # noqa: F401
        import tf2onnx
    except ImportError as error:
        return f"tf2onnx/onnxruntime not installed for TensorFlow {tf.__version__}: {error}"
    except AttributeError as error:
        # TF 2.15-2.17 pin an ml_dtypes too old for the onnx (1.18 or later) that pip resolves
        # next to them on Python 3.10 and later.
        return f"onnx cannot be imported next to TensorFlow {tf.__version__}: {error}"
    import numpy as np

    # tf2onnx before 1.17 (the newest on Python 3.9, where TensorFlow 2.18 and 2.19 take NumPy 2)
    # folds constants with np.cast, which NumPy 2 removed.
    tf2onnx_minor = tuple(int(part) for part in tf2onnx.__version__.split(".")[:2])
    if tf2onnx_minor < (1, 17) and not hasattr(np, "cast"):
        return f"tf2onnx {tf2onnx.__version__} calls np.cast, which NumPy {np.__version__} removed"
    return None


def convert_onnx(inference_export: str, out: Path) -> None:
    import tf2onnx.convert

    command_line = ["tf2onnx.convert", "--saved-model", inference_export,
                    "--signature_def", "serving_default", "--output", str(out / "onnx_cli.onnx")]
    with mock.patch.object(sys, "argv", command_line):
        tf2onnx.convert.main()
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
    builtin_dir, inference_dir, out_dir = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    convert_tflite(builtin_dir, out_dir, keras="--no-keras-tflite" not in sys.argv[4:])
    missing = onnx_tools_missing()
    if missing:
        (out_dir / "onnx_missing.txt").write_text(missing)
    else:
        convert_onnx(inference_dir, out_dir)
