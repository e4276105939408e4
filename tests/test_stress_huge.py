"""Tensors past the 32-bit limits go through both ops without a copy and with exact shapes.

The tensors are built in a worker process (tests/workers/huge_tensors.py) with one allocation
each, and checked for every op, implementation (ours, built-in) and mode (eager,
tf.function). Only one run of these tests at a time holds the memory, machine-wide.
"""

from __future__ import annotations

import json

import pytest
from stress_support import (
    GIB,
    MIB,
    assert_not_crashed,
    exclusive,
    report,
    run_worker,
    skip_unless_available_ram,
)

HUGE_TENSORS = [  # the largest first: the worker's pooled allocator then reuses its memory
    {"name": "float32 over 4 GiB", "dtype": "float32", "shape": [2**16, 2**14 + 1]},
    {"name": "int8 over 2**31 elements", "dtype": "int8", "shape": [2**31 + 64]},
]
OPS = ["stop_gradient", "prevent_gradient"]
MODES = ["eager", "tf.function"]
RSS_GROWTH_LIMIT = 64 * MIB  # compared with tensors of 2 and 4 GiB
HEADROOM = 2 * GIB  # the worker's own TensorFlow, and a margin for the rest of the machine


def size_of(spec):
    count = 1
    for dim in spec["shape"]:
        count *= dim
    return count * {"float32": 4, "int8": 1}[spec["dtype"]]


@pytest.fixture(scope="module")
def huge_results(tmp_path_factory):
    with exclusive("huge-tensors"):
        needed = max(size_of(spec) for spec in HUGE_TENSORS) + HEADROOM
        skip_unless_available_ram(needed, "the huge-tensor tests")
        finished = run_worker(
            "huge_tensors",
            json.dumps(HUGE_TENSORS),
            cwd=tmp_path_factory.mktemp("huge"),
            timeout=1200,
        )
    assert_not_crashed(finished)
    assert finished.returncode == 0, finished.describe()
    records = finished.records()
    for record in records:
        if record["kind"] == "created":
            report(
                f"huge: made {record['tensor']} ({record['bytes'] / GIB:.3f} GiB) in "
                f"{record['seconds']:.1f} s"
            )
        elif record["kind"] == "peak":
            report(f"huge: worker peak RSS {record['peak_rss'] / GIB:.2f} GiB")
    return {
        (r["tensor"], r["op"], r["mode"], r["implementation"]): r
        for r in records
        if r["kind"] == "result"
    }


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("spec", HUGE_TENSORS, ids=lambda spec: spec["name"])
@pytest.mark.slow
def test_huge_tensor_passes_through_without_copy(spec, op, mode, huge_results):
    ours = huge_results[spec["name"], op, mode, "ours"]
    builtin = huge_results[spec["name"], op, mode, "built-in"]
    report(
        f"huge: {spec['name']}, {op}, {mode}: ours {ours['seconds'] * 1e3:.1f} ms, RSS "
        f"{ours['rss_growth'] / MIB:+.1f} MiB; built-in {builtin['seconds'] * 1e3:.1f} ms, "
        f"RSS {builtin['rss_growth'] / MIB:+.1f} MiB"
    )
    assert ours["aliased"], "the output does not share the input's buffer"
    assert (ours["dtype"], ours["shape"]) == (spec["dtype"], spec["shape"])
    assert (builtin["dtype"], builtin["shape"]) == (spec["dtype"], spec["shape"])
    assert ours["values_match"] and builtin["values_match"]
    assert ours["rss_growth"] < RSS_GROWTH_LIMIT
