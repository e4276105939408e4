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


@dataclasses.dataclass(frozen=True)
class Timing:
    """The per-call times of one callable, in microseconds, one sample per round."""

    samples_us: tuple[float, ...]

    @property
    def best_us(self) -> float:
        return min(self.samples_us)

    @property
    def median_us(self) -> float:
        return statistics.median(self.samples_us)

    @property
    def spread(self) -> float:
        """How far the median sample sits above the best one, as a fraction (0.05 is 5 %)."""
        return self.median_us / self.best_us - 1.0


def median_round_ratio(ours: Timing, reference: Timing) -> float:
    """The median over rounds of ``ours / reference``, each pair sampled in the same round.

    Pairing the samples of a round cancels load that lasts longer than a round, which the ratio
    of two best samples, taken in different rounds, does not.
    """
    return statistics.median(o / r for o, r in zip(ours.samples_us, reference.samples_us))


@dataclasses.dataclass(frozen=True)
class TimedGroup:
    """Callables compared with each other, timed back to back in every round.

    Attributes:
      name: Identifies the group in the timings returned by :func:`time_interleaved`.
      variants: The callables, by name. Each is called ``calls`` times per sample.
      calls: Calls per sample: a few milliseconds' worth, well above the timer's resolution
        and short enough that some samples fit between other processes' time slices.
      context: Entered around each round's samples, e.g. to keep a tape active.
    """

    name: str
    variants: Mapping[str, Callable[[], object]]
    calls: int
    context: Callable[[], contextlib.AbstractContextManager[object]] = contextlib.nullcontext


def time_interleaved(
    groups: list[TimedGroup],
    rounds: int,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, dict[str, Timing]]:
    """Time every variant of every group once per round, after one untimed warm-up call each.

    ``progress``, if given, is called as ``progress(samples_done, samples_total)`` after every
    sample.

    Returns:
      ``{group name: {variant name: Timing}}``.
    """
    samples: dict[str, dict[str, list[float]]] = {
        group.name: {variant: [] for variant in group.variants} for group in groups
    }
    total = rounds * sum(len(group.variants) for group in groups)
    done = 0
    for group in groups:  # Trace, compile and fill caches before anything is timed.
        with group.context():
            for function in group.variants.values():
                function()
    for round_index in range(rounds):
        for group in groups:
            order = list(group.variants.items())
            if round_index % 2:
                order.reverse()
            with group.context():
                for variant, function in order:
                    seconds = timeit.Timer(function).timeit(number=group.calls)
                    samples[group.name][variant].append(seconds / group.calls * 1e6)
                    done += 1
                    if progress is not None:
                        progress(done, total)
    return {
        group: {variant: Timing(tuple(values)) for variant, values in variants.items()}
        for group, variants in samples.items()
    }
