"""Interleaved best-of timing, for per-call times on a machine shared with other work.

Every round takes one sample of every variant, back to back, and alternates their order, so
a burst of load from elsewhere hits ours and the reference alike. The best sample over the
rounds estimates the undisturbed cost; the median shows how noisy the machine was.
"""

from __future__ import annotations

import contextlib
import dataclasses
import statistics
import timeit
from collections.abc import Mapping
from typing import Callable

from tf_stopgrad.benchmarks.report import Row, ratio


@dataclasses.dataclass(frozen=True)
class TimedCase:
    """Callables timed back to back in every round, and the table rows that compare them.

    Attributes:
      variants: The callables, by name. Each is called ``calls`` times per sample.
      calls: Calls per sample: a few milliseconds' worth, well above the timer's resolution
        and short enough that some samples fit between other processes' time slices.
      rows: ``(case, ours, reference, target)`` per table row: variant ``ours`` against
        variant ``reference``, and the target for their ratio (None: for information).
      note: Turns the best sample of each variant into a remark on the first row.
      per_round: The rows show the median samples and the median of the per-round ratios,
        instead of the best samples and their ratio.
      context: Entered around each round's samples, e.g. to keep a tape active.
    """

    variants: Mapping[str, Callable[[], object]]
    calls: int
    rows: list[tuple[str, str, str, float | None]]
    note: Callable[[Mapping[str, float]], str] | None = None
    per_round: bool = False
    context: Callable[[], contextlib.AbstractContextManager[object]] = contextlib.nullcontext


def time_interleaved(cases: list[TimedCase], rounds: int, sampled: Callable[[], None]) -> list[Row]:
    """Time every variant of every case once per round, after one untimed warm-up call each,
    and return the cases' rows in order. ``sampled()`` is called after every sample."""
    samples: list[dict[str, list[float]]] = [
        {variant: [] for variant in case.variants} for case in cases
    ]
    for case in cases:  # Trace, compile and fill caches before anything is timed.
        with case.context():
            for function in case.variants.values():
                function()
    for round_index in range(rounds):
        for case, case_samples in zip(cases, samples):
            order = list(case.variants.items())
            if round_index % 2:
                order.reverse()
            with case.context():
                for variant, function in order:
                    seconds = timeit.Timer(function).timeit(number=case.calls)
                    case_samples[variant].append(seconds / case.calls * 1e6)
                    sampled()
    return [row for case, by_variant in zip(cases, samples) for row in _rows(case, by_variant)]


def _rows(case: TimedCase, samples: Mapping[str, list[float]]) -> list[Row]:
    """The case's table rows, from its samples (µs per call) by variant."""
    best = {variant: min(values) for variant, values in samples.items()}
    median = {variant: statistics.median(values) for variant, values in samples.items()}
    rows = []
    for index, (name, ours, reference, target) in enumerate(case.rows):
        if case.per_round:
            # Pairing the samples of a round cancels load that lasts longer than a round,
            # which the ratio of two best samples, taken in different rounds, does not.
            shown = median
            ours_ratio = statistics.median(o / r for o, r in zip(samples[ours], samples[reference]))
        else:
            shown = best
            ours_ratio = ratio(best[ours], best[reference])
        noise = [median[variant] / best[variant] - 1.0 for variant in (ours, reference)]
        note = f"noise {noise[0]:+.0%} / {noise[1]:+.0%}."
        if case.note is not None and index == 0:
            note += " " + case.note(best)
        rows.append(Row(name, shown[ours], "µs", target, shown[reference], ours_ratio, note))
    return rows
