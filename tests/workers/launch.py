"""Runs the worker scripts in this directory as fresh Python processes."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

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


def run_worker(script: str, *args: str, cwd: Path, timeout: float) -> None:
    """Run one worker script to completion; raise WorkerFailed if it does not succeed."""
    run_together([Worker(script, args)], cwd=cwd, timeout=timeout)


def run_together(workers: Sequence[Worker], cwd: Path, timeout: float) -> None:
    """Start all workers at once and wait for all of them.

    Workers that talk to each other hang when a peer dies, so the first failure, or the
    deadline, kills every worker still running.

    Raises:
      WorkerFailed: a worker exited non-zero, or the deadline passed.
    """
    deadline = time.monotonic() + timeout
    running = [_start(worker, index, cwd) for index, worker in enumerate(workers)]
    try:
        while True:
            returncodes = [process.poll() for _, process, _ in running]
            for (worker, _, stderr_path), returncode in zip(running, returncodes):
                if returncode not in (None, 0):
                    raise WorkerFailed(
                        f"{_describe(worker)} exited with {returncode}\n" + _tail(stderr_path)
                    )
            if None not in returncodes:
                return
            if time.monotonic() > deadline:
                worker, _, stderr_path = running[returncodes.index(None)]
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
            [sys.executable, str(WORKERS_DIR / worker.script), *worker.args],
            cwd=cwd,
            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **worker.env},
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
        )
    return worker, process, stderr_path


def _tail(path: Path) -> str:
    return path.read_text(errors="replace")[-STDERR_TAIL_CHARS:]


def _describe(worker: Worker) -> str:
    return " ".join([worker.script, *worker.args])
