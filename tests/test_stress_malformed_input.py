"""Malformed input gives the built-in's outcome, as a Python exception, and never a crash.

Arbitrary objects, ragged or mixed nested lists, unsupported NumPy arrays, composite tensors
with inconsistent parts (built with validate=False or unchecked indices) and messages of the
wrong type run in a worker process (tests/workers/malformed_inputs.py), so that a crash shows
up as a failure here. Where the built-in raises, ours must raise the same exception type;
where the built-in passes the malformed value through, ours must return the same components.
"""

from __future__ import annotations

import pytest
from stress_support import assert_not_crashed, report, run_worker, scaled
from workers.malformed_inputs import INPUTS, MESSAGES, MODES, OPS

pytestmark = pytest.mark.slow

FUZZED_STRUCTURES = scaled(short=200, long=2_000)


@pytest.fixture(scope="module")
def worker_run(tmp_path_factory):
    finished = run_worker(
        "malformed_inputs",
        str(FUZZED_STRUCTURES),
        cwd=tmp_path_factory.mktemp("malformed"),
        timeout=900,
    )
    records = finished.records()
    started = [r for r in records if r["kind"] == "started"]
    if finished.returncode < 0 and started:
        last = started[-1]
        pytest.fail(
            f"the worker crashed during {last['case']!r}, {last['op']}, {last['mode']}:\n"
            f"{finished.describe()}"
        )
    assert_not_crashed(finished)
    assert finished.returncode == 0, finished.describe()
    return records


def outcome_of(records, kind, case, op, mode):
    key = (kind, case, op, mode)
    matches = [r for r in records if (r["kind"], r.get("case"), r.get("op"), r.get("mode")) == key]
    assert len(matches) == 1, f"no single result for {case!r}, {op}, {mode}"
    return matches[0]["ours"], matches[0]["builtin"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("case", list(INPUTS))
def test_malformed_input_has_the_builtins_outcome(case, op, mode, worker_run):
    ours, builtin = outcome_of(worker_run, "input", case, op, mode)
    assert ours == builtin


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", list(MESSAGES))
def test_prevent_gradient_message_has_the_builtins_outcome(case, mode, worker_run):
    ours, builtin = outcome_of(worker_run, "message", case, "prevent_gradient", mode)
    assert ours == builtin


def test_fuzzed_nested_structures_have_the_builtins_outcome(worker_run):
    (fuzz,) = [r for r in worker_run if r["kind"] == "fuzz"]
    report(
        f"malformed: {fuzz['examples']} fuzzed nested structures, "
        f"{len(fuzz['mismatches'])} outcome mismatches"
    )
    assert fuzz["examples"] >= FUZZED_STRUCTURES
    assert fuzz["mismatches"] == []
