"""The repository's own files agree: versions, CI's lanes, the README's matrix and the
release's checks, all against the supported range of pyproject.toml; and every relative link of
the Markdown files resolves.

These read the repository's files (the workflows with regular expressions over their lines, as
PyYAML is no test dependency) and run .ci/release.py; none uses TensorFlow, which conftest.py
imports all the same.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import time
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


def toxfile():
    """.ci/toxfile.py, which makes the lanes of the supported minors for tox."""
    spec = importlib.util.spec_from_file_location("toxfile", REPO_ROOT / ".ci" / "toxfile.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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


def test_ci_workflow_runs_the_wheels_then_a_job_for_each_lane_that_run_lists():
    workflow = (WORKFLOWS / "ci.yml").read_text()
    argument = r'(?: +(?:--[\w-]+|"\$LANE"|"\$\{LANES\}"|\w+))'
    calls = [call.strip() for script in run_blocks(workflow)
             for call in re.findall(rf"\.ci/run({argument}*)", script)]  # fmt: skip
    assert calls == ['--list "${LANES}"', "wheels", '--prebuilt "$LANE"']
    assert re.search(r"^  LANES: \$\{\{ inputs\.lanes \}\}$", workflow, re.M)
    matrix = r"^\s+lane: \$\{\{ fromJSON\(needs\.lanes\.outputs\.lanes\) \}\}$"
    assert re.search(matrix, workflow, re.M)
    assert re.search(r"^\s+LANE: \$\{\{ matrix\.lane \}\}$", workflow, re.M)


def test_each_lane_has_its_section_in_tox_ini():
    config = ConfigParser(interpolation=None)
    config.read(REPO_ROOT / ".ci" / "tox.ini")
    default, named = toxfile().lanes()
    for lane, kind in {**default, **named}.items():
        section = f"lane:{kind}" if kind else f"testenv:{lane}"
        assert config.has_section(section), f"{lane}: .ci/tox.ini has no [{section}]"
        commands = config[section].get("commands", config["testenv"]["commands"])
        assert commands.startswith("bash .ci/lanes {env_name}"), section


def test_workflows_pin_every_action_by_commit():
    for workflow in sorted(WORKFLOWS.glob("*.yml")):
        for uses in re.findall(r"^\s*(?:-\s+)?uses:\s*(.*)$", workflow.read_text(), re.M):
            if uses.startswith("./.github/workflows/"):  # this repository's own, at this commit
                continue
            pinned = re.fullmatch(r"[\w.-]+/[\w./-]+@[0-9a-f]{40} # v\d[\w.-]*", uses.strip())
            assert pinned, f"{workflow.name}: {uses} is not pinned by commit (with # vX.Y.Z)"


def test_every_artifact_is_written_again_by_a_re_run_and_no_script_hides_an_exit_status():
    """A re-run is the same workflow run, where upload-artifact refuses a name it has unless told
    to overwrite it; a process substitution's status is lost (`diff <(a) <(b)` passes when both
    fail), and so is a command substitution's in a test (`[[ $(a) == b ]]`: bash -e goes on)."""
    uploading = []
    for workflow in sorted(WORKFLOWS.glob("*.yml")):
        text = workflow.read_text()
        uploads = re.split(r"uses: actions/upload-artifact@", text)[1:]
        uploading += [workflow.name] if uploads else []
        assert all(re.match(r".*\n\s+(?:with: \{.*, )?overwrite: true\b", upload, re.S)
                   for upload in uploads), workflow.name  # fmt: skip
        assert not [script for script in run_blocks(text) if "<(" in script], workflow.name
        assert not [script for script in run_blocks(text)
                    if re.search(r"\[\[[^\]]*\$\(", script)], workflow.name  # fmt: skip
    assert uploading == ["ci.yml", "release.yml"]  # scheduled.yml's are ci.yml's


def test_setup_python_takes_one_patch_release():
    """setup-python given a full version, X.Y.Z, not a minor whose patch floats."""
    for workflow in ("ci.yml", "release.yml"):  # scheduled.yml runs ci.yml's jobs
        text = (WORKFLOWS / workflow).read_text()
        variables = dict(re.findall(r"^  ([A-Z_]+): \"?([^\"\s]*)\"?", text, re.M))
        versions = re.findall(r"uses: actions/setup-python@.*\n(?:\s+.*\n)*?\s+python-version: "
                              r"\"?([^\"\n]*)\"?", text)  # fmt: skip
        assert versions, workflow
        for version in versions:
            version = variables.get(version.removeprefix("${{ env.").removesuffix(" }}"), version)
            assert re.fullmatch(r"3\.\d+\.\d+", version), f"{workflow}: python {version}"


def test_every_document_that_promises_the_same_bytes_says_for_how_long():
    """The same commit gives the same bytes for as long as Debian serves the pinned toolchain:
    each document that says anyone can rebuild a release says so."""
    contributing = (REPO_ROOT / "CONTRIBUTING.md").read_text()
    check = contributing[contributing.index("Anyone can check a release") :].split("\n\n")[0]
    for name, text in (("CONTRIBUTING.md", check),
                       ("BUILD_NOTES.md", (REPO_ROOT / "BUILD_NOTES.md").read_text()),
                       ("CHANGELOG.md", (REPO_ROOT / "CHANGELOG.md").read_text())):  # fmt: skip
        text = " ".join(text.split())
        assert re.search(r"for as long as Debian serves (the|those) pinned", text), name


def test_ci_and_the_release_build_the_jars_with_the_same_jdk_release():
    """setup-java's JDK, pinned to a full release, not a major that floats: the release job,
    days after CI, builds the jars again, which must be CI's bytes (jars-ci), javac's classes
    and javadoc's pages among them."""
    javas = [re.search(r"distribution: (\S+)\n\s+java-version: (.*)\n", step).groups()
             for workflow in sorted(WORKFLOWS.glob("*.yml"))
             for step in workflow.read_text().split("uses: actions/setup-java@")[1:]]  # fmt: skip
    assert len(javas) == 2 and len(set(javas)) == 1, javas
    assert javas[0][0] == "temurin" and re.fullmatch(r'"17\.0\.\d+\+\d+"', javas[0][1]), javas


# The version of the commit: in a dry run's CI, .ci/release.py dev has written X.Y.Z.devN into
# pyproject.toml and java/pom.xml; this is X.Y.Z, the CHANGELOG section's.
RELEASE = re.sub(r"(\.dev\d+)+$", "", pyproject_version())
# README.md's Install section on main before the first release (the release's commit replaces it).
UNRELEASED_INSTALL = ("No release is tagged yet ([changelog](CHANGELOG.md): Unreleased), so "
                      "nothing is on PyPI or Maven\nCentral: install from a clone.\n\n")


def release_files(root: Path) -> None:
    """The files .ci/release.py reads, copied into root, with the commit's version (RELEASE)."""
    for name in ("pyproject.toml", "java/pom.xml", "CHANGELOG.md", "README.md", ".ci/release.py"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO_ROOT / name, root / name)
    version = pyproject_version()
    edit(root / "pyproject.toml", f'version = "{version}"', f'version = "{RELEASE}"')
    edit(root / "java/pom.xml", f"<version>{version}</version>", f"<version>{RELEASE}</version>")


def release_py(root: Path, *arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, ".ci/release.py", *arguments], cwd=root,
                          capture_output=True, text=True, timeout=60)  # fmt: skip


def main_s_commit(root: Path) -> Path:
    """The copy in root made main's commit before the release's (the checkout may be either): its
    CHANGELOG section Unreleased, and README.md's Install section saying so."""
    changelog_heading(root, "- Unreleased")
    readme = root / "README.md"
    readme.write_text(re.sub(r"^Each release is on PyPI.*?\n\n", UNRELEASED_INSTALL,
                             readme.read_text(), count=1, flags=re.M | re.S))  # fmt: skip
    return root


def release_s_commit(root: Path) -> Path:
    """The copy in root, main's commit, made the release's by .ci/release.py prepare."""
    prepared = release_py(root, "prepare", RELEASE)
    assert prepared.returncode == 0, prepared.stdout + prepared.stderr
    return root


@pytest.fixture
def release_check(tmp_path):
    """``.ci/release.py check TAG NOTES`` on a copy of the files it reads (release_files), which a
    test may change first; returns (exit status, its output, the notes written)."""
    release_files(tmp_path)

    def check(tag: str) -> tuple[int, str, str]:
        notes = tmp_path / "notes.md"
        notes.unlink(missing_ok=True)
        ran = release_py(tmp_path, "check", tag, str(notes))
        return ran.returncode, ran.stdout + ran.stderr, notes.read_text() if notes.exists() else ""

    check.root = tmp_path
    return check


def pom_without_scm(root: Path) -> None:
    edit(root / "java/pom.xml", "<scm>", "<scm_>", "</scm>", "</scm_>")


def changelog_heading(root: Path, heading: str) -> None:
    """The version's CHANGELOG heading made '## [VERSION] HEADING', whatever it was."""
    changelog = root / "CHANGELOG.md"
    text, count = re.subn(rf"^## \[{re.escape(RELEASE)}\].*$", f"## [{RELEASE}] {heading}",
                          changelog.read_text(), count=1, flags=re.M)  # fmt: skip
    assert count == 1, f"CHANGELOG.md has no section for {RELEASE}"
    changelog.write_text(text)


def changelog_section_empty(root: Path) -> None:
    changelog = root / "CHANGELOG.md"
    heading = f"## [{RELEASE}]"
    before, after = changelog.read_text().split(heading)
    changelog.write_text(f"{before}{heading} - 2026-01-01\n\n## [0.0.1] - 2025-01-01\n\n- old\n")


def a_dry_run_s_readme_offering_a_release(root: Path) -> None:
    """The release's commit, its CHANGELOG section Unreleased again, then a dry run's version."""
    release_s_commit(main_s_commit(root))
    changelog_heading(root, "- Unreleased")
    assert release_py(root, "dev", f"{RELEASE}.dev1").returncode == 0


# What the release check refuses: (change to the files, tag, what it says).
RELEASE_REFUSALS = {
    "another tag": (None, "v9.9.9", r"the tag v9\.9\.9 is not v{version}, pyproject\.toml's "
                    r"version: tag the release v{version}"),
    "not a v tag": (None, "{version}", r"the tag {version} is not v{version}"),
    "the pom's version": (
        lambda root: edit(root / "java/pom.xml", "<version>{version}</version>",
                          "<version>9.9.9</version>"),
        "v{version}", r"java/pom\.xml's version is 9\.9\.9, pyproject\.toml's {version}"),
    "the pom's scm": (pom_without_scm, "v{version}",
                      r"java/pom\.xml lacks what Maven Central requires: scm/url, scm/connection"),
    "no CHANGELOG section": (
        lambda root: edit(root / "CHANGELOG.md", "## [{version}]", "## [9.9.9]"),
        "v{version}", r"CHANGELOG\.md has no section for {version}, or an empty one"),
    "an empty CHANGELOG section": (changelog_section_empty, "v{version}",
                                   r"CHANGELOG\.md has no section for {version}, or an empty one"),
    "an Unreleased CHANGELOG section": (
        lambda root: changelog_heading(root, "- Unreleased"), "v{version}",
        r"CHANGELOG\.md's section for {version} is headed '## \[{version}\] - Unreleased', "
        r"without the release's date: head it '## \[{version}\] - YYYY-MM-DD'"),
    "a CHANGELOG date not YYYY-MM-DD": (
        lambda root: changelog_heading(root, "- 2026-1-5"), "v{version}",
        r"is headed '## \[{version}\] - 2026-1-5', without the release's date"),
    "a README that does not offer the release": (
        lambda root: changelog_heading(main_s_commit(root), "- 2026-01-01"), "v{version}",
        r"README\.md's Install section must offer `pip install tf_stopgrad` while CHANGELOG\.md's "
        r"{version} is dated: `python3 \.ci/release\.py prepare {version}` writes the release's "
        r"commit"),
    "a dry run's README that offers a release not dated": (
        a_dry_run_s_readme_offering_a_release, "v{version}.dev1",
        r"README\.md's Install section must not offer `pip install tf_stopgrad` while "
        r"CHANGELOG\.md's {version} is Unreleased"),
}  # fmt: skip


def edit(path: Path, *replacements: str) -> None:
    text = path.read_text()
    for old, new in zip(replacements[::2], replacements[1::2]):
        old = old.format(version=RELEASE)
        assert old in text, old
        text = text.replace(old, new)
    path.write_text(text)


def changed_lines(root: Path, before: dict[str, str]) -> dict[str, tuple[set[str], set[str]]]:
    """Each file's lines removed and added since before (its text then)."""
    after = {name: set((root / name).read_text().splitlines()) for name in before}
    return {name: (set(text.splitlines()) - after[name], after[name] - set(text.splitlines()))
            for name, text in before.items()}  # fmt: skip


@pytest.mark.slow
def test_the_release_check_passes_on_the_release_s_commit_as_prepare_writes_it(release_check):
    root = main_s_commit(release_check.root)
    names = ("pyproject.toml", "java/pom.xml", "CHANGELOG.md", "README.md")
    before = {name: (root / name).read_text() for name in names}
    release_s_commit(root)
    status, output, notes = release_check(f"v{RELEASE}")
    assert status == 0, output
    changelog = (REPO_ROOT / "CHANGELOG.md").read_text()
    assert notes.strip() and notes.strip() in changelog
    assert "## [" not in notes
    # The date and the README's opening, and nothing else (the version was the release's).
    today = time.strftime("%Y-%m-%d", time.gmtime())
    changed = changed_lines(root, before)
    assert changed.pop("CHANGELOG.md") == ({f"## [{RELEASE}] - Unreleased"},
                                           {f"## [{RELEASE}] - {today}"})  # fmt: skip
    removed, added = changed.pop("README.md")
    assert removed == set(UNRELEASED_INSTALL.splitlines()) - {""} and len(added) == 2
    assert "pip install tf_stopgrad" in "".join(added) and "org.tfstopgrad:tf-stopgrad" in "".join(
        added)  # fmt: skip
    assert changed == dict.fromkeys(names[:2], (set(), set()))
    assert readme_install(root) == ((False, True), (False, True))
    # Once made, it is not made again, and a version with no Unreleased section changes nothing.
    for version in (RELEASE, "9.9.9"):
        before = {name: (root / name).read_text() for name in names}
        again = release_py(root, "prepare", version)
        assert again.returncode == 1 and "nothing matches CHANGELOG.md" in again.stderr
        assert changed_lines(root, before) == dict.fromkeys(names, (set(), set()))
    # The next version, whose section is Unreleased: both versions written, and its section dated.
    edit(root / "CHANGELOG.md", f"## [{RELEASE}] - {today}", "## [9.9.9] - Unreleased")
    assert release_py(root, "prepare", "9.9.9").returncode == 0
    assert pyproject_version(root / "pyproject.toml") == "9.9.9"
    assert "<version>9.9.9</version>" in (root / "java/pom.xml").read_text()
    assert release_py(root, "check", "v9.9.9", str(root / "notes.md")).returncode == 0


@pytest.mark.slow
@pytest.mark.parametrize("commit", ["main's", "the release's"])
def test_a_dry_run_s_version_leaves_the_readme_and_the_changelog_agreeing(release_check, commit):
    """The dry run's dev writes X.Y.Z.devN into pyproject.toml and java/pom.xml before its check
    job and its CI test the commit: on main's commit and on the release's, the README's install
    test passes before it and after it, and the release's check passes for the dry run's tag."""
    root = main_s_commit(release_check.root)
    if commit == "the release's":
        release_s_commit(root)
    says, called_for = readme_install(root)
    assert says == called_for == ((False, True) if commit == "the release's" else (True, False))
    assert (release_check(f"v{RELEASE}")[0] == 0) == (commit == "the release's")
    dev = release_py(root, "dev", f"{RELEASE}.dev4242")
    assert dev.returncode == 0, dev.stderr
    assert pyproject_version(root / "pyproject.toml") == f"{RELEASE}.dev4242"
    assert readme_install(root) == (says, called_for)
    status, output, notes = release_check(f"v{RELEASE}.dev4242")
    assert status == 0 and notes.strip(), output


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(RELEASE_REFUSALS))
def test_the_release_check_refuses_what_disagrees_and_says_what_to_change(release_check, case):
    change, tag, message = RELEASE_REFUSALS[case]
    if change is not None:
        change(release_check.root)
    status, output, notes = release_check(tag.format(version=RELEASE))
    assert status == 1 and not notes
    assert re.search(message.format(version=re.escape(RELEASE)), " ".join(output.split())), output


GH_RUNS = """#!/bin/sh
# gh, as far as .ci/release.py tag asks it: its arguments logged to GH_LOG; GH_ANSWER printed,
# with the status GH_STATUS.
echo "$*" >>"$GH_LOG"
echo "$GH_ANSWER"
exit "${GH_STATUS:-0}"
"""

# What `.ci/release.py tag` finds: (the change, GH_ANSWER and GH_STATUS, its arguments, whether
# it tags, what it says). gh lists the runs newest first.
TAGGINGS = {
    "all is well": (None, ('[{"conclusion":"success"},{"conclusion":"failure"}]', "0"), [], True,
                    "release: v{version} tags {commit}, pushed"),
    "CI failed": (None, ('[{"conclusion":"failure"}]', "0"), [], False,
                  "CI's newest run on {commit} has not passed (its conclusion: failure): tag once "
                  "it has"),
    "a later run failed": (None, ('[{"conclusion":"failure"},{"conclusion":"success"}]', "0"), [],
                           False, "CI's newest run on {commit} has not passed"),
    "CI still running": (None, ('[{"conclusion":""},{"conclusion":"success"}]', "0"), [], False,
                         "has not passed (its conclusion: none yet)"),
    "no CI run": (None, ("[]", "0"), [], False, "(its conclusion: no run)"),
    "gh logged out": (None, ("", "4"), [], False,
                      "cannot tell whether CI passed on {commit} (gh: run gh auth login"),
    "no gh": (None, None, [], False, "(gh: not installed): see its runs in the Actions tab, then "
              "again with --ci-passed"),
    "no gh, but CI passed": (None, None, ["--ci-passed"], True, "pushed"),
    "undated": ("- Unreleased", ('[{"conclusion":"success"}]', "0"), [], False,
                "without the release's date"),
    "uncommitted": ("uncommitted", ('[{"conclusion":"success"}]', "0"), [], False,
                    "the checkout differs from HEAD"),
    "not on main": ("unpushed", ('[{"conclusion":"success"}]', "0"), [], False,
                    "is not on origin's main: only main's commits are released"),
}  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(TAGGINGS))
def test_the_tag_command_tags_and_pushes_only_what_the_release_s_checks_pass(tmp_path, case):
    """`.ci/release.py tag X.Y.Z`, in a clone of an origin that stands in for GitHub's, with a
    stand-in gh: the tag is pushed only once the checks pass, CI's included."""
    change, gh, arguments, tags, says = TAGGINGS[case]
    version, origin, clone = RELEASE, tmp_path / "origin.git", tmp_path / "clone"
    git(tmp_path, "init", "-q", "--bare", str(origin))
    git(tmp_path, "clone", "-q", str(origin), str(clone))
    release_files(clone)
    main_s_commit(clone) if change == "- Unreleased" else release_s_commit(main_s_commit(clone))
    git(clone, "add", ".")
    git(clone, "commit", "-q", "-m", "the release")
    git(clone, "push", "-q", "origin", "HEAD:main")
    if change == "unpushed":
        git(clone, "commit", "-q", "--allow-empty", "-m", "not on main")
    elif change == "uncommitted":
        changelog_heading(clone, "- 2026-01-02")
    commit = git(clone, "rev-parse", "HEAD")
    bin = tmp_path / "bin"
    bin.mkdir()
    (bin / "git").symlink_to(shutil.which("git"))
    if gh is not None:
        (bin / "gh").write_text(GH_RUNS)
        (bin / "gh").chmod(0o755)
    environment = {**os.environ, "PATH": str(bin), "GH_LOG": str(tmp_path / "gh.log"),
                   "GH_ANSWER": gh[0] if gh else "", "GH_STATUS": gh[1] if gh else "0",
                   "GIT_CONFIG_GLOBAL": "/dev/null"}  # fmt: skip
    if gh and gh[1] != "0":
        environment["GH_ANSWER"] = "run gh auth login"  # on stdout here; gh says it on stderr
        (bin / "gh").write_text(GH_RUNS.replace('echo "$GH_ANSWER"', 'echo "$GH_ANSWER" >&2'))
    ran = subprocess.run([sys.executable, ".ci/release.py", "tag", version, *arguments],
                         cwd=clone, env=environment, capture_output=True, text=True,
                         timeout=60)  # fmt: skip
    output = ran.stdout + ran.stderr
    assert (ran.returncode == 0) == tags, output
    assert says.format(version=version, commit=commit) in output
    pushed = subprocess.run(["git", "-C", str(origin), "rev-parse", f"refs/tags/v{version}"],
                            capture_output=True, text=True)  # fmt: skip
    assert (pushed.stdout.strip() == commit) == tags and (pushed.returncode == 0) == tags
    if gh and case not in ("undated", "uncommitted", "not on main"):
        asked = (tmp_path / "gh.log").read_text()
        assert asked == (f"run list --commit {commit} --workflow ci.yml --limit 1 --json "
                         "conclusion\n")  # fmt: skip


def release_commands(text: str) -> list[str]:
    """The .ci/release.py commands a script runs, in order: 'serves pypi', 'check', ..."""
    return re.findall(r"\.ci/release\.py ((?:serves \w+)|[\w-]+)", text)


def workflow_jobs(workflow: str, text: str | None = None) -> dict[str, str]:
    """A workflow's jobs (of its text, when given), each its lines."""
    text = (text or (WORKFLOWS / workflow).read_text()).split("\njobs:\n", 1)[1]
    return dict(re.findall(r"^  ([\w-]+):\n((?:(?:    .*)?\n)*)", text + "\n", re.M))


def test_the_rehearsal_runs_the_release_s_commands_in_its_order():
    release = release_commands("\n".join(run_blocks((WORKFLOWS / "release.yml").read_text())))
    lanes = (REPO_ROOT / ".ci" / "lanes").read_text()
    rehearsal = release_commands(lanes[lanes.index("lane_release() {") :])
    # The dry run's own commands, which test_release's Runner plays as release.yml has them; the
    # rehearsal's own, prepare, which makes the release's commit of a copy before it.
    dry_run = {"dev", "central-drop"}
    assert dry_run <= set(release)
    assert set(release) - dry_run == set(rehearsal) - {"prepare"}, "the rehearsal runs others"
    # Central's bundle (maven), its upload, PyPI's, then Central's publication.
    publishing = ["maven", "central-upload", "serves pypi", "central-publish", "serves central"]
    assert [command for command in rehearsal if command in publishing][:5] == publishing
    assert 'python3 .ci/release.py check "$TAG" notes.md' in "".join(
        run_blocks((WORKFLOWS / "release.yml").read_text()))
    assert re.search(r"step \"twine upload\".*\n.*\n.*serves pypi", lanes)


def test_nothing_is_public_before_both_registries_have_validated_what_they_take():
    jobs = workflow_jobs("release.yml")
    needs = {job: re.findall(r"[\w-]+", re.search(r"^    needs: (.*)$", lines, re.M).group(1))
             for job, lines in jobs.items() if "needs:" in lines}  # fmt: skip

    def before(job: str) -> set[str]:
        return {earlier for need in needs.get(job, []) for earlier in {need, *before(need)}}

    runs = {job: release_commands(lines) for job, lines in jobs.items()}
    uploads = [job for job, commands in runs.items() if "central-upload" in commands]
    assert uploads == ["central-upload"]
    # Maven uploads nothing; .ci/release.py uploads a deployment that waits to be published, once
    # the jars are compared with CI's (a step before).
    assert "<skipUpload>true</skipUpload>" in (REPO_ROOT / "java" / "pom.xml").read_text()
    assert "upload?publishingType=USER_MANAGED&" in (REPO_ROOT / ".ci" / "release.py").read_text()
    steps = re.split(r"^(?=      - )", jobs["central-upload"], flags=re.M)
    [compared] = [i for i, step in enumerate(steps) if "diff ci.sums built.sums" in step]
    [uploaded] = [i for i, step in enumerate(steps) if ".ci/release.py central-upload" in step]
    [built] = [i for i, step in enumerate(steps) if ".ci/release.py maven" in step]
    assert built < compared < uploaded
    assert "pypa/gh-action-pypi-publish@" in jobs["pypi"]
    assert {"check", "ci", "preflight", "central-upload"} <= before("pypi")
    assert runs["pypi-served"] == ["serves pypi"] and "pypi" in before("pypi-served")
    assert "central-publish" in runs["central-publish"]
    assert "pypi-served" in before("central-publish")
    assert {"pypi-served", "central-publish"} <= before("github")
    assert "needs.pypi-served.result == 'success'" in jobs["github"]


def test_the_scheduled_workflow_runs_ci_s_scheduled_lanes_weekly_and_by_hand():
    workflow = (WORKFLOWS / "scheduled.yml").read_text()
    assert re.search(r'^  schedule:\n    - cron: "\d+ \d+ \* \* \d"', workflow, re.M)
    assert re.search(r"^  workflow_dispatch:$", workflow, re.M)
    calls_ci = (r"^    uses: \./\.github/workflows/ci\.yml( #.*)?"
                r"\n    with:\n      lanes: scheduled$")
    assert re.search(calls_ci, workflow, re.M)
    tox = (REPO_ROOT / ".ci" / "tox.ini").read_text()
    scheduled = re.findall(r"^\[testenv:([\w.-]+)\]\n(?:[^\[].*\n)*?labels = scheduled$", tox, re.M)
    assert scheduled == ["pre", "nightly"]


def test_every_job_has_a_timeout():
    for workflow in ("ci.yml", "release.yml", "scheduled.yml"):
        for job, lines in workflow_jobs(workflow).items():
            calls_workflow = re.search(r"^    uses: \./\.github/workflows/", lines, re.M)
            timeout = re.search(r"^    timeout-minutes: \d+( #.*)?$", lines, re.M)
            # A job that calls a workflow has none of its own: the called jobs' apply.
            assert calls_workflow or timeout, f"{workflow}: {job} has no timeout-minutes"


def steps_piping_without_pipefail(workflow: str) -> list[str]:
    """The steps of a workflow (its text) whose script pipes (``|`` outside quotes) but that run
    without ``shell: bash`` (the workflow's, the job's or their own): GitHub runs a step that
    names no shell with ``bash -e``, where a pipe's status is its last command's, and a failure
    before it passes. ``shell: bash`` is ``bash -eo pipefail``."""
    head, _, jobs = workflow.partition("\njobs:\n")
    bash = r"shell: bash *(#.*)?$"
    everywhere = re.search(rf"^defaults:\n  run:\n    {bash}", head, re.M)
    found = []
    for job, lines in re.findall(r"^  ([\w-]+):\n((?:(?:    .*)?\n)*)", jobs + "\n", re.M):
        in_job = everywhere or re.search(
            rf"^    defaults:\n      run:\n        {bash}", lines, re.M
        )
        for step in re.split(r"^(?=      - )", lines, flags=re.M):
            pipefail = in_job or re.search(rf"^        {bash}", step, re.M)
            for script in run_blocks(step):
                unquoted = re.sub(r"'[^']*'|\"(?:[^\"\\]|\\.)*\"|\|\|", "", script)
                if "|" in unquoted and not pipefail:
                    found.append(f"{job}: {script.strip().splitlines()[0]}")
    return found


def test_every_step_that_pipes_runs_with_pipefail():
    for workflow in sorted(WORKFLOWS.glob("*.yml")):
        assert steps_piping_without_pipefail(workflow.read_text()) == [], workflow.name


PIPING = """\
on: push
jobs:
  build:
    runs-on: ubuntu-24.04
    steps:
      - run: echo "a | b" 'c | d' || exit 1
      - name: Build
        run: |
          make 2>&1 | tee make.log
"""


def test_the_pipefail_check_finds_a_pipe_without_pipefail_and_only_there():
    assert steps_piping_without_pipefail(PIPING) == ["build: make 2>&1 | tee make.log"]
    own = PIPING.replace("        run: |", "        shell: bash\n        run: |")
    defaults = "    defaults:\n      run:\n        shell: bash\n"
    jobs = PIPING.replace("    steps:", f"{defaults}    steps:")
    workflows = PIPING.replace("jobs:", "defaults:\n  run:\n    shell: bash # pipefail\njobs:")
    assert steps_piping_without_pipefail(own) == []
    assert steps_piping_without_pipefail(jobs) == []
    assert steps_piping_without_pipefail(workflows) == []
    sh = PIPING.replace("        run: |", "        shell: sh\n        run: |")
    assert steps_piping_without_pipefail(sh) == ["build: make 2>&1 | tee make.log"]
    # release.yml without its defaults: the upload to Central would pass with Maven failing.
    release = (WORKFLOWS / "release.yml").read_text()
    release = re.sub(r"^defaults:\n(?:  .*\n)+", "", release, flags=re.M)
    unsafe = steps_piping_without_pipefail(release)
    assert "central-upload: version=${TAG#v}" in unsafe


def git(directory: Path, *arguments: str) -> str:
    settings = ["user.name=tests", "user.email=tests@invalid", "init.defaultBranch=main"]
    options = [option for setting in settings for option in ("-c", setting)]
    ran = subprocess.run(["git", *options, "-C", str(directory), *arguments], check=True,
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    return ran.stdout.strip()


@pytest.mark.slow
@pytest.mark.parametrize("tagged", ["main", "main~1", "branch"])
def test_only_a_commit_on_main_is_released(tmp_path, tagged):
    """release.yml's step that refuses a tagged commit not on main, in a clone as
    actions/checkout makes it with fetch-depth 0 (origin/main in it)."""
    [script] = [script for script in run_blocks((WORKFLOWS / "release.yml").read_text())
                if "merge-base --is-ancestor" in script]  # fmt: skip
    origin, clone = tmp_path / "origin", tmp_path / "clone"
    git(tmp_path, "init", "-q", str(origin))
    for message in ("one", "two", "on a branch"):
        if message == "on a branch":
            git(origin, "checkout", "-q", "-b", "branch")
        git(origin, "commit", "-q", "--allow-empty", "-m", message)
    git(tmp_path, "clone", "-q", str(origin), str(clone))
    commit = git(clone, "rev-parse", f"origin/{tagged}")
    environment = {**os.environ, "GITHUB_SHA": commit, "TAG": "v9.9.9"}
    ran = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=clone, env=environment,
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    if tagged != "branch":
        assert ran.returncode == 0, ran.stdout + ran.stderr
    else:
        assert ran.returncode == 1
        refusal = f"v9.9.9 tags {commit}, which is not on main: only main's commits are released"
        assert refusal in ran.stdout


def test_each_irreversible_job_first_checks_that_the_tag_has_not_moved():
    jobs = workflow_jobs("release.yml")
    step = r"^      - .*\n(?:        if: (.*)\n)?        run: (.*git ls-remote.*)$"
    checks = {job: re.findall(step, lines, re.M) for job, lines in jobs.items()}
    # Only the dry run's central-publish, which drops what it uploaded, goes on after a push to
    # main; the other jobs check in a dry run too.
    skipped = {job for job, found in checks.items() if found and found[0][0]}
    assert skipped == {"central-publish"}
    assert checks["central-publish"][0][0] == "${{ !env.DRY_RUN }}"
    assert {job for job, found in checks.items() if found} == {"pypi", "central-publish", "github"}
    for job in ("pypi", "central-publish", "github"):
        first = re.search(r"^    steps:\n      - (.*)\n(?:        .*\n)*", jobs[job], re.M)
        assert "git ls-remote" in first.group(0), f"{job}: the tag's check is not its first step"
    assert len({found[0][1] for found in checks.values() if found}) == 1


def test_every_file_of_the_github_release_is_attested_before_it_is_attached():
    """The GitHub release's files carry a provenance attestation (Sigstore-signed, as PyPI's
    do): every file it attaches, SHA256SUMS among them, attested before the release is made."""
    github = workflow_jobs("release.yml")["github"]
    steps = re.split(r"^(?=      - )", github, flags=re.M)
    sums = [i for i, step in enumerate(steps) if "sha256sum -- * >SHA256SUMS" in step]
    assert "sha256sum -c SHA256SUMS" in steps[sums[0]]  # central-upload's, signed, with the jars
    attest = [i for i, step in enumerate(steps) if "uses: actions/attest@" in step]
    release = [i for i, step in enumerate(steps) if "gh release" in step]
    assert len(sums) == len(attest) == len(release) == 1 and sums < attest < release, steps
    assert "subject-path: files/*\n" in steps[attest[0]]
    assert set(re.findall(r" (files/\S*)", steps[release[0]])) == {"files/*"}
    assert re.search(r"^      id-token: write\b.*\n      attestations: write\b", github, re.M)


@pytest.mark.slow
@pytest.mark.parametrize("tag", ["lightweight", "annotated", "moved", "deleted", "another"])
def test_the_tag_check_passes_only_while_the_tag_points_at_the_run_s_commit(tmp_path, tag):
    """release.yml's check before each irreversible step, against a repository that stands in for
    GitHub's (GITHUB_SERVER_URL/GITHUB_REPOSITORY), its tag as the test leaves it."""
    [script] = {script for script in run_blocks((WORKFLOWS / "release.yml").read_text())
                if "git ls-remote" in script}  # fmt: skip
    origin = tmp_path / "owner" / "tf_stopgrad"
    git(tmp_path, "init", "-q", str(origin))
    git(origin, "commit", "-q", "--allow-empty", "-m", "released")
    commit = git(origin, "rev-parse", "HEAD")
    git(origin, "tag", *(["-a", "-m", "v9.9.9"] if tag != "lightweight" else []), "v9.9.9")
    git(origin, "tag", "v9.9.9.1")  # a tag the pattern must not take for v9.9.9
    if tag == "moved":
        git(origin, "commit", "-q", "--allow-empty", "-m", "after")
        git(origin, "tag", "-f", "-a", "-m", "moved", "v9.9.9")
    elif tag == "deleted":
        git(origin, "tag", "-d", "v9.9.9")
    environment = {**os.environ, "GITHUB_SERVER_URL": f"file://{tmp_path}", "GITHUB_SHA": commit,
                   "GITHUB_REPOSITORY": "owner/tf_stopgrad", "GITHUB_REF": "refs/tags/v9.9.9",
                   **({"GITHUB_SHA": "0" * 40} if tag == "another" else {})}  # fmt: skip
    ran = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
                         cwd=tmp_path, env=environment, capture_output=True, text=True,
                         timeout=60)  # fmt: skip
    assert ran.returncode == (0 if tag in ("lightweight", "annotated") else 1), ran.stderr


@pytest.mark.slow
def test_a_lane_that_stops_early_fails_and_says_where(tmp_path):
    """A lane that returns after a command that is not a step fails (it has no failed step to
    count), and its line names that command."""
    for name in (".ci/lanes", "build_backend/supported_tensorflow.py", "pyproject.toml"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO_ROOT / name, tmp_path / name)
    lanes = tmp_path / ".ci" / "lanes"
    # The lint lane, made to stop at a mkdir whose parent does not exist.
    stops_early = ('lane_lint() { step "a first check" true && mkdir "${LANE_DIR}/missing/dir" '
                   '&& step "a check never run" true || return; }\n')  # fmt: skip
    dispatcher = "\ncase ${LANE} in\n"
    assert lanes.read_text().count(dispatcher) == 1
    lanes.write_text(lanes.read_text().replace(dispatcher, f"\n{stops_early}{dispatcher[1:]}"))
    # Without .ci/run's settings, and TOX_ENV_DIR above all: a lane removes that directory.
    environment = {name: value for name, value in os.environ.items()
                   if not name.startswith(("CI_", "TOX_"))}  # fmt: skip
    ran = subprocess.run(["bash", str(lanes), "lint"], cwd=tmp_path, env=environment,
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    result = (tmp_path / "ci-logs" / "results" / "lint").read_text()
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert re.search(r"\| 1 1 \| a first check in \d+ s; FAILED: .*stopped .*"
                     r'mkdir "\$\{LANE_DIR\}/missing/dir"', result), result  # fmt: skip


def supported_minors() -> list[tuple[int, int]]:
    sys.path.insert(0, str(REPO_ROOT / "build_backend"))
    import supported_tensorflow

    return supported_tensorflow.minors()


def test_readme_support_matrix_has_one_row_per_supported_minor():
    readme = (REPO_ROOT / "README.md").read_text()
    rows = re.findall(r"^\| (\d+)\.(\d+) \|", readme, re.MULTILINE)
    assert [(int(major), int(minor)) for major, minor in rows] == supported_minors()


def test_the_default_ci_run_has_a_lane_for_every_supported_minor_and_platform():
    default, _ = toxfile().lanes()
    minors = [minor for _, minor in supported_minors()]
    for minor in minors:
        assert any(lane.split("-")[0] == f"tf2.{minor}" for lane in default), minor
    oldest, newest = minors[0], minors[-1]
    assert {"wheels", "lint", "source", "asan", "java", "release", f"tf2.{oldest}-bullseye",
            f"tf2.{newest}-trixie", f"tf2.{newest}-aarch64"} <= set(default)  # fmt: skip


def test_changelog_names_the_newest_supported_minor():
    major, newest = supported_minors()[-1]
    changelog = (REPO_ROOT / "CHANGELOG.md").read_text()
    assert re.search(rf"\b{major}\.{newest}\b", changelog), f"no line names {major}.{newest}"


def readme_install(root: Path = REPO_ROOT) -> tuple[tuple[bool, bool], tuple[bool, bool]]:
    """What README.md's Install section says (no release is tagged yet; `pip install
    tf_stopgrad`), and what CHANGELOG.md calls for: until it dates a release, nothing is on
    PyPI, and the README says so and offers no `pip install tf_stopgrad`; from the first
    release's commit on, it offers it instead. A dry run's version changes neither file."""
    sections = re.findall(r"^## \[([^\]]+)\] - (.+)$", (root / "CHANGELOG.md").read_text(), re.M)
    assert sections, "CHANGELOG.md has no version section"
    released = any(re.fullmatch(r"\d{4}-\d{2}-\d{2}", date.strip()) for _, date in sections)
    readme = (root / "README.md").read_text()
    install = re.search(r"^## Install\n(.*?)^## ", readme, re.M | re.S)
    assert install, "README.md has no Install section"
    says_unreleased = "No release is tagged yet" in install.group(1)
    offers_pypi = re.search(r"pip install tf_stopgrad\b", readme) is not None
    return (says_unreleased, offers_pypi), (not released, released)


def test_readme_install_says_whether_a_release_is_out():
    says, called_for = readme_install()
    assert says == called_for


def test_readme_support_marks_are_what_the_lanes_test():
    default, named = toxfile().lanes()
    readme = (REPO_ROOT / "README.md").read_text()
    newest = supported_minors()[-1][1]
    columns = ("x86_64", "aarch64", "Python 3.9", "3.11", "3.13", "3.14")
    rows = re.findall(r"^\| 2\.(\d+) \|" + r" *([^|]*?) *\|" * 6, readme, re.M)
    assert len(rows) == len(supported_minors())
    differing = []
    for minor, *cells in rows:
        tested = "✓" if f"tf2.{minor}" in default or int(minor) == newest else ""  # source lane
        emulated = f"tf2.{minor}-aarch64"
        lanes = (tested, "✓" if emulated in default else "○" if emulated in named else "",
                 "✓" if f"tf2.{minor}-bullseye" in default else "", tested,
                 "✓" if f"tf2.{minor}-trixie" in default else "", "")  # fmt: skip
        # Under Python, ✗ (no TensorFlow wheel for that pair) is as untested as a blank.
        marks = [cell.replace("✗", "") if column[0] in "P3" else cell
                 for column, cell in zip(columns, cells)]  # fmt: skip
        readme_marks, lane_marks = dict(zip(columns, marks)), dict(zip(columns, lanes))
        if readme_marks != lane_marks:
            differing.append(f"README's 2.{minor} row {readme_marks}, the lanes' {lane_marks}")
    assert differing == [], "\n".join(differing)


def test_the_readme_s_tests_are_what_a_lane_runs_on_what_the_source_lane_installs():
    """The README's quick start: the extras the source lane installs from the checkout, and the
    pytest selection of one of .ci/tox.ini's lanes, so what it tells a user to run, CI runs."""
    readme = (REPO_ROOT / "README.md").read_text()
    quick_start = FENCED_CODE.search(readme)
    assert quick_start, "README.md has no quick start"
    command = r'^pip install "\.\[([\w,]+)\]" && pytest ([^#\n]*?) *#'
    [(extras, selection)] = re.findall(command, quick_start.group(0), re.M)
    config = ConfigParser(interpolation=None)
    config.read(REPO_ROOT / ".ci" / "tox.ini")
    selections = {}
    for section in config.sections():
        default = re.search(r"\{posargs:(.*)\}", config[section].get("commands", ""), re.S)
        if default:
            selections[section] = " ".join(default.group(1).replace("\\\n", " ").split())
    assert selection in selections.values(), f"pytest {selection} is no lane's: {selections}"
    lanes = (REPO_ROOT / ".ci" / "lanes").read_text()
    source = lanes[lanes.index("lane_source() {") :]
    assert re.search(rf"^ +EXTRAS={re.escape(extras)}$", source[: source.index("\n}")], re.M)


def test_the_readme_s_command_for_the_same_bytes_runs_the_lane_that_compares_them():
    readme = (REPO_ROOT / "README.md").read_text()
    [lane] = re.findall(r"same bytes anywhere: `bash \.ci/run (\w+)`", readme)
    lanes = (REPO_ROOT / ".ci" / "lanes").read_text()
    body = lanes[lanes.index(f"lane_{lane}() {{") :]
    body = body[: body.index("\n}")]
    assert 'step "the same bytes from another path"' in body and "sha256sum" in body


def test_the_readme_s_java_build_names_ci_s_jdk_and_each_tested_tensorflow_java_s_minor():
    readme = (REPO_ROOT / "README.md").read_text()
    java = re.search(r"^\*\*Java\.\*\* (.*?)\n\n", readme, re.M | re.S)
    assert java, "README.md has no Java paragraph"
    ci = (WORKFLOWS / "ci.yml").read_text()
    [major] = re.findall(r'java-version: "(\d+)\.', ci)
    assert f"JDK {major}" in java.group(1)
    loader = (REPO_ROOT / "java/src/main/java/org/tfstopgrad/TfStopgrad.java").read_text()
    tested = re.search(r"Map\.of\(([^)]*)\)", loader)
    assert tested, "TfStopgrad.java has no table of the tested TensorFlow Java releases"
    pairs = re.findall(r'"([\d.]+)", "([\d.]+)"', tested.group(1))
    written = "; ".join(f"{release}: {minor}" for release, minor in pairs)
    assert len(pairs) >= 2 and written in java.group(1), written


def test_the_readme_names_the_cache_the_build_unpacks_releases_into(monkeypatch, tmp_path):
    sys.path.insert(0, str(REPO_ROOT / "build_backend"))
    import tensorflow_wheels

    for variable in ("TF_STOPGRAD_CACHE", "XDG_CACHE_HOME"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    relative = tensorflow_wheels.cache_dir().relative_to(tmp_path)
    readme = (REPO_ROOT / "README.md").read_text()
    assert f"`~/{relative}`" in readme and f"`rm -rf ~/{relative}`" in readme


MARKDOWN_FILES = sorted([*REPO_ROOT.glob("*.md"), *(REPO_ROOT / "docs").glob("*.md")])
FENCED_CODE = re.compile(r"^```.*?^```", re.M | re.S)


def github_anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives a Markdown file's headings: the text lowercased, punctuation
    dropped, spaces made hyphens; a repeated heading gets -1, -2, ..."""
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    for heading in re.findall(r"^#{1,6} +(.+?) *#*$", FENCED_CODE.sub("", markdown), re.M):
        anchor = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        anchors.add(f"{anchor}-{seen[anchor]}" if anchor in seen else anchor)
        seen[anchor] = seen.get(anchor, 0) + 1
    return anchors


def broken_links(markdown_files: list[Path]) -> list[str]:
    """Every relative link (``[text](target)``, ``[name]: target``) of the files, outside
    code, whose file does not exist, or whose anchor is no heading of the Markdown file it
    names, as ``file: target``."""
    broken = []
    for path in markdown_files:
        text = re.sub(r"`[^`\n]*`", "", FENCED_CODE.sub("", path.read_text()))
        targets = re.findall(r"\]\(([^)\s]+)(?: \"[^\"]*\")?\)|^\[[^\]]+\]: *(\S+)", text, re.M)
        for target in (inline or reference for inline, reference in targets):
            if re.match(r"[a-z][\w+.-]*:", target):  # https:, mailto:
                continue
            file, _, anchor = target.partition("#")
            linked = (path.parent / file).resolve() if file else path
            if not linked.exists():
                broken.append(f"{path.name}: {target} (no such file)")
                continue
            headings = github_anchors(linked.read_text()) if linked.suffix == ".md" else None
            if anchor and headings is not None and anchor not in headings:
                broken.append(f"{path.name}: {target} (no such heading in {linked.name})")
    return broken


def test_every_relative_link_and_anchor_in_the_markdown_files_resolves():
    assert {"README.md", "CONTRIBUTING.md", "parity.md"} <= {path.name for path in MARKDOWN_FILES}
    assert broken_links(MARKDOWN_FILES) == []


# Where code and docs name a Markdown file's section in words: BUILD_NOTES.md, "Java".
SECTION_NAMERS = ["CMakeLists.txt", "cc", "cmake", "java/pom.xml", "java/src", "tf_stopgrad",
                  "build_backend", ".ci", ".github"]  # fmt: skip


def test_every_section_named_in_words_begins_a_heading_of_its_file():
    files = [*MARKDOWN_FILES, *(path for top in SECTION_NAMERS for path in sorted(
        [REPO_ROOT / top] if (REPO_ROOT / top).is_file() else (REPO_ROOT / top).rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts)]  # fmt: skip
    named, missing = 0, []
    for path in files:
        text = path.read_text(errors="replace")
        references = re.findall(r'([\w/]+\.md), \\?"([^"\\]+)\\?"', text)
        itself = str(path.relative_to(REPO_ROOT))
        references += [(itself, section) for section in re.findall(r'\(see "([^"]+)"\)', text)]
        for file, section in references:
            headings = re.findall(r"^#+ +(.+)$", (REPO_ROOT / file).read_text(), re.M)
            named += 1
            if not any(heading.startswith(section) for heading in headings):
                missing.append(f"{path.relative_to(REPO_ROOT)}: {file}, {section!r}")
    assert named >= 4 and missing == []

def test_the_link_check_finds_each_broken_link_and_follows_githubs_anchors(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "NOTES.md").write_text(
        "# Using the ops from C++\n\n## Reproducible builds: one pinned toolchain\n\n"
        "## The `tf.stop_gradient` twin\n\n## Limits\n\n## Limits\n\n"
        "```bash\n# not a heading\n```\n"
    )
    page = tmp_path / "docs" / "page.md"
    page.write_text(
        "# On this page\n\n"
        "[a](../NOTES.md#using-the-ops-from-c) [b](../NOTES.md#reproducible-builds-one-pinned-"
        "toolchain) [c](../NOTES.md#the-tfstop_gradient-twin) [d](../NOTES.md#limits-1) "
        '[e](#on-this-page) [f](https://example.invalid/missing.md) [g](../NOTES.md "title")\n'
        "`[code](missing.md)` and\n```\n[fenced](missing.md)\n```\n"
        "[gone](../GONE.md) [renamed](../NOTES.md#using-the-ops-from-the-c-api) "
        "[third](../NOTES.md#limits-2) [here](#not-a-heading)\n\n[reference]: ../GONE.md#x\n"
    )
    assert broken_links([page]) == [
        "page.md: ../GONE.md (no such file)",
        "page.md: ../NOTES.md#using-the-ops-from-the-c-api (no such heading in NOTES.md)",
        "page.md: ../NOTES.md#limits-2 (no such heading in NOTES.md)",
        "page.md: #not-a-heading (no such heading in page.md)",
        "page.md: ../GONE.md#x (no such file)",
    ]


def python3_stand_in(directory: Path, lanes: list[str]) -> dict[str, str]:
    """An environment whose python3, for .ci/run, makes a tools venv of stand-ins with `-m venv`
    (a pip that reads what it is given, a tox that lists ``lanes``; nothing is downloaded) and
    is this Python otherwise; without the dry run's DEV_VERSION, which its CI's lanes have."""
    listed = "".join(f"{lane}\\\\n" for lane in lanes)
    (directory / "bin").mkdir()
    (directory / "bin" / "python3").write_text(
        '#!/bin/sh\nif [ "$1 $2" = "-m venv" ]; then\n  mkdir -p "$3/bin"\n'
        '  printf "#!/bin/sh\\ncat >/dev/null\\n" >"$3/bin/pip"\n'
        f'  printf "#!/bin/sh\\nprintf \'{listed}\'\\n" >"$3/bin/tox"\n'
        '  chmod +x "$3/bin/pip" "$3/bin/tox"; exit\nfi\n'
        f'exec "{sys.executable}" "$@"\n')  # fmt: skip
    (directory / "bin" / "python3").chmod(0o755)
    environment = {name: value for name, value in os.environ.items() if name != "DEV_VERSION"}
    return {**environment, "PATH": f"{directory / 'bin'}{os.pathsep}{os.environ['PATH']}"}


@pytest.mark.slow
def test_run_list_prints_the_lanes_and_keeps_the_last_runs_logs_and_cache(tmp_path):
    """`bash .ci/run --list`, as CI's first job and a contributor run it, on a copy of .ci/run
    whose python3 makes a tools venv of stand-ins (a tox that knows three lanes; nothing is
    downloaded): it prints the lanes after wheels, and deletes nothing of the last run."""
    (tmp_path / ".ci").mkdir()
    for name in ("run", "constraints.txt"):
        shutil.copy(REPO_ROOT / ".ci" / name, tmp_path / ".ci" / name)
    last_log = tmp_path / "ci-logs" / "results" / "lint"
    cached = tmp_path / ".ci-venvs" / "uv-cache" / "a-package"
    for kept in (last_log, cached):
        kept.parent.mkdir(parents=True)
        kept.write_text("the last run's")
    environment = {**python3_stand_in(tmp_path, ["wheels", "lint", "source"]),
                   "SOURCE_DATE_EPOCH": "0"}  # fmt: skip
    ran = subprocess.run(["bash", str(tmp_path / ".ci" / "run"), "--list"], env=environment,
                         capture_output=True, text=True, timeout=60)  # fmt: skip

    assert (ran.returncode, ran.stdout) == (0, '["lint", "source"]\n'), ran.stderr
    assert last_log.read_text() == cached.read_text() == "the last run's"


def constraints() -> dict[str, tuple[str, list[str]]]:
    """.ci/constraints.txt's pins: each name's version and hashes."""
    text = (REPO_ROOT / ".ci" / "constraints.txt").read_text().replace("\\\n", " ")
    return {pin.group(1): (pin.group(2), re.findall(r"--hash=sha256:([0-9a-f]{64})", pin.group(0)))
            for pin in re.finditer(r"^([\w.-]+)==(\S+)[^\n]*", text, re.M)}  # fmt: skip


def test_every_tool_ci_installs_is_pinned_with_hashes_that_every_install_requires():
    """.ci/constraints.txt: --require-hashes first (pip and uv honour it in a constraints file),
    each pin with its files' hashes, made again by the command its header gives; tox's deps,
    which uv installs, pinned as there (uv takes hashes for requirements pinned with == only)."""
    text = (REPO_ROOT / ".ci" / "constraints.txt").read_text()
    assert text.splitlines()[0] == "--require-hashes"
    assert "--generate-hashes - -o .ci/constraints.txt && sed -i '1i --require-hashes'" in text
    pins = constraints()
    assert {"pip", "tox", "tox-uv", "twine", "ruff", "mypy", "cmake"} <= pins.keys()
    assert [name for name, (_, hashes) in pins.items() if not hashes] == []
    config = ConfigParser(interpolation=None)
    config.read(REPO_ROOT / ".ci" / "tox.ini")
    for section in config.sections():
        for dep in config[section].get("deps", "").split("\n"):
            if dep.strip() and not dep.startswith("-c "):
                name, _, version = dep.strip().partition("==")
                pinned = pins.get(name, ("",))[0]
                assert pinned == version, f"[{section}] {dep}: constraints.txt has {pinned}"


def test_the_quick_loop_lints_on_the_python_constraints_txt_is_resolved_for():
    """CONTRIBUTING's lint lines install constraints.txt's tools, which pip finds pinned, with
    their hashes, only on the Python it was resolved for and later ones (mypy 2 needs 3.10, and
    below 3.11 it needs tomli, which has no pin)."""
    constraints_header = (REPO_ROOT / ".ci" / "constraints.txt").read_text()
    [python] = re.findall(r"--python-version (3\.\d+)", constraints_header)
    contributing = (REPO_ROOT / "CONTRIBUTING.md").read_text()
    quick_loop = re.search(r"^## The quick loop\n(.*?)^## ", contributing, re.M | re.S)
    assert quick_loop, "CONTRIBUTING.md has no quick loop"
    assert f"on Python {python}+" in quick_loop.group(1), "the lint lines' comment names no Python"
    assert f"need Python {python} or newer" in quick_loop.group(1)


@pytest.mark.slow
def test_hashed_gives_pip_the_pin_and_its_hashes_and_pip_26_comes_first():
    """A pip before 26.1 takes no hash from a constraints file, and so refuses what
    constraints.txt requires: .ci/lanes' hashed hands pip one pin with its hashes, as a
    requirements file; the toolchain installs the pinned pip that way before the build tools, the
    Debian lanes CMake (bullseye's Python 3.9 gets no pip past 26.0.1); .ci/run installs the
    pinned pip first."""
    lanes = (REPO_ROOT / ".ci" / "lanes").read_text()
    [hashed] = re.findall(r"^hashed\(\) \{.*\}$", lanes, re.M)
    script = f'{hashed}\nhashed "$1" sh -c cat stand-in'  # cat: what pip would read
    for name in ("pip", "cmake"):
        given = subprocess.run(["bash", "-c", script, "_", name], cwd=REPO_ROOT, check=True,
                               capture_output=True, text=True, timeout=60).stdout  # fmt: skip
        version, hashes = constraints()[name]
        assert given.startswith(f"{name}=={version} ") and given.count("--hash=") == len(hashes)
        assert re.findall(r"sha256:(\w+)", given) == hashes
    toolchain = lanes[lanes.index("toolchain() {") :]
    assert toolchain.index("hashed pip") < toolchain.index("-c .ci/constraints.txt")
    assert re.search(r'step "CMake from PyPI" hashed cmake "\$\{PYTHON\[@\]\}"', lanes)
    run = (REPO_ROOT / ".ci" / "run").read_text()
    assert run.index("sed -n '/^pip==/") < run.index("-c .ci/constraints.txt tox tox-uv")


def test_maven_is_the_wrapper_s_pinned_distribution_checked_by_its_sha256():
    """CI's lanes and the release run Maven through java/mvnw only, whose distribution is one
    release of Maven with its SHA-256 (the wrapper refuses another download): the jars that
    release.yml builds days after CI come from the same Maven."""
    properties = dict(line.split("=", 1) for line in
                      (REPO_ROOT / "java/.mvn/wrapper/maven-wrapper.properties").read_text()
                      .splitlines() if line and not line.startswith("#"))  # fmt: skip
    assert properties["distributionType"] == "only-script"
    assert re.fullmatch(r"https://repo\.maven\.apache\.org/maven2/org/apache/maven/apache-maven/"
                        r"(3\.\d+\.\d+)/apache-maven-\1-bin\.zip", properties["distributionUrl"])
    assert re.fullmatch(r"[0-9a-f]{64}", properties["distributionSha256Sum"])
    mvnw = REPO_ROOT / "java" / "mvnw"
    assert os.access(mvnw, os.X_OK) and "distributionSha256Sum" in mvnw.read_text()
    for name in (".ci/lanes", ".ci/release.py", ".github/workflows/ci.yml",
                 ".github/workflows/release.yml"):  # fmt: skip
        text = (REPO_ROOT / name).read_text()
        assert not re.search(r"""(^|[\s"'(])mvn\b""", text, re.M), f"{name} runs Maven unpinned"
    assert "java/mvnw" in (REPO_ROOT / ".ci" / "lanes").read_text()
    assert '"java/mvnw"' in (REPO_ROOT / ".ci" / "release.py").read_text()
    # Each artifact Maven downloads must match its checksum: a mismatch fails, not a warning.
    for name in (".ci/lanes", ".ci/release.py"):
        calls = re.findall(r'java/mvnw(?:",)? "?-(.*)', (REPO_ROOT / name).read_text())
        assert calls and all("--strict-checksums" in call for call in calls), name


def test_the_release_s_maven_takes_only_what_has_the_sha512_the_repository_records(monkeypatch):
    """The release's Maven (.ci/release.py maven: the release lane's, and central-upload's, which
    holds the signing key and Central's token) runs with Maven 3.9's trusted checksums: each file
    it resolves must have the SHA-512 that java/.mvn/checksums records, and one not recorded
    fails. Each plugin the pom names is recorded (after a change of version, record it again)."""
    spec = importlib.util.spec_from_file_location("release", REPO_ROOT / ".ci" / "release.py")
    release = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(release)
    ran = []
    monkeypatch.setattr(release.subprocess, "run", lambda command: ran.append(command) or
                        subprocess.CompletedProcess(command, 0))  # fmt: skip
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    monkeypatch.chdir(REPO_ROOT)
    assert release.central_bundle("dist-ci", "-Dgpg.skip") == 0
    [command] = ran
    checksums = REPO_ROOT / "java" / ".mvn" / "checksums"
    trusted = "-Daether.artifactResolver.postProcessor.trustedChecksums"
    assert {"-Daether.trustedChecksumsSource.summaryFile=true", f"{trusted}=true",
            "-Daether.trustedChecksumsSource.summaryFile.originAware=false",
            f"-Daether.trustedChecksumsSource.summaryFile.basedir={checksums}",
            f"{trusted}.checksumAlgorithms=SHA-512",
            f"{trusted}.failIfMissing=true"} <= set(command)  # fmt: skip
    assert not [argument for argument in command if ".record" in argument]
    properties = (REPO_ROOT / "java/.mvn/wrapper/maven-wrapper.properties").read_text()
    assert re.search(r"apache-maven-3\.(9|\d\d)\.\d+-bin\.zip", properties)  # resolver 1.9
    recorded = dict(line.split()[::-1] for line in (checksums / "checksums.sha512").read_text()
                    .splitlines())  # fmt: skip
    assert all(re.fullmatch(r"[0-9a-f]{128}", digest) for digest in recorded.values())
    pom = ElementTree.parse(REPO_ROOT / "java" / "pom.xml").getroot()
    plugins = pom.findall(".//{*}plugin")
    assert len(plugins) >= 10
    for plugin in plugins:
        group = (plugin.findtext("{*}groupId") or "org.apache.maven.plugins").replace(".", "/")
        artifact, version = plugin.findtext("{*}artifactId"), plugin.findtext("{*}version")
        path = f"{group}/{artifact}/{version}/{artifact}-{version}"
        assert f"{path}.jar" in recorded and f"{path}.pom" in recorded, path


def test_the_lanes_install_tf_stopgrad_by_name_at_the_checkout_s_version():
    """Where a lane installs tf_stopgrad by name (as a user does), it asks for the checkout's
    version: pip passes over a pre-release, a dry run's X.Y.Z.devN, for a release on PyPI."""
    lanes = (REPO_ROOT / ".ci" / "lanes").read_text()
    assert re.search(r"^VERSION=.*\[\"project\"\]\[\"version\"\]", lanes, re.M)
    commands = [line for line in lanes.replace("\\\n", " ").splitlines()
                if re.search(r"[\s_]install\b", line) and not re.match(r"\s*(#|\[\[)", line)]
    name = r"\btf_stopgrad(?![-'/\w])(?:\[[^\]]*\])?(?:==[^\s\"]*)?"
    by_name = [found for line in commands for found in re.findall(name, line)]
    assert len(by_name) >= 6, by_name
    assert [name for name in by_name if not name.endswith("==${VERSION}")] == []
