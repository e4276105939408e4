"""Smoke test of the benchmark: it runs with tiny settings and reports every case.

Only behaviour is checked (one row per case, finite numbers, the CLI's output and chart);
timings depend on the machine and its load, and their targets live in tf_stopgrad/benchmarks/.
"""

import math
from pathlib import Path

import pytest

from tf_stopgrad.benchmarks import bench
from tf_stopgrad.benchmarks.report import Row

# One case per target of the benchmark, each named by words in its row.
TARGETED_CASES = (
    "Eager call, no tape",
    "GradientTape",
    "Size independence, ours",
    "Graph",
    "vectorized_map",
    "XLA",
    "v1 Session.run: chain",
    "v1 Session.run: GradientDescentOptimizer",
    "Tape memory",
)


@pytest.fixture(scope="module")
def quick_run() -> tuple[list[Row], list[tuple[int, int]]]:
    reported: list[tuple[int, int]] = []
    rows = bench.run(quick=True, progress=lambda done, total: reported.append((done, total)))
    return rows, reported


def test_every_case_has_a_row_with_finite_numbers(quick_run):
    rows, _ = quick_run
    cases = [row.case for row in rows]
    assert len(cases) == len(set(cases))
    for words in TARGETED_CASES:
        assert any(words in row.case and row.target is not None for row in rows), words
    for row in rows:
        assert all(math.isfinite(value) for value in (row.ours, row.reference, row.ratio)), row
        assert row.ours >= 0 and row.reference >= 0, row


def test_progress_counts_up_to_the_total(quick_run):
    _, reported = quick_run
    assert reported
    total = reported[-1][1]
    assert [done for done, _ in reported] == list(range(1, total + 1))


def test_command_line_prints_the_table_and_saves_the_chart(tmp_path: Path, capsys):
    chart = tmp_path / "ratios.png"
    assert bench.main(["--quick", "--rounds", "1", "--plot", str(chart)]) == 0
    output = capsys.readouterr().out
    assert "| case | ours | reference | ratio ours/ref | target | met? |" in output
    assert "TensorFlow" in output and "cores" in output
    assert chart.stat().st_size > 0


def test_command_line_rejects_zero_rounds(capsys):
    with pytest.raises(SystemExit) as exited:
        bench.main(["--rounds", "0"])
    assert exited.value.code == 2  # argparse's usage error
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith(
        "error: --rounds must be at least 1"
    )


def test_export_benchmark_measures_both_steps_on_a_tiny_model(capsys):
    from tf_stopgrad.benchmarks import export_bench

    cost = export_bench.measure(**export_bench.QUICK)
    links = export_bench.QUICK["links"]
    assert cost.plugin_nodes == export_bench.QUICK["functions"] * len(range(0, links, 4))
    assert cost.nodes > cost.plugin_nodes
    assert cost.save_s > 0 and cost.export_s > 0

    assert export_bench.main(["--quick"]) == 0
    assert "rewrite / save =" in capsys.readouterr().out
