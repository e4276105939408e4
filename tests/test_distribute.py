"""tf.distribute: a data-parallel training step with the op matches one with tf.stop_gradient.

tests/workers/distributed_train_step.py runs the same step three ways (tf_stopgrad's op,
tf.stop_gradient, no stop) in fresh processes: MirroredStrategy needs its logical devices
configured before TensorFlow starts, and MultiWorkerMirroredStrategy needs one process per
worker.

ParameterServerStrategy runs as a cluster of processes (tests/workers/ps_cluster.py): one
ps that never imports tf_stopgrad (ps_server.py asserts it), two workers that import it or
not, and a coordinator that runs the same step and reports what reached it.
"""

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from workers.launch import Worker, free_loopback_ports, run_together, worker_result

pytestmark = pytest.mark.slow

MIRRORED_TIMEOUT_S = 120
MULTI_WORKER_TIMEOUT_S = 90
# A bound on a hang, not a speed target: under CI load each process imports TensorFlow in ~25 s.
PARAMETER_SERVER_TIMEOUT_S = 180
PARAMETER_SERVER_PROMPT_ERROR_S = 10
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
    return worker_result(
        "distributed_train_step.py", "mirrored", cwd=workdir, timeout=MIRRORED_TIMEOUT_S
    )


def test_mirrored_step_runs_the_op_on_both_replicas(mirrored_results):
    plugin = mirrored_results["tf_stopgrad"]
    assert len(plugin["local_replica_losses"]) == 2
    assert plugin["local_replica_losses"][0] != plugin["local_replica_losses"][1]
    assert plugin["tf_stopgrad_ops_traced"] == 2
    assert mirrored_results["builtin"]["tf_stopgrad_ops_traced"] == 0


def test_mirrored_step_matches_builtin(mirrored_results):
    assert_same_step(mirrored_results["tf_stopgrad"], mirrored_results["builtin"])
    assert_stop_took_effect(mirrored_results)


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


def private_network_wrapper() -> tuple[tuple[str, ...], str]:
    """How to run a process in a network namespace of its own, or why it cannot be done here.

    TensorFlow's gRPC servers listen on all interfaces, whatever address the cluster names.
    """
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return (), "unshare or ip is not installed"
    probe = subprocess.run(["unshare", "-n", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        return (), f"unshare -n failed: {probe.stderr.strip()}"
    return ("unshare", "-n"), ""


def run_parameter_server_cluster(workdir: Path, worker_plugin: str) -> dict:
    wrapper, _ = private_network_wrapper()
    network = ("private-network",) if wrapper else ()
    cluster = Worker(
        "ps_cluster.py",
        ("result.json", worker_plugin, str(PARAMETER_SERVER_TIMEOUT_S), *network),
        wrapper=wrapper,
    )
    run_together([cluster], cwd=workdir, timeout=PARAMETER_SERVER_TIMEOUT_S + 10)
    results = json.loads((workdir / "result.json").read_text())
    results["network_namespace"] = (workdir / "network_namespace").read_text()
    return results


@pytest.fixture(scope="module")
def parameter_server_results(tmp_path_factory) -> dict:
    return run_parameter_server_cluster(tmp_path_factory.mktemp("ps"), "with-plugin")


@pytest.fixture(scope="module")
def parameter_server_results_without_plugin(tmp_path_factory) -> dict:
    return run_parameter_server_cluster(tmp_path_factory.mktemp("ps_no_plugin"), "without-plugin")


def test_parameter_server_step_matches_builtin(parameter_server_results):
    assert_same_step(parameter_server_results["tf_stopgrad"], parameter_server_results["builtin"])
    assert_stop_took_effect(parameter_server_results)


def test_parameter_server_workers_without_plugin_fail_promptly(
    parameter_server_results_without_plugin, parameter_server_results
):
    failed = parameter_server_results_without_plugin["tf_stopgrad"]
    assert failed["error"] == "NotFoundError"
    assert re.match(r"Op type not registered 'TfStopgrad>StopGradient'", failed["message"])
    assert "from remote target /job:worker/replica:0/task:" in failed["message"]
    assert failed["seconds_to_error"] < PARAMETER_SERVER_PROMPT_ERROR_S
    # Only the plugin's op needs the import: the same workers run the other steps.
    for name in ("builtin", "no_stop"):
        assert_same_step(
            parameter_server_results_without_plugin[name], parameter_server_results[name]
        )


def test_parameter_server_cluster_has_a_network_of_its_own(parameter_server_results):
    wrapper, reason = private_network_wrapper()
    if not wrapper:
        pytest.skip(f"the cluster listened on this machine's interfaces: {reason}")
    assert parameter_server_results["network_namespace"] != os.readlink("/proc/self/ns/net")
