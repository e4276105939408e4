"""Runnable examples of the four jobs stop_gradient exists for: ``python -m tf_stopgrad demo NAME``.

Each example module explains its job in its docstring and provides ``run(**settings)``, whose
defaults are the full example and ``QUICK_SETTINGS`` the small one, and ``PLOT_HELP``. ``run``
returns the example's figures, which can ``summary()`` themselves, list the success criteria
they miss (``failures()``) and ``save_plot(path)``.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# Imported only when run: the examples need TensorFlow and scikit-learn.
EXAMPLES = ("softmax", "em", "rbm", "adversarial")


def demo(name: str, argv: list[str]) -> int:
    """Runs example ``name`` with ``[--quick] [--plot FILE.png]``; returns 0 if it meets
    every success criterion, else 1 (the missed ones go to stderr)."""
    example = importlib.import_module(f"{__name__}.{name}")
    parser = argparse.ArgumentParser(description=(example.__doc__ or name).splitlines()[0])
    parser.add_argument("--plot", metavar="FILE.png", help=example.PLOT_HELP)
    parser.add_argument("--quick", action="store_true", help="small settings for tests and CI")
    args = parser.parse_args(argv)

    figures = example.run(**example.QUICK_SETTINGS) if args.quick else example.run()
    print(figures.summary())
    if args.plot:
        figures.save_plot(args.plot)
        print(f"plot saved to {args.plot}")
    missed = figures.failures()
    for message in missed:
        print(f"FAILED: {message}", file=sys.stderr)
    return 1 if missed else 0
