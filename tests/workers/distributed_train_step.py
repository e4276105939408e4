"""One data-parallel training step with each way of stopping a gradient; writes the results.

Usage:
  python distributed_train_step.py mirrored RESULT_JSON
  python distributed_train_step.py multi-worker RESULT_JSON   (TF_CONFIG describes the cluster)

``mirrored`` runs MirroredStrategy over two logical CPUs of this process; ``multi-worker``
runs MultiWorkerMirroredStrategy with one CPU replica per worker process.

The model is ``tanh(x @ frozen) * (x @ live)`` with the stop applied to the ``tanh`` branch,
so ``frozen`` only learns when nothing stops its gradient. The step is run with
tf_stopgrad's op, with ``tf.stop_gradient``, and with no stop at all. RESULT_JSON maps each
to the summed loss, the reduced gradients, the updated weights, this process's per-replica
losses, and how many of tf_stopgrad's ops the traced step contains.
"""

import json
import sys

import numpy as np
import tensorflow as tf

import tf_stopgrad

GLOBAL_BATCH = 4
LEARNING_RATE = 0.1
INPUTS = np.linspace(-1.0, 1.0, GLOBAL_BATCH * 3, dtype=np.float32).reshape(GLOBAL_BATCH, 3)
TARGETS = np.array([[0.5], [-0.25], [1.0], [0.0]], dtype=np.float32)
STOPS = {
    "tf_stopgrad": tf_stopgrad.stop_gradient,
    "builtin": tf.stop_gradient,
    "no_stop": tf.identity,
}


def make_strategy(kind: str) -> tf.distribute.Strategy:
    """Must run before anything else touches TensorFlow's devices."""
    if kind == "mirrored":
        (cpu,) = tf.config.list_physical_devices("CPU")
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * 2
        )
        return tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    if kind == "multi-worker":
        return tf.distribute.MultiWorkerMirroredStrategy()
    raise SystemExit(f"unknown strategy kind {kind!r}")


def count_ops(graph_def: tf.compat.v1.GraphDef, op_type: str) -> int:
    nodes = list(graph_def.node)
    for function in graph_def.library.function:
        nodes.extend(function.node_def)
    return sum(node.op == op_type for node in nodes)


def make_weights(strategy: tf.distribute.Strategy) -> tuple[tf.Variable, tf.Variable]:
    """``frozen`` and ``live``, created where ``strategy`` keeps its variables."""
    with strategy.scope():
        return tf.Variable([[0.5], [-1.0], [0.25]]), tf.Variable([[1.0], [0.5], [-0.5]])


def loss_and_gradients(stop, frozen: tf.Variable, live: tf.Variable, x, y):
    """This batch's share of the loss, and its gradients for ``[frozen, live]``."""
    with tf.GradientTape() as tape:
        prediction = stop(tf.tanh(x @ frozen)) * (x @ live)
        loss = tf.reduce_sum(tf.square(prediction - y)) / GLOBAL_BATCH
    gradients = tape.gradient(
        loss, [frozen, live], unconnected_gradients=tf.UnconnectedGradients.ZERO
    )
    return loss, gradients


def train_once(strategy: tf.distribute.Strategy, stop) -> dict:
    frozen, live = make_weights(strategy)
    shard_size = GLOBAL_BATCH // strategy.num_replicas_in_sync

    def shard(array):
        def replica_shard(context):
            start = context.replica_id_in_sync_group * shard_size
            return tf.constant(array[start : start + shard_size])

        return strategy.experimental_distribute_values_from_function(replica_shard)

    def replica_step(x, y):
        return loss_and_gradients(stop, frozen, live, x, y)

    @tf.function
    def step(x, y):
        losses, gradients = strategy.run(replica_step, args=(x, y))
        reduced = [strategy.reduce("SUM", gradient, axis=None) for gradient in gradients]
        for variable, gradient in zip((frozen, live), reduced):
            variable.assign_sub(LEARNING_RATE * gradient)
        return strategy.reduce("SUM", losses, axis=None), reduced, losses

    x, y = shard(INPUTS), shard(TARGETS)
    loss, gradients, losses = step(x, y)
    traced = step.get_concrete_function(x, y).graph.as_graph_def()
    return {
        "loss": float(loss),
        "gradients": [gradient.numpy().tolist() for gradient in gradients],
        "weights": [frozen.numpy().tolist(), live.numpy().tolist()],
        "local_replica_losses": [
            float(value) for value in strategy.experimental_local_results(losses)
        ],
        "tf_stopgrad_ops_traced": count_ops(traced, tf_stopgrad.STOP_GRADIENT_OP),
    }


def main(strategy_kind: str, result_path: str) -> None:
    strategy = make_strategy(strategy_kind)
    results = {name: train_once(strategy, stop) for name, stop in STOPS.items()}
    with open(result_path, "w") as result_file:
        json.dump(results, result_file)


if __name__ == "__main__":
    main(*sys.argv[1:])
