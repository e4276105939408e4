"""The command line's output: TensorFlow's C++ log lines hidden unless asked for, and progress
that reads well in a terminal and in a log."""

import io
import re
import subprocess
import sys

import pytest
import tensorflow as tf
from support import REPO_ROOT, environment_with_tensorflow_logging, needs_gpu, run_command

import tf_stopgrad
from tf_stopgrad.__main__ import SELF_CHECKS, _untested
from tf_stopgrad._progress import LOG_LINES, Progress

# TensorFlow's C++ log lines: absl's format ("E0000 00:00:1795... 123 cuda_platform.cc:52]"),
# absl's note before it is initialized, and TSL's older format ("2026-11-22 12:13:50.938536:
# I external/local_tsl/tsl/cuda/cudart_stub.cc:31]").
TF_LOG_LINE = re.compile(
    r"^[IWEF]\d{4} [\d:. ]+\s*\d+ [\w.]+:\d+\]"
    r"|absl::InitializeLog"
    r"|^\d{4}-\d\d-\d\d [\d:.]+: [IWEF] \S+:\d+\]",
    re.M,
)


@pytest.fixture(scope="module")
def main_job() -> subprocess.CompletedProcess:
    """``python -m tf_stopgrad``, the report and self-check, run once for the tests below."""
    return run_command(cwd=REPO_ROOT)


@pytest.mark.slow
def test_main_job_reports_and_passes_its_self_check(main_job):
    # Run where the README runs it: in the repository root, whose ./tf_stopgrad (first on
    # sys.path) has no compiled parts and hands over to the installed copy.
    assert main_job.returncode == 0, main_job.stdout + main_job.stderr
    assert f"op library             : {tf_stopgrad.library_path()}" in main_job.stdout
    assert f"TensorFlow at run time : {tf.__version__}" in main_job.stdout
    assert "All checks passed." in main_job.stdout
    assert "FAILED" not in main_job.stdout


@pytest.mark.parametrize("minors_past_the_newest", [0, 1, 2])
def test_the_report_calls_a_tensorflow_newer_than_the_tested_releases_untested(
    minors_past_the_newest, monkeypatch
):
    tested = tf_stopgrad.build_info()["tested_tf_versions"]
    major, newest = (int(part) for part in tested.rpartition("-")[2].split("."))
    running = f"{major}.{newest + minors_past_the_newest}.0"
    monkeypatch.setattr(tf, "__version__", running + ("-rc0" if minors_past_the_newest else ""))

    said = _untested(tested)

    if minors_past_the_newest:
        assert said == f" (untested: tf_stopgrad {tf_stopgrad.__version__} is tested with " \
                       f"TensorFlow {tested})"
    else:
        assert said == ""


@pytest.mark.slow
def test_main_job_help_describes_every_subcommand(tmp_path):
    result = run_command("--help", cwd=tmp_path, timeout=120)
    assert result.returncode == 0
    for subcommand in ("demo", "bench", "export"):
        assert subcommand in result.stdout


@pytest.mark.slow
def test_main_job_prints_no_tensorflow_log_lines_by_default(main_job):
    assert main_job.returncode == 0, main_job.stdout + main_job.stderr
    assert "All checks passed." in main_job.stdout
    assert not TF_LOG_LINE.search(main_job.stdout + main_job.stderr), main_job.stderr


@pytest.mark.slow
def test_the_self_check_says_on_which_devices_it_ran(main_job):
    if tf.config.list_physical_devices("GPU"):
        expected = ["Self-check on CPU:0", "Self-check on GPU:0"]
    else:
        expected = ["Self-check on CPU:0 (no GPU visible)"]
    lines = main_job.stdout.splitlines()
    assert [line for line in lines if line.startswith("Self-check")] == expected
    for name in SELF_CHECKS:
        assert lines.count(f"  [ok] {name}") == len(expected), main_job.stdout


@pytest.mark.parametrize("device", ["CPU:0", pytest.param("GPU:0", marks=needs_gpu)])
def test_the_zero_copy_self_check_fails_for_an_op_that_copies(device, monkeypatch):
    check = SELF_CHECKS["output aliases the input (zero copy)"]
    with tf.device(f"/{device}"):
        assert check()
        monkeypatch.setattr(tf_stopgrad, "stop_gradient", lambda x: tf.raw_ops.DeepCopy(x=x))
        assert not check()


# Makes TensorFlow's C++ code log a line at exit, whatever it logs at import on a machine:
# with device placement logging on, running an op logs at INFO where it ran.
LOG_AT_EXIT = """
import atexit

def log_a_line():
    import tensorflow as tf
    tf.debugging.set_log_device_placement(True)
    tf.constant(1.0) + 1.0

atexit.register(log_a_line)
"""
PLACEMENT_LOG_LINE = "Executing op AddV2 in device"


def run_logging_at_exit(tmp_path, *interpreter_arguments: str) -> subprocess.CompletedProcess:
    """Runs the interpreter in ``tmp_path``, where a script.py reports the log level the
    user's code sees, and TensorFlow's C++ code logs a line at exit."""
    (tmp_path / "sitecustomize.py").write_text(LOG_AT_EXIT)
    (tmp_path / "script.py").write_text(
        "import os, tf_stopgrad; print(os.environ.get('TF_CPP_MIN_LOG_LEVEL'))"
    )
    env = dict(environment_with_tensorflow_logging(), PYTHONPATH=str(tmp_path))
    return subprocess.run(
        [sys.executable, *interpreter_arguments],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("interpreter_arguments", "quiet"),
    [
        (["-m", "tf_stopgrad", "--help"], True),
        (["-mtf_stopgrad", "--help"], True),
        (["-B", "-m", "tf_stopgrad", "--help"], True),
        (["-m", "tf_stopgrad", "--tf-logs", "--help"], False),
        (["script.py", "-m", "tf_stopgrad"], False),
        (["-m", "script", "-m", "tf_stopgrad"], False),
    ],
)
@pytest.mark.slow
def test_only_the_command_without_tf_logs_hides_tensorflow_log_lines(
    interpreter_arguments, quiet, tmp_path
):
    result = run_logging_at_exit(tmp_path, *interpreter_arguments)
    assert result.returncode == 0, result.stderr
    assert (PLACEMENT_LOG_LINE not in result.stderr) == quiet, result.stderr
    if "--help" in interpreter_arguments:
        assert "--tf-logs" in result.stdout
    else:
        # Placement logging also prints the placements to stdout, after the script's line.
        assert result.stdout.splitlines()[0] == "None", "the user's TensorFlow logging changed"


@pytest.mark.parametrize(
    ("command_line", "module"),
    [
        (["python", "-m", "tf_stopgrad"], "tf_stopgrad"),
        (["python", "-mtf_stopgrad", "bench"], "tf_stopgrad"),
        (["python", "-Im", "tf_stopgrad"], "tf_stopgrad"),
        (["python", "-Imtf_stopgrad.__main__"], "tf_stopgrad.__main__"),
        (["python", "-X", "dev", "-W", "error", "-m", "tf_stopgrad"], "tf_stopgrad"),
        (["python", "-Xdev", "-Werror", "-m", "tf_stopgrad"], "tf_stopgrad"),
        (["python", "--check-hash-based-pycs", "always", "-m", "tf_stopgrad"], "tf_stopgrad"),
        (["python", "-m", "pytest", "-m", "tf_stopgrad"], "pytest"),
        (["python", "train.py", "-m", "tf_stopgrad"], None),
        (["python", "-c", "import tf_stopgrad", "-m", "tf_stopgrad"], None),
        (["python", "-", "-m", "tf_stopgrad"], None),
        (["python"], None),
    ],
)
def test_the_module_a_command_line_runs_is_read_as_the_interpreter_reads_it(command_line, module):
    from tf_stopgrad._tensorflow_logs import module_run_by

    assert module_run_by(command_line) == module


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("total", [1, 3, 4, 7, 100])
def test_progress_in_a_log_is_a_few_whole_lines_ending_at_the_total(total):
    log = io.StringIO()
    with Progress("epoch", total, stream=log) as progress:
        for done in range(1, total + 1):
            progress(done)
    lines = log.getvalue().splitlines()
    assert "\r" not in log.getvalue()
    assert 1 <= len(lines) <= LOG_LINES
    assert lines[-1] == f"epoch {total}/{total}"
    assert lines == sorted(set(lines), key=lines.index)  # no line written twice


def test_progress_in_a_log_that_stops_early_ends_with_the_count_reached():
    log = io.StringIO()
    with Progress("EM iteration", 500, stream=log) as progress:
        for done in range(1, 85):
            progress(done)
    assert log.getvalue().splitlines()[-1] == "EM iteration 84/500"


def test_progress_in_a_terminal_updates_one_line_in_place():
    terminal = FakeTerminal()
    with Progress("bench: sample", stream=terminal) as progress:
        for done in range(1, 4):
            progress(done, 3)
    assert terminal.getvalue() == "\rbench: sample 1/3\rbench: sample 2/3\rbench: sample 3/3\n"


def test_progress_in_a_terminal_that_stops_early_still_ends_its_line():
    terminal = FakeTerminal()
    with Progress("RBM epoch", 10, stream=terminal) as progress:
        progress(1)
    assert terminal.getvalue() == "\rRBM epoch 1/10\n"


# Runs the command as `python -m tf_stopgrad` would, in a process where scikit-learn cannot be
# imported, as if it were not installed.
WITHOUT_SKLEARN = (
    "import runpy, sys; sys.modules['sklearn'] = None; sys.argv[0] = 'tf_stopgrad'; "
    "runpy.run_module('tf_stopgrad', run_name='__main__', alter_sys=True)"
)


@pytest.mark.parametrize("name", ["em", "rbm", "adversarial"])
@pytest.mark.slow
def test_demo_without_scikit_learn_says_how_to_install_it(name, tmp_path):
    result = subprocess.run(
        [sys.executable, "-c", WITHOUT_SKLEARN, "demo", name, "--quick"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        f"python -m tf_stopgrad demo {name}: needs scikit-learn, which is not installed. "
        f'Install the examples\' requirements: pip install "tf_stopgrad[examples]" '
        f'(from a source checkout: pip install ".[examples]")'
    )
    assert "Traceback" not in result.stderr
