"""The TensorFlow releases tf_stopgrad supports, read from the one place they are written:
the ``tensorflow`` requirement in pyproject.toml's ``[project] dependencies``.

Used by the build backend, java/op_libraries.py, CI (.ci/toxfile.py makes the lanes from it;
``python3 build_backend/supported_tensorflow.py`` prints the supported minor numbers for .ci/run and
.ci/lanes) and the tests. Standard library only, as it runs before anything is installed.
"""

from __future__ import annotations

import re
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


def requirement(pyproject: Path = PYPROJECT) -> str:
    """The requirement string, ``tensorflow>=X.A,<X.B``."""
    found = re.search(r'"(tensorflow\s*>=[^"]+)"', pyproject.read_text())
    if found is None:
        raise ValueError(f"{pyproject} has no 'tensorflow>=...' dependency")
    return found.group(1).replace(" ", "")


def minors(pyproject: Path = PYPROJECT) -> list[tuple[int, int]]:
    """Every supported (major, minor), oldest first: ``>=X.A,<X.B`` gives X.A to X.(B-1)."""
    bounds = re.fullmatch(r"tensorflow>=(\d+)\.(\d+),<(\d+)\.(\d+)", requirement(pyproject))
    if bounds is None:
        raise ValueError(f"expected 'tensorflow>=X.Y,<X.Z' in {pyproject}")
    major, low, upper_major, high = (int(part) for part in bounds.groups())
    if upper_major != major:
        raise ValueError(f"the supported range in {pyproject} must stay within TensorFlow {major}")
    return [(major, minor) for minor in range(low, high)]


def describe(pyproject: Path = PYPROJECT) -> str:
    """``X.A-X.Z``, the first and last supported minors: the range as people write it."""
    (major, low), *_, (_, high) = minors(pyproject)
    return f"{major}.{low}-{major}.{high}"


if __name__ == "__main__":
    print(" ".join(str(minor) for _, minor in minors()))
