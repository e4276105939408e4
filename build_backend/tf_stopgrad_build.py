"""PEP 517 backend: scikit-build-core, built against the TensorFlow that will run the plugin.

pip builds in an isolated environment that hides the packages of the environment being
installed into. A custom op must be compiled against the exact TensorFlow it will be loaded
by, so before building we look for TensorFlow in that environment (the interpreter running
the build, started with ``-E`` so that pip's isolation ``PYTHONPATH`` is ignored):

* found: CMake asks that interpreter for TensorFlow's flags, and nothing is installed;
* not found: ``tensorflow`` becomes a build requirement, and CMake asks the build
  environment's interpreter.

Either way the wheel requires ``tensorflow==<major>.<minor>.*`` of the version it was built
against. ``TF_STOPGRAD_PYTHON=/path/to/python`` names the interpreter explicitly.

This module is also the scikit-build-core metadata provider for ``dependencies``.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from typing import Any

from scikit_build_core import build as _skbuild

MINIMUM_TENSORFLOW = "tensorflow>=2.15"

_PROBE = (
    "import importlib.metadata as m, importlib.util as u, json;"
    "found = u.find_spec('tensorflow') is not None;"
    "print(json.dumps(m.version('tensorflow') if found else None))"
)


@functools.cache
def _installed_tensorflow(python: tuple[str, ...]) -> str | None:
    """The version of TensorFlow that ``python`` imports, or None."""
    try:
        out = subprocess.run([*python, "-c", _PROBE], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return json.loads(out.stdout.strip().splitlines()[-1])


def _target_python() -> tuple[str, ...]:
    """The interpreter of the environment the wheel is being installed into."""
    explicit = os.environ.get("TF_STOPGRAD_PYTHON")
    return (explicit,) if explicit else (sys.executable, "-E")


def _tensorflow_python() -> tuple[tuple[str, ...], str | None]:
    """The interpreter whose TensorFlow we build against, and its TensorFlow version."""
    target = _target_python()
    version = _installed_tensorflow(target)
    if version is not None:
        return target, version
    build_env = (sys.executable,)
    return build_env, _installed_tensorflow(build_env)


def _tensorflow_requirement() -> list[str]:
    return [] if _installed_tensorflow(_target_python()) else [MINIMUM_TENSORFLOW]


def _with_tensorflow_python(config_settings: dict[str, Any] | None) -> dict[str, Any]:
    settings = dict(config_settings or {})
    python, _ = _tensorflow_python()
    settings.setdefault("cmake.define.TF_STOPGRAD_PYTHON", ";".join(python))
    return settings


# --- PEP 517 hooks -------------------------------------------------------------------------


def get_requires_for_build_wheel(config_settings=None):
    return _skbuild.get_requires_for_build_wheel(config_settings) + _tensorflow_requirement()


def get_requires_for_build_editable(config_settings=None):
    return _skbuild.get_requires_for_build_editable(config_settings) + _tensorflow_requirement()


def get_requires_for_build_sdist(config_settings=None):
    return _skbuild.get_requires_for_build_sdist(config_settings)


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    return _skbuild.prepare_metadata_for_build_wheel(metadata_directory, config_settings)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _skbuild.build_wheel(
        wheel_directory, _with_tensorflow_python(config_settings), metadata_directory
    )


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _skbuild.build_editable(
        wheel_directory, _with_tensorflow_python(config_settings), metadata_directory
    )


def build_sdist(sdist_directory, config_settings=None):
    return _skbuild.build_sdist(sdist_directory, config_settings)


# --- scikit-build-core metadata provider ----------------------------------------------------


def dynamic_metadata(field: str, settings: dict[str, Any] | None = None, project=None) -> list[str]:
    if field != "dependencies":
        raise ValueError(f"tf_stopgrad_build only provides 'dependencies', not {field!r}")
    _, version = _tensorflow_python()
    if version is None:
        # Metadata asked for outside a build that has TensorFlow (e.g. building an sdist).
        return [MINIMUM_TENSORFLOW]
    major, minor = version.split(".")[:2]
    return [f"tensorflow=={major}.{minor}.*"]
