"""The C++ client API: a plain program using tf_stopgrad/stop_gradient.h builds, links and
behaves like TensorFlow's own C++ StopGradient and PreventGradient (tests/cpp/), built both
with g++ and the flags BUILD_NOTES.md lists, and with CMake against tf_stopgrad's CMake
package (``find_package(tf_stopgrad CONFIG)``)."""

import functools
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from support import needs_cmake

import tf_stopgrad

PROGRAM = Path(__file__).parent / "cpp" / "client_api_check.cc"
CMAKE_PROJECT = PROGRAM.parent  # its CMakeLists.txt builds PROGRAM with the CMake package
MESSAGE = "labels are sampled, not learned"  # the message client_api_check.cc passes
INPUT = [3.0, -1.5, 0.25, 8.0]  # the constant client_api_check.cc builds

pytestmark = pytest.mark.slow


def compile_command(source, output):
    # TensorFlow's headers go in as system headers, so only warnings in our code count.
    tf_flags = [
        "-isystem" + flag[2:] if flag.startswith("-I") else flag
        for flag in tf.sysconfig.get_compile_flags()
    ]
    tf_lib = tf.sysconfig.get_lib()
    op_library = tf_stopgrad.library_path()
    return [
        "g++", *tf_flags, "-I", tf_stopgrad.include_dir(), "-Wall", "-Wextra", "-Werror",
        str(source), "-o", str(output),
        # --as-needed (the default on some distributions) keeps a library only if the
        # program references it: the op library must be referenced through the header.
        "-Wl,--as-needed", op_library,
        os.path.join(tf_lib, "libtensorflow_cc.so.2"),
        os.path.join(tf_lib, "libtensorflow_framework.so.2"),
        f"-Wl,-rpath,{os.path.dirname(op_library)}:{tf_lib}",
    ]  # fmt: skip


@functools.cache
def cmake_dir() -> str:
    """What ``python -m tf_stopgrad --cmake-dir`` prints: asked once, in a fresh process that
    imports TensorFlow, for every test that needs it."""
    printed = subprocess.run(
        [sys.executable, "-m", "tf_stopgrad", "--cmake-dir"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert printed.returncode == 0, printed.stderr[-3000:]
    return printed.stdout.strip()


def built_with_gpp(workdir: Path) -> Path:
    executable = workdir / "client_api_check"
    compiled = subprocess.run(
        compile_command(PROGRAM, executable),
        cwd=workdir, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert compiled.returncode == 0, compiled.stderr[-5000:]
    return executable


def built_with_cmake(workdir: Path) -> Path:
    """The program built by CMake from PATH, configured as BUILD_NOTES.md says: only
    ``tf_stopgrad_DIR`` given, so the package finds its Python itself."""
    build = workdir / "build"
    for command in (
        ["cmake", "-S", str(CMAKE_PROJECT), "-B", str(build), f"-Dtf_stopgrad_DIR={cmake_dir()}"],
        ["cmake", "--build", str(build)],
    ):
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-5000:]
    return build / "client_api_check"


@pytest.fixture(scope="module", params=[pytest.param("g++", marks=pytest.mark.needs("g++")),
                                        pytest.param("cmake", marks=needs_cmake)])  # fmt: skip
def program_output(request, tmp_path_factory):
    """`label: value` lines the compiled program prints, as a dict."""
    workdir = tmp_path_factory.mktemp("cpp_client")
    build = built_with_gpp if request.param == "g++" else built_with_cmake
    executable = build(workdir)
    ran = subprocess.run(
        [str(executable)],
        cwd=workdir, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr[-3000:]
    return dict(line.split(": ", 1) for line in ran.stdout.splitlines() if ": " in line)


def test_cmake_dir_holds_the_package_and_its_version_file():
    directory = Path(cmake_dir())
    assert (directory / "tf_stopgradConfig.cmake").is_file()
    assert (directory / "tf_stopgradConfigVersion.cmake").is_file()


@pytest.mark.compiler
@needs_cmake
def test_cmake_package_asked_with_a_python_without_tf_stopgrad_says_which_python_to_use(
    tmp_path,
):
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")],
                   check=True, timeout=120)  # fmt: skip
    other_python = tmp_path / "venv" / "bin" / "python"
    configured = subprocess.run(
        ["cmake", "-S", str(CMAKE_PROJECT), "-B", str(tmp_path / "build"),
         f"-Dtf_stopgrad_DIR={cmake_dir()}", f"-DPython_EXECUTABLE={other_python}"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip

    assert configured.returncode != 0
    message = " ".join(configured.stderr.split())  # CMake wraps long messages
    assert "No module named 'tf_stopgrad'" in message
    assert f"{other_python} cannot describe tf_stopgrad for CMake" in message
    assert f"python -m tf_stopgrad --cmake-dir printed {cmake_dir()}" in message


def values(text):
    return np.array([float(v) for v in text.split()], dtype=np.float32)


@pytest.mark.compiler
def test_program_builds_nodes_of_our_op_types(program_output):
    assert program_output["stop_op_type"] == tf_stopgrad.STOP_GRADIENT_OP
    assert program_output["prevent_op_type"] == tf_stopgrad.PREVENT_GRADIENT_OP
    assert program_output["prevent_message_attr"] == MESSAGE
    assert program_output["graph"] == "ok"


@pytest.mark.compiler
def test_nodes_get_the_builtin_default_names(program_output):
    # Ours are made first, so the built-in's, in the same scope, come second in the sequence.
    assert program_output["node_names"].split() == [
        "StopGradient", "PreventGradient", "StopGradient_1", "PreventGradient_1",
    ]  # fmt: skip


@pytest.mark.parametrize("op", ["stop", "prevent"])
@pytest.mark.compiler
def test_forward_is_the_input_like_builtin(program_output, op):
    np.testing.assert_array_equal(values(program_output["input"]), INPUT)
    np.testing.assert_array_equal(values(program_output[f"{op}_forward"]), INPUT)
    np.testing.assert_array_equal(
        values(program_output[f"{op}_forward"]), values(program_output[f"builtin_{op}_forward"])
    )


@pytest.mark.compiler
def test_symbolic_gradient_of_stopped_product_is_the_input_like_builtin(program_output):
    # d/dx sum(stop(x) * x) = stop(x) = x: AddSymbolicGradients must not differentiate stop(x).
    np.testing.assert_array_equal(values(program_output["stop_gradient"]), INPUT)
    np.testing.assert_array_equal(
        values(program_output["stop_gradient"]), values(program_output["builtin_stop_gradient"])
    )


@pytest.mark.compiler
def test_symbolic_gradient_through_prevent_gradient_fails_with_its_message(program_output):
    status = program_output["prevent_gradient"]
    assert status.startswith("INVALID_ARGUMENT")
    # The wording of the Python gradient, which starts with the built-in Python gradient's.
    assert f"Gradient explicitly disabled. Reason: {MESSAGE}" in status
    assert f"(op {tf_stopgrad.PREVENT_GRADIENT_OP}, node 'PreventGradient')" in status
    # The built-in refuses too, but only because TensorFlow registers no C++ gradient for it.
    assert program_output["builtin_prevent_gradient"].startswith("NOT_FOUND: No gradient defined")
