"""tf_stopgrad.keras: the StopGradient and PreventGradient layers.

Reference models use a layer that calls ``tf.stop_gradient``; ``keras.layers.Identity``
stands for a model where nothing stops the gradient.
"""

import json
import re

import keras
import numpy as np
import pytest
import tensorflow as tf
from workers.launch import worker_result

import tf_stopgrad
from tf_stopgrad.keras import PreventGradient, StopGradient

SUBPROCESS_TIMEOUT_S = 120
MESSAGE = "sampled, not learned"
SEED = 11
INPUTS = np.linspace(-2.0, 2.0, 16 * 3, dtype=np.float32).reshape(16, 3)
TARGETS = np.sin(INPUTS.sum(axis=1, keepdims=True))


class BuiltinStopGradient(keras.layers.Layer):
    def call(self, inputs):
        return tf.stop_gradient(inputs)


@pytest.mark.slow
def test_layers_are_a_lazily_imported_submodule(tmp_path):
    result = worker_result("report_lazy_keras.py", cwd=tmp_path, timeout=SUBPROCESS_TIMEOUT_S)
    assert result == {
        "keras_modules_added": [],
        "submodule_imported_by_package": False,
        "attribute_is_submodule": True,
        "attribute_has_layers": True,
    }


def test_unknown_attribute_raises_attribute_error():
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        tf_stopgrad.no_such_name  # noqa: B018


@pytest.mark.parametrize(
    ("layer_class", "registered_name"),
    [(StopGradient, "tf_stopgrad>StopGradient"), (PreventGradient, "tf_stopgrad>PreventGradient")],
)
def test_layers_are_registered_for_serialization(layer_class, registered_name):
    assert keras.saving.get_registered_name(layer_class) == registered_name
    assert keras.saving.get_registered_object(registered_name) is layer_class


@pytest.mark.parametrize(
    "layer",
    [StopGradient(name="stop"), PreventGradient(MESSAGE, name="prevent")],
    ids=["stop_gradient", "prevent_gradient"],
)
def test_serialization_round_trip_keeps_the_config(layer):
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer))
    assert type(restored) is type(layer)
    assert restored.get_config() == layer.get_config()


def test_prevent_gradient_config_holds_the_message():
    assert PreventGradient(MESSAGE).get_config()["message"] == MESSAGE


def test_prevent_gradient_rejects_a_non_string_message():
    with pytest.raises(TypeError, match=r"message must be text \(str or bytes\) or None, got int"):
        PreventGradient(3)


@pytest.mark.parametrize(
    "inputs",
    [tf.constant([[1.0, -2.0], [0.5, 3.0]]), [tf.constant([1.0, 2.0]), tf.constant([[3.0]])]],
    ids=["tensor", "list"],
)
def test_stop_gradient_layer_masks_like_builtin(inputs):
    def gradients(stop):
        with tf.GradientTape() as tape:
            tape.watch(inputs)
            stopped = tf.nest.flatten(stop(inputs))
            loss = sum(tf.reduce_sum(s * x * x) for s, x in zip(stopped, tf.nest.flatten(inputs)))
        return stopped, tape.gradient(loss, inputs)

    values, gradients_ = gradients(StopGradient())
    expected_values, expected_gradients = gradients(
        lambda x: tf.nest.map_structure(tf.stop_gradient, x)
    )
    for actual, expected in zip(
        values + tf.nest.flatten(gradients_), expected_values + tf.nest.flatten(expected_gradients)
    ):
        np.testing.assert_array_equal(actual, expected)


def test_prevent_gradient_layer_raises_like_builtin():
    x = tf.constant([1.0, 2.0])
    with pytest.raises(LookupError) as builtin_error, tf.GradientTape() as tape:
        tape.watch(x)
        tape.gradient(tf.raw_ops.PreventGradient(input=x * x, message=MESSAGE), x)
    with pytest.raises(type(builtin_error.value), match=MESSAGE), tf.GradientTape() as tape:
        tape.watch(x)
        tape.gradient(PreventGradient(MESSAGE)(x * x), x)


@pytest.mark.parametrize(
    "layer", [StopGradient(), PreventGradient(MESSAGE)], ids=["stop_gradient", "prevent_gradient"]
)
def test_layers_pass_the_mask_on(layer):
    mask = tf.constant([[True, False, True]])
    np.testing.assert_array_equal(layer.compute_mask(tf.ones([1, 3, 2]), mask), mask)


def two_branch_model(stop_layer: keras.layers.Layer) -> keras.Model:
    """``frozen`` feeds the head only through ``stop_layer``; ``live`` feeds it directly."""
    keras.utils.set_random_seed(SEED)
    inputs = keras.Input((3,))
    frozen = keras.layers.Dense(4, activation="tanh", name="frozen")(inputs)
    live = keras.layers.Dense(4, activation="tanh", name="live")(inputs)
    merged = keras.layers.Concatenate()([stop_layer(frozen), live])
    return keras.Model(inputs, keras.layers.Dense(1, name="head")(merged))


def train_with_xla(stop_layer: keras.layers.Layer) -> tuple[keras.Model, list[np.ndarray]]:
    """Returns the trained model and the ``frozen`` branch's weights before training."""
    model = two_branch_model(stop_layer)
    frozen_before = model.get_layer("frozen").get_weights()
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse", jit_compile=True)
    assert model.jit_compile is True
    model.fit(INPUTS, TARGETS, batch_size=8, epochs=3, shuffle=False, verbose=0)
    return model, frozen_before


# Keras warns that the stopped branch gets no gradient, which is the point of the test.
@pytest.mark.filterwarnings("ignore:Gradients do not exist for variables:UserWarning")
def test_xla_training_matches_builtin_and_freezes_the_stopped_branch():
    model, frozen_before = train_with_xla(StopGradient())
    reference, _ = train_with_xla(BuiltinStopGradient())
    unstopped, _ = train_with_xla(keras.layers.Identity())

    for actual, expected in zip(model.get_weights(), reference.get_weights()):
        np.testing.assert_allclose(actual, expected, rtol=1e-6)
    for actual, before in zip(model.get_layer("frozen").get_weights(), frozen_before):
        np.testing.assert_array_equal(actual, before)
    for unstopped_weight, before in zip(unstopped.get_layer("frozen").get_weights(), frozen_before):
        assert not np.allclose(unstopped_weight, before), "the stop must matter for this model"


def serializable_model(stop_layer: keras.layers.Layer) -> keras.Model:
    keras.utils.set_random_seed(SEED)
    inputs = keras.Input((3,))
    guarded = PreventGradient(MESSAGE, name="guard")(inputs)
    hidden = keras.layers.Dense(4, activation="tanh")(guarded)
    return keras.Model(inputs, keras.layers.Dense(2)(stop_layer(hidden)))


@pytest.fixture
def saved_keras_file(tmp_path):
    """A ``.keras`` file with both layers, and the predictions the built-in twin makes."""
    model = serializable_model(StopGradient(name="stop"))
    path = tmp_path / "model.keras"
    model.save(str(path))
    reference = serializable_model(BuiltinStopGradient())
    reference.set_weights(model.get_weights())
    return path, reference.predict(INPUTS, verbose=0)


def test_keras_file_reloads_in_this_process(saved_keras_file):
    path, expected = saved_keras_file
    reloaded = keras.saving.load_model(str(path))
    np.testing.assert_allclose(reloaded.predict(INPUTS, verbose=0), expected, rtol=1e-6)
    assert type(reloaded.get_layer("stop")) is StopGradient
    assert reloaded.get_layer("guard").message == MESSAGE


@pytest.mark.slow
def test_keras_file_reloads_in_a_fresh_process(saved_keras_file):
    path, expected = saved_keras_file
    (path.parent / "inputs.json").write_text(json.dumps(INPUTS.tolist()))
    result = worker_result(
        "load_keras_model.py",
        path.name,
        "inputs.json",
        cwd=path.parent,
        timeout=SUBPROCESS_TIMEOUT_S,
    )
    np.testing.assert_allclose(result["predictions"], expected, rtol=1e-6)
    ours = {
        layer["config"]["name"]: layer
        for layer in result["layers"]
        if layer["registered_name"].startswith("tf_stopgrad>")
    }
    assert ours["stop"]["registered_name"] == "tf_stopgrad>StopGradient"
    assert ours["guard"]["registered_name"] == "tf_stopgrad>PreventGradient"
    assert ours["guard"]["config"]["message"] == MESSAGE


@pytest.mark.slow
def test_keras_file_without_the_import_fails_as_deploying_md_says(saved_keras_file):
    # Keras releases that import a layer's module themselves load the file all the same.
    path, _ = saved_keras_file
    result = worker_result(
        "load_keras_model.py", "--no-import", path.name, cwd=path.parent,
        timeout=SUBPROCESS_TIMEOUT_S,
    )  # fmt: skip
    if result["error"] is None:
        assert result["imported"], "loaded without the layers: Keras imported no tf_stopgrad.keras"
    else:
        # Keras 2 (TensorFlow 2.15) calls the name of the class it did not find.
        says = r"Could not locate class '(Stop|Prevent)Gradient'"
        if keras.__version__.startswith("2."):
            says = r"'str' object is not callable"
        assert result["error"].startswith("TypeError: ") and re.search(says, result["error"])
        assert not result["imported"]
