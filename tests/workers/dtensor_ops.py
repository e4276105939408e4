"""Runs both ops and their built-ins on DTensors over a 2-CPU mesh; writes what each gives.

Usage: python dtensor_ops.py RESULT_JSON

DTensor needs two logical CPUs, configured before TensorFlow starts, hence a fresh process.
RESULT_JSON maps ``"<implementation> <layout>"`` (implementations ``tf_stopgrad`` and
``builtin``, layouts ``sharded`` and ``replicated``) to the outcome of each scenario: a
result's per-device components and layout, or an error's type and message. It also lists
the op types in a ``tf.function`` of ``tf_stopgrad.stop_gradient`` traced before and after
the process first uses DTensor, and what the one traced before gives for a DTensor.
"""

import json
import sys

import numpy as np
import tensorflow as tf
from tensorflow.experimental import dtensor

import tf_stopgrad

MESSAGE = "sampled, not learned"
IMPLEMENTATIONS = {
    "tf_stopgrad": (
        tf_stopgrad.stop_gradient,
        lambda x: tf_stopgrad.prevent_gradient(x, message=MESSAGE),
    ),
    "builtin": (
        tf.stop_gradient,
        lambda x: tf.raw_ops.PreventGradient(input=x, message=MESSAGE),
    ),
}
VALUES = np.arange(8, dtype=np.float32).reshape(4, 2)


def describe(tensor: tf.Tensor) -> dict:
    if not dtensor.is_dtensor(tensor):
        return {"layout": None, "device": tensor.device, "components": [tensor.numpy().tolist()]}
    return {
        "layout": dtensor.fetch_layout(tensor).to_string(),
        "components": [component.numpy().tolist() for component in dtensor.unpack(tensor)],
    }


def outcome(compute) -> dict:
    try:
        return describe(compute())
    except Exception as error:  # Every failure is a result to report.
        return {"error": type(error).__name__, "message": str(error)}


def gradient_through(op, x: tf.Tensor) -> tf.Tensor:
    """d/dx of op(x * x) * x: op(x * x) where op stops the gradient, 3 x^2 where nothing does."""
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = op(x * x) * x
    # DTensor cannot broadcast a plain seed to a sharded layout, so seed with ones like x.
    return tape.gradient(y, x, output_gradients=tf.ones_like(x))


def scenarios(stop, prevent, x: tf.Tensor) -> dict:
    return {
        "stop": outcome(lambda: stop(x)),
        "prevent": outcome(lambda: prevent(x)),
        "stop_variable": outcome(lambda: stop(dtensor.DVariable(x))),
        "stop_gradient": outcome(lambda: gradient_through(stop, x)),
        "prevent_gradient": outcome(lambda: gradient_through(prevent, x)),
        "no_stop_gradient": outcome(lambda: gradient_through(tf.identity, x)),
        "stop_in_function": outcome(lambda: tf.function(stop)(x)),
        "prevent_in_function": outcome(lambda: tf.function(prevent)(x)),
        "stop_gradient_in_function": outcome(lambda: tf.function(gradient_through)(stop, x)),
        "prevent_gradient_in_function": outcome(lambda: tf.function(gradient_through)(prevent, x)),
    }


def traced_op_types(function) -> list:
    graph = function.get_concrete_function(tf.constant(VALUES)).graph
    return sorted({op.type for op in graph.get_operations()} - {"Placeholder", "Identity"})


def main(result_path: str) -> None:
    (cpu,) = tf.config.list_physical_devices("CPU")
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    mesh = dtensor.create_mesh([("batch", 2)], device_type="CPU")
    traced_early = tf.function(tf_stopgrad.stop_gradient)
    results = {"traced before DTensor is used": traced_op_types(traced_early)}
    layouts = {
        "sharded": dtensor.Layout(["batch", dtensor.UNSHARDED], mesh),
        "replicated": dtensor.Layout.replicated(mesh, rank=2),
    }
    for layout_name, layout in layouts.items():
        x = dtensor.relayout(dtensor.copy_to_mesh(VALUES, layouts["replicated"]), layout)
        assert dtensor.fetch_layout(x) == layout
        for name, (stop, prevent) in IMPLEMENTATIONS.items():
            results[f"{name} {layout_name}"] = scenarios(stop, prevent, x)
    results["traced once DTensor is used"] = traced_op_types(tf.function(tf_stopgrad.stop_gradient))
    results["traced before DTensor is used, called with a DTensor"] = outcome(
        lambda: traced_early(x)
    )
    with open(result_path, "w") as result_file:
        json.dump(results, result_file, indent=1)


if __name__ == "__main__":
    main(*sys.argv[1:])
