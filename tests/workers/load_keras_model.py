"""Fresh-process half of tests/test_keras.py: reload a ``.keras`` file and predict.

Usage: python load_keras_model.py MODEL_PATH INPUTS_JSON RESULT_JSON

RESULT_JSON gets the predictions and, for every layer, its class's registered name and
its config.
"""

import json
import sys

import keras
import numpy as np

import tf_stopgrad.keras  # noqa: F401  (registers the layers with Keras before loading)


def main(model_path: str, inputs_path: str, result_path: str) -> None:
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
    main(*sys.argv[1:])
