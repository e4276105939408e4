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
from pathlib import Path

# Imported only when run: the examples need TensorFlow, all but softmax scikit-learn.
EXAMPLES = ("softmax", "em", "rbm", "adversarial")
# What the `examples` extra installs, by the name it is imported as.
EXAMPLES_EXTRA = {"sklearn": "scikit-learn", "matplotlib": "matplotlib"}


def demo(name: str, argv: list[str]) -> int:
    """Runs example ``name``, or each in turn for ``all``, with ``[--quick] [--plot FILE.png]``;
    returns 0 if it meets every success criterion, else 1 (the missed ones go to stderr)."""
    if name == "all":
        statuses = []
        for each in EXAMPLES:
            print(f"== {each} ==")
            statuses.append(demo(each, _with_plot_suffix(argv, each)))
        return max(statuses)
    try:
        return _run(name, argv)
    except ModuleNotFoundError as error:
        missing = (error.name or "").partition(".")[0]
        if missing not in EXAMPLES_EXTRA:
            raise
        print(
            f"python -m tf_stopgrad demo {name}: needs {EXAMPLES_EXTRA[missing]}, which is not "
            f'installed. Install the examples\' requirements: pip install "tf_stopgrad[examples]" '
            f'(from a source checkout: pip install ".[examples]")',
            file=sys.stderr,
        )
        return 1


def _with_plot_suffix(argv: list[str], suffix: str) -> list[str]:
    """`--plot out.png` -> `--plot out-<suffix>.png`, so `demo all` keeps every plot."""
    renamed = list(argv)
    for i, arg in enumerate(renamed[:-1]):
        if arg == "--plot":
            path = Path(renamed[i + 1])
            renamed[i + 1] = str(path.with_name(f"{path.stem}-{suffix}{path.suffix}"))
    return renamed


def _run(name: str, argv: list[str]) -> int:
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
