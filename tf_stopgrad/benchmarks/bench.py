"""tf_stopgrad.stop_gradient against the built-in tf.stop_gradient, case by case.

Run it as ``python -m tf_stopgrad bench`` or ``python -m tf_stopgrad.benchmarks.bench``; ``--quick``
gives a smoke run in seconds, ``--plot FILE.png`` saves a chart of the ratios. The printed
Markdown table holds the best sample of each side over interleaved rounds, its ratio and the
target for that ratio (for the v1 Session cases: the median samples and the median of the
per-round ratios); targets that are missed are reported as missed.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

import tensorflow as tf

import tf_stopgrad
from tf_stopgrad import _compat
from tf_stopgrad._cli import Progress
from tf_stopgrad.benchmarks import cases, report, tape_memory
from tf_stopgrad.benchmarks.report import Row
from tf_stopgrad.benchmarks.timing import median_round_ratio, time_interleaved

FULL_ROUNDS = 120
QUICK_ROUNDS = 2
_MIB = float(1 << 20)


def run(
    quick: bool = False,
    progress: Callable[[int, int], None] | None = None,
    rounds: int | None = None,
) -> list[Row]:
    """Measure every case and return one row per case, timed cases first.

    Args:
      quick: Small tensors, few calls and two rounds: checks that everything runs, in seconds.
      progress: Called as ``progress(samples_done, samples_total)`` after every timing sample.
      rounds: Interleaved timing rounds; defaults to 120, or 2 when ``quick``.
    """
    sizes = cases.QUICK if quick else cases.FULL
    if rounds is None:
        rounds = QUICK_ROUNDS if quick else FULL_ROUNDS
    groups, comparisons = cases.build(sizes)
    timings = time_interleaved(groups, rounds, progress)
    rows = []
    for comparison in comparisons:
        group = timings[comparison.group]
        ours, reference = group[comparison.ours], group[comparison.reference]
        if comparison.per_round:
            ours_us, reference_us = ours.median_us, reference.median_us
            ratio = median_round_ratio(ours, reference)
        else:
            ours_us, reference_us = ours.best_us, reference.best_us
            ratio = report.ratio(ours_us, reference_us)
        rows.append(
            Row(
                case=comparison.case,
                ours=ours_us,
                reference=reference_us,
                unit="µs",
                ratio=ratio,
                target=comparison.target,
                ours_spread=ours.spread,
                reference_spread=reference.spread,
                note=comparison.note(group),
            )
        )
    rows.append(_tape_memory_row(sizes.tape_intermediate_bytes))
    return rows


def _record_unpaused(tensor: tf.Tensor) -> tf.Tensor:
    """The plugin's op run without pausing the tape: a tape records it, like any other op."""
    return _compat.fast_path_execute(_compat.context(), tf_stopgrad.STOP_GRADIENT_OP, None, tensor)


def _tape_memory_row(intermediate_bytes: int) -> Row:
    """The tape-memory case: ours against the built-in, with an unpaused recording as control."""
    use_allocator = tape_memory.allocator_counts_bytes()
    ours = tape_memory.measure(tf_stopgrad.stop_gradient, intermediate_bytes, use_allocator)
    builtin = tape_memory.measure(tf.stop_gradient, intermediate_bytes, use_allocator)
    control = tape_memory.measure(_record_unpaused, intermediate_bytes, use_allocator)
    peaks = ""
    if ours.forward_peak_bytes is not None and builtin.forward_peak_bytes is not None:
        peaks = (
            f" Forward-pass peak: ours {ours.forward_peak_bytes / _MIB:.1f} MiB, built-in "
            f"{builtin.forward_peak_bytes / _MIB:.1f} MiB."
        )
    note = (
        f"Measured with {tape_memory.method_description(use_allocator)}. Control: the plugin "
        f"op recorded by the tape (no pause) holds {control.held_bytes / _MIB:.1f} MiB.{peaks}"
    )
    return Row(
        case=f"Tape memory: held by a persistent tape after a {intermediate_bytes / _MIB:g} MiB "
        f"intermediate passes through",
        ours=ours.held_bytes / _MIB,
        reference=builtin.held_bytes / _MIB,
        unit="MiB",
        ratio=report.ratio(ours.held_bytes, builtin.held_bytes),
        target=1.0,
        note=note,
    )


def main(argv: list[str] | None = None) -> int:
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
    args = parser.parse_args(argv)
    if args.rounds is not None and args.rounds < 1:
        parser.error("--rounds must be at least 1")

    header = report.machine_description()
    progress = Progress("bench: sample")
    rows = run(quick=args.quick, progress=progress, rounds=args.rounds)
    print("\n".join(header))
    print(f"Load average at end (1, 5, 15 min): {report.load_average()}")
    print()
    print(report.markdown_table(rows))
    print()
    print(report.notes(rows))
    if args.plot:
        report.plot(rows, args.plot)
        print(f"\nChart saved to {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
