"""A ParameterServerStrategy cluster on 127.0.0.1: 1 ps, 2 workers and the coordinator.

Usage: python ps_cluster.py RESULT_JSON (with-plugin|without-plugin) TIMEOUT_S [private-network]

Each task is its own process. The workers import tf_stopgrad or not as told; the ps never
does. The coordinator (ps_coordinator.py) writes RESULT_JSON. ``private-network`` says this
process was started in a network namespace of its own (``unshare -n``), whose loopback
starts down; the namespace it ran in is written to ``network_namespace``.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

from launch import Worker, free_loopback_ports, run_together


def task_config(cluster: dict, task_type: str, index: int) -> dict:
    return {
        "TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": task_type, "index": index}})
    }


def main(result_path: str, worker_plugin: str, timeout_s: str, *network: str) -> None:
    if network == ("private-network",):
        subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    Path("network_namespace").write_text(os.readlink("/proc/self/ns/net"))
    chief, ps, *workers = (f"127.0.0.1:{port}" for port in free_loopback_ports(4))
    cluster = {"chief": [chief], "ps": [ps], "worker": workers}
    servers = [Worker("ps_server.py", ("without-plugin",), task_config(cluster, "ps", 0))]
    servers += [
        Worker("ps_server.py", (worker_plugin,), task_config(cluster, "worker", index))
        for index in range(len(workers))
    ]
    coordinator = Worker("ps_coordinator.py", (result_path,), task_config(cluster, "chief", 0))
    run_together([coordinator], cwd=Path.cwd(), timeout=float(timeout_s), servers=servers)


if __name__ == "__main__":
    main(*sys.argv[1:])
