"""The build: configure-time checks, and rebuilding after TensorFlow changes in place."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import tensorflow as tf
from packaging.version import Version
from support import REPO_ROOT, needs_cmake

sys.path.insert(0, str(REPO_ROOT / "build_backend"))
import supported_tensorflow
import tensorflow_config
import tensorflow_wheels

CONFIGURE_TIMEOUT_S = 180


def fake_tensorflow_releases(tmp_path: Path, version: str, extra_include_dir: Path) -> Path:
    """A stand-in for the build backend's description of the releases to build against: the
    installed TensorFlow, but with ``version`` and ``extra_include_dir`` searched before its
    headers."""
    release = tensorflow_config.describe_installed()
    release.update(version=version, include_dirs=[str(extra_include_dir), *release["include_dirs"]])
    releases = tmp_path / "tensorflow_releases.json"
    releases.write_text(json.dumps([release]))
    return releases


def configure(source: Path, build: Path, releases: Path) -> subprocess.CompletedProcess:
    """Runs CMake's configure step on ``source`` for the TensorFlow ``releases``."""
    return subprocess.run(
        ["cmake", "-S", str(source), "-B", str(build), f"-DTF_STOPGRAD_RELEASES={releases}",
         "-DSKBUILD_PROJECT_VERSION=0.0.0"],
        capture_output=True, text=True, timeout=CONFIGURE_TIMEOUT_S,
    )  # fmt: skip


@pytest.mark.core
@needs_cmake
@pytest.mark.slow
@pytest.mark.compiler
def test_unusable_tensorflow_headers_stop_the_configure_step_with_the_remedy(tmp_path):
    # Like TensorFlow 2.19's wheels: a header the plugin needs includes one that is not shipped.
    broken = tmp_path / "include" / "tensorflow" / "core" / "framework"
    broken.mkdir(parents=True)
    (broken / "op.h").write_text('#include "llvm/ADT/ArrayRef.h"\n')
    releases = fake_tensorflow_releases(tmp_path, "2.99.0", tmp_path / "include")

    configured = configure(REPO_ROOT, tmp_path / "build", releases)

    assert configured.returncode != 0
    message = " ".join(configured.stderr.split())  # CMake wraps long messages
    assert "TensorFlow 2.99.0's C++ headers cannot be compiled" in message
    assert "llvm/ADT/ArrayRef.h" in message
    assert "install a TensorFlow release whose headers are complete" in message
    assert "pip install --upgrade" in message
    assert not (tmp_path / "build" / "Makefile").exists(), "nothing may be generated to build"


@pytest.mark.slow
@pytest.mark.core
@needs_cmake
@pytest.mark.compiler
def test_the_installed_tensorflow_passes_the_header_check(tmp_path):
    # The path reaches CMake as JSON: quotes and dollars are data, never CMake code.
    extra_dir = tmp_path / 'no "extra" headers $HOME ${HOME}'
    releases = fake_tensorflow_releases(tmp_path, tf.__version__, extra_dir)

    configured = configure(REPO_ROOT, tmp_path / "build", releases)

    assert f"TensorFlow {tf.__version__}'s headers: the" in configured.stdout, configured.stderr
    assert "cannot be compiled" not in configured.stderr


NEWEST_SUPPORTED_MINOR = supported_tensorflow.minors()[-1][1]
OLDEST_MAJOR, OLDEST_MINOR = supported_tensorflow.minors()[0]
TOO_OLD = f"{OLDEST_MAJOR}.{OLDEST_MINOR - 1}"  # the minor release just below the range
REBUILD_TIMEOUT_S = 900
INPUT = [1.0, -2.0, 3.5]
USE_AFTER_REBUILD = f"""
import json, tensorflow as tf, tf_stopgrad
x = tf.constant({INPUT})
with tf.GradientTape() as tape:
    tape.watch(x)
    y = tf.reduce_sum(tf_stopgrad.stop_gradient(x * x) * x)
print(json.dumps({{
    "tensorflow": tf.__version__,
    "built_against": tf_stopgrad.build_info()["tf_version"],
    "forward": tf_stopgrad.stop_gradient(x).numpy().tolist(),
    "gradient": tape.gradient(y, x).numpy().tolist(),
}}))
"""


def other_tensorflow_minor() -> str:
    """The next TensorFlow minor release we support, or the previous one for the newest."""
    major, minor = (int(part) for part in tf.__version__.split(".")[:2])
    other = minor + 1 if minor < NEWEST_SUPPORTED_MINOR else minor - 1
    return f"{major}.{other}"


def layered_venv(path: Path) -> tuple[Path, dict[str, str]]:
    """A virtual environment that sees this one's packages (tf_stopgrad built for the running
    TensorFlow included) behind its own, like this environment after more installs. Returns
    its interpreter, and an environment with it first on PATH and no PYTHONPATH."""
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, timeout=120)
    python = path / "bin" / "python"
    own_site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    # As site directories, whose .pth files count too: an editable install's import hook is one.
    (Path(own_site) / "outer_environment.pth").write_text("".join(
        f"import site; site.addsitedir({p!r})\n" for p in sys.path if p.endswith("site-packages")))
    env = dict(os.environ, PATH=f"{path / 'bin'}{os.pathsep}{os.environ['PATH']}",
               TF_CPP_MIN_LOG_LEVEL="2", PIP_DISABLE_PIP_VERSION_CHECK="1")  # fmt: skip
    env.pop("PYTHONPATH", None)
    return python, env


@pytest.mark.slow
@pytest.mark.compiler
def test_changing_tensorflow_in_place_asks_for_the_rebuild_that_then_works(tmp_path):
    other_minor = other_tensorflow_minor()
    python, env = layered_venv(tmp_path / "venv")

    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", f"tensorflow=={other_minor}.*"],
        env=env, check=True, timeout=REBUILD_TIMEOUT_S,
    )  # fmt: skip
    refused = subprocess.run(
        [str(python), "-c", "import tf_stopgrad"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip

    assert refused.returncode != 0
    last_line = refused.stderr.strip().splitlines()[-1]
    # Versions as versions: the build record holds 2.22.0rc0 where tf.__version__ is 2.22.0-rc0.
    named = re.match(r"ImportError: tf_stopgrad has op libraries for TensorFlow (\S+), but "
                     r"TensorFlow (\S+) is installed", last_line)  # fmt: skip
    assert named, last_line
    assert Version(named[1]) == Version(tf.__version__), last_line
    assert f"{Version(named[2]).major}.{Version(named[2]).minor}" == other_minor, last_line
    command = re.search(r"Build tf_stopgrad for this TensorFlow: (.+)$", last_line)
    assert command, last_line

    subprocess.run(command.group(1), shell=True, env=env, cwd=tmp_path, check=True,
                   capture_output=True, timeout=REBUILD_TIMEOUT_S)  # fmt: skip
    used = subprocess.run(
        [str(python), "-c", USE_AFTER_REBUILD],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip

    assert used.returncode == 0, used.stderr[-3000:]
    result = json.loads(used.stdout.strip().splitlines()[-1])
    assert result["tensorflow"].startswith(f"{other_minor}.")
    assert Version(result["built_against"]) == Version(result["tensorflow"])
    assert result["forward"] == INPUT
    x = tf.constant(INPUT)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = tf.reduce_sum(tf.stop_gradient(x * x) * x)
    assert result["gradient"] == tape.gradient(y, x).numpy().tolist()


@pytest.mark.core
def test_a_release_described_from_its_files_matches_tf_sysconfig():
    # The wheel build describes each release from its unpacked files, which cannot be
    # imported; for the installed TensorFlow both descriptions must agree.
    from_files = tensorflow_config.describe_unpacked(Path(tf.sysconfig.get_lib()), tf.__version__)
    assert from_files == tensorflow_config.describe_installed()


@pytest.mark.core
def test_no_header_outside_include_external_includes_one_inside_it():
    # The wheel build leaves include/external/ out of each unpacked release.
    include_dir = Path(tf.sysconfig.get_include())
    including = [
        str(header.relative_to(include_dir))
        for header in include_dir.rglob("*")
        if header.is_file() and header.relative_to(include_dir).parts[0] != "external"
        and re.search(rb'#\s*include\s*[<"](\.\./)*external/', header.read_bytes())
    ]  # fmt: skip
    assert including == []


# TensorFlow 2.20 is the last release with wheels for Python 3.9; 2.21, the first for 3.13 alone.
RELEASE_PIP_INSTALLS = {"3.9": (2, 20), "3.13": supported_tensorflow.minors()[-1]}


@pytest.mark.parametrize("python_version", sorted(RELEASE_PIP_INSTALLS))
@pytest.mark.parametrize("build_pip", ["pip", "none"])
@pytest.mark.slow
@pytest.mark.compiler
def test_without_tensorflow_a_source_build_takes_the_release_pip_installs_for_its_python(
    build_pip, python_version, monkeypatch
):
    import tf_stopgrad_build

    monkeypatch.setattr(tf_stopgrad_build, "_installed_tensorflow", lambda python: None)
    monkeypatch.setattr(tf_stopgrad_build, "_python_version", lambda python: python_version)
    if build_pip == "none":  # uv's build environment, or a pip without --dry-run
        monkeypatch.setattr(tensorflow_wheels, "_PIP", [sys.executable, "-m", "no_such_pip"])

    plan = tf_stopgrad_build._Plan({})

    if build_pip == "pip":  # from its wheel, unpacked, as the prebuilt wheel's build does
        assert plan.minors == [RELEASE_PIP_INSTALLS[python_version]]
        assert plan.requirements == []
    else:  # installed into the build environment by the front end, which picks it
        assert plan.requirements == [supported_tensorflow.requirement()]


@pytest.mark.slow
def test_a_source_build_for_a_python_no_supported_tensorflow_has_a_wheel_for_says_what_to_do():
    # No supported TensorFlow has a wheel for Python 3.8 (nor, before TensorFlow 2.22, for 3.14).
    with pytest.raises(SystemExit, match=r"pip finds no TensorFlow \S+ wheel for Python 3\.8 .*"
                       r"Use a Python that the supported releases have wheels for, or install a "
                       r"newer TensorFlow first"):  # fmt: skip
        tensorflow_wheels.installable_minor("3.8")


class Fetched(Exception):
    """What a stand-in for tensorflow_wheels._download raises: the requirement it was given."""


@pytest.mark.parametrize("pip_pre", ["", "1"])
def test_a_cached_pre_release_serves_only_builds_that_take_pre_releases(
    pip_pre, monkeypatch, tmp_path
):
    for version in ("2.22.0rc0", "2.22.0rc1", "2.21.0", "2.21.1rc0"):
        (tmp_path / f"tensorflow-{version}-x86_64").mkdir()
        (tmp_path / f"tensorflow-{version}-x86_64" / ".complete").write_text("a.whl\n")
    monkeypatch.setenv("TF_STOPGRAD_CACHE", str(tmp_path))
    monkeypatch.setenv("PIP_PRE", pip_pre)

    def download(requirement, architecture, into):
        raise Fetched(requirement)

    monkeypatch.setattr(tensorflow_wheels, "_download", download)

    newest_21 = tensorflow_wheels.unpacked_release(2, 21, "x86_64")[1]
    if pip_pre:
        assert newest_21 == "2.21.1rc0"
        assert tensorflow_wheels.unpacked_release(2, 22, "x86_64")[1] == "2.22.0rc1"
    else:  # the final: cached, or fetched, never a cached candidate
        assert newest_21 == "2.21.0"
        with pytest.raises(Fetched, match=r"^tensorflow==2\.22\.\*$"):
            tensorflow_wheels.unpacked_release(2, 22, "x86_64")


def build_directory(monkeypatch, release: dict, skbuild_settings: dict | None = None,
                    tensorflow_requirement: str | None = None) -> Path:
    """The build directory the backend picks for ``release``, the scikit-build-core settings
    ``skbuild_settings`` and the wheel's ``tensorflow_requirement``, under the ``BUILD_ROOT`` the
    test set."""
    import tf_stopgrad_build

    plan = tf_stopgrad_build._Plan.__new__(tf_stopgrad_build._Plan)
    plan.tensorflow_requirement = tensorflow_requirement
    plan.skbuild_settings, plan.compiler_command = dict(skbuild_settings or {}), ["/usr/bin/c++"]
    plan.compiler, plan.architecture, plan.cross = plan.compiler_command[0], "x86_64", False
    monkeypatch.setattr(plan, "describe_releases", lambda: [release], raising=False)
    with tf_stopgrad_build._build_settings(plan) as (_, directory):
        return directory


@pytest.mark.core
def test_builds_for_different_tensorflow_releases_never_share_a_build_directory(
    monkeypatch, tmp_path
):
    import tf_stopgrad_build

    monkeypatch.setattr(tf_stopgrad_build, "BUILD_ROOT", tmp_path)

    def build_dir(release):
        return build_directory(monkeypatch, release)

    installed = tensorflow_config.describe_installed()
    other_version = dict(installed, version="2.99.0")
    other_options = dict(installed, compile_options=["-D_GLIBCXX_USE_CXX11_ABI=0"])
    smaller_library = tmp_path / "libtensorflow_framework.so.2"
    smaller_library.write_bytes(b"not the same library")
    other_library = dict(installed, libraries=[str(smaller_library), installed["libraries"][1]])
    releases = (installed, other_version, other_options, other_library)
    directories = {build_dir(release) for release in releases}
    assert len(directories) == 4
    assert all(directory.parent == tmp_path for directory in directories)
    # The same release found in another place (pip's build environment, then the venv).
    elsewhere = dict(installed, include_dirs=["/elsewhere/include"])
    assert build_dir(elsewhere) == build_dir(installed)
    # The same release from another distribution (tf-nightly's wheel requires no tensorflow).
    nightly = build_directory(monkeypatch, installed, tensorflow_requirement="")
    assert nightly != build_dir(installed)


def passes_user_flags(variable: str) -> bool:
    """Whether the environment variable passes compiler or CMake flags to the build."""
    return variable in ("CXXFLAGS", "LDFLAGS", "CMAKE_ARGS") or variable.startswith("SKBUILD_")


USER_FLAGS = {
    "CXXFLAGS": ({"CXXFLAGS": "-fsanitize=address"}, {}),
    "LDFLAGS": ({"LDFLAGS": "-fsanitize=address"}, {}),
    "CMAKE_ARGS": ({"CMAKE_ARGS": "-DCMAKE_CXX_FLAGS=-g"}, {}),
    "SKBUILD_CMAKE_BUILD_TYPE": ({"SKBUILD_CMAKE_BUILD_TYPE": "Debug"}, {}),
    "SKBUILD_CMAKE_DEFINE": ({"SKBUILD_CMAKE_DEFINE": "CMAKE_CXX_FLAGS=-g"}, {}),
    "-C cmake.define": ({}, {"cmake.define.CMAKE_CXX_FLAGS": "-fsanitize=address"}),
    "-C cmake.build-type": ({}, {"cmake.build-type": "Debug"}),
    "-C cmake.args": ({}, {"cmake.args": "-DCMAKE_CXX_FLAGS=-g"}),
}


@pytest.mark.core
@pytest.mark.parametrize(("environment", "settings"), USER_FLAGS.values(), ids=USER_FLAGS)
def test_a_flag_the_user_asks_for_gets_its_own_build_directory_and_is_never_reused(
    environment, settings, monkeypatch, tmp_path
):
    import tf_stopgrad_build

    monkeypatch.setattr(tf_stopgrad_build, "BUILD_ROOT", tmp_path)
    for name in filter(passes_user_flags, list(os.environ)):
        monkeypatch.delenv(name)
    installed = tensorflow_config.describe_installed()
    plain_directory = build_directory(monkeypatch, installed)
    plain_fingerprint = tf_stopgrad_build._wheel_fingerprint(tf_stopgrad_build._requested_flags({}))
    # A setting that changes nothing compiled keeps the directory.
    assert build_directory(monkeypatch, installed, {"build.verbose": "true"}) == plain_directory

    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    requested = tf_stopgrad_build._requested_flags(settings)

    assert build_directory(monkeypatch, installed, settings) != plain_directory
    assert tf_stopgrad_build._wheel_fingerprint(requested) != plain_fingerprint


GCC_SWITCHES_SECTION = ".GCC.command.line"  # what -frecord-gcc-switches adds; strip keeps it


def elf_sections(library: bytes) -> set[str]:
    """The ELF section names of a shared ``library``."""
    from elftools.elf.elffile import ELFFile

    return {section.name for section in ELFFile(io.BytesIO(library)).iter_sections()}


def op_library_of(wheel: Path) -> bytes:
    """The one op library in ``wheel``."""
    with zipfile.ZipFile(wheel) as archive:
        record = json.loads(archive.read("tf_stopgrad/_build_record.json"))
        (library,) = record["libraries"].values()
        return archive.read(f"tf_stopgrad/{library['file']}")


@pytest.mark.slow
@pytest.mark.compiler
def test_a_rebuild_with_another_cxxflags_compiles_with_it(tmp_path):
    import tf_stopgrad

    # The installed op library, built without the flag, is the control.
    assert GCC_SWITCHES_SECTION not in elf_sections(Path(tf_stopgrad.library_path()).read_bytes())
    source = copy_of_checkout(tmp_path / "checkout")
    env = {name: value for name, value in os.environ.items() if not passes_user_flags(name)}
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(tmp_path / "dist"),
         str(source)],
        env=dict(env, PIP_DISABLE_PIP_VERSION_CHECK="1", CXXFLAGS="-frecord-gcc-switches"),
        capture_output=True, text=True, timeout=REBUILD_TIMEOUT_S,
    )  # fmt: skip

    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").glob("tf_stopgrad-*.whl")
    assert GCC_SWITCHES_SECTION in elf_sections(op_library_of(wheel))


def test_only_the_most_recently_used_build_directories_are_kept(monkeypatch, tmp_path):
    import fcntl

    import tf_stopgrad_build

    monkeypatch.setattr(tf_stopgrad_build, "BUILD_ROOT", tmp_path)
    kept = tf_stopgrad_build.KEPT_BUILD_DIRS
    names = [f"tf2.{minor}.0-000000000000" for minor in range(kept + 3)]  # oldest first
    (tmp_path / "not-a-build").mkdir()
    for age, name in enumerate(reversed(names)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "object.o").write_bytes(b"")
        os.utime(tmp_path / name, (1_000_000 - age, 1_000_000 - age))
    held_by_another_build = os.open(tmp_path / names[0], os.O_RDONLY)  # the oldest
    try:
        fcntl.flock(held_by_another_build, fcntl.LOCK_EX)
        tf_stopgrad_build._delete_old_build_dirs()
    finally:
        os.close(held_by_another_build)

    remaining = sorted(path.name for path in tmp_path.iterdir() if path.is_dir())
    assert remaining == sorted(["not-a-build", names[0], *names[-kept:]])


@pytest.mark.slow
def test_an_unchanged_checkout_reuses_its_last_wheel_and_a_changed_one_does_not(
    monkeypatch, tmp_path
):
    import tf_stopgrad_build

    checkout = copy_of_checkout(tmp_path / "checkout")
    monkeypatch.setattr(tf_stopgrad_build, "SOURCE_DIR", checkout)
    build_dir, first, second = (tmp_path / name for name in ("build", "dist1", "dist2"))
    for directory in (build_dir, first, second):
        directory.mkdir()
    wheel = first / "tf_stopgrad-0.0.0-py3-none-linux_x86_64.whl"
    wheel.write_bytes(b"a wheel")
    no_flags = tf_stopgrad_build._requested_flags({})
    tf_stopgrad_build._keep_for_reuse(
        build_dir, tf_stopgrad_build._wheel_fingerprint(no_flags), wheel
    )

    reused = tf_stopgrad_build._reuse_previous_wheel(
        build_dir, tf_stopgrad_build._wheel_fingerprint(no_flags), second
    )
    assert reused == wheel.name
    assert (second / wheel.name).read_bytes() == b"a wheel"

    with open(checkout / "cc" / "kernels.cc", "a") as source:
        source.write("// edited\n")
    assert (
        tf_stopgrad_build._reuse_previous_wheel(
            build_dir, tf_stopgrad_build._wheel_fingerprint(no_flags), second
        )
        is None
    )


def hidden_compilers(tmp_path: Path) -> dict[str, str]:
    """An environment whose PATH finds compilers and CMake that fail, before the real ones."""
    fake_bin = tmp_path / "fake_bin"
    fake_bin.mkdir()
    for tool in ("cc", "c++", "gcc", "g++", "clang", "clang++", "cmake"):
        (fake_bin / tool).write_text('#!/bin/sh\necho "$0: no compiler here" >&2\nexit 1\n')
        (fake_bin / tool).chmod(0o755)
    env = dict(os.environ, PATH=f"{fake_bin}{os.pathsep}{os.environ['PATH']}",
               PIP_DISABLE_PIP_VERSION_CHECK="1")  # fmt: skip
    env.pop("CXX", None)
    return env


@pytest.mark.parametrize(
    ("cxx", "found"),
    [("g++", True), ("env g++", True), ("env CCACHE_DISABLE=1 g++", True),
     ("env no-such-compiler", False), ("no-such-compiler g++", False)],
)  # fmt: skip
@pytest.mark.slow
@pytest.mark.compiler
def test_a_cxx_of_several_words_is_probed_as_cmake_runs_it(cxx, found, monkeypatch):
    import tf_stopgrad_build

    monkeypatch.setenv("CXX", cxx)
    if found:
        command = tf_stopgrad_build._working_cxx_compiler()
        assert [Path(command[0]).name, *command[1:]] == cxx.split()
    else:
        with pytest.raises(SystemExit, match=rf"Tried: {re.escape(cxx)} \("):
            tf_stopgrad_build._working_cxx_compiler()


@pytest.mark.slow
@pytest.mark.core
@pytest.mark.compiler
def test_without_a_compiler_pip_install_stops_first_and_says_what_to_install(tmp_path):
    # A fresh environment without TensorFlow: the check must come before pip downloads it.
    # From a copy of the checkout: pip before 21.3 copies the whole source directory first,
    # and what else lies in a working tree (venvs, logs) may change while it copies.
    source = copy_of_checkout(tmp_path / "checkout")
    subprocess.run([sys.executable, "-m", "venv", str(tmp_path / "venv")], check=True)
    installed = subprocess.run(
        [str(tmp_path / "venv" / "bin" / "python"), "-m", "pip", "install", str(source)],
        env=hidden_compilers(tmp_path), capture_output=True, text=True, timeout=600,
    )  # fmt: skip

    output = installed.stdout + installed.stderr
    assert installed.returncode != 0
    assert "tf_stopgrad: building from source needs a C++17 compiler, and none works" in output
    assert "apt-get install g++" in output and "prebuilt wheel" in output
    assert "Collecting tensorflow" not in output, "TensorFlow was fetched before the check"


def install_tensorflow_metadata(python: str, version: str) -> None:
    """Makes ``python`` find a ``tensorflow`` package and distribution at ``version``: only what
    the build backend reads before it refuses a release (the package's place, the distribution's
    metadata). Importing it fails."""
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    package, metadata = Path(site) / "tensorflow", Path(site) / f"tensorflow-{version}.dist-info"
    package.mkdir()
    (package / "__init__.py").write_text('raise ImportError("metadata only")\n')
    metadata.mkdir()
    (metadata / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: tensorflow\nVersion: {version}\n"
    )
    (metadata / "top_level.txt").write_text("tensorflow\n")


@pytest.mark.slow
@pytest.mark.compiler
def test_a_source_build_refuses_tensorflow_older_than_the_supported_range(tmp_path):
    subprocess.run([sys.executable, "-m", "venv", str(tmp_path / "venv")], check=True)
    python = str(tmp_path / "venv" / "bin" / "python")
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1")
    install_tensorflow_metadata(python, f"{TOO_OLD}.1")

    installed = subprocess.run([python, "-m", "pip", "install", str(REPO_ROOT)], env=env,
                               capture_output=True, text=True, timeout=600)  # fmt: skip

    output = " ".join((installed.stdout + installed.stderr).split())
    assert installed.returncode != 0
    assert re.search(rf"tf_stopgrad: this environment has TensorFlow {re.escape(TOO_OLD)}\.\d+, "
                     r"but tf_stopgrad supports TensorFlow "
                     rf"{re.escape(supported_tensorflow.describe())}\. "
                     r"Upgrade TensorFlow first", output), output
    assert f'pip install --upgrade "{supported_tensorflow.requirement()}"' in output
    assert "Building wheel for tf_stopgrad" not in output, "it compiled before refusing"


NEXT_MINOR = f"{OLDEST_MAJOR}.{NEWEST_SUPPORTED_MINOR + 1}"
INSTALLED_TENSORFLOWS = {  # what a user may have installed: distribution, version
    "newest": ("tensorflow", f"{OLDEST_MAJOR}.{NEWEST_SUPPORTED_MINOR}.1"),
    "oldest, CPU only": ("tensorflow-cpu", f"{OLDEST_MAJOR}.{OLDEST_MINOR}.0"),
    "next minor's candidate": ("tensorflow", f"{NEXT_MINOR}.0rc0"),
    "nightly": ("tf-nightly", f"{OLDEST_MAJOR}.{NEWEST_SUPPORTED_MINOR + 2}.0.dev20261026"),
}


@pytest.mark.parametrize(("distribution", "version"), INSTALLED_TENSORFLOWS.values(),
                         ids=INSTALLED_TENSORFLOWS)  # fmt: skip
def test_a_source_build_requires_nothing_that_would_make_pip_replace_the_installed_tensorflow(
    distribution, version
):
    import tf_stopgrad_build
    from packaging.requirements import Requirement

    requirement = tf_stopgrad_build._requirement_keeping(distribution, version)

    if distribution != "tensorflow":  # naming tensorflow would install it over theirs
        assert requirement == ""
        return
    if requirement is None:  # pyproject.toml's range, as the sdist and release wheels say
        requirement = supported_tensorflow.requirement()
    required = Requirement(requirement)
    assert required.name == "tensorflow"
    # pip keeps an installed pre-release that a requirement's range holds, as here.
    assert required.specifier.contains(version, prereleases=True)
    assert required.specifier.contains(f"{OLDEST_MAJOR}.{OLDEST_MINOR}.0")
    assert not required.specifier.contains(TOO_OLD + ".0")
    newest_taken = max(Version(version).release[:2], (OLDEST_MAJOR, NEWEST_SUPPORTED_MINOR))
    assert not required.specifier.contains(f"{newest_taken[0]}.{newest_taken[1] + 1}.0")


@pytest.mark.parametrize("requirement", ["tensorflow>=2.15,<2.24", ""])
def test_a_wheel_given_another_tensorflow_requirement_keeps_its_record_true(requirement, tmp_path):
    import tf_stopgrad_build

    metadata = (b"Metadata-Version: 2.1\nName: x\nRequires-Dist: tensorflow<2.22,>=2.15\n"
                b"Requires-Dist: tensorflow-text; extra == 'text'\n")
    wheel = tmp_path / "x-1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("x/__init__.py", "")
        archive.writestr("x-1.dist-info/METADATA", metadata)
        archive.writestr("x-1.dist-info/RECORD", "x/__init__.py,,0\nx-1.dist-info/METADATA,"
                         "sha256=stale,1\nx-1.dist-info/RECORD,,\n")  # fmt: skip

    tf_stopgrad_build._require_in_wheel(wheel, requirement)

    with zipfile.ZipFile(wheel) as archive:
        rewritten = archive.read("x-1.dist-info/METADATA")
        record = archive.read("x-1.dist-info/RECORD").decode().splitlines()
        assert archive.namelist() == ["x/__init__.py", "x-1.dist-info/METADATA",
                                      "x-1.dist-info/RECORD"]  # fmt: skip
    replaced = f"Requires-Dist: {requirement}\n" if requirement else ""
    assert rewritten == metadata.replace(b"Requires-Dist: tensorflow<2.22,>=2.15\n",
                                         replaced.encode())  # fmt: skip
    # PEP 376's RECORD: urlsafe base64 of the SHA-256, unpadded, then the size.
    digest = base64.urlsafe_b64encode(hashlib.sha256(rewritten).digest()).rstrip(b"=").decode()
    assert record == ["x/__init__.py,,0",
                      f"x-1.dist-info/METADATA,sha256={digest},{len(rewritten)}",
                      "x-1.dist-info/RECORD,,"]  # fmt: skip


@pytest.mark.slow
@pytest.mark.compiler
def test_two_builds_at_once_from_a_checkout_whose_path_has_a_space_quote_and_dollar(tmp_path):
    # Not a double quote or ${...}: CMake's own install script cannot take them (BUILD_NOTES).
    source = copy_of_checkout(tmp_path / "it's a checkout $HOME")
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1")
    builds = [
        subprocess.Popen(
            [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(tmp_path / f"dist{i}"),
             str(source)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        for i in range(2)
    ]
    for build in builds:
        output, _ = build.communicate(timeout=REBUILD_TIMEOUT_S)
        assert build.returncode == 0, output[-3000:]
    wheels = [next((tmp_path / f"dist{i}").glob("tf_stopgrad-*.whl")) for i in range(2)]
    with zipfile.ZipFile(wheels[0]) as archive:
        record = json.loads(archive.read("tf_stopgrad/_build_record.json"))
    (library,) = record["libraries"].values()
    assert Version(library["tf_version"]) == Version(tf.__version__)
    assert wheels[0].read_bytes() == wheels[1].read_bytes(), "two builds of one checkout differ"


def copy_of_checkout(destination: Path) -> Path:
    """The repository's tracked files, copied to ``destination``."""
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO_ROOT, capture_output=True,
                             text=True, check=True).stdout.splitlines()  # fmt: skip
    for name in tracked:
        (destination / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO_ROOT / name, destination / name)
    return destination


def lowest_scikit_build_core() -> str:
    """The lowest scikit-build-core the build allows (pyproject's build-system.requires)."""
    requires = (REPO_ROOT / "pyproject.toml").read_text()
    return re.search(r'requires = \["scikit-build-core>=([\d.]+)"\]', requires).group(1)


@pytest.mark.slow
@pytest.mark.compiler
def test_editable_install_with_the_lowest_scikit_build_core_then_pytest_and_edits(tmp_path):
    # Without build isolation, the build uses the environment's scikit-build-core: the lowest
    # one pyproject.toml allows. Its editable finder must serve the build record too.
    source = copy_of_checkout(tmp_path / "checkout")
    python, env = layered_venv(tmp_path / "venv")
    lowest = lowest_scikit_build_core()
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", f"scikit-build-core=={lowest}"],
                   env=env, check=True, timeout=REBUILD_TIMEOUT_S)  # fmt: skip
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps",
                    "--no-build-isolation", "-e", "."],
                   cwd=source, env=env, check=True, timeout=REBUILD_TIMEOUT_S)  # fmt: skip
    used = subprocess.run(
        [str(python), "-c", "import scikit_build_core; print(scikit_build_core.__version__)"],
        env=env, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    assert Version(used) == Version(lowest)

    tested = subprocess.run(
        [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_forward.py"],
        cwd=source, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert tested.returncode == 0, tested.stdout[-3000:] + tested.stderr[-3000:]
    assert " passed" in tested.stdout.splitlines()[-1]

    with open(source / "tf_stopgrad" / "__init__.py", "a") as init:
        init.write("\nEDITED_IN_THE_CHECKOUT = True\n")
    edited = subprocess.run(
        [str(python), "-c", "import tf_stopgrad as t; print(t.__file__, t.EDITED_IN_THE_CHECKOUT)"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert edited.returncode == 0, edited.stderr[-3000:]
    assert edited.stdout.split() == [str(source / "tf_stopgrad" / "__init__.py"), "True"]


# --- building for another architecture ------------------------------------------------------

OTHER_ARCHITECTURE = {"x86_64": "aarch64", "aarch64": "x86_64"}.get(platform.machine(), "aarch64")


def test_an_architecture_tensorflow_has_no_wheels_for_is_refused():
    import tf_stopgrad_build

    with pytest.raises(SystemExit, match=r"-C arch='riscv64'.*x86_64, aarch64"):
        tf_stopgrad_build._Plan({"arch": "riscv64", "tensorflow": "all"})


def test_a_cross_build_must_name_its_releases():
    import tf_stopgrad_build

    with pytest.raises(SystemExit, match=rf"name its releases too.*-C tensorflow=2\.\d+-2\.\d+ "
                                         rf"-C arch={OTHER_ARCHITECTURE}"):  # fmt: skip
        tf_stopgrad_build._Plan({"arch": OTHER_ARCHITECTURE})


def test_without_a_cross_compiler_the_build_says_which_to_install(monkeypatch, tmp_path):
    import tf_stopgrad_build

    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    package = f"g\\+\\+-{OTHER_ARCHITECTURE.replace('_', '-')}-linux-gnu"
    with pytest.raises(SystemExit, match=rf"C\+\+17 cross compiler.*apt-get install {package}"):
        tf_stopgrad_build._Plan({"arch": OTHER_ARCHITECTURE, "tensorflow": "all"})


def test_a_shell_wheel_leads_to_the_distribution_that_holds_tensorflow(tmp_path):
    # TensorFlow 2.15's aarch64 `tensorflow` wheel holds no TensorFlow, only these lines.
    shell = tmp_path / "tensorflow-2.15.1-cp311-cp311-manylinux2014_aarch64.whl"
    with zipfile.ZipFile(shell, "w") as archive:
        archive.writestr("tensorflow-2.15.1.dist-info/METADATA", "\n".join([
            "Name: tensorflow",
            "Version: 2.15.1",
            "Requires-Dist: tensorflow-macos ==2.15.1 ; "
            'platform_system == "Darwin" and platform_machine == "arm64"',
            "Requires-Dist: tensorflow-cpu-aws ==2.15.1 ; "
            'platform_system == "Linux" and (platform_machine == "arm64" or '
            'platform_machine == "aarch64")',
            'Requires-Dist: tensorflow-intel ==2.15.1 ; platform_system == "Windows"',
            "Requires-Dist: numpy <2.0.0,>=1.23.5",
        ]))  # fmt: skip

    assert not tensorflow_wheels._holds_libraries(shell)
    assert tensorflow_wheels._holding_distribution(shell, "aarch64") == "tensorflow-cpu-aws==2.15.1"
    with pytest.raises(SystemExit, match="names no distribution that does on Linux x86_64"):
        tensorflow_wheels._holding_distribution(shell, "x86_64")


def fake_pip_download(tmp_path: Path, name: str, content: bytes) -> list[str]:
    """A pip whose download writes ``content`` as the wheel ``name`` into its --dest."""
    script = tmp_path / "pip_download.py"
    script.write_text("import pathlib, sys\n"
                      "dest = pathlib.Path(sys.argv[sys.argv.index('--dest') + 1])\n"
                      f"(dest / {name!r}).write_bytes({content!r})\n")  # fmt: skip
    return [sys.executable, str(script)]


RECORDED = REPO_ROOT / "build_backend" / "tensorflow_wheels.sha256"


def test_the_wheels_lane_s_tensorflow_wheels_each_have_a_recorded_sha256():
    """The wheels lane (bookworm's Python 3.11) downloads, for each supported minor, its newest
    patch release's wheel for both architectures (2.15's aarch64 one a shell that leads to
    tensorflow-cpu-aws): each is in the table, with a SHA-256, which CI's build requires (the
    newest minor's too: CONTRIBUTING.md, "Adding a TensorFlow minor")."""
    recorded = dict(line.split()[::-1] for line in RECORDED.read_text().splitlines())
    assert all(re.fullmatch(r"[0-9a-f]{64}", digest) for digest in recorded.values())
    for major, minor in supported_tensorflow.minors():
        for architecture in ("x86_64", "aarch64"):
            wheel = rf"tensorflow-{major}\.{minor}\.\d+-cp311-cp311-manylinux\S*_{architecture}"
            wheel += r"\.whl"
            assert [name for name in recorded if re.fullmatch(wheel, name)], (minor, architecture)
    assert any(name.startswith("tensorflow_cpu_aws-2.15.") for name in recorded)


@pytest.mark.slow
@pytest.mark.parametrize("dated", [False, True])
def test_a_downloaded_tensorflow_wheel_must_have_its_recorded_sha256(
    tmp_path, monkeypatch, capfd, dated
):
    name, digest = RECORDED.read_text().splitlines()[0].split()[::-1]
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000") if dated else monkeypatch.delenv(
        "SOURCE_DATE_EPOCH", raising=False)  # fmt: skip
    monkeypatch.delenv("CI", raising=False)
    (tmp_path / "dest").mkdir()
    monkeypatch.setattr(tensorflow_wheels, "_PIP", fake_pip_download(tmp_path, name, b"re-upload"))
    with pytest.raises(SystemExit, match=rf"{re.escape(name)} has the SHA-256 [0-9a-f]{{64}}, "
                       rf"not {digest} as build_backend/tensorflow_wheels\.sha256 records"):
        tensorflow_wheels._download("tensorflow==2.15.*", "x86_64", tmp_path / "dest")

    # A wheel the table does not name (a new minor's, a new patch release's) is no re-upload:
    # built against, with a note that names the command that records it; under CI, whose builds
    # are released, it fails, naming that command.
    unrecorded = "tensorflow-2.99.0-cp311-cp311-manylinux_2_27_x86_64.whl"
    (tmp_path / "other").mkdir()
    monkeypatch.setattr(tensorflow_wheels, "_PIP", fake_pip_download(tmp_path, unrecorded, b"new"))
    downloaded = tensorflow_wheels._download("tensorflow", "x86_64", tmp_path / "other")
    assert downloaded == tmp_path / "other" / unrecorded
    record = (f"echo '{hashlib.sha256(b'new').hexdigest()}  {unrecorded}' "
              ">>build_backend/tensorflow_wheels.sha256")  # fmt: skip
    assert (f"{unrecorded} is not in build_backend/tensorflow_wheels.sha256: its bytes are not "
            f"checked. Once PyPI's page of the release shows its SHA-256, record it: {record}"
            ) in capfd.readouterr().err  # fmt: skip
    monkeypatch.setenv("CI", "true")
    (tmp_path / "under-ci").mkdir()
    with pytest.raises(SystemExit, match=re.escape(f"{unrecorded} is not in")) as failed:
        tensorflow_wheels._download("tensorflow", "x86_64", tmp_path / "under-ci")
    assert str(failed.value).endswith(record)
    # The command records the wheel: the table then names it, with the digest the build checks.
    table = tmp_path / "tensorflow_wheels.sha256"
    shutil.copy(RECORDED, table)
    subprocess.run(record.replace("build_backend/tensorflow_wheels.sha256", str(table)), shell=True,
                   check=True)  # fmt: skip
    monkeypatch.setattr(tensorflow_wheels, "_WHEEL_SHA256", table)
    (tmp_path / "recorded").mkdir()
    assert tensorflow_wheels._download("tensorflow", "x86_64", tmp_path / "recorded").name == (
        unrecorded)  # fmt: skip
