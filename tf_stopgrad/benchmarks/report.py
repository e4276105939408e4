"""Presenting results: the result row, the machine, the Markdown table and page, notes and the
chart."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import math
import os
import platform

import tensorflow as tf

import tf_stopgrad
from tf_stopgrad import _plots


@dataclasses.dataclass(frozen=True)
class Row:
    """One case of the benchmark: ours against the reference, or ours alone.

    Attributes:
      case: What was measured.
      ours, reference: The best measurement of each side (the median one for a row whose
        ratio is the median of per-round ratios), in ``unit``; no reference for a row that
        has an absolute target.
      unit: ``"µs"`` per call, ``"MiB"``, ``"s"`` or ``"ms"``.
      target: The ratio, or without a reference the measurement, to stay at or under; None
        for rows reported for information.
      ratio: ``ours / reference`` (two zeros count as 1.0: equal); None without a reference.
      note: A remark printed under the table (for a timed row, first the noise seen).
    """

    case: str
    ours: float
    unit: str
    target: float | None
    reference: float | None = None
    ratio: float | None = None
    note: str = ""

    @property
    def met(self) -> bool | None:
        if self.target is None:
            return None
        return (self.ours if self.ratio is None else self.ratio) <= self.target


def ratio(ours: float, reference: float) -> float:
    """``ours / reference``, with 0/0 as 1.0 and x/0 as infinity."""
    if reference == 0:
        return 1.0 if ours == 0 else math.inf
    return ours / reference


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo, or what the platform module knows."""
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def load_average() -> str:
    """The 1, 5 and 15 minute load averages, or "n/a" where the OS has none."""
    try:
        return ", ".join(f"{load:.2f}" for load in os.getloadavg())
    except OSError:
        return "n/a"


def machine_description() -> list[str]:
    """Lines saying when, where and against what the benchmark ran (load at the start)."""
    return [
        f"Date: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}",
        f"CPU: {cpu_model()}, {os.cpu_count()} cores",
        f"TensorFlow {tf.__version__}, tf_stopgrad {tf_stopgrad.__version__}, "
        f"Python {platform.python_version()}",
        f"Load average at start (1, 5, 15 min): {load_average()}",
    ]


def _number(value: float | None, unit: str) -> str:
    """A measurement with two decimals, or none once it reaches three digits."""
    if value is None:
        return "—"
    return f"{value:.2f} {unit}" if value < 100 else f"{value:.0f} {unit}"


def results(rows: list[Row]) -> str:
    """The Markdown table (case | ours | reference | ratio | target | met?), then the notes:
    per-case remarks and the noise seen (how far the median sample was above the best)."""
    lines = [
        "| case | ours | reference | ratio ours/ref | target | met? |",
        "|---|---:|---:|---:|---:|:---:|",
    ]
    for row in rows:
        if row.target is None:
            target = "—"
        else:
            target = f"≤ {row.target:g} {row.unit}" if row.ratio is None else f"≤ {row.target:.2f}"
        ratio = "—" if row.ratio is None else f"{row.ratio:.3f}"
        met = {None: "—", True: "yes", False: "**no**"}[row.met]
        lines.append(
            f"| {row.case} | {_number(row.ours, row.unit)} | {_number(row.reference, row.unit)} "
            f"| {ratio} | {target} | {met} |"
        )
    lines += ["", "Notes (noise = median sample above best sample, ours / reference):"]
    lines += [f"- {row.case}: {row.note}" for row in rows if row.note]
    return "\n".join(lines)


def page(command: str, machine: list[str], rows: list[Row], method: str) -> str:
    """A run's Markdown page: the command that wrote it, the machine, the results and the method."""
    machine_list = "\n".join(f"- {line}" for line in machine)
    return f"""# Benchmarks

Written by `{command}`; run it again to update this page.

{machine_list}

## Results

{results(rows)}

## Method

{method}
"""


def plot(rows: list[Row], path: str) -> None:
    """Save a horizontal bar chart of each case's ratio, with its target marked (rows without
    a reference have no ratio and are left out)."""
    rows = [row for row in rows if row.ratio is not None]
    figure, axes = _plots.pyplot().subplots(figsize=(10, 0.4 * len(rows) + 1.5))
    positions = range(len(rows))
    colors = [{None: "tab:gray", True: "tab:green", False: "tab:red"}[row.met] for row in rows]
    shown = [min(row.ratio or 0.0, 10.0) for row in rows]  # Keep an infinite ratio drawable.
    axes.barh(positions, shown, color=colors, height=0.6)
    for position, row in zip(positions, rows):
        if row.target is not None:
            axes.vlines(row.target, position - 0.4, position + 0.4, colors="black", linewidth=2)
    axes.axvline(1.0, color="gray", linestyle=":", linewidth=1)
    axes.set_yticks(list(positions))
    axes.set_yticklabels([row.case for row in rows], fontsize=8)
    axes.invert_yaxis()
    axes.set_xlabel("ratio ours / reference (black mark: target; lower is better)")
    axes.set_title(f"tf_stopgrad vs built-in, TensorFlow {tf.__version__}, {cpu_model()}")
    _plots.save_figure(figure, path, dpi=120)
