"""Runs the worker scripts in this directory as fresh Python processes."""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

WORKERS_DIR = Path(__file__).resolve().parent
STDERR_TAIL_CHARS = 6000
POLL_SECONDS = 0.2


class WorkerFailed(RuntimeError):
    """A worker exited with an error or ran out of time; the message ends with its stderr."""


@dataclasses.dataclass(frozen=True)
class Worker:
    """One worker process: a script in this directory, its arguments, extra environment."""

    script: str
    args: Sequence[str] = ()
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    # Runs the worker through another command, e.g. ("unshare", "-n").
    wrapper: Sequence[str] = ()


def run_worker(script: str, *args: str, cwd: Path, timeout: float) -> None:
    """Run one worker script to completion; raise WorkerFailed if it does not succeed."""
    run_together([Worker(script, args)], cwd=cwd, timeout=timeout)


def worker_result(script: str, *args: str, cwd: Path, timeout: float) -> Any:
    """Run a worker script whose last argument is a file it writes its result to, as JSON; return
    that result."""
    run_worker(script, *args, "result.json", cwd=cwd, timeout=timeout)
    return json.loads((cwd / "result.json").read_text())


def run_together(
    workers: Sequence[Worker], cwd: Path, timeout: float, servers: Sequence[Worker] = ()
) -> None:
    """Start all workers and servers at once and wait for the workers.

    Servers serve until they are killed, which happens once the workers are done. Workers
    that talk to each other hang when a peer dies, so the first failure (any exit of a
    server), or the deadline, kills every process still running.

    Raises:
      WorkerFailed: a worker exited non-zero, a server exited, or the deadline passed.
    """
    deadline = time.monotonic() + timeout
    running = [_start(worker, index, cwd) for index, worker in enumerate([*servers, *workers])]
    running_servers, running_workers = running[: len(servers)], running[len(servers) :]
    try:
        while True:
            for server, process, stderr_path in running_servers:
                if process.poll() is not None:
                    raise WorkerFailed(
                        f"server {_describe(server)} exited with {process.returncode}\n"
                        + _tail(stderr_path)
                    )
            returncodes = [process.poll() for _, process, _ in running_workers]
            for (worker, _, stderr_path), returncode in zip(running_workers, returncodes):
                if returncode not in (None, 0):
                    raise WorkerFailed(
                        f"{_describe(worker)} exited with {returncode}\n" + _tail(stderr_path)
                    )
            if None not in returncodes:
                return
            if time.monotonic() > deadline:
                worker, _, stderr_path = running_workers[returncodes.index(None)]
                raise WorkerFailed(
                    f"{_describe(worker)} did not finish within {timeout} s\n" + _tail(stderr_path)
                )
            time.sleep(POLL_SECONDS)
    finally:
        for _, process, _ in running:
            if process.poll() is None:
                process.kill()
                process.wait()


def _start(worker: Worker, index: int, cwd: Path) -> tuple[Worker, subprocess.Popen, Path]:
    # Output goes to files: a worker blocked on a full pipe would look like a hang.
    log_stem = f"{Path(worker.script).stem}.{index}"
    stderr_path = cwd / f"{log_stem}.stderr"
    with open(stderr_path, "wb") as stderr, open(cwd / f"{log_stem}.stdout", "wb") as stdout:
        process = subprocess.Popen(
            [*worker.wrapper, sys.executable, str(WORKERS_DIR / worker.script), *worker.args],
            cwd=cwd,
            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **worker.env},
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
        )
    return worker, process, stderr_path


def free_loopback_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _tail(path: Path) -> str:
    return path.read_text(errors="replace")[-STDERR_TAIL_CHARS:]


def _describe(worker: Worker) -> str:
    return " ".join([worker.script, *worker.args])
