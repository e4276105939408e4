"""tf_stopgrad.export on unusual sources and destinations, and when it is interrupted.

Text-format SavedModels; byte-identical output across processes; what a SIGKILLed export
leaves and how the next export removes it without touching a live export's files; and bad
destinations and sources, each refused before any work, in the export's own words. The
results are run by TensorFlow in a process that cannot import tf_stopgrad
(tests/workers/load_export_without_plugin.py).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from test_export import INPUTS, MESSAGE, file_digests, op_types, plugin_model, save
from workers.launch import run_worker

import tf_stopgrad
from tf_stopgrad import export

TIMEOUT_S = 240
PAUSE_WHILE_ENV = "_TF_STOPGRAD_EXPORT_PAUSE_WHILE"  # export.py's test hook
STAGING = re.compile(r"\..*\.tf_stopgrad-export-[a-z0-9_]{8}")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("export_safety")


@pytest.fixture(scope="module")
def source(workdir) -> Path:
    """A TF2 SavedModel with the plugin's ops: signatures, functions and attrs are maps."""
    return save(plugin_model(), workdir / "source")


def expected_y(scale=(1.5, -2.0, 0.5)) -> np.ndarray:
    x, scale = np.float32(INPUTS), np.float32(scale)
    return np.sum(np.square(x) * scale * x + scale * x, axis=1)


def staging_dirs(parent: Path) -> list[Path]:
    return sorted(path for path in parent.iterdir() if STAGING.fullmatch(path.name))


def export_command(src: Path, dst: Path) -> list[str]:
    return [sys.executable, "-m", "tf_stopgrad", "export", str(src), str(dst)]


def start_export(src: Path, dst: Path, pause_while: Path) -> subprocess.Popen:
    """The command-line export, held by the test hook once staged, until pause_while goes."""
    pause_while.touch()
    env = {**os.environ, PAUSE_WHILE_ENV: str(pause_while)}
    return subprocess.Popen(
        export_command(src, dst), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip


def wait_until_staged(process: subprocess.Popen, parent: Path) -> Path:
    """The staging directory of the paused export, once it is complete."""
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()[1][-3000:]
        staged = [path for path in staging_dirs(parent) if (path / "fingerprint.pb").exists()]
        if staged:
            return staged[0]
        time.sleep(0.1)
    raise AssertionError("the export did not stage in time")


def run_without_plugin(workdir: Path, models: dict[str, Path]) -> dict:
    jobs = {"inputs": INPUTS, "models": {name: str(path) for name, path in models.items()}}
    (workdir / "load_jobs.json").write_text(json.dumps(jobs))
    run_worker("load_export_without_plugin.py", "load_jobs.json", "load_results.json",
               cwd=workdir, timeout=TIMEOUT_S)  # fmt: skip
    results = json.loads((workdir / "load_results.json").read_text())
    assert results.pop("plugin_importable") is False
    return results


# --- 1. Text-format sources ---------------------------------------------------------------


def save_v1_as_text(path: Path) -> Path:
    """A TF1 SavedModel with the plugin's ops, as ``Builder.save(as_text=True)`` writes it."""
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
        x = tf.compat.v1.placeholder(tf.float32, [None, 3], name="x")
        scale = tf.compat.v1.Variable([1.5, -2.0, 0.5], name="scale")
        stopped = tf_stopgrad.stop_gradient(tf.square(x) * scale)
        prevented = tf_stopgrad.prevent_gradient(scale * x, MESSAGE)
        y = tf.reduce_sum(stopped * x + prevented, axis=1)
        session.run(tf.compat.v1.global_variables_initializer())
        builder = tf.compat.v1.saved_model.Builder(str(path))
        signature = tf.compat.v1.saved_model.predict_signature_def({"x": x}, {"y": y})
        builder.add_meta_graph_and_variables(
            session, ["serve"], signature_def_map={"serving_default": signature}
        )
        builder.save(as_text=True)
    return path


@pytest.mark.slow
def test_text_format_source_exports_to_a_binary_saved_model_that_loads_without_plugin(
    workdir, source
):
    text_source = save_v1_as_text(workdir / "text_source")
    assert (text_source / "saved_model.pbtxt").exists()
    assert not (text_source / "saved_model.pb").exists()
    before = file_digests(text_source)

    rewritten = export.to_builtin_saved_model(text_source, workdir / "from_text")

    assert rewritten == 2
    assert file_digests(text_source) == before
    written = sorted(path.name for path in (workdir / "from_text").iterdir())
    assert written == ["fingerprint.pb", "saved_model.pb", "variables"]
    assert {"StopGradient", "PreventGradient"} <= op_types(workdir / "from_text")
    loaded = run_without_plugin(workdir, {"from_text": workdir / "from_text"})
    np.testing.assert_allclose(np.float32(loaded["from_text"]), expected_y(), rtol=1e-6)


# --- 2. The same bytes in any process -----------------------------------------------------


@pytest.mark.slow
def test_two_processes_write_byte_identical_saved_model_pb(workdir, source):
    # Map fields whose order an ordinary serialization leaves to chance.
    saved_model = export._read_saved_model(source / "saved_model.pb")
    (meta_graph,) = saved_model.meta_graphs
    assert len(meta_graph.object_graph_def.concrete_functions) >= 2
    assert len(meta_graph.signature_def) >= 2
    assert any(len(node.attr) >= 2 for node in export._all_nodes(meta_graph.graph_def))

    runs = {
        (name, run): subprocess.Popen(
            [*export_command(source, workdir / f"twice_{name}_{run}"), *options],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for name, options in (("builtin", []), ("inference", ["--inference"]))
        for run in (1, 2)
    }  # fmt: skip
    for process in runs.values():
        _, stderr = process.communicate(timeout=TIMEOUT_S)
        assert process.returncode == 0, stderr[-3000:]
    for name in ("builtin", "inference"):
        first, second = (
            (workdir / f"twice_{name}_{run}" / "saved_model.pb").read_bytes() for run in (1, 2)
        )
        assert first == second, f"{name}: the two processes' saved_model.pb differ"


# --- 3. A killed export and a live one ----------------------------------------------------


@pytest.mark.slow
def test_a_killed_exports_leftover_is_removed_by_the_next_export_and_nothing_else(workdir, source):
    parent = workdir / "killed"
    parent.mkdir()
    destination = parent / "model"
    # Beside the destination, none of them made by an export to it: each must survive.
    unrelated_target = parent / "elsewhere"
    (unrelated_target / "data").mkdir(parents=True)
    (parent / ".model.keep").mkdir()
    (parent / ".other.tf_stopgrad-export-abcdefgh").mkdir()  # another destination's
    (parent / ".model.tf_stopgrad-export-abcdefghij").mkdir()  # not the pattern
    (parent / ".model.tf_stopgrad-export-linkedaa").symlink_to(unrelated_target)
    (parent / ".model.tf_stopgrad-export-filezzzz").write_text("a file")
    unrelated = sorted(path.name for path in parent.iterdir())

    process = start_export(source, destination, workdir / "pause_killed")
    try:
        staging = wait_until_staged(process, parent)
    finally:
        process.send_signal(signal.SIGKILL)
        process.communicate(timeout=TIMEOUT_S)
    assert process.returncode == -signal.SIGKILL
    assert staging.is_dir() and not destination.exists()
    assert (staging / "saved_model.pb").stat().st_size > 0
    assert file_digests(staging / "variables") == file_digests(source / "variables")

    result = subprocess.run(export_command(source, destination), capture_output=True, text=True,
                            timeout=TIMEOUT_S)  # fmt: skip

    assert result.returncode == 0, result.stderr[-3000:]
    assert not staging.exists()
    assert sorted(path.name for path in parent.iterdir()) == sorted([*unrelated, "model"])
    assert (unrelated_target / "data").is_dir()
    loaded = run_without_plugin(workdir, {"after_kill": destination})
    np.testing.assert_allclose(np.float32(loaded["after_kill"]), expected_y(), rtol=1e-6)


@pytest.mark.slow
def test_a_live_exports_staging_is_left_alone_and_it_then_refuses_a_filled_destination(
    workdir, source
):
    parent = workdir / "live"
    parent.mkdir()
    destination = parent / "model"
    pause = workdir / "pause_live"
    process = start_export(source, destination, pause)
    try:
        staging = wait_until_staged(process, parent)
        staged = file_digests(staging)

        export.to_builtin_saved_model(source, destination)  # the same destination, meanwhile

        assert file_digests(staging) == staged
        written = file_digests(destination)
        pause.unlink()  # let the first export go on, to its rename
        _, stderr = process.communicate(timeout=TIMEOUT_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 1
    assert f"The export destination {destination} was filled by something else" in stderr
    assert "tf_stopgrad-export" not in stderr
    assert file_digests(destination) == written
    assert staging_dirs(parent) == []


# --- 4. Bad destinations and sources, refused up front ------------------------------------


def assert_nothing_written(parent: Path, before: list[str]) -> None:
    assert sorted(path.name for path in parent.iterdir()) == before


@pytest.fixture
def unwritable_dir(tmp_path):
    """A directory no file can be created in. Root ignores permission bits, so for root
    it is made immutable (chattr +i)."""
    directory = tmp_path / "unwritable"
    directory.mkdir()
    if os.geteuid() == 0:
        subprocess.run(["chattr", "+i", str(directory)], check=True, capture_output=True)
    else:
        directory.chmod(0o555)
    try:
        yield directory
    finally:
        if os.geteuid() == 0:
            subprocess.run(["chattr", "-i", str(directory)], check=True)
        else:
            directory.chmod(0o755)


@pytest.mark.parametrize("below", ["model", "new/model"])
@pytest.mark.slow
def test_an_unwritable_parent_is_refused_naming_the_destination(source, unwritable_dir, below):
    destination = unwritable_dir / below
    with pytest.raises(
        PermissionError,
        match=rf"^The export destination {re.escape(str(destination))} cannot be created: this "
        rf"process may not write in {re.escape(str(unwritable_dir))} ",
    ):
        export.to_builtin_saved_model(source, destination)
    assert list(unwritable_dir.iterdir()) == []


@pytest.mark.parametrize("target", ["empty directory", "nothing"])
def test_a_symlink_destination_is_refused_up_front(source, tmp_path, target):
    empty = tmp_path / "empty"
    if target == "empty directory":
        empty.mkdir()
    link = tmp_path / "link"
    link.symlink_to(empty)
    before = sorted(path.name for path in tmp_path.iterdir())
    with pytest.raises(
        FileExistsError,
        match=rf"^The export destination {re.escape(str(link))} is a symbolic link \(to "
        rf"{re.escape(str(empty))}\).*Pass the directory it points to",
    ):
        export.to_builtin_saved_model(source, link)
    assert_nothing_written(tmp_path, before)
    assert link.is_symlink()
    if target == "empty directory":
        assert list(empty.iterdir()) == []


def test_a_destination_under_a_regular_file_is_refused(source, tmp_path):
    (tmp_path / "file").write_text("not a directory")
    destination = tmp_path / "file" / "sub" / "model"
    with pytest.raises(
        NotADirectoryError,
        match=rf"^The export destination {re.escape(str(destination))} cannot be created: "
        rf"{re.escape(str(tmp_path / 'file'))} is not a directory",
    ):
        export.to_builtin_saved_model(source, destination)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["file"]


@pytest.fixture
def source_copy(source, tmp_path) -> Path:
    return Path(shutil.copytree(source, tmp_path / "source_copy"))


def test_a_fifo_in_the_sources_assets_is_refused_naming_it(source_copy, tmp_path):
    fifo = source_copy / "assets" / "pipe"
    os.mkfifo(fifo)
    before = sorted(path.name for path in tmp_path.iterdir())
    with pytest.raises(
        ValueError,
        match=rf"^{re.escape(str(fifo))} in the SavedModel {re.escape(str(source_copy))} is "
        rf"not a regular file",
    ):
        export.to_builtin_saved_model(source_copy, tmp_path / "out")
    assert_nothing_written(tmp_path, before)


def test_a_broken_link_in_the_source_is_refused_naming_it(source_copy, tmp_path):
    link = source_copy / "assets" / "vocabulary.txt"
    link.symlink_to(tmp_path / "gone.txt")
    with pytest.raises(
        FileNotFoundError,
        match=rf"^{re.escape(str(link))} in the SavedModel .* is a broken symbolic link",
    ):
        export.to_builtin_saved_model(source_copy, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_damaged_text_format_source_is_refused(tmp_path):
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    (damaged / "saved_model.pbtxt").write_text("saved_model_schema_version: 1\nmeta_graphs {")
    with pytest.raises(ValueError, match=r"saved_model.pbtxt is not a readable SavedModel"):
        export.to_builtin_saved_model(damaged, tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.fixture
def small_file_system(tmp_path):
    """A 256 KiB tmpfs, to fill while writing (mounting needs root)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    mount_point = tmp_path / "small"
    mount_point.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount_point)],
                   check=True, capture_output=True)  # fmt: skip
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", str(mount_point)], check=True)


@pytest.mark.slow
def test_a_full_disk_is_reported_naming_the_destination_and_leaves_nothing(
    source_copy, small_file_system
):
    (source_copy / "assets" / "large.bin").write_bytes(os.urandom(1 << 20))
    destination = small_file_system / "model"
    with pytest.raises(
        OSError,
        match=rf"^Writing the export of .* to {re.escape(str(destination))} failed: No space "
        rf"left on device\. Nothing was written",
    ) as raised:
        export.to_builtin_saved_model(source_copy, destination)
    assert type(raised.value) is OSError
    assert "tf_stopgrad-export" not in str(raised.value)
    assert list(small_file_system.iterdir()) == []
