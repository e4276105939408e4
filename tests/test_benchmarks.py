"""Smoke test of the benchmark: it runs with tiny settings and reports every case.

Only behaviour is checked (one row per case, finite numbers, the CLI's output, page and chart);
timings depend on the machine and its load, and their targets live in tf_stopgrad/benchmarks/.
docs/benchmarks.md, which the command wrote, must still have the sections and cases it writes.
"""

import math
import re
import zipfile
from pathlib import Path

import pytest

from tf_stopgrad.benchmarks import bench, export_cost, report
from tf_stopgrad.benchmarks.report import Row

DOCS_PAGE = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
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
    "Export",
    "`import tf_stopgrad`",
    "`pip install` of the wheel",
    "opcheck: the checks in this process",
    "opcheck: every check, edge samples included",
    "opcheck_library: per op",
)


def tiny_wheel(directory: Path) -> Path:
    """A pure-Python wheel of one empty module: installing it needs no build."""
    info = "tiny_module-1.0.dist-info"
    files = {
        "tiny_module.py": "",
        f"{info}/METADATA": "Metadata-Version: 2.1\nName: tiny-module\nVersion: 1.0\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    files[f"{info}/RECORD"] = "".join(f"{name},,\n" for name in [*files, f"{info}/RECORD"])
    wheel = directory / "tiny_module-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return wheel


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory) -> tuple[list[Row], list[tuple[int, int]]]:
    reported: list[tuple[int, int]] = []
    rows = bench.run(
        quick=True,
        progress=lambda done, total: reported.append((done, total)),
        wheel=tiny_wheel(tmp_path_factory.mktemp("wheel")),
    )
    return rows, reported


@pytest.mark.slow
def test_every_case_has_a_row_with_finite_numbers(quick_run):
    rows, _ = quick_run
    cases = [row.case for row in rows]
    assert len(cases) == len(set(cases))
    for words in TARGETED_CASES:
        assert any(words in row.case and row.target is not None for row in rows), words
    for row in rows:
        measured = [row.ours] if row.reference is None else [row.ours, row.reference, row.ratio]
        assert all(math.isfinite(value) and value >= 0 for value in measured), row
        assert (row.reference is None) == (row.ratio is None), row


@pytest.mark.slow
def test_progress_counts_up_to_the_total(quick_run):
    _, reported = quick_run
    assert reported
    total = reported[-1][1]
    assert [done for done, _ in reported] == list(range(1, total + 1))
    assert {total for _, total in reported} == {total}


def test_a_missed_absolute_target_is_reported_with_what_was_measured():
    row = Row(case="import", ours=60.0, unit="ms", target=53.0)
    assert row.met is False
    assert "| import | 60.00 ms | — | — | ≤ 53 ms | **no** |" in report.results([row])


@pytest.mark.slow
def test_command_line_prints_the_table_and_writes_the_chart_and_the_page(
    quick_run, tmp_path, capsys, monkeypatch
):
    # The quick run's rows stand for a second run: the options must reach bench.run as given.
    asked = []
    monkeypatch.setattr(bench, "run", lambda *args: asked.append(args) or quick_run[0])
    chart, page = tmp_path / "ratios.png", tmp_path / "benchmarks.md"
    argv = ["--quick", "--rounds", "1", "--plot", str(chart), "--markdown", str(page)]
    assert bench.main(argv) == 0
    assert [(quick, rounds, wheel) for quick, _, rounds, wheel, _ in asked] == [(True, 1, None)]
    header = "| case | ours | reference | ratio ours/ref | target | met? |"
    output = capsys.readouterr().out
    assert header in output
    assert "TensorFlow" in output and "cores" in output
    assert chart.stat().st_size > 0

    text = page.read_text(encoding="utf-8")
    assert text.startswith("# Benchmarks\n")
    options = f"--quick --rounds 1 --plot {chart} --markdown benchmarks.md"
    assert f"Written by `python -m tf_stopgrad bench {options}`" in text
    assert "cores" in text and "Load average at end" in text
    assert header in text and "Notes (noise" in text
    method = text.split("## Method", 1)[1]
    # The method is the code's own docstrings, in Markdown.
    assert "Every round takes one sample of every variant" in method
    assert "- A one-element eager call without a tape" in method
    assert "### Export" in method and "``" not in method


def test_command_line_rejects_zero_rounds(capsys):
    with pytest.raises(SystemExit) as exited:
        bench.main(["--rounds", "0"])
    assert exited.value.code == 2  # argparse's usage error
    assert (
        capsys.readouterr()
        .err.strip()
        .splitlines()[-1]
        .endswith("error: --rounds must be at least 1")
    )


def test_export_cost_counts_the_plugin_nodes_and_times_both_steps():
    cost = export_cost.measure(functions=3, links=10, repeats=1)
    assert cost.plugin_nodes == 3 * len(range(0, 10, 4))
    assert cost.nodes > cost.plugin_nodes
    assert cost.save_s > 0 and cost.export_s > 0


def page_structure(text: str) -> tuple[list[str], list[str]]:
    """A benchmark page's headings and its table's cases, each number in them made N."""
    headings = re.findall(r"^#+ .+$", text, re.M)
    cases = re.findall(r"^\| (.+?)(?: \| [^|]*){5} \|$", text, re.M)
    return headings, [re.sub(r"\d+(\.\d+)?", "N", case) for case in cases]


def test_the_docs_page_s_method_is_what_the_generator_writes():
    text = DOCS_PAGE.read_text(encoding="utf-8")
    assert text.split("\n## Method\n\n", 1)[1] == bench.method() + "\n"


@pytest.mark.slow
def test_the_docs_page_has_the_sections_and_cases_the_generator_writes(quick_run):
    text = DOCS_PAGE.read_text(encoding="utf-8")
    command = re.search(r"^Written by `(python -m tf_stopgrad bench[^`]*)`", text, re.M)
    assert command, f"{DOCS_PAGE.name} does not say which command wrote it"
    rows, _ = quick_run
    if "--wheel" not in command.group(1):
        rows = [row for row in rows if not row.case.startswith("`pip install` of the wheel")]
    written = report.page(command.group(1), report.machine_description(), rows, bench.method())
    headings, cases = page_structure(text)
    assert (headings, cases) == page_structure(written)
    assert len(cases) == len(rows) + 1  # and the table's header
