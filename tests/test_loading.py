"""Loading: repeated loads are harmless, and damaged installs give clear errors.

Every scenario runs tests/workers/load_and_use.py in fresh Python processes. The damaged
installs are temporary copies of the installed package, found first through PYTHONPATH; each
is damaged in one way, and importing it must raise ImportError with the rebuild command,
never crash.
"""

from __future__ import annotations

import _ctypes
import json
import random
import re
import shutil
from pathlib import Path

import pytest
import tensorflow as tf
from stress_support import assert_not_crashed, finish, run_worker, start_python
from workers.load_and_use import RELOAD_ACTIONS

import tf_stopgrad

pytestmark = [pytest.mark.core, pytest.mark.slow]

WORKER = str(Path(__file__).resolve().parent / "workers" / "load_and_use.py")
INSTALLED_PACKAGE = Path(tf_stopgrad.__file__).resolve().parent
LIBRARY = Path(tf_stopgrad.library_path()).name
# Where the op libraries and the build record are: beside the Python files, but for an editable
# install, whose Python files stay in the checkout.
INSTALLED_LIBRARIES = Path(tf_stopgrad.library_path()).resolve().parent
TIMEOUT = 900
REINSTALL = re.escape("pip install --force-reinstall --no-deps --no-cache-dir")


def the_library(package: Path) -> Path:
    return package / LIBRARY


def leave_intact(package):
    pass


def overwrite_with_random_bytes(package):
    size = the_library(package).stat().st_size
    the_library(package).write_bytes(random.Random(0).randbytes(size))


def truncate_to_half(package):
    data = the_library(package).read_bytes()
    the_library(package).write_bytes(data[: len(data) // 2])


def truncate_by_one_byte(package):
    data = the_library(package).read_bytes()
    the_library(package).write_bytes(data[:-1])


def empty(package):
    the_library(package).write_bytes(b"")


def replace_with_another_shared_library(package):
    shutil.copyfile(_ctypes.__file__, the_library(package))


def delete(package):
    the_library(package).unlink()


def build_record_for_tensorflow_2_14_only(package):
    """Rewrite the build record as if the package held only a library for TensorFlow 2.14."""
    record_file = package / "_build_record.json"
    record = json.loads(record_file.read_text())
    record["libraries"] = {"2.14": dict(next(iter(record["libraries"].values())),
                                        tf_version="2.14.0")}  # fmt: skip
    record_file.write_text(json.dumps(record))


def build_record_missing(package):
    (package / "_build_record.json").unlink()


def could_not_load(reason):
    return rf"could not load tf_stopgrad's op library \S+: .*{reason}.*{REINSTALL}"


DAMAGES = {  # how the copy is damaged: (damage, the ImportError expected, None for success)
    "intact copy (control)": (leave_intact, None),
    "library overwritten with random bytes": (
        overwrite_with_random_bytes,
        could_not_load("invalid ELF header"),
    ),
    "library truncated to half": (truncate_to_half, rf"is damaged: it is truncated.*{REINSTALL}"),
    "library truncated by one byte": (
        truncate_by_one_byte,
        rf"is damaged: it is truncated.*{REINSTALL}",
    ),
    "library emptied": (empty, could_not_load("file too short")),
    "library replaced by another shared library": (
        replace_with_another_shared_library,
        rf"does not define the ops .*not tf_stopgrad's op library.*{REINSTALL}",
    ),
    "library missing": (delete, rf"op library is missing: \S+ does not exist.*{REINSTALL}"),
    "build record for TensorFlow 2.14.0 only": (
        build_record_for_tensorflow_2_14_only,
        rf"has op libraries for TensorFlow 2\.14\.0, but TensorFlow {re.escape(tf.__version__)} "
        rf"is installed.*{REINSTALL}",
    ),
    "build record missing": (
        build_record_missing,
        r"compiled parts are missing.*pip install \. \(from the tf_stopgrad source directory\)",
    ),
}


def single_record(finished):
    assert_not_crashed(finished)
    assert finished.returncode == 0, finished.describe()
    (record,) = finished.records()
    return record


def assert_all_checks_pass(checks):
    assert checks and all(checks.values()), checks


@pytest.fixture(scope="module")
def reload_records(tmp_path_factory):
    finished = run_worker(
        "load_and_use", "reload", cwd=tmp_path_factory.mktemp("reload"), timeout=TIMEOUT
    )
    assert_not_crashed(finished)
    assert finished.returncode == 0, finished.describe()
    return {record["action"]: record for record in finished.records()}


@pytest.mark.parametrize("action", list(RELOAD_ACTIONS))
def test_loading_again_is_harmless(action, reload_records):
    record = reload_records[action]
    assert_all_checks_pass(record["current"])
    assert_all_checks_pass(record["first_import"])


@pytest.fixture(scope="module")
def damaged_copies(tmp_path_factory):
    """Import every damaged copy, each in its own process, all at once."""
    processes = {}
    for name, (damage, _) in DAMAGES.items():
        site = tmp_path_factory.mktemp("site")
        package = site / "tf_stopgrad"
        for installed in dict.fromkeys([INSTALLED_PACKAGE, INSTALLED_LIBRARIES]):
            shutil.copytree(installed, package, ignore=shutil.ignore_patterns("__pycache__"),
                            dirs_exist_ok=True)  # fmt: skip
        damage(package)
        processes[name] = (package, start_python([WORKER, "copy"], cwd=site, PYTHONPATH=str(site)))
    return {
        name: (package, finish(process, TIMEOUT)) for name, (package, process) in processes.items()
    }


@pytest.mark.parametrize("name", list(DAMAGES))
def test_damaged_install_gives_import_error_with_the_remedy(name, damaged_copies):
    package, finished = damaged_copies[name]
    record = single_record(finished)
    assert Path(record["origin"]).resolve().parent == package.resolve(), "not the copy"
    expected_error = DAMAGES[name][1]
    if expected_error is None:
        assert "import_error" not in record, record["import_error"]
        assert Path(record["file"]).resolve().parent == package.resolve()
        assert_all_checks_pass(record["checks"])
    else:
        assert "import_error" in record, "the damaged copy imported without error"
        assert re.search(expected_error, record["import_error"], re.DOTALL), record["import_error"]
