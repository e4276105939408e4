"""Fresh-process half of tests/test_keras.py: what ``import tf_stopgrad`` imports.

Usage: python report_lazy_keras.py RESULT_JSON

RESULT_JSON gets the Keras modules that ``import tf_stopgrad`` added to those TensorFlow
had already imported, whether ``tf_stopgrad.keras`` was imported then, and whether
accessing the ``tf_stopgrad.keras`` attribute afterwards imports it.
"""

import json
import sys

import tensorflow as tf  # noqa: F401  (TensorFlow may import Keras itself)


def keras_modules() -> set:
    return {name for name in sys.modules if name.split(".")[0] in ("keras", "tf_keras")}


def main(result_path: str) -> None:
    before = keras_modules()
    import tf_stopgrad

    results = {
        "keras_modules_added": sorted(keras_modules() - before),
        "submodule_imported_by_package": "tf_stopgrad.keras" in sys.modules,
    }
    submodule = tf_stopgrad.keras
    results["attribute_is_submodule"] = submodule is sys.modules.get("tf_stopgrad.keras")
    results["attribute_has_layers"] = hasattr(submodule, "StopGradient")
    with open(result_path, "w") as result_file:
        json.dump(results, result_file)


if __name__ == "__main__":
    main(*sys.argv[1:])
