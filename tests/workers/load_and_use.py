"""Worker for test_loading.py and test_stress_imports.py: import tf_stopgrad, then check it
still works like the built-in.

Usage:
  load_and_use.py once    import whichever tf_stopgrad sys.path finds; print one JSON object:
                          where it was found, and the ImportError message or the checks
  load_and_use.py copy    once, for a copy on PYTHONPATH, ahead of an editable install's import
                          hook (which comes before sys.path)
  load_and_use.py reload  import, then apply each of RELOAD_ACTIONS in turn; after each, print
                          the checks, run with the current module and with the first import
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys

import numpy as np
import tensorflow as tf


def _drop_and_import_again():
    for name in [name for name in sys.modules if name.split(".")[0] == "tf_stopgrad"]:
        del sys.modules[name]
    return importlib.import_module("tf_stopgrad")


RELOAD_ACTIONS = {
    "import tf_stopgrad again": lambda: importlib.import_module("tf_stopgrad"),
    "importlib.reload(tf_stopgrad)": lambda: importlib.reload(sys.modules["tf_stopgrad"]),
    "importlib.reload(tf_stopgrad.ops)": lambda: importlib.reload(sys.modules["tf_stopgrad.ops"]),
    "tf.load_op_library(library_path()) again": lambda: tf.load_op_library(
        sys.modules["tf_stopgrad"].library_path()
    ),
    "fresh import after removing it from sys.modules": _drop_and_import_again,
}


def bits(tensor):
    return tensor.dtype.name, tuple(tensor.shape), np.asarray(tensor.numpy()).tobytes()


def checks(module) -> dict[str, bool]:
    """The ops work and match the built-in, eagerly and in graphs; gradients are masked."""
    special = tf.constant([1.5, -0.0, float("nan"), float("inf")])
    x = tf.constant([1.5, -2.0, 3.0])
    results = {
        "stop_gradient forward": bits(module.stop_gradient(special))
        == bits(tf.stop_gradient(special)),
        "prevent_gradient forward": bits(module.prevent_gradient(special, message="m"))
        == bits(tf.raw_ops.PreventGradient(input=special, message="m")),
    }
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        ours = module.stop_gradient(x) * x
        builtin = tf.stop_gradient(x) * x
        prevented = module.prevent_gradient(x, message="m")
    results["stop_gradient masks the tape gradient"] = bits(tape.gradient(ours, x)) == bits(
        tape.gradient(builtin, x)
    )
    try:
        tape.gradient(prevented, x)
        results["prevent_gradient refuses the tape gradient"] = False
    except LookupError:
        results["prevent_gradient refuses the tape gradient"] = True

    @tf.function
    def graph_gradients(v):
        return (
            tf.gradients(module.stop_gradient(v) * v, v)[0],
            tf.gradients(tf.stop_gradient(v) * v, v)[0],
        )

    ours_graph, builtin_graph = graph_gradients(x)
    results["stop_gradient masks tf.gradients in tf.function"] = bits(ours_graph) == bits(
        builtin_graph
    )
    return results


def emit(**record):
    print(json.dumps(record), flush=True)


def once():
    origin = importlib.util.find_spec("tf_stopgrad").origin
    try:
        import tf_stopgrad
    except ImportError as error:
        emit(origin=origin, import_error=str(error))
        return
    emit(origin=origin, file=tf_stopgrad.__file__, checks=checks(tf_stopgrad))


def copy():
    sys.meta_path[:] = [finder for finder in sys.meta_path
                        if "editable" not in type(finder).__module__]  # fmt: skip
    once()


def reload():
    import tf_stopgrad as first_import

    for action, perform in RELOAD_ACTIONS.items():
        perform()
        emit(
            action=action,
            current=checks(sys.modules["tf_stopgrad"]),
            first_import=checks(first_import),
        )


if __name__ == "__main__":
    {"once": once, "copy": copy, "reload": reload}[sys.argv[1]]()
