"""Runs an exported model in a process where ``import tf_stopgrad`` is impossible.

Usage: python run_without_plugin.py JOBS_JSON RESULT_JSON

JOBS_JSON holds ``inputs`` (a nested list of float32) and ``jobs``, a list of
``[name, kind, model path]``; RESULT_JSON gets each job's result under its name, and whether
``import tf_stopgrad`` failed here. One process runs every job, so TensorFlow loads once.
  KIND saved-model: MODEL is a SavedModel with ``serving_default`` (input ``x``, output ``y``)
       and a ``prevented`` function; the result holds the serving output, the gradients of
       its sum with respect to ``x`` and the variable ``scale``, and the error from differentiating
       through ``prevented``.
  KIND tflite: MODEL is a .tflite file with one input and one output, run by TensorFlow
       Lite's interpreter.
  KIND onnx: MODEL is an .onnx file with one input and one output, run by onnxruntime.
  KIND load-error: MODEL is a SavedModel; the result is what ``tf.saved_model.load`` raises
       (type and message), or no type if it loads.
"""

import importlib.abc
import json
import sys


class RefuseTfStopgrad(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname.split(".")[0] == "tf_stopgrad":
            raise ImportError("tf_stopgrad is not available in this process")
        return None


sys.meta_path.insert(0, RefuseTfStopgrad())

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402


def plugin_is_importable() -> bool:
    try:
        import tf_stopgrad  # noqa: F401
    except ImportError:
        return False
    return True


def run_saved_model(model_dir: str, x: np.ndarray) -> dict:
    model = tf.saved_model.load(model_dir)
    serve = model.signatures["serving_default"]
    x = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = serve(x=x)["y"]
        total = tf.reduce_sum(y)
    gradient_x, gradient_scale = tape.gradient(total, [x, model.scale])
    try:
        with tf.GradientTape() as tape:
            tape.watch(x)
            prevented = model.prevented(x)
        tape.gradient(prevented, x)
        prevent_error = None
    except LookupError as error:
        prevent_error = str(error)
    return {
        "y": y.numpy().tolist(),
        "gradient_x": gradient_x.numpy().tolist(),
        "gradient_scale": gradient_scale.numpy().tolist(),
        "prevented": model.prevented(x).numpy().tolist(),
        "prevent_error": prevent_error,
    }


def run_tflite(model_path: str, x: np.ndarray) -> dict:
    interpreter = tf.lite.Interpreter(model_path=model_path)
    (input_detail,) = interpreter.get_input_details()
    interpreter.resize_tensor_input(input_detail["index"], x.shape)
    interpreter.allocate_tensors()
    interpreter.set_tensor(input_detail["index"], x)
    interpreter.invoke()
    (output_detail,) = interpreter.get_output_details()
    return {"y": interpreter.get_tensor(output_detail["index"]).tolist()}


def run_onnx(model_path: str, x: np.ndarray) -> dict:
    import onnxruntime

    session = onnxruntime.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    (model_input,) = session.get_inputs()
    (y,) = session.run(None, {model_input.name: x})
    return {"y": y.tolist()}


def load_error(model_dir: str, x: np.ndarray) -> dict:
    try:
        tf.saved_model.load(model_dir)
    except Exception as error:  # The test checks which type it is.
        return {"type": type(error).__name__, "message": str(error)}
    return {"type": None, "message": ""}


RUNNERS = {
    "saved-model": run_saved_model, "tflite": run_tflite, "onnx": run_onnx,
    "load-error": load_error,
}  # fmt: skip


def main(jobs_path: str, result_path: str) -> None:
    with open(jobs_path) as jobs_file:
        jobs = json.load(jobs_file)
    x = np.array(jobs["inputs"], dtype=np.float32)
    results = {name: RUNNERS[kind](model, x) for name, kind, model in jobs["jobs"]}
    results["plugin_importable"] = plugin_is_importable()
    with open(result_path, "w") as result_file:
        json.dump(results, result_file)


if __name__ == "__main__":
    main(*sys.argv[1:])
