"""tf.distribute: a data-parallel training step with the op matches one with tf.stop_gradient.

tests/workers/distributed_train_step.py runs the same step three ways (tf_stopgrad's op,
tf.stop_gradient, no stop) in fresh processes: MirroredStrategy needs its logical devices
configured before TensorFlow starts, and MultiWorkerMirroredStrategy needs one process per
worker.
"""

import json
import socket

import numpy as np
import pytest
from workers.launch import Worker, run_together, run_worker

MIRRORED_TIMEOUT_S = 120
MULTI_WORKER_TIMEOUT_S = 90
COMPARED = ("loss", "gradients", "weights")


def assert_same_step(actual: dict, expected: dict) -> None:
    for key in COMPARED:
        np.testing.assert_allclose(actual[key], expected[key], rtol=1e-6, err_msg=key)


def assert_stop_took_effect(results: dict) -> None:
    frozen_gradient = np.array(results["tf_stopgrad"]["gradients"][0])
    unstopped_gradient = np.array(results["no_stop"]["gradients"][0])
    assert np.all(frozen_gradient == 0)
    assert np.all(np.abs(unstopped_gradient) > 1e-3), "the stop must matter for this step"


@pytest.fixture(scope="module")
def mirrored_results(tmp_path_factory) -> dict:
    workdir = tmp_path_factory.mktemp("mirrored")
    run_worker(
        "distributed_train_step.py",
        "mirrored",
        "result.json",
        cwd=workdir,
        timeout=MIRRORED_TIMEOUT_S,
    )
    return json.loads((workdir / "result.json").read_text())


def test_mirrored_step_runs_the_op_on_both_replicas(mirrored_results):
    plugin = mirrored_results["tf_stopgrad"]
    assert len(plugin["local_replica_losses"]) == 2
    assert plugin["local_replica_losses"][0] != plugin["local_replica_losses"][1]
    assert plugin["tf_stopgrad_ops_traced"] == 2
    assert mirrored_results["builtin"]["tf_stopgrad_ops_traced"] == 0


def test_mirrored_step_matches_builtin(mirrored_results):
    assert_same_step(mirrored_results["tf_stopgrad"], mirrored_results["builtin"])
    assert_stop_took_effect(mirrored_results)


def free_loopback_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def tf_config(ports: list[int], index: int) -> str:
    cluster = {"worker": [f"127.0.0.1:{port}" for port in ports]}
    return json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})


@pytest.fixture(scope="module")
def multi_worker_results(tmp_path_factory) -> list[dict]:
    workdir = tmp_path_factory.mktemp("multi_worker")
    ports = free_loopback_ports(2)
    workers = [
        Worker(
            "distributed_train_step.py",
            ("multi-worker", f"result{index}.json"),
            env={"TF_CONFIG": tf_config(ports, index)},
        )
        for index in range(len(ports))
    ]
    run_together(workers, cwd=workdir, timeout=MULTI_WORKER_TIMEOUT_S)
    return [json.loads((workdir / f"result{index}.json").read_text()) for index in range(2)]


def test_multi_worker_step_runs_the_op_on_each_worker(multi_worker_results):
    local_losses = []
    for results in multi_worker_results:
        assert results["tf_stopgrad"]["tf_stopgrad_ops_traced"] == 1
        local_losses.extend(results["tf_stopgrad"]["local_replica_losses"])
    assert len(local_losses) == 2 and local_losses[0] != local_losses[1]
    assert sum(local_losses) == pytest.approx(multi_worker_results[0]["tf_stopgrad"]["loss"])


@pytest.mark.parametrize("worker", [0, 1])
def test_multi_worker_step_matches_builtin(multi_worker_results, worker):
    results = multi_worker_results[worker]
    assert_same_step(results["tf_stopgrad"], results["builtin"])
    assert_stop_took_effect(results)


@pytest.mark.parametrize("implementation", ["tf_stopgrad", "builtin"])
def test_multi_worker_workers_agree(multi_worker_results, implementation):
    first, second = (results[implementation] for results in multi_worker_results)
    assert_same_step(first, second)
