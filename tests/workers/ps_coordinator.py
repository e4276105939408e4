"""The coordinator of a ParameterServerStrategy cluster: one training step per way of stopping.

Usage: python ps_coordinator.py RESULT_JSON   (TF_CONFIG names the cluster; this is the chief)

Runs distributed_train_step.py's step (variables on the ps, the step scheduled on a worker)
with tf_stopgrad's op, tf.stop_gradient and no stop. RESULT_JSON maps each to the loss, the
gradients and the updated weights, or, if the step fails, to the error's type and message
and the seconds from scheduling the step to the error reaching the coordinator.
"""

import json
import sys
import time

import tensorflow as tf
from distributed_train_step import (
    INPUTS,
    LEARNING_RATE,
    STOPS,
    TARGETS,
    loss_and_gradients,
    make_weights,
)


def train_once(strategy, coordinator, stop) -> dict:
    frozen, live = make_weights(strategy)

    @tf.function
    def step():
        loss, gradients = loss_and_gradients(stop, frozen, live, INPUTS, TARGETS)
        for variable, gradient in zip((frozen, live), gradients):
            variable.assign_sub(LEARNING_RATE * gradient)
        return loss, gradients

    scheduled = time.monotonic()
    try:
        loss, gradients = coordinator.schedule(step).fetch()
    except tf.errors.OpError as error:
        return {
            "error": type(error).__name__,
            "message": str(error),
            "seconds_to_error": time.monotonic() - scheduled,
        }
    return {
        "loss": float(loss),
        "gradients": [gradient.tolist() for gradient in gradients],
        "weights": [frozen.numpy().tolist(), live.numpy().tolist()],
    }


def main(result_path: str) -> None:
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    strategy = tf.distribute.experimental.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)
    # tf_stopgrad's step goes last: when it fails, the coordinator raises the same error again
    # at the next schedule, which would hide how the other steps went.
    order = sorted(STOPS, key=lambda name: name == "tf_stopgrad")
    results = {name: train_once(strategy, coordinator, STOPS[name]) for name in order}
    with open(result_path, "w") as result_file:
        json.dump(results, result_file, indent=1)


if __name__ == "__main__":
    main(*sys.argv[1:])
