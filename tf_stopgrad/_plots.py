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
    curve: list[float],
    curve_label: str,
    reference: float,
    reference_label: str,
    axis_labels: tuple[str, str],
    reference_color: str = "tab:red",
) -> None:
    """Saves a curve by iteration, with a reference value as a dashed horizontal line."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5, 3))
    ax.plot(curve, marker=".", label=curve_label)
    ax.axhline(reference, color=reference_color, linestyle="--", label=reference_label)
    ax.set_xlabel(axis_labels[0])
    ax.set_ylabel(axis_labels[1])
    ax.legend()
    save_figure(fig, path)
