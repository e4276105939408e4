"""What the examples share: their command line and how they save a plot."""

from __future__ import annotations

import argparse
import sys
from types import ModuleType
from typing import Any


def pyplot() -> Any:
    """Returns ``matplotlib.pyplot`` on the non-interactive Agg backend (no display needed).

    Called only when a plot is asked for, so that runs without ``--plot`` never import
    matplotlib.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


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
    parser = argparse.ArgumentParser(description=example.__doc__.splitlines()[0])
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
