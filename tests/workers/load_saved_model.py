"""Fresh-process half of tests/test_saved_model.py: load the SavedModels and run them.

Usage: python load_saved_model.py MODULE_DIR KERAS_DIR INPUTS_JSON RESULT_JSON

MODULE_DIR holds the test's ``GradientMasking`` module, KERAS_DIR a one-input Keras model
saved with ``tf.saved_model.save``. RESULT_JSON gets each function's output on the inputs,
the gradients of ``stopped`` taken around the loaded function, the error (type and message)
from differentiating through ``prevented``, and the Keras model's serving output.
"""

import json
import sys

import tensorflow as tf

import tf_stopgrad  # noqa: F401  (registers the ops the SavedModels' graphs use)


def gradient_error(function, x: tf.Tensor) -> dict:
    # Under a tape, TensorFlow may build a function's gradient, and so raise, at the call.
    try:
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = function(x)
        tape.gradient(y, x)
    except Exception as error:  # The test checks which type it is.
        return {"type": type(error).__name__, "message": str(error)}
    return {"type": None, "message": ""}


def main(module_dir: str, keras_dir: str, inputs_path: str, result_path: str) -> None:
    with open(inputs_path) as inputs_file:
        x = tf.constant(json.load(inputs_file), tf.float32)
    module = tf.saved_model.load(module_dir)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = module.stopped(x)
    gradient_x, gradient_scale = tape.gradient(y, [x, module.scale])

    keras_model = tf.saved_model.load(keras_dir)
    serve = keras_model.signatures["serving_default"]
    (input_name,) = serve.structured_input_signature[1]
    (keras_output,) = serve(**{input_name: x}).values()

    results = {
        "stopped": module.stopped(x).numpy().tolist(),
        "prevented": module.prevented(x).numpy().tolist(),
        "gradient_inside": module.gradient_inside(x).numpy().tolist(),
        "stopped_gradient_x": gradient_x.numpy().tolist(),
        "stopped_gradient_scale": gradient_scale.numpy().tolist(),
        "prevented_gradient_error": gradient_error(module.prevented, x),
        "keras_output": keras_output.numpy().tolist(),
    }
    with open(result_path, "w") as result_file:
        json.dump(results, result_file)


if __name__ == "__main__":
    main(*sys.argv[1:])
