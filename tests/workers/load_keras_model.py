"""Fresh-process half of tests/test_keras.py: reload a ``.keras`` file and predict.

Usage: python load_keras_model.py MODEL_PATH INPUTS_JSON RESULT_JSON
       python load_keras_model.py --no-import MODEL_PATH RESULT_JSON

RESULT_JSON gets the predictions and, for every layer, its class's registered name and
its config. With ``--no-import``, the worker loads without importing tf_stopgrad.keras first:
RESULT_JSON gets the load's error (``None`` if it loaded), and whether tf_stopgrad.keras was
imported all the same (by Keras).
"""

import json
import sys

import keras
import numpy as np


def load_without_import(model_path: str) -> dict:
    try:
        keras.saving.load_model(model_path)
        error = None
    except Exception as raised:  # The test checks which error, and its message.
        error = f"{type(raised).__name__}: {raised}"
    return {"error": error, "imported": "tf_stopgrad.keras" in sys.modules}


def main(model_path: str, inputs_path: str, result_path: str) -> None:
    import tf_stopgrad.keras  # noqa: F401  (registers the layers with Keras before loading)

    model = keras.saving.load_model(model_path)
    with open(inputs_path) as inputs_file:
        inputs = np.array(json.load(inputs_file), dtype=np.float32)
    results = {
        "predictions": model.predict(inputs, verbose=0).tolist(),
        "layers": [
            {
                "registered_name": keras.saving.get_registered_name(type(layer)),
                "config": layer.get_config(),
            }
            for layer in model.layers
        ],
    }
    with open(result_path, "w") as result_file:
        json.dump(results, result_file)


if __name__ == "__main__":
    if sys.argv[1] == "--no-import":
        with open(sys.argv[-1], "w") as result_file:
            json.dump(load_without_import(sys.argv[2]), result_file)
    else:
        main(*sys.argv[1:])
