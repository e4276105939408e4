"""Hands a source checkout's import of the package over to the installed copy.

`python -m tf_stopgrad` in the repository root finds ./tf_stopgrad first (the working directory
leads sys.path), but only the installed copy has the compiled op library, the build record,
and the C++ header. Python's import system returns whatever ``sys.modules[name]`` holds once a
package's ``__init__`` has run, so putting the installed copy there makes every later import,
``__main__`` included, come from it.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from pathlib import Path


def _has_compiled_parts(package_dir: Path) -> bool:
    return (package_dir / "_build_record.json").is_file()


def _is_source_checkout(package_dir: Path) -> bool:
    # A damaged install is not one: its loader must report what is missing.
    root = package_dir.parent
    return (root / "pyproject.toml").is_file() and (root / "CMakeLists.txt").is_file()


def hand_over_to_installed_copy(name: str, init_file: str, package_path: list[str]) -> bool:
    """If ``init_file`` is a source checkout's, load the installed copy as ``name`` instead.

    Returns whether it did. An editable install is left alone: its ``package_path``
    (``__path__``) also holds the directory with the compiled parts. Without an installed copy
    nothing happens, and the loader then explains how to install the package.
    """
    package_dir = Path(init_file).resolve().parent
    locations = [package_dir, *(Path(location) for location in package_path)]
    if any(_has_compiled_parts(location) for location in locations):
        return False
    if not _is_source_checkout(package_dir):
        return False
    elsewhere = [p for p in sys.path if Path(p or ".").resolve() != package_dir.parent]
    spec = importlib.machinery.PathFinder.find_spec(name, elsewhere)
    if spec is None or spec.origin is None or spec.loader is None:
        return False
    if not _has_compiled_parts(Path(spec.origin).resolve().parent):
        return False
    installed = importlib.util.module_from_spec(spec)
    sys.modules[name] = installed
    spec.loader.exec_module(installed)
    return True
