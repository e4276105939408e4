"""What the command's demos and benchmark share: the examples' command line, progress lines,
and plots saved without a display."""

from __future__ import annotations

import argparse
import sys
from types import ModuleType
from typing import Any, TextIO

LOG_LINES = 4  # whole lines a loop writes to a log: at each quarter, the last at its end


class Progress:
    """``label done/total`` on a stream (stderr by default).

    On a terminal one line is updated in place. In a log (a file or pipe), where carriage
    returns would pile up into one long line, a whole line is written at each quarter of the
    work and when it ends. Use it as a context manager, so that a loop that stops early
    (a converged fit) still ends its line::

        with Progress("EM iteration", max_iter) as progress:
            for iteration in range(1, max_iter + 1):
                ...
                progress(iteration)

    It can also be handed to code that reports ``progress(done, total)`` itself.
    """

    def __init__(self, label: str, total: int = 0, stream: TextIO | None = None) -> None:
        self._label = label
        self._total = total
        self._stream = stream if stream is not None else sys.stderr
        self._in_place = self._stream.isatty()
        self._done = 0
        self._written = -1  # the count of the last line written

    def __call__(self, done: int, total: int | None = None) -> None:
        if total is not None:
            self._total = total
        self._done = done
        if self._in_place:
            self._stream.write(f"\r{self._line()}")
            if done >= self._total:
                self._stream.write("\n")
                self._written = done
        elif done >= self._total or self._quarter(done) != self._quarter(done - 1):
            self._write_line()
        self._stream.flush()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._written == self._done:
            return
        if self._in_place:
            self._stream.write("\n")
        else:
            self._write_line()
        self._stream.flush()

    def _line(self) -> str:
        return f"{self._label} {self._done}/{self._total}"

    def _write_line(self) -> None:
        self._stream.write(self._line() + "\n")
        self._written = self._done

    def _quarter(self, done: int) -> int:
        return done * LOG_LINES // max(self._total, 1)


def pyplot() -> Any:
    """Returns ``matplotlib.pyplot`` on the non-interactive Agg backend (no display needed).

    Called only when a plot is asked for, so that runs without ``--plot`` never import
    matplotlib.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


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


def save_figure(fig: Any, path: str) -> None:
    """Saves a figure made with :func:`pyplot` to ``path`` and closes it."""
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    pyplot().close(fig)


def main(example: ModuleType, plot_help: str, argv: list[str] | None) -> int:
    """Runs an example module from the command line: ``[--plot FILE.png] [--quick]``.

    Args:
      example: The example's module. The first line of its docstring describes the command;
        it provides ``run`` (returns the figures, called with the keyword arguments
        ``QUICK_SETTINGS`` under ``--quick``), ``print_figures(figures)``,
        ``failures(figures)`` (the missed success criteria, printed to stderr) and
        ``save_plot(figures, path)``.
      plot_help: Help text of ``--plot``.
      argv: Command-line arguments without the program name (``sys.argv[1:]`` if None).

    Returns:
      0 if every success criterion holds, else 1.
    """
    summary = (example.__doc__ or example.__name__).splitlines()[0]
    parser = argparse.ArgumentParser(description=summary)
    parser.add_argument("--plot", metavar="FILE.png", help=plot_help)
    parser.add_argument("--quick", action="store_true", help="small settings for tests and CI")
    args = parser.parse_args(argv)

    figures = example.run(**example.QUICK_SETTINGS) if args.quick else example.run()
    example.print_figures(figures)
    if args.plot:
        example.save_plot(figures, args.plot)
        print(f"plot saved to {args.plot}")
    missed = example.failures(figures)
    for message in missed:
        print(f"FAILED: {message}", file=sys.stderr)
    return 1 if missed else 0
