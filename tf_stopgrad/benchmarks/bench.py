"""tf_stopgrad against the built-in ops, case by case: ``python -m tf_stopgrad bench``.

``--quick`` gives a smoke run in seconds, ``--plot FILE.png`` saves a chart of the ratios,
``--markdown FILE.md`` writes the whole page of the run (the machine, the table, the notes and
this method), ``--wheel WHEEL`` adds the row of installing that wheel. The Markdown table
holds the best sample of each side over interleaved rounds, its ratio and the target for that
ratio (for the v1 Session cases: the median samples and the median of the per-round ratios),
then the tape's memory, the export's cost against a save, the time to import (and install)
the plugin, and what opcheck costs, against absolute targets. A missed target is reported as
missed.
"""

from __future__ import annotations

import argparse
import inspect
import shlex
import sys
from collections.abc import Callable
from pathlib import Path

from tf_stopgrad._progress import Progress
from tf_stopgrad.benchmarks import (
    cases,
    export_cost,
    import_and_install,
    opcheck_cost,
    report,
    tape_memory,
    timing,
)

FULL_ROUNDS = 120
QUICK_ROUNDS = 2


def run(
    quick: bool = False,
    progress: Callable[[int, int], None] | None = None,
    rounds: int | None = None,
    wheel: Path | None = None,
    variables_mb: int = 0,
) -> list[report.Row]:
    """Measure every case and return one row per case, timed cases first.

    ``quick`` takes small tensors and models, few calls and two rounds (unless ``rounds`` is
    given): it checks that everything runs. ``progress(done, total)`` is called after every
    timing sample and every other row. ``wheel`` adds the row of installing it.
    """
    if rounds is None:
        rounds = QUICK_ROUNDS if quick else FULL_ROUNDS
    timed = [case(quick) for case in cases.CASES]
    other_rows: list[Callable[[], list[report.Row]]] = [
        lambda: [tape_memory.row(quick)],
        lambda: [export_cost.row(quick, variables_mb)],
        lambda: [import_and_install.import_row(quick)],
        lambda: opcheck_cost.rows(quick),
    ]
    if wheel is not None:
        other_rows.append(lambda: [import_and_install.wheel_install_row(wheel)])
    total = rounds * sum(len(case.variants) for case in timed) + len(other_rows)
    done = 0

    def count() -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(done, total)

    rows = timing.time_interleaved(timed, rounds, count)
    for measure in other_rows:
        rows += measure()
        count()
    return rows


def _markdown(documented: object) -> str:
    return (inspect.getdoc(documented) or "").replace("``", "`")


def method() -> str:
    """How the run measures, in Markdown, from the docstrings of the code that measures."""
    timed_cases = "\n".join("- " + _markdown(case).replace("\n", "\n  ") for case in cases.CASES)
    sections = {
        "Timing": _markdown(timing),
        "Timed cases": timed_cases.replace("\n  \n", "\n\n"),
        "Tape memory": _markdown(tape_memory),
        "Export": _markdown(export_cost),
        "Import and install": _markdown(import_and_install),
        "opcheck": _markdown(opcheck_cost),
    }
    parts = [_markdown(sys.modules[__name__])]
    parts += [f"### {title}\n\n{text}" for title, text in sections.items()]
    return "\n\n".join(parts)


def main(argv: list[str]) -> int:
    """Command line: run the benchmark, print the machine, the table and the notes."""
    parser = argparse.ArgumentParser(
        prog="tf_stopgrad bench",
        description="Time tf_stopgrad.stop_gradient against tf.stop_gradient.",
    )
    parser.add_argument("--quick", action="store_true", help="tiny sizes and few calls")
    parser.add_argument(
        "--rounds",
        type=int,
        help=f"interleaved timing rounds (default {FULL_ROUNDS}, or {QUICK_ROUNDS} with --quick)",
    )
    parser.add_argument("--plot", metavar="FILE.png", help="save a bar chart of the ratios")
    parser.add_argument(
        "--markdown", metavar="FILE.md", help="write the run's page: machine, table, notes, method"
    )
    parser.add_argument("--wheel", type=Path, help="also time installing this wheel")
    parser.add_argument(
        "--variables-mb",
        type=int,
        default=0,
        help="add float32 variables of this many MB to the exported model",
    )
    args = parser.parse_args(argv)
    if args.rounds is not None and args.rounds < 1:
        parser.error("--rounds must be at least 1")

    machine = report.machine_description()
    rows = run(args.quick, Progress("bench: sample"), args.rounds, args.wheel, args.variables_mb)
    machine.append(f"Load average at end (1, 5, 15 min): {report.load_average()}")
    print(*machine, "", report.results(rows), sep="\n")
    if args.plot:
        report.plot(rows, args.plot)
        print(f"\nChart saved to {args.plot}")
    if args.markdown:
        # The command shows the page's path as given if relative, else its file name.
        path = Path(args.markdown)
        shown = [path.name if arg == args.markdown and path.is_absolute() else arg for arg in argv]
        command = shlex.join(["python", "-m", "tf_stopgrad", "bench", *shown])
        path.write_text(report.page(command, machine, rows, method()), encoding="utf-8")
        print(f"\nPage written to {args.markdown}")
    return 0
