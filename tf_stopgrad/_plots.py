"""Plots of the demos and the benchmark, drawn with matplotlib on Agg (no display needed).

Only runs with ``--plot`` import matplotlib.
"""

from __future__ import annotations

from typing import Any


def pyplot() -> Any:
    """``matplotlib.pyplot``, on the non-interactive Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: str, dpi: int = 80) -> None:
    """Saves a figure made with :func:`pyplot` to ``path`` and closes it."""
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    pyplot().close(fig)


def save_curve(
    path: str,
    curve: tuple[str, list[float]],
    reference: tuple[str, float],
    axis_labels: tuple[str, str],
    reference_color: str = "tab:red",
) -> None:
    """Saves a ``(label, values)`` curve by iteration, and a ``(label, value)`` dashed line."""
    (curve_label, values), (reference_label, value) = curve, reference
    fig, ax = pyplot().subplots(figsize=(5, 3))
    ax.plot(values, marker=".", label=curve_label)
    ax.axhline(value, color=reference_color, linestyle="--", label=reference_label)
    ax.set(xlabel=axis_labels[0], ylabel=axis_labels[1])
    ax.legend()
    save_figure(fig, path)
