"""The four use-case examples meet their acceptance criteria, checked against references.

References: ``tf.nn.softmax``, scikit-learn's ``GaussianMixture``, the CD update and the
log-likelihood written out by hand here, and the built-in ``tf.stop_gradient``.
"""

import math
import re
import sys

import numpy as np
import pytest
import tensorflow as tf
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning

import tf_stopgrad
from tf_stopgrad.examples import EXAMPLES, adversarial, demo, em, rbm, softmax


def max_abs_difference(first, second) -> float:
    """Largest elementwise difference between two equally structured nests of tensors."""
    return max(
        float(np.max(np.abs(np.asarray(a) - np.asarray(b))))
        for a, b in zip(tf.nest.flatten(first), tf.nest.flatten(second))
    )


# --- Stable softmax -------------------------------------------------------------------------


def value_and_gradient(softmax_fn, logits, output_weights):
    with tf.GradientTape() as tape:
        tape.watch(logits)
        probabilities = softmax_fn(logits)
        objective = tf.reduce_sum(output_weights * probabilities)
    return probabilities.numpy(), tape.gradient(objective, logits).numpy()


@pytest.mark.parametrize(
    "logits",
    [
        [[0.3, -1.2, 2.0, 0.7], [-0.5, 0.1, 0.0, 1.5]],
        [[1e4, 1e4 + 2.0, 1e4 - 1.0, 1e4 + 0.5], [-1e4, -1e4 + 3.0, -1e4, -1e4 - 2.0]],
        [[2.0, 2.0, -1.0, 0.5], [1e4, 1e4, 1e4 - 1.0, 1e4]],
    ],
    ids=["ordinary", "around_1e4", "tied_max"],
)
def test_stable_softmax_equals_tf_nn_softmax(logits):
    logits = tf.constant(logits, tf.float32)
    output_weights = tf.constant([[1.0, -2.0, 0.5, 3.0], [-1.0, 0.25, 2.0, -0.5]])
    values, gradient = value_and_gradient(softmax.stable_softmax, logits, output_weights)
    expected_values, expected_gradient = value_and_gradient(tf.nn.softmax, logits, output_weights)
    assert np.isfinite(values).all() and np.isfinite(gradient).all()
    np.testing.assert_allclose(values, expected_values, rtol=0, atol=1e-6)
    np.testing.assert_allclose(gradient, expected_gradient, rtol=0, atol=1e-6)
    assert np.abs(gradient).max() > 1e-3  # The weighted objective has a real gradient.


def test_naive_softmax_overflows_where_stable_softmax_does_not():
    logits = tf.constant([[1e4, 1e4 + 1.0, 1e4 - 1.0]])
    assert np.isnan(softmax.naive_softmax(logits).numpy()).any()
    assert np.isfinite(softmax.stable_softmax(logits).numpy()).all()


def test_stop_gradient_shrinks_the_backward_graph_like_the_builtin():
    def builtin_stable_softmax(logits):
        shift = tf.stop_gradient(tf.reduce_max(logits, axis=-1, keepdims=True))
        exps = tf.exp(logits - shift)
        return exps / tf.reduce_sum(exps, axis=-1, keepdims=True)

    figures = softmax.run(**softmax.QUICK_SETTINGS)
    shape = (softmax.QUICK_SETTINGS["batch"], softmax.QUICK_SETTINGS["classes"])
    builtin_ops = softmax.count_graph_ops(builtin_stable_softmax, shape, with_gradient=True)
    assert figures.gradient_ops_with_stop == builtin_ops
    assert figures.gradient_ops_with_stop < figures.gradient_ops_without_stop
    # Only the backward pass shrinks: forward, stop_gradient is one extra op.
    assert figures.forward_ops_with_stop == figures.forward_ops_without_stop + 1
    assert figures.failures() == []


# --- EM for a Gaussian mixture --------------------------------------------------------------


def reference_total_log_likelihood(data, weights, means, variances):
    """sum_n log sum_k pi_k N(x_n | mu_k, diag(var_k)), written out independently."""
    offsets = data[:, None, :] - means[None, :, :]
    log_normal = -0.5 * tf.reduce_sum(
        tf.math.log(2.0 * math.pi * variances) + offsets**2 / variances, axis=-1
    )
    return tf.reduce_sum(tf.reduce_logsumexp(tf.math.log(weights) + log_normal, axis=-1))


def test_em_is_monotone_and_matches_sklearn():
    settings = em.QUICK_SETTINGS
    data = em.make_data(settings["num_points"], seed=1)
    init = em.initial_params(data, num_components=3, seed=1)
    fitted, history = em.fit_em(tf.constant(data), init, settings["max_iter"], settings["tol"])
    reference = em.sklearn_reference(data, init, settings["max_iter"], settings["tol"])

    history = np.array(history)
    assert len(history) > 5  # EM actually iterated.
    assert history[-1] > history[0] + 0.1
    assert np.all(np.diff(history) >= -1e-9 * np.abs(history[:-1]))
    sklearn_score = reference.score(data)
    assert abs(history[-1] - sklearn_score) <= 1e-3 * abs(sklearn_score)


def test_em_iterations_equal_sklearn_iterations():
    data = em.make_data(200, seed=3)
    init = em.initial_params(data, num_components=3, seed=3)
    iterations = 5  # Far from converged, so every step has to agree.
    fitted, _ = em.fit_em(tf.constant(data), init, iterations, tol=0.0)
    with pytest.warns(ConvergenceWarning):
        reference = em.sklearn_reference(data, init, iterations, tol=0.0)
    np.testing.assert_allclose(fitted.weights.numpy(), reference.weights_, rtol=1e-9)
    np.testing.assert_allclose(fitted.means.numpy(), reference.means_, rtol=1e-9)
    np.testing.assert_allclose(fitted.variances.numpy(), reference.covariances_, rtol=1e-9)
    assert max_abs_difference(fitted.means, init.means) > 0.1


def test_em_run_meets_its_criteria():
    figures = em.run(**em.QUICK_SETTINGS)
    assert figures.smallest_relative_gain >= -em.MONOTONE_TOLERANCE
    assert figures.relative_difference <= em.SKLEARN_TOLERANCE
    assert figures.failures() == []


def test_q_gradient_is_the_likelihood_gradient_only_with_stop_gradient():
    data = tf.constant(em.make_data(200, seed=2))
    params = em.initial_params(data.numpy(), num_components=3, seed=2)

    def q_gradient(stop_gradient):
        with tf.GradientTape() as tape:
            tape.watch(params)
            q = em.q_function(data, params, stop_gradient)
        return tape.gradient(q, params)

    # Fisher's identity: with the responsibilities held fixed, grad Q = grad log-likelihood.
    with tf.GradientTape() as tape:
        tape.watch(params)
        log_likelihood = reference_total_log_likelihood(data, *params)
    expected = tape.gradient(log_likelihood, params)
    scale = max(float(tf.reduce_max(tf.abs(g))) for g in expected)

    assert max_abs_difference(q_gradient(tf_stopgrad.stop_gradient), expected) <= 1e-9 * scale
    assert max_abs_difference(q_gradient(tf.stop_gradient), expected) <= 1e-9 * scale
    assert max_abs_difference(q_gradient(tf.identity), expected) > 1e-2 * scale


# --- Contrastive divergence -----------------------------------------------------------------


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def textbook_cd_update(data, chain_end, weights, visible_bias, hidden_bias):
    """<v p(h|v)>_data - <v p(h|v)>_chain and the bias analogues, in NumPy."""
    data_hidden = sigmoid(data @ weights + hidden_bias)
    chain_hidden = sigmoid(chain_end @ weights + hidden_bias)
    batch = len(data)
    return (
        (data.T @ data_hidden - chain_end.T @ chain_hidden) / batch,
        (data - chain_end).mean(axis=0),
        (data_hidden - chain_hidden).mean(axis=0),
    )


# On a GPU, TensorFlow runs float32 matmuls in TF32 by default (Ampere and later): their inputs
# keep 10 of float32's 23 mantissa bits, so a sum of products is right to about 1e-3.
TF32 = bool(tf.config.list_logical_devices("GPU")) and (
    tf.config.experimental.tensor_float_32_execution_enabled()
)


@pytest.mark.parametrize("cd_steps", [1, 3])
def test_cd_gradient_is_the_textbook_update(cd_steps):
    """What the demo promises: stop_gradient makes the gradient the textbook CD update, to 1e-5
    in float32 (on the CPU), and to 1e-3 where a GPU runs its matmuls in TF32, as TensorFlow does
    by default; either way far from the gradient without it (more than 1e-2 away)."""
    data = (load_digits().data[:50] > 8).astype(np.float32)
    rng = np.random.default_rng(3)
    params = rbm.RBMParams(
        tf.constant(rng.normal(0.0, 0.3, (64, 20)), tf.float32),
        tf.constant(rng.normal(0.0, 0.3, 64), tf.float32),
        tf.constant(rng.normal(0.0, 0.3, 20), tf.float32),
    )

    def gradients_with(stop_gradient):
        chain_rng = tf.random.Generator.from_seed(7)
        return rbm.cd_gradients(tf.constant(data), params, cd_steps, chain_rng, stop_gradient)

    gradients, chain_end = gradients_with(tf_stopgrad.stop_gradient)
    chain_end = chain_end.numpy()
    assert np.abs(chain_end - data).mean() > 0.05  # The chain moved away from the data.
    expected_update = textbook_cd_update(data, chain_end, *(p.numpy() for p in params))
    descent = [-g.numpy() for g in gradients]
    assert max_abs_difference(descent, expected_update) <= (1e-3 if TF32 else 1e-5)
    assert max(np.abs(u).max() for u in expected_update) > 1e-2

    builtin_gradients, builtin_chain_end = gradients_with(tf.stop_gradient)
    np.testing.assert_array_equal(builtin_chain_end.numpy(), chain_end)
    assert max_abs_difference(gradients, builtin_gradients) <= 1e-6

    unstopped_gradients, _ = gradients_with(tf.identity)
    assert max_abs_difference([-g for g in unstopped_gradients], expected_update) > 1e-2


def test_rbm_training_halves_the_reconstruction_error():
    figures = rbm.run(**rbm.QUICK_SETTINGS)
    assert figures.final_error <= 0.5 * figures.initial_error
    assert figures.cd_update_difference <= rbm.GRADIENT_TOLERANCE
    assert figures.builtin_stop_gradient_difference <= rbm.GRADIENT_TOLERANCE
    assert figures.no_stop_gradient_difference > 1e-2
    assert figures.failures() == []


# --- FGSM adversarial training --------------------------------------------------------------


def small_mlp(seed):
    rng = np.random.default_rng(seed)
    return adversarial.MLPParams(
        *(
            tf.constant(rng.normal(0.0, 0.3, shape), tf.float32)
            for shape in [(64, 16), (16,), (16, 10), (10,)]
        )
    )


def reference_cross_entropy(params, images, labels):
    hidden = tf.nn.relu(images @ params.hidden_weights + params.hidden_bias)
    class_scores = hidden @ params.output_weights + params.output_bias
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, class_scores))


def digit_batch(size):
    digits = load_digits()
    return (
        tf.constant(digits.data[:size] / 16.0, tf.float32),
        tf.constant(digits.target[:size], tf.int32),
    )


def test_fgsm_examples_are_the_signed_gradient_step():
    params = small_mlp(seed=4)
    images, labels = digit_batch(40)
    epsilon = 0.15
    with tf.GradientTape() as tape:
        tape.watch(images)
        loss = reference_cross_entropy(params, images, labels)
    step = epsilon * np.sign(tape.gradient(loss, images).numpy())
    expected = np.clip(images.numpy() + step, 0.0, 1.0)
    actual = adversarial.fgsm_examples(params, images, labels, epsilon).numpy()
    np.testing.assert_allclose(actual, expected, rtol=0, atol=1e-6)
    assert np.abs(actual - images.numpy()).max() == pytest.approx(epsilon)


def test_adversarial_training_gradient_treats_the_perturbation_as_fixed():
    params = small_mlp(seed=5)
    images, labels = digit_batch(40)
    epsilon = 0.2

    def training_gradient(stop_gradient):
        with tf.GradientTape() as tape:
            tape.watch(params)
            loss = adversarial.adversarial_training_loss(
                params, images, labels, epsilon, stop_gradient
            )
        return tape.gradient(loss, params)

    # Reference: make the adversarial images first, then differentiate with them as data.
    fixed_adversarial = tf.constant(adversarial.fgsm_examples(params, images, labels, epsilon))
    with tf.GradientTape() as tape:
        tape.watch(params)
        loss = 0.5 * reference_cross_entropy(params, images, labels)
        loss += 0.5 * reference_cross_entropy(params, fixed_adversarial, labels)
    expected = tape.gradient(loss, params)

    assert max_abs_difference(training_gradient(tf_stopgrad.stop_gradient), expected) <= 1e-6
    assert max_abs_difference(training_gradient(tf.stop_gradient), expected) <= 1e-6
    with_stop = adversarial.training_gradient_ops(params, epsilon, tf_stopgrad.stop_gradient)
    with_builtin = adversarial.training_gradient_ops(params, epsilon, tf.stop_gradient)
    without_stop = adversarial.training_gradient_ops(params, epsilon, tf.identity)
    assert with_stop == with_builtin < without_stop


def test_adversarial_training_resists_fgsm():
    figures = adversarial.run(**adversarial.QUICK_SETTINGS)
    assert figures.epsilon == pytest.approx(0.2)
    assert figures.adversarial.attacked - figures.normal.attacked >= 0.2
    assert figures.normal.clean >= 0.85
    assert figures.adversarial.clean >= 0.85
    assert figures.failures() == []


# --- Command line ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["softmax", "em", "rbm", "adversarial"])
def test_demo_quick_succeeds_and_saves_a_plot(name, tmp_path, capsys):
    plot = tmp_path / f"{name}.png"
    assert demo(name, ["--quick", "--plot", str(plot)]) == 0
    assert plot.stat().st_size > 1000
    assert plot.read_bytes().startswith(b"\x89PNG")
    captured = capsys.readouterr()
    assert str(plot) in captured.out
    # stderr is not a terminal here: progress comes as a few whole lines, never as "\r".
    assert "\r" not in captured.err
    progress_lines = [line for line in captured.err.splitlines() if re.search(r" \d+/\d+$", line)]
    assert len(progress_lines) <= 10


def test_the_softmax_demo_needs_neither_scikit_learn_nor_matplotlib(monkeypatch):
    # As if the examples extra were not installed: importing either raises ModuleNotFoundError.
    # (The others need scikit-learn: tests/test_command_line.py.)
    imported = {name for name in sys.modules if name.split(".")[0] in ("sklearn", "matplotlib")}
    for name in imported | {"sklearn", "matplotlib"}:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.delitem(sys.modules, "tf_stopgrad.examples.softmax", raising=False)
    assert demo("softmax", ["--quick"]) == 0


def test_examples_lists_the_four_examples():
    assert sorted(EXAMPLES) == ["adversarial", "em", "rbm", "softmax"]
