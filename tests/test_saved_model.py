"""SavedModels that use the ops, saved here and loaded in fresh processes.

A module's functions are saved with tf_stopgrad's ops; the same module built with the
built-in ops, run in this process, gives the expected values. tests/workers/ holds the
scripts for the loading processes.
"""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf
from support import builtin_prevent_gradient
from workers.launch import worker_result

import tf_stopgrad
import tf_stopgrad.keras

LOAD_TIMEOUT_S = 120
MESSAGE = "sampled, not learned"
INPUT_SPEC = tf.TensorSpec([None, 3], tf.float32)
INPUTS = [[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]]


class GradientMasking(tf.Module):
    """Functions whose values or gradients depend on the stop and prevent ops."""

    def __init__(self, stop, prevent):
        super().__init__()
        self._stop = stop
        self._prevent = prevent
        self.scale = tf.Variable([1.5, -2.0, 0.5])

    @tf.function(input_signature=[INPUT_SPEC])
    def stopped(self, x):
        return tf.reduce_sum(self._stop(tf.square(x) * self.scale) * x + self.scale * x, axis=1)

    @tf.function(input_signature=[INPUT_SPEC])
    def prevented(self, x):
        return self._prevent(tf.sin(x) * self.scale, MESSAGE)

    @tf.function(input_signature=[INPUT_SPEC])
    def gradient_inside(self, x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.reduce_sum(self._stop(tf.exp(x)) * tf.sin(x) * self.scale)
        return tape.gradient(y, x)


def plugin_module() -> GradientMasking:
    return GradientMasking(tf_stopgrad.stop_gradient, tf_stopgrad.prevent_gradient)


def builtin_module() -> GradientMasking:
    return GradientMasking(tf.stop_gradient, builtin_prevent_gradient)


def unstopped_module() -> GradientMasking:
    return GradientMasking(tf.identity, builtin_prevent_gradient)


def gradients_of_stopped(module: GradientMasking) -> tuple[np.ndarray, np.ndarray]:
    x = tf.constant(INPUTS)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = module.stopped(x)
    gradient_x, gradient_scale = tape.gradient(y, [x, module.scale])
    return gradient_x.numpy(), gradient_scale.numpy()


class BuiltinStopGradient(keras.layers.Layer):
    def call(self, inputs):
        return tf.stop_gradient(inputs)


def small_model(stop_layer: keras.layers.Layer) -> keras.Model:
    inputs = keras.Input((3,), name="features")
    hidden = keras.layers.Dense(4, activation="tanh")(inputs)
    outputs = keras.layers.Dense(2)(stop_layer(hidden))
    return keras.Model(inputs, outputs)


@pytest.fixture(scope="module")
def saved_models(tmp_path_factory):
    """Saves the plugin module and Keras model; returns their directory and the Keras model's
    built-in twin, which has the same weights."""
    workdir = tmp_path_factory.mktemp("saved_model")
    tf.saved_model.save(plugin_module(), str(workdir / "module"))
    keras.utils.set_random_seed(3)
    plugin_model = small_model(tf_stopgrad.keras.StopGradient())
    tf.saved_model.save(plugin_model, str(workdir / "keras_model"))
    builtin_model = small_model(BuiltinStopGradient())
    builtin_model.set_weights(plugin_model.get_weights())
    return workdir, builtin_model


@pytest.fixture(scope="module")
def loaded(saved_models) -> dict:
    workdir, _ = saved_models
    (workdir / "inputs.json").write_text(json.dumps(INPUTS))
    return worker_result(
        "load_saved_model.py",
        "module",
        "keras_model",
        "inputs.json",
        cwd=workdir,
        timeout=LOAD_TIMEOUT_S,
    )


@pytest.mark.parametrize("function", ["stopped", "prevented", "gradient_inside"])
@pytest.mark.slow
def test_loaded_function_matches_builtin(loaded, function):
    module = builtin_module()
    expected = getattr(module, function)(tf.constant(INPUTS)).numpy()
    np.testing.assert_allclose(loaded[function], expected, rtol=1e-6)


def test_inputs_tell_a_masked_gradient_inside_from_an_unmasked_one():
    x, masked, unmasked = tf.constant(INPUTS), builtin_module(), unstopped_module()
    assert not np.allclose(masked.gradient_inside(x), unmasked.gradient_inside(x))


@pytest.mark.slow
def test_gradient_through_loaded_function_is_masked(loaded):
    expected_x, expected_scale = gradients_of_stopped(builtin_module())
    np.testing.assert_allclose(loaded["stopped_gradient_x"], expected_x, rtol=1e-6)
    np.testing.assert_allclose(loaded["stopped_gradient_scale"], expected_scale, rtol=1e-6)
    unstopped_x, unstopped_scale = gradients_of_stopped(unstopped_module())
    assert not np.allclose(unstopped_x, expected_x)
    assert not np.allclose(unstopped_scale, expected_scale)


@pytest.mark.slow
def test_gradient_through_loaded_prevent_gradient_raises_like_builtin(loaded):
    x, module = tf.constant(INPUTS), builtin_module()
    with pytest.raises(LookupError) as builtin_error, tf.GradientTape() as tape:
        tape.watch(x)
        tape.gradient(module.prevented(x), x)
    error = loaded["prevented_gradient_error"]
    assert error["type"] == type(builtin_error.value).__name__
    assert MESSAGE in error["message"]


@pytest.mark.slow
def test_loaded_keras_model_serves_like_builtin(saved_models, loaded):
    _, builtin_model = saved_models
    expected = builtin_model(np.array(INPUTS, dtype=np.float32))
    np.testing.assert_allclose(loaded["keras_output"], expected, rtol=1e-6)
