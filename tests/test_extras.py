"""The README's second command, ``pip install ".[test,examples]"``, keeps the TensorFlow its
first installed, as it keeps any supported TensorFlow a user has: on every Python pyproject.toml
allows, the extras resolve next to each supported minor that has a wheel for that Python.

pip keeps an installed TensorFlow that some resolution allows; where none does, it takes another
release (on Python 3.9, the onnx extra's tf2onnx took 2.20 back to 2.19). uv's resolver reads
only the wheels' metadata, a few MB in all; pip's dry run would download a whole TensorFlow
wheel (some 600 MB) for each pair, from an index without PEP 658 metadata.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

REPO_ROOT = Path(__file__).resolve().parent.parent
EXTRAS = ("test", "examples")


def pythons() -> list[str]:
    """Every Python 3 minor that pyproject.toml's requires-python allows."""
    pyproject = (REPO_ROOT / "pyproject.toml").read_text()
    [allowed] = re.findall(r'^requires-python = "([^"]+)"', pyproject, re.M)
    return [f"3.{minor}" for minor in range(30) if f"3.{minor}" in SpecifierSet(allowed)]


def resolves(python: str, tensorflow: str, extras: tuple[str, ...] = ()) -> bool:
    """Whether uv finds versions for pyproject.toml's dependencies and EXTRAS with TENSORFLOW,
    for PYTHON on this platform."""
    command = ["uv", "pip", "compile", "--quiet", "--python-version", python, "-o", os.devnull,
               "pyproject.toml", *(f"--extra={extra}" for extra in extras), "-"]  # fmt: skip
    # The Python need not be installed: uv resolves for its version, and downloads none.
    environment = {**os.environ, "UV_PYTHON_DOWNLOADS": "never", "UV_SYSTEM_CERTS": "1"}
    result = subprocess.run(command, input=tensorflow, cwd=REPO_ROOT, env=environment,
                            capture_output=True, text=True, timeout=300)  # fmt: skip
    if result.returncode and "No solution found" not in result.stderr:
        pytest.fail(f"uv could not resolve: {result.stderr}")
    return result.returncode == 0


@pytest.mark.slow
@pytest.mark.needs("uv")
@pytest.mark.parametrize("python", pythons())
def test_the_readme_s_extras_keep_every_supported_tensorflow(python):
    sys.path.insert(0, str(REPO_ROOT / "build_backend"))
    import supported_tensorflow

    def replaced(release: str) -> bool:
        """Whether pip would replace RELEASE: it resolves alone (it has a wheel for this Python),
        but not with the extras."""
        return not resolves(python, release, EXTRAS) and resolves(python, release)

    releases = [f"tensorflow=={major}.{minor}.*" for major, minor in supported_tensorflow.minors()]
    # uv waits on the index most of the time: every release at once.
    with ThreadPoolExecutor() as pool:
        moved = [release for release, moves in zip(releases, pool.map(replaced, releases)) if moves]
    assert moved == [], f'pip install ".[{",".join(EXTRAS)}]" would replace {moved}'
