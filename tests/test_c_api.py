"""TensorFlow's C API, which the Java, Go, Rust and C# bindings sit on: a C program built
against ``tensorflow/c/c_api.h`` alone loads the op library with ``TF_LoadLibrary``, builds
graphs with both ops and the built-in ones through ``TF_NewOperation``, runs them, and
differentiates through them with ``TF_AddGradients`` (tests/c/c_api_ops.c)."""

import numpy as np
import pytest
import tensorflow as tf
from c_programs import build_c_program, needs_gcc, run_c_program

import tf_stopgrad

pytestmark = [pytest.mark.core, pytest.mark.slow, pytest.mark.compiler, needs_gcc]

MESSAGE = "labels are sampled, not learned"
TF_INVALID_ARGUMENT = tf.errors.INVALID_ARGUMENT
TF_NOT_FOUND = tf.errors.NOT_FOUND


@pytest.fixture(scope="module")
def program_output(tmp_path_factory):
    """`label: value` lines the C program prints, as a dict."""
    executable = build_c_program("c_api_ops", tmp_path_factory.mktemp("c_api"))
    return run_c_program(executable, tf_stopgrad.library_path(), MESSAGE)


def values(text):
    return np.array([float(v) for v in text.split()], dtype=np.float32)


def input_values(program_output):
    return values(program_output["input"])


def test_nodes_have_our_namespaced_op_types(program_output):
    assert program_output["stop_op_type"] == tf_stopgrad.STOP_GRADIENT_OP
    assert program_output["prevent_op_type"] == tf_stopgrad.PREVENT_GRADIENT_OP


@pytest.mark.parametrize("op", ["stop", "prevent"])
def test_session_run_gives_the_input_like_builtin(program_output, op):
    np.testing.assert_array_equal(
        values(program_output[f"{op}_forward"]), input_values(program_output)
    )
    np.testing.assert_array_equal(
        values(program_output[f"{op}_forward"]), values(program_output[f"builtin_{op}_forward"])
    )


def test_add_gradients_treats_the_stop_as_a_constant_like_builtin(program_output):
    # d/dx sum(stop(x) * x) = stop(x) = x
    np.testing.assert_array_equal(
        values(program_output["stop_gradient"]), input_values(program_output)
    )
    np.testing.assert_array_equal(
        values(program_output["stop_gradient"]), values(program_output["builtin_stop_gradient"])
    )


def test_add_gradients_refuses_the_prevent_with_the_message(program_output):
    code, message = program_output["prevent_gradient_status"].split(" ", 1)
    assert int(code) == TF_INVALID_ARGUMENT
    assert f"explicitly disabled. Reason: {MESSAGE}" in message
    assert tf_stopgrad.PREVENT_GRADIENT_OP in message
    # The built-in refuses too, but only because TensorFlow has no C++ gradient for it.
    builtin_code, builtin_message = program_output["builtin_prevent_gradient_status"].split(" ", 1)
    assert int(builtin_code) == TF_NOT_FOUND
    assert "No gradient defined" in builtin_message
