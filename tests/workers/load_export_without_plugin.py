"""Runs exported SavedModels' ``serving_default`` where ``import tf_stopgrad`` is impossible.

Usage: python load_export_without_plugin.py JOBS_JSON RESULT_JSON

JOBS_JSON holds ``inputs`` (a nested list of float32) and ``models``, a mapping of names to
SavedModel directories, each with a ``serving_default`` signature (input ``x``, output
``y``), TF2 or TF1 alike; RESULT_JSON gets each model's ``y`` under its name, and whether
``import tf_stopgrad`` failed here.
"""

import json
import sys

import tensorflow as tf

# Importing it makes `import tf_stopgrad` fail in this process from then on.
from run_without_plugin import plugin_is_importable


def main(jobs_path: str, result_path: str) -> None:
    with open(jobs_path) as jobs_file:
        jobs = json.load(jobs_file)
    x = tf.constant(jobs["inputs"], dtype=tf.float32)
    results = {}
    for name, path in jobs["models"].items():
        model = tf.saved_model.load(path)  # held while its signature runs
        results[name] = model.signatures["serving_default"](x=x)["y"].numpy().tolist()
    results["plugin_importable"] = plugin_is_importable()
    with open(result_path, "w") as result_file:
        json.dump(results, result_file)


if __name__ == "__main__":
    main(*sys.argv[1:])
