"""The repository's own files agree: versions, CI's lanes and the release's tag check.

These read files only: neither TensorFlow nor a build is needed. The workflows are read with
regular expressions over their lines, as PyYAML is no test dependency.
"""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from configparser import ConfigParser
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = REPO_ROOT / ".github" / "workflows"


def pyproject_version(pyproject: Path = REPO_ROOT / "pyproject.toml") -> str:
    """``[project] version`` of a pyproject.toml."""
    try:
        import tomllib
    except ImportError:  # Python < 3.11
        project = re.search(r"^\[project\]\n(.*?)(?=^\[|\Z)", pyproject.read_text(), re.M | re.S)
        assert project, f"{pyproject} has no [project] table"
        version = re.search(r'^version\s*=\s*"([^"]+)"', project.group(1), re.M)
        assert version, f"{pyproject}'s [project] has no version"
        return version.group(1)
    with pyproject.open("rb") as file:
        return tomllib.load(file)["project"]["version"]


def expand_tox_factors(entry: str) -> list[str]:
    """tox's generative names: ``tf2.{16-20}`` is tf2.16 to tf2.20, ``py{39,311}`` py39, py311."""
    parts = re.split(r"\{([^}]*)\}", entry)
    choices: list[list[str]] = []
    for index, part in enumerate(parts):
        if index % 2 == 0:
            choices.append([part])
            continue
        alternatives = []
        for item in part.split(","):
            item = item.strip()
            ranged = re.fullmatch(r"(\d+)-(\d+)", item)
            if ranged:
                low, high = int(ranged.group(1)), int(ranged.group(2))
                alternatives += [str(number) for number in range(low, high + 1)]
            else:
                alternatives.append(item)
        choices.append(alternatives)
    return ["".join(combination) for combination in itertools.product(*choices)]


def tox_lanes() -> list[str]:
    """.ci/tox.ini's env_list, expanded, in its order."""
    config = ConfigParser(interpolation=None)
    config.read(REPO_ROOT / ".ci" / "tox.ini")
    entries = config["tox"]["env_list"].split()
    return [lane for entry in entries for lane in expand_tox_factors(entry)]


def yaml_list(text: str, key: str) -> list[str]:
    """The items of every YAML list under ``key:``, block (``- a``) or flow (``[a, b]``) style."""
    items = []
    for flow in re.finditer(rf"^\s*{re.escape(key)}:\s*\[([^\]]*)\]", text, re.M):
        items += [item.strip().strip("'\"") for item in flow.group(1).split(",") if item.strip()]
    block = rf"^([ \t]*){re.escape(key)}:[ \t]*(?:#.*)?\n((?:\1[ \t]*(?:-[ \t].*|#.*)?\n)+)"
    for found in re.finditer(block, text, re.M):
        for line in found.group(2).splitlines():
            item = re.fullmatch(r"\s*-\s+(.*?)\s*(?:#.*)?", line)
            if item:
                items.append(item.group(1).strip("'\""))
    return items


def ci_workflow_lanes(text: str) -> list[str]:
    """The lanes that the CI workflow's `.ci/run` calls run: named ones, and the matrix's
    ``lane`` list for a call that passes a variable."""
    lanes = []
    calls = (re.finditer(r"\.ci/run((?:[ \t]+--[\w-]+)*)[ \t]+(\S+)", s) for s in run_blocks(text))
    for call in itertools.chain.from_iterable(calls):
        argument = call.group(2).strip("'\"")
        if re.fullmatch(r"[\w.-]+", argument):
            lanes.append(argument)
        else:  # "$LANE", ${{ matrix.lane }}: one job per item of the matrix's lane list
            lanes += yaml_list(text, "lane")
    return lanes


def run_blocks(text: str) -> list[str]:
    """The shell scripts of a workflow's ``run:`` keys, their indentation removed."""
    lines = text.splitlines()
    scripts = []
    for number, line in enumerate(lines):
        key = re.match(r"^(\s*)(?:-\s+)?run:\s*(.*)$", line)
        if not key:
            continue
        value = key.group(2)
        if value and value[0] not in "|>":
            scripts.append(value)
            continue
        body = []
        for following in lines[number + 1 :]:
            if following.strip() and len(following) - len(following.lstrip()) <= len(key.group(1)):
                break
            body.append(following)
        indent = min(len(b) - len(b.lstrip()) for b in body if b.strip())
        scripts.append("\n".join(b[indent:] for b in body) + "\n")
    return scripts


def test_java_version_is_pyproject_version():
    project = ElementTree.parse(REPO_ROOT / "java" / "pom.xml").getroot()
    version = project.find("{http://maven.apache.org/POM/4.0.0}version")
    assert version is not None, "java/pom.xml has no <version> of its own"
    assert version.text == pyproject_version()


def test_license_file_is_the_license_pyproject_and_the_pom_name():
    pom = ElementTree.parse(REPO_ROOT / "java" / "pom.xml").getroot()
    pom_license = pom.find("{*}licenses/{*}license/{*}url")
    assert pom_license is not None and pom_license.text
    pyproject = (REPO_ROOT / "pyproject.toml").read_text()
    license_text = (REPO_ROOT / "LICENSE").read_text()

    assert re.search(r'^license = \{ text = "Apache-2.0" \}$', pyproject, re.M)
    assert pom_license.text.endswith("/licenses/LICENSE-2.0.txt")
    assert license_text.split()[:4] == ["Apache", "License", "Version", "2.0,"]
    assert "END OF TERMS AND CONDITIONS" in license_text


def test_ci_workflow_runs_each_lane_of_tox_env_list_once():
    lanes = ci_workflow_lanes((WORKFLOWS / "ci.yml").read_text())
    assert len(lanes) == len(set(lanes)), f"lanes run twice: {sorted(lanes)}"
    assert sorted(lanes) == sorted(tox_lanes())


def test_workflows_pin_every_action_by_commit():
    for workflow in sorted(WORKFLOWS.glob("*.yml")):
        for uses in re.findall(r"^\s*(?:-\s+)?uses:\s*(.*)$", workflow.read_text(), re.M):
            pinned = re.fullmatch(r"[\w.-]+/[\w./-]+@[0-9a-f]{40} # v\d[\w.-]*", uses.strip())
            assert pinned, f"{workflow.name}: {uses} is not pinned by commit (with # vX.Y.Z)"


@pytest.mark.skipif(sys.version_info < (3, 11), reason="the check runs on Python 3.11 (tomllib)")
def test_release_refuses_a_tag_other_than_pyproject_version(tmp_path):
    checks = [script for script in run_blocks((WORKFLOWS / "release.yml").read_text())
              if "pyproject.toml" in script and "GITHUB_REF_NAME" in script]  # fmt: skip
    assert len(checks) == 1, "release.yml should have one step that checks the tag"
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\nversion = "9.8.7"\n')
    # The script's python3 is this interpreter (3.11 or newer, as in the workflow).
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"

    def check(tag: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-e", "-c", checks[0]], cwd=tmp_path, capture_output=True, text=True,
            env={**os.environ, "PATH": path, "GITHUB_REF_NAME": tag}, timeout=60,
        )  # fmt: skip

    assert check("v9.8.7").returncode == 0, check("v9.8.7").stderr
    for tag in (f"v{pyproject_version()}", "v9.8.8", "9.8.7"):
        refused = check(tag)
        assert refused.returncode != 0, tag
        assert tag in refused.stdout and "pyproject.toml" in refused.stdout


def supported_minors() -> list[tuple[int, int]]:
    sys.path.insert(0, str(REPO_ROOT / "build_backend"))
    import supported_tensorflow

    return supported_tensorflow.minors()


def test_readme_support_matrix_has_one_row_per_supported_minor():
    readme = (REPO_ROOT / "README.md").read_text()
    rows = re.findall(r"^\| (\d+)\.(\d+) \|", readme, re.MULTILINE)
    assert [(int(major), int(minor)) for major, minor in rows] == supported_minors()


def test_the_default_ci_run_has_a_lane_for_every_supported_minor_and_platform():
    lanes = set(tox_lanes())
    minors = [minor for _, minor in supported_minors()]
    for minor in minors:
        assert any(lane.split("-")[0] == f"tf2.{minor}" for lane in lanes), minor
    oldest, newest = minors[0], minors[-1]
    assert {"wheels", "source", "asan", "java", f"tf2.{oldest}-bullseye", f"tf2.{newest}-trixie",
            f"tf2.{newest}-aarch64"} <= lanes  # fmt: skip
