"""PEP 517 backend: scikit-build-core, told which TensorFlow releases to build against.

``pip install .`` builds one op library, for the TensorFlow of the environment being installed
into (the installing interpreter says which, as pip's isolation hides it); without one there,
for the release pip then installs (the newest supported with a wheel for that Python), unpacked
from its wheel. ``pip wheel . -C tensorflow=all [-C arch=aarch64]`` builds one per supported
minor, each against that release's wheel, into one ``py3-none`` wheel tagged with the manylinux
platform ``auditwheel`` measures. Both first check that a C++17 compiler works and that the
TensorFlow found is supported.
BUILD_NOTES.md says why each step is as it is.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import staging
import supported_tensorflow
import tensorflow_config
import tensorflow_wheels
from packaging.version import Version
from scikit_build_core import build as _skbuild

if sys.version_info >= (3, 11):
    from tomllib import load as _toml_load
else:  # scikit-build-core requires tomli there
    from tomli import load as _toml_load

SOURCE_DIR = Path(__file__).resolve().parent.parent
BUILD_ROOT = SOURCE_DIR / "build"
# Build directories kept in BUILD_ROOT, the most recently used first; older ones are deleted.
KEPT_BUILD_DIRS = 4
RELEASES_SETTING = "tensorflow"
ARCHITECTURE_SETTING = "arch"
ARCHITECTURES = ("x86_64", "aarch64")

# The name and version of the distribution that provides the `tensorflow` package, whatever its
# name (tensorflow, tensorflow-cpu, tf-nightly), and the package's directory, without importing
# it (an import takes seconds).
_PROBE = (
    "import importlib.metadata as m, importlib.util as u, json;"
    "spec = u.find_spec('tensorflow');"
    "names = getattr(m, 'packages_distributions', dict)().get('tensorflow') or ['tensorflow'];"
    "print(json.dumps(spec and [names[0], m.version(names[0]),"
    " spec.submodule_search_locations[0]]))"
)


class _Plan:
    """What one build compiles: the TensorFlow releases, and how to describe each to CMake."""

    def __init__(self, config_settings: dict[str, Any] | None):
        if not sys.platform.startswith("linux"):
            raise _fail(
                f"tf_stopgrad builds on Linux only (x86_64 and aarch64); this is "
                f"{sys.platform}. macOS and Windows builds are not supported yet."
            )
        settings = dict(config_settings or {})
        requested = settings.pop(RELEASES_SETTING, None)
        host = tensorflow_wheels.host_architecture()
        self.architecture = settings.pop(ARCHITECTURE_SETTING, None) or host
        self.cross = self.architecture != host
        self.skbuild_settings = settings
        self.portable = requested is not None
        if self.architecture not in ARCHITECTURES:
            raise _fail(
                f"-C {ARCHITECTURE_SETTING}={self.architecture!r}: the architectures "
                f"TensorFlow publishes Linux wheels for are {', '.join(ARCHITECTURES)}"
            )
        if self.cross and not self.portable:
            raise _fail(
                f"-C {ARCHITECTURE_SETTING}={self.architecture} builds the prebuilt wheel "
                f"for another machine: name its releases too, e.g. pip wheel . "
                f"-C {RELEASES_SETTING}={supported_tensorflow.describe()} "
                f"-C {ARCHITECTURE_SETTING}={self.architecture}"
            )
        self.compiler_command = _working_cxx_compiler(self.architecture if self.cross else None)
        self.compiler = shlex.join(self.compiler_command)
        # What the wheel requires of TensorFlow, where it differs from pyproject.toml's.
        self.tensorflow_requirement: str | None = None
        if self.portable:
            self.minors = _parse_releases(requested)
            self.installed_python: tuple[str, ...] | None = None
            self.requirements = ["auditwheel>=6", "wheel>=0.40"]
            return
        self.requirements = []
        target = _target_python()
        installed = _installed_tensorflow(target)
        if installed is not None:
            distribution, version, _ = installed
            self.tensorflow_requirement = _requirement_keeping(distribution, version)
            _check_supported(version, self.tensorflow_requirement)
            self.installed_python = target
        elif installable := tensorflow_wheels.installable_minor(_python_version(target)):
            self.minors = [installable]  # the release pip installs next, unpacked from its wheel
            self.installed_python = None
        else:  # the front end installs it into the build environment, for this Python
            self.installed_python = (sys.executable,)
            self.requirements = [supported_tensorflow.requirement()]

    def describe_releases(self) -> list[dict]:
        if self.installed_python is not None:
            _, version, package_dir = _installed_tensorflow(self.installed_python)
            return [tensorflow_config.describe_unpacked(Path(package_dir), version)]
        releases = tensorflow_wheels.unpacked_releases(self.minors, self.architecture)
        return [tensorflow_config.describe_unpacked(*release) for release in releases]


@functools.cache
def _plan(config_settings_json: str) -> _Plan:
    return _Plan(json.loads(config_settings_json))


def _plan_for(config_settings: dict[str, Any] | None) -> _Plan:
    return _plan(json.dumps(config_settings or {}, sort_keys=True))


def _fail(message: str) -> SystemExit:
    """pip shows a backend's stderr; a SystemExit prints just the message, no traceback."""
    return SystemExit(f"\ntf_stopgrad: {message}\n")


def _working_cxx_compiler(cross_architecture: str | None = None) -> list[str]:
    """The first C++ compiler command that compiles and links a C++17 program: $CXX, or c++, g++,
    clang++ (for another architecture: its GNU cross compiler, e.g. aarch64-linux-gnu-g++). $CXX may
    hold several words (``ccache g++``): CMake, which reads $CXX itself, runs the first with the
    others as its first arguments, and so does the probe."""
    if os.environ.get("CXX"):
        candidates = [os.environ["CXX"]]
    elif cross_architecture:
        candidates = [f"{cross_architecture}-linux-gnu-g++"]
    else:
        candidates = ["c++", "g++", "clang++"]
    tried = []
    for candidate in candidates:
        program, *arguments = shlex.split(candidate)
        path = shutil.which(program)
        if path is None:
            tried.append(f"{candidate} ({program} not found)")
            continue
        command = [path, *arguments]
        with tempfile.TemporaryDirectory() as scratch:
            try:
                compiled = subprocess.run(
                    [*command, "-std=c++17", "-x", "c++", "-", "-o", f"{scratch}/probe"],
                    input="#include <string_view>\nint main() { return 0; }\n",
                    capture_output=True, text=True, timeout=120,
                )  # fmt: skip
                if compiled.returncode == 0:
                    return command
            except (OSError, subprocess.TimeoutExpired):
                pass
        tried.append(f"{candidate} (cannot compile C++17)")
    if cross_architecture:
        raise _fail(
            f"building for {cross_architecture} on this {tensorflow_wheels.host_architecture()} "
            f"machine needs a C++17 cross compiler, and none works here. Tried: "
            f"{', '.join(tried)}. Install one (Debian/Ubuntu: apt-get install "
            f"g++-{cross_architecture.replace('_', '-')}-linux-gnu), or set CXX to one, then run "
            "pip again."
        )
    raise _fail(
        "building from source needs a C++17 compiler, and none works here. Tried: "
        f"{', '.join(tried)}. Install one (Debian/Ubuntu: apt-get install g++; Fedora/RHEL: dnf "
        "install gcc-c++), or set CXX to one, then run pip again. Or install the prebuilt wheel, "
        "which needs no compiler: pip install tf_stopgrad-*.whl (see the README)."
    )


def _parse_releases(requested: str) -> list[tuple[int, int]]:
    """``all`` (every supported minor release), or minors, ``2.18``, spans, ``2.15-2.18``, or
    both, ``2.15,2.17-2.18``: each a supported minor release."""
    supported = supported_tensorflow.minors()
    if requested == "all":
        return supported
    wanted: list[tuple[int, int]] = []
    for part in requested.split(","):
        bounds = re.fullmatch(r"\s*(\d+)\.(\d+)\s*(?:-\s*(\d+)\.(\d+)\s*)?", part)
        if bounds is None:
            raise _fail(f"-C {RELEASES_SETTING}={requested!r}: write releases as all, as a "
                        f"span ({supported_tensorflow.describe()}), or as minors and spans "
                        "joined by commas")  # fmt: skip
        major, low, high_major, high = bounds.groups()
        first, last = (int(major), int(low)), (int(high_major or major), int(high or low))
        wanted += [minor for minor in supported if first <= minor <= last]
        if first not in supported or last not in supported:
            raise _fail(f"-C {RELEASES_SETTING}={requested!r} asks for releases outside the "
                        f"supported {supported_tensorflow.describe()}")  # fmt: skip
    return sorted(set(wanted))


def _check_supported(version: str, requirement: str | None) -> None:
    minor = Version(version).release[:2]
    supported = supported_tensorflow.minors()
    span = supported_tensorflow.describe()
    if minor < supported[0]:
        raise _fail(
            f"this environment has TensorFlow {version}, but tf_stopgrad supports TensorFlow "
            f"{span}. Upgrade TensorFlow first, then install tf_stopgrad again:\n"
            f'    pip install --upgrade "{supported_tensorflow.requirement()}"'
        )
    if minor > supported[-1]:
        print(f"tf_stopgrad: warning: TensorFlow {version} is newer than the releases "
              f"tf_stopgrad is tested with ({span}); building against it, and keeping it: the "
              f"wheel requires {requirement or 'no other TensorFlow'}. python -m tf_stopgrad "
              "says so too.",
              file=sys.stderr)  # fmt: skip


def _requirement_keeping(distribution: str, version: str) -> str | None:
    """What a wheel built against an installed TensorFlow requires of TensorFlow, so that pip
    keeps that TensorFlow, where it is not pyproject.toml's range (None): for ``tensorflow``
    newer than the range, the range widened to its minor (a release candidate of the next minor
    included); for another distribution (tensorflow-cpu, tf-nightly), nothing, "" (a
    requirement names one distribution, and ``tensorflow`` would be installed over theirs).
    BUILD_NOTES.md, "A TensorFlow newer than the range", says why."""
    if distribution != "tensorflow":
        return ""
    (major, oldest), *_, (_, newest) = supported_tensorflow.minors()
    if Version(version).release[:2] <= (major, newest):
        return None  # the build reuses a wheel made before this TensorFlow was installed
    return f"tensorflow>={major}.{oldest},<{major}.{Version(version).release[1] + 1}"


@functools.cache
def _installed_tensorflow(python: tuple[str, ...]) -> tuple[str, str, str] | None:
    """The distribution, version and package directory of the TensorFlow that ``python``
    imports, or None."""
    try:
        out = subprocess.run([*python, "-c", _PROBE], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return json.loads(out.stdout.strip().splitlines()[-1])


def _python_version(python: tuple[str, ...]) -> str:
    probe = [*python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"]
    return subprocess.run(probe, capture_output=True, text=True, check=True).stdout.strip()


def _target_python() -> tuple[str, ...]:
    """The interpreter of the environment the wheel is being installed into."""
    explicit = os.environ.get("TF_STOPGRAD_PYTHON")
    return (explicit,) if explicit else (sys.executable, "-E")


@contextlib.contextmanager
def _build_settings(plan: _Plan):
    """scikit-build-core settings for ``plan``, and the build directory of its own they name.

    The directory is named after what the build compiles against: each TensorFlow's version,
    compile options and libraries (by size), the compiler, and the flags the user asked for
    (``_requested_flags``). So objects compiled against one TensorFlow, or with other flags,
    are never reused for another, while the same TensorFlow found elsewhere (pip's isolated
    build environment, then the venv) reuses the directory. It is locked for the build, so
    that two builds from one checkout at once take turns instead of corrupting each other.
    Only the ``KEPT_BUILD_DIRS`` most recently used directories are kept.
    """
    releases = plan.describe_releases()
    identity = [
        [release["version"], release["compile_options"],
         [os.path.getsize(library) for library in release["libraries"]]]
        for release in releases
    ]  # fmt: skip
    inputs = [identity, plan.compiler, _requested_flags(plan.skbuild_settings),
              plan.tensorflow_requirement]  # fmt: skip
    key = hashlib.sha256(json.dumps(inputs).encode()).hexdigest()[:12]
    versions = "+".join(release["version"] for release in releases)
    build_dir = BUILD_ROOT / f"tf{versions}-{plan.architecture}-{key}"
    build_dir.mkdir(parents=True, exist_ok=True)
    lock = staging.lock(build_dir, wait=True)
    try:
        os.utime(build_dir)  # the most recently used
        _delete_old_build_dirs()
        releases_file = build_dir / "tensorflow_releases.json"
        releases_file.write_text(json.dumps(releases, indent=1, sort_keys=True))
        settings = dict(plan.skbuild_settings)
        # scikit-build-core expands {wheel_tag}-style fields in it.
        settings["build-dir"] = str(build_dir).replace("{", "{{").replace("}", "}}")
        settings["cmake.define.TF_STOPGRAD_RELEASES"] = str(releases_file)
        settings["cmake.define.TF_STOPGRAD_TESTED"] = supported_tensorflow.describe()
        if len(plan.compiler_command) == 1:  # else CMake reads $CXX itself, words and all
            settings["cmake.define.CMAKE_CXX_COMPILER"] = plan.compiler_command[0]
        if plan.cross:  # Naming the target system is what tells CMake it cross-compiles.
            settings["cmake.define.CMAKE_SYSTEM_NAME"] = "Linux"
            settings["cmake.define.CMAKE_SYSTEM_PROCESSOR"] = plan.architecture
        yield settings, build_dir
    finally:
        if lock is not None:
            os.close(lock)


def _requested_flags(skbuild_settings: dict[str, Any]) -> dict[str, Any]:
    """What the user asked the compiler and CMake for: the environment variables that change
    what is compiled (CMake initializes CMAKE_CXX_FLAGS from CXXFLAGS and its linker flags from
    LDFLAGS; scikit-build-core adds CMAKE_ARGS, and reads any of its cmake.* settings from
    SKBUILD_CMAKE_*), and every ``-C cmake.*`` setting (``cmake.args``, ``cmake.build-type``,
    ``cmake.define.*``). The build directory's name and the reuse of a previous wheel both
    depend on it, so a build with other flags compiles again."""
    environment = {
        name: value
        for name, value in sorted(os.environ.items())
        if name in ("CXXFLAGS", "LDFLAGS", "CMAKE_ARGS") or name.startswith("SKBUILD_CMAKE_")
    }
    settings = {
        name: value for name, value in sorted(skbuild_settings.items()) if name.startswith("cmake.")
    }
    return {"environment": environment, "settings": settings}


def _delete_old_build_dirs() -> None:
    """Deletes all but the ``KEPT_BUILD_DIRS`` most recently used build directories (each build
    touches its own), skipping any that another build holds."""
    build_dirs = [path for path in BUILD_ROOT.glob("tf*-*") if path.is_dir()]
    build_dirs.sort(key=lambda path: -path.stat().st_mtime)
    for build_dir in build_dirs[KEPT_BUILD_DIRS:]:
        staging.remove_unless_locked(build_dir)


# --- reusing an identical build ----------------------------------------------------------

# What goes into a wheel besides the build directory's inputs: the metadata files, the files
# that CMake compiles and installs, and the Python packages (pyproject's wheel.packages).
_WHEEL_SOURCES = ("pyproject.toml", "README.md", "LICENSE", "CMakeLists.txt", "cc", "cmake",
                  "build_backend")  # fmt: skip
_PREVIOUS_WHEEL = "previous-wheel"


def _wheel_fingerprint(requested_flags: dict[str, Any]) -> str:
    """A hash of every file a wheel is made from and of the flags the user asked for
    (``_requested_flags``), so that an unchanged checkout built the same way is not compiled
    again (``pip install .`` then ``pip install ".[test,examples]"``)."""
    with open(SOURCE_DIR / "pyproject.toml", "rb") as file:
        packages = _toml_load(file)["tool"]["scikit-build"]["wheel"]["packages"]
    digest = hashlib.sha256(json.dumps(requested_flags, sort_keys=True).encode() + b"\0")
    for top in sorted({*_WHEEL_SOURCES, *packages}):
        path = SOURCE_DIR / top
        files = [path] if path.is_file() else sorted(path.rglob("*"))
        for file in files:
            if file.is_file() and "__pycache__" not in file.parts:
                digest.update(str(file.relative_to(SOURCE_DIR)).encode() + b"\0")
                digest.update(file.read_bytes() + b"\0")
    return digest.hexdigest()


def _reuse_previous_wheel(build_dir: Path, sources: str, wheel_directory: Path) -> str | None:
    """The name of the wheel this build directory last made, copied to ``wheel_directory``,
    if it was made from the same sources; else None."""
    previous = build_dir / _PREVIOUS_WHEEL
    wheels = list(previous.glob("*.whl"))
    fingerprint = previous / "inputs.sha256"
    if len(wheels) != 1 or not fingerprint.is_file() or fingerprint.read_text().strip() != sources:
        return None
    shutil.copy2(wheels[0], wheel_directory / wheels[0].name)
    print(f"tf_stopgrad: reusing the build of {wheels[0].name} in {build_dir}: the sources, "
          "the TensorFlow it was built against, the compiler and the flags are unchanged",
          file=sys.stderr)  # fmt: skip
    return wheels[0].name


def _keep_for_reuse(build_dir: Path, sources: str, wheel: Path) -> None:
    previous = build_dir / _PREVIOUS_WHEEL
    shutil.rmtree(previous, ignore_errors=True)
    previous.mkdir()
    shutil.copy2(wheel, previous / wheel.name)
    (previous / "inputs.sha256").write_text(sources + "\n")


# --- PEP 517 hooks -------------------------------------------------------------------------

# An sdist compiles nothing, so it needs no plan: scikit-build-core's own hooks.
get_requires_for_build_sdist = _skbuild.get_requires_for_build_sdist
build_sdist = _skbuild.build_sdist


def get_requires_for_build_wheel(config_settings=None):
    plan = _plan_for(config_settings)
    return _skbuild.get_requires_for_build_wheel(plan.skbuild_settings) + plan.requirements


def get_requires_for_build_editable(config_settings=None):
    plan = _plan_for(config_settings)
    return _skbuild.get_requires_for_build_editable(plan.skbuild_settings) + plan.requirements


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    plan = _plan_for(config_settings)
    name = _skbuild.prepare_metadata_for_build_wheel(metadata_directory, plan.skbuild_settings)
    if plan.tensorflow_requirement is not None:
        metadata = Path(metadata_directory) / name / "METADATA"
        metadata.write_bytes(_requiring(metadata.read_bytes(), plan.tensorflow_requirement))
    return name


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    plan = _plan_for(config_settings)
    with _build_settings(plan) as (settings, build_dir):
        sources = _wheel_fingerprint(_requested_flags(plan.skbuild_settings))
        reused = _reuse_previous_wheel(build_dir, sources, Path(wheel_directory))
        if reused is not None:
            return reused
        # Not metadata_directory: scikit-build-core compares it with its own, which
        # prepare_metadata_for_build_wheel may have given another TensorFlow requirement.
        name = _skbuild.build_wheel(wheel_directory, settings)
        wheel = Path(wheel_directory) / name
        if plan.portable:
            name = _retag(wheel, _platform_tag(wheel, plan))
        elif plan.tensorflow_requirement is not None:
            _require_in_wheel(wheel, plan.tensorflow_requirement)
        _keep_for_reuse(build_dir, sources, Path(wheel_directory) / name)
    return name


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    plan = _plan_for(config_settings)
    with _build_settings(plan) as (settings, _):
        name = _skbuild.build_editable(wheel_directory, settings)
    if plan.tensorflow_requirement is not None:
        _require_in_wheel(Path(wheel_directory) / name, plan.tensorflow_requirement)
    return name


def _requiring(metadata: bytes, requirement: str) -> bytes:
    """``metadata`` (a METADATA file) with ``requirement`` in place of pyproject.toml's
    TensorFlow requirement, or without it for ``""``."""
    line = f"Requires-Dist: {requirement}\n".encode() if requirement else b""
    rewritten, count = re.subn(rb"^Requires-Dist: tensorflow[<>=!~ ][^\n]*\n", line, metadata,
                               flags=re.MULTILINE)  # fmt: skip
    if count != 1:
        raise _fail(f"the wheel's METADATA has {count} TensorFlow requirements, not one")
    return rewritten


def _require_in_wheel(wheel: Path, requirement: str) -> None:
    """Rewrites ``wheel``'s METADATA with ``_requiring``, and its line in RECORD. The wheel
    package's unpack and pack would do it too, at the cost of a build requirement for every
    source build."""
    with zipfile.ZipFile(wheel) as source:
        members = [(info, source.read(info)) for info in source.infolist()]
    contents = {info.filename: data for info, data in members}
    metadata = next(name for name in contents if name.endswith(".dist-info/METADATA"))
    contents[metadata] = _requiring(contents[metadata], requirement)
    digest = base64.urlsafe_b64encode(hashlib.sha256(contents[metadata]).digest()).rstrip(b"=")
    record = metadata.removesuffix("METADATA") + "RECORD"
    contents[record] = b"".join(
        f"{metadata},sha256={digest.decode()},{len(contents[metadata])}\n".encode()
        if line.startswith(f"{metadata},".encode()) else line
        for line in contents[record].splitlines(keepends=True)
    )  # fmt: skip
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as target:
        for info, _ in members:
            target.writestr(info, contents[info.filename])


# --- the portable wheel's platform tag ------------------------------------------------------


def _platform_tag(wheel: Path, plan: _Plan) -> str:
    """The manylinux tag of the portable wheel: where each op library in it loads next to the
    TensorFlow it serves.

    A library for TensorFlow 2.N is loaded only next to TensorFlow 2.N, which installs only
    where its own wheel's tag allows. So a library whose symbol versions (``auditwheel show``
    of a copy of the wheel holding only that library) ask no more than its TensorFlow's tag
    constrains nothing: the wheel's tag is the oldest TensorFlow's, raised by any library
    that asks more than its own TensorFlow.
    """
    with zipfile.ZipFile(wheel) as archive:
        record = json.loads(archive.read("tf_stopgrad/_build_record.json"))
    tensorflow_glibc = {
        f"{major}.{minor}": tensorflow_wheels.platform_glibc(
            tensorflow_wheels.unpacked_release(major, minor, plan.architecture)[0]
        )
        for major, minor in plan.minors
    }
    glibc = min(tensorflow_glibc.values())
    with tempfile.TemporaryDirectory() as scratch:
        for minor, library in record["libraries"].items():
            only = _holding_only(wheel, library["file"], plan.architecture, Path(scratch))
            measured = _measured_platform_tag(only)
            print(f"tf_stopgrad: the library for TensorFlow {minor} needs "
                  f"{measured or 'only the oldest manylinux policy for ' + plan.architecture}; "
                  f"TensorFlow {minor} itself needs glibc "
                  f"{'.'.join(map(str, tensorflow_glibc[minor]))}", file=sys.stderr)  # fmt: skip
            if measured and tensorflow_wheels.manylinux_glibc(measured) > tensorflow_glibc[minor]:
                glibc = max(glibc, tensorflow_wheels.manylinux_glibc(measured))
    tag = f"manylinux_{glibc[0]}_{glibc[1]}_{plan.architecture}"
    return f"{tag}.manylinux2014_{plan.architecture}" if glibc == (2, 17) else tag


def _holding_only(wheel: Path, library_file: str, architecture: str, directory: Path) -> Path:
    """A copy of ``wheel`` in ``directory`` without the op libraries but ``library_file``
    (its RECORD less their lines, as auditwheel reads it). The copy's name says
    ``architecture``, which auditwheel reads from it (a cross build is named after the host)."""

    def left_out(path: str) -> bool:
        name = Path(path).name
        return name.startswith("libtf_stopgrad_ops") and name != library_file

    copy = directory / re.sub(r"-linux_\w+\.whl$", f"-linux_{architecture}.whl", wheel.name)
    with zipfile.ZipFile(wheel) as source, zipfile.ZipFile(copy, "w") as target:
        for info in source.infolist():
            if left_out(info.filename):
                continue
            data = source.read(info)
            if info.filename.endswith(".dist-info/RECORD"):
                lines = data.decode().splitlines(keepends=True)
                data = "".join(line for line in lines if not left_out(line.split(",")[0])).encode()
            target.writestr(info, data)
    return copy


def _measured_platform_tag(wheel: Path) -> str | None:
    """The manylinux tag that ``auditwheel show`` says the wheel's symbol versions allow, or
    None where they allow the architecture's oldest policy (auditwheel then names none:
    manylinux2014 on aarch64, whose policies start there).

    The TensorFlow libraries the op libraries link are not on any manylinux policy's list, so
    auditwheel calls the wheel itself ``linux_<arch>``; they come from the tensorflow
    dependency, as for every TensorFlow plugin, and are never bundled.
    """
    shown = subprocess.run([sys.executable, "-m", "auditwheel", "show", str(wheel)],
                           capture_output=True, text=True)  # fmt: skip
    text = " ".join(shown.stdout.split())
    if shown.returncode != 0 or "is consistent with the following platform tag" not in text:
        raise _fail(f"auditwheel could not measure {wheel.name}:\n{shown.stdout}{shown.stderr}")
    tag = re.search(r'constrains the platform tag to "([a-z0-9_]+)"', text)
    return tag.group(1) if tag else None


def _retag(wheel: Path, platform_tag: str) -> str:
    """Gives ``wheel`` the platform tag ``platform_tag`` with the ``wheel`` package's own
    ``wheel tags``, which rewrites the file name, WHEEL's tags and RECORD; returns the new name."""
    retagged = subprocess.run(
        [sys.executable, "-m", "wheel", "tags", "--remove", "--platform-tag", platform_tag,
         str(wheel)],
        capture_output=True, text=True,
    )  # fmt: skip
    if retagged.returncode != 0:
        raise _fail(f"wheel tags could not retag {wheel.name}:\n{retagged.stderr}")
    return retagged.stdout.strip().splitlines()[-1]
