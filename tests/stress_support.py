"""Shared by the stress suite: short or long form, subprocess workers, RSS, live tensors, RAM.

The stress tests (tests/test_stress_*.py) run in a short form by default;
``TF_STOPGRAD_STRESS=long pytest tests/test_stress_*.py`` runs the long form. Measured figures
are printed; ``pytest -rP`` shows them.
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest
import tensorflow as tf

FORM = os.environ.get("TF_STOPGRAD_STRESS", "short").strip().lower() or "short"
if FORM not in ("short", "long"):
    raise RuntimeError(f"TF_STOPGRAD_STRESS must be 'short' or 'long', not {FORM!r}")
LONG_FORM = FORM == "long"

WORKERS = Path(__file__).resolve().parent / "workers"
GIB = 1 << 30
MIB = 1 << 20

EagerTensor = type(tf.constant(0.0))


def scaled(short: int, long: int) -> int:
    """``long`` in the long form of the stress suite, ``short`` otherwise."""
    return long if LONG_FORM else short


def report(line: str) -> None:
    """A measured figure, shown by ``pytest -rP`` (or ``-s``)."""
    print(f"[stress/{FORM}] {line}", flush=True)


# --- Subprocesses -------------------------------------------------------------------------


@dataclass
class Finished:
    args: Sequence[str]
    returncode: int
    stdout: str
    stderr: str

    def describe(self) -> str:
        if self.returncode < 0:
            status = f"was killed by {signal.Signals(-self.returncode).name} (a crash)"
        else:
            status = f"exited with {self.returncode}"
        tail = "\n".join(self.stderr.splitlines()[-40:])
        command = " ".join(self.args)
        return f"{command} {status}\n--- stdout ---\n{self.stdout}\n--- stderr ---\n{tail}"

    def records(self) -> list[dict]:
        """The JSON objects a worker printed, one a line."""
        return [json.loads(line) for line in self.stdout.splitlines() if line.startswith("{")]


def python_env(**extra: str) -> dict[str, str]:
    """The environment for a child Python: quiet TensorFlow, no inherited PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    env.update(extra)
    return env


def start_python(args: Sequence[str], cwd: Path, **env: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, *args], cwd=cwd, env=python_env(**env),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def finish(process: subprocess.Popen, timeout: float) -> Finished:
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        stdout, stderr = process.communicate()
        pytest.fail(f"{' '.join(process.args)} did not finish within {timeout} s\n{stderr[-4000:]}")
    return Finished(process.args, process.returncode, stdout, stderr)


def run_python(args: Sequence[str], cwd: Path, timeout: float, **env: str) -> Finished:
    return finish(start_python(args, cwd, **env), timeout)


def run_worker(name: str, *args: str, cwd: Path, timeout: float, **env: str) -> Finished:
    """Run ``tests/workers/<name>.py`` in a fresh Python (working directory ``cwd``)."""
    return run_python([str(WORKERS / f"{name}.py"), *args], cwd, timeout, **env)


def assert_not_crashed(finished: Finished) -> None:
    """A negative return code means the child died of a signal: a crash, never acceptable."""
    assert finished.returncode >= 0, finished.describe()


# --- Memory -------------------------------------------------------------------------------


def rss() -> int:
    return psutil.Process().memory_info().rss


def live_eager_tensors() -> int:
    """How many EagerTensor objects are alive, counted the way TF's own leak checks do."""
    gc.collect()
    return sum(isinstance(obj, EagerTensor) for obj in gc.get_objects())


def skip_unless_available_ram(needed: int, purpose: str) -> None:
    available = psutil.virtual_memory().available
    if available < needed:
        pytest.skip(
            f"{purpose} needs {needed / GIB:.1f} GiB of available RAM, but psutil reports "
            f"{available / GIB:.1f} GiB available"
        )


@contextlib.contextmanager
def exclusive(resource: str) -> Iterator[None]:
    """Hold a machine-wide lock, so concurrent test runs don't stack up huge allocations."""
    path = Path(tempfile.gettempdir()) / f"tf_stopgrad-{resource}.lock"
    # Opened to read: flock needs no more, so the file another user made serves every user.
    try:
        lock = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        lock = os.open(path, os.O_RDONLY | os.O_CREAT, 0o644)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield
    finally:
        os.close(lock)
