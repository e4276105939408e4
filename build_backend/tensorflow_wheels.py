"""TensorFlow releases as build inputs, taken from their wheels without installing them.

For each minor release and machine architecture (``x86_64``, ``aarch64``), ``pip download``
fetches the newest patch release's wheel for that architecture (with SOURCE_DATE_EPOCH, the
newest uploaded before that time; a release already in the cache is taken as it is), and only
the headers and the two libraries an op library links are unpacked, into a cache directory that
later builds reuse (pip keeps no copy of the wheel: the unpacked release is the cache). A
build for several releases fetches a few at once: side by side, downloads take a fraction of
the time they take one after another.

    $TF_STOPGRAD_CACHE, or $XDG_CACHE_HOME/tf_stopgrad, or ~/.cache/tf_stopgrad
        tensorflow-2.N.P-aarch64/  include/  libtensorflow_framework.so.2  libtensorflow_cc.so.2

Some releases' ``tensorflow`` wheel for an architecture is a shell that only requires the
distribution that holds TensorFlow there (2.15 on aarch64: ``tensorflow-cpu-aws``); the
download follows that requirement.

Delete a release's directory to fetch it again (say, for a new patch release). A cached
pre-release is taken only where pip takes pre-releases (``PIP_PRE``).

Each downloaded wheel must have the SHA-256 that ``tensorflow_wheels.sha256`` (``sha256sum``'s
format) records for its name, so that a file uploaded again under that name cannot change a
build unseen. One it does not name (a new minor's or patch release's) fails a build under CI
(``CI`` set, as for the released wheels), naming the command that records it; elsewhere, a note.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path

import staging
import supported_tensorflow
from packaging.requirements import Requirement
from packaging.version import Version
from tensorflow_config import CC_LIBRARY, FRAMEWORK_LIBRARY

CACHE_VARIABLE = "TF_STOPGRAD_CACHE"
_COMPLETE = ".complete"
# The newest glibc whose manylinux tag a download for another architecture accepts; pip does
# not widen an explicit --platform to older glibc versions, so each one is named.
_NEWEST_GLIBC_MINOR = 40
# Each a wheel of over half a gigabyte in the temporary directory while it is unpacked.
_FETCHES_AT_ONCE = 4
_WHEEL_SHA256 = Path(__file__).with_name("tensorflow_wheels.sha256")


def host_architecture() -> str:
    """The machine architecture as wheel tags spell it: x86_64, aarch64."""
    return platform.machine()


def cache_dir() -> Path:
    if os.environ.get(CACHE_VARIABLE):
        return Path(os.environ[CACHE_VARIABLE])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "tf_stopgrad"


def unpacked_releases(minors: list[tuple[int, int]], architecture: str) -> list[tuple[Path, str]]:
    """unpacked_release() of each of ``minors``, in their order, fetched a few at once."""
    with ThreadPoolExecutor(_FETCHES_AT_ONCE) as pool:
        return list(pool.map(lambda minor: unpacked_release(*minor, architecture), minors))


def unpacked_release(major: int, minor: int, architecture: str) -> tuple[Path, str]:
    """The unpacked newest patch release of TensorFlow ``major.minor`` for ``architecture``,
    and its version."""
    cached = {Version(path.name.split("-")[1]): path for path in
              cache_dir().glob(f"tensorflow-{major}.{minor}.*-{architecture}")
              if (path / _COMPLETE).is_file()}  # fmt: skip
    # A cached pre-release serves only a build that takes pre-releases, never one for the final.
    usable = [version for version in cached if _takes_pre_releases() or not version.is_prerelease]
    if usable:
        newest = cached[max(usable)]
        return newest, newest.name.split("-")[1]
    with tempfile.TemporaryDirectory(prefix="tf_stopgrad-download-") as download_dir:
        wheel = _download(f"tensorflow=={major}.{minor}.*", architecture, Path(download_dir))
        if not _holds_libraries(wheel):
            holding = _holding_distribution(wheel, architecture)
            wheel = _download(holding, architecture, Path(download_dir))
        version = wheel.name.split("-")[1]
        destination = cache_dir() / f"tensorflow-{version}-{architecture}"
        return _unpack(wheel, destination), version


def platform_glibc(release_dir: Path) -> tuple[int, int]:
    """The oldest glibc that the wheel an unpacked release came from is tagged for: where that
    TensorFlow installs."""
    wheel_name = (release_dir / _COMPLETE).read_text().strip()
    platforms = wheel_name.removesuffix(".whl").split("-")[-1].split(".")
    return min(manylinux_glibc(platform) for platform in platforms)


def manylinux_glibc(tag: str) -> tuple[int, int]:
    """The glibc version a manylinux tag stands for: ``manylinux_2_27[_x86_64]`` -> (2, 27),
    ``manylinux2014`` -> (2, 17)."""
    legacy = {"manylinux2014": (2, 17), "manylinux2010": (2, 12), "manylinux1": (2, 5)}
    for name, glibc in legacy.items():
        if tag.startswith(name):
            return glibc
    found = re.match(r"manylinux_(\d+)_(\d+)", tag)
    if found is None:
        raise ValueError(f"not a manylinux tag: {tag}")
    return int(found.group(1)), int(found.group(2))


def _takes_pre_releases() -> bool:
    """Whether pip takes pre-releases here (PIP_PRE, as pip reads it)."""
    return os.environ.get("PIP_PRE", "").lower() in ("1", "true", "yes", "on")


def _platform_options(architecture: str) -> list[str]:
    """pip's options to download for ``architecture``: none for this machine's own."""
    if architecture == host_architecture():
        return []
    glibc_minors = range(17, _NEWEST_GLIBC_MINOR + 1)
    tags = [f"manylinux2014_{architecture}"]
    tags += [f"manylinux_2_{glibc_minor}_{architecture}" for glibc_minor in glibc_minors]
    python = f"{sys.version_info.major}{sys.version_info.minor}"
    return [option for tag in tags for option in ("--platform", tag)] + [
        "--implementation", "cp", "--python-version", python, "--abi", f"cp{python}",
    ]  # fmt: skip


def _holds_libraries(wheel: Path) -> bool:
    with zipfile.ZipFile(wheel) as archive:
        return any(name.endswith(f"/{FRAMEWORK_LIBRARY}") for name in archive.namelist())


def _holding_distribution(shell_wheel: Path, architecture: str) -> str:
    """The requirement by which a shell wheel brings TensorFlow on Linux ``architecture``,
    without its marker: ``tensorflow-cpu-aws==2.15.1``."""
    environment = {"platform_system": "Linux", "sys_platform": "linux",
                   "platform_machine": architecture, "extra": ""}  # fmt: skip
    with zipfile.ZipFile(shell_wheel) as archive:
        metadata = next(name for name in archive.namelist() if name.endswith(".dist-info/METADATA"))
        lines = archive.read(metadata).decode().splitlines()
    for line in lines:
        if line.startswith("Requires-Dist:"):
            requirement = Requirement(line.split(":", 1)[1].strip())
            applies = requirement.marker is not None and requirement.marker.evaluate(environment)
            if applies and requirement.name.startswith("tensorflow"):
                return f"{requirement.name}{requirement.specifier}"
    raise SystemExit(f"tf_stopgrad: {shell_wheel.name} holds no TensorFlow libraries and names "
                     f"no distribution that does on Linux {architecture}")  # fmt: skip


# -E: pip's build isolation puts its own PYTHONPATH first, which may hide pip itself.
_PIP = [sys.executable, "-E", "-m", "pip"]


def _dated() -> list[str]:
    """With SOURCE_DATE_EPOCH, a build takes the releases that were out then, whenever it runs."""
    if not os.environ.get("SOURCE_DATE_EPOCH"):
        return []
    uploaded_before = datetime.fromtimestamp(int(os.environ["SOURCE_DATE_EPOCH"]), timezone.utc)
    return ["--uploaded-prior-to", uploaded_before.isoformat()]


def installable_minor(python_version: str) -> tuple[int, int] | None:
    """The supported minor release that pip installs for Python ``python_version`` here: the
    newest with a wheel for that interpreter. None where this build's pip cannot say: a build
    environment that uv made has no pip, and an old pip has no --dry-run. SystemExit, saying
    what to do, where no supported release has one (Python 3.14 before TensorFlow 2.22)."""
    with tempfile.TemporaryDirectory(prefix="tf_stopgrad-resolve-") as scratch:
        report = Path(scratch) / "report.json"
        result = subprocess.run(
            [*_PIP, "install", "--dry-run", "--quiet", "--no-deps", "--ignore-installed",
             "--only-binary=:all:", "--disable-pip-version-check", "--python-version",
             python_version, "--target", scratch, "--report", str(report), *_dated(),
             supported_tensorflow.requirement()], capture_output=True,
        )  # fmt: skip
        if b"No matching distribution found" in result.stderr:
            raise SystemExit(
                f"\ntf_stopgrad: pip finds no TensorFlow {supported_tensorflow.describe()} wheel "
                f"for Python {python_version} (or cannot reach its index). Use a Python that the "
                "supported releases have wheels for, or install a newer TensorFlow first (pip "
                "install . then builds for it and keeps it).\n"
            )
        if result.returncode != 0:
            return None
        version = json.loads(report.read_text())["install"][0]["metadata"]["version"]
        major, minor = Version(version).release[:2]
        return major, minor


def _download(requirement: str, architecture: str, into: Path) -> Path:
    command = [*_PIP, "download", "--no-deps", "--quiet", "--no-cache-dir",
               "--only-binary=:all:", "--disable-pip-version-check", "--dest", str(into),
               *_platform_options(architecture), *_dated(), requirement]  # fmt: skip
    print(f"tf_stopgrad: fetching {requirement} for {architecture} (headers and libraries only)",
          file=sys.stderr)  # fmt: skip
    before = set(into.glob("*.whl"))
    result = subprocess.run(command, capture_output=True, text=True)
    wheels = list(set(into.glob("*.whl")) - before)
    if result.returncode != 0 or len(wheels) != 1:
        raise SystemExit(f"tf_stopgrad: could not download {requirement} to build against it:\n"
                         f"{result.stderr.strip()[-2000:]}\nThe wheel build needs the package "
                         "index (or pip's cache) to fetch each TensorFlow release it builds for.")
    return _verified(wheels[0])


def _verified(wheel: Path) -> Path:
    """``wheel``, once its SHA-256 is the one _WHEEL_SHA256 records for its name."""
    recorded = dict(line.split()[::-1] for line in _WHEEL_SHA256.read_text().splitlines())
    digest = hashlib.sha256()
    with open(wheel, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    table = f"build_backend/{_WHEEL_SHA256.name}"
    if wheel.name not in recorded:
        unrecorded = (f"tf_stopgrad: {wheel.name} is not in {table}: its bytes are not checked. "
                      "Once PyPI's page of the release shows its SHA-256, record it: echo "
                      f"'{digest.hexdigest()}  {wheel.name}' >>{table}")  # fmt: skip
        if os.environ.get("CI"):  # CI's builds, the released ones, take recorded wheels only
            raise SystemExit(unrecorded)
        print(unrecorded, file=sys.stderr)
    elif recorded[wheel.name] != digest.hexdigest():
        raise SystemExit(f"tf_stopgrad: {wheel.name} has the SHA-256 {digest.hexdigest()}, not "
                         f"{recorded[wheel.name]} as {table} records: the index serves other "
                         "bytes under that name; build against it only once you know why")
    return wheel


def _unpack(wheel: Path, destination: Path) -> Path:
    """Unpacks the build inputs beside ``destination``, then renames them into place, so that
    a concurrent or interrupted build never sees half a release."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    partial, lock = staging.new_staging_directory(destination, "unpack")
    # Not include/external/ (a quarter of a gigabyte): the build's only include directory is
    # include/, and no header outside external/ names one inside it.
    wanted = re.compile(rf"tensorflow/(include/(?!external/).*|{re.escape(FRAMEWORK_LIBRARY)}|"
                        rf"{re.escape(CC_LIBRARY)})$")  # fmt: skip
    try:
        with zipfile.ZipFile(wheel) as archive:
            for member in archive.infolist():
                match = wanted.match(member.filename)
                if match is None or member.is_dir():
                    continue
                target = partial / match.group(1)
                target.parent.mkdir(parents=True, exist_ok=True)
                with archive.open(member) as source, open(target, "wb") as sink:
                    shutil.copyfileobj(source, sink, 1 << 20)
        (partial / _COMPLETE).write_text(wheel.name + "\n")
        partial.chmod(0o755)  # mkdtemp made it private
        try:
            partial.rename(destination)
        except OSError:  # Another build unpacked the same release first.
            if not (destination / _COMPLETE).is_file():
                raise
    finally:
        shutil.rmtree(partial, ignore_errors=True)
        if lock is not None:
            os.close(lock)
    return destination
