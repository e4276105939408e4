"""A binary restricted Boltzmann machine trained by contrastive divergence (CD-k).

CD approximates the log-likelihood gradient by the data statistics minus the statistics of
samples from a short Gibbs chain that starts at the data. Written as a loss,

    loss = mean F(data) - mean F(stop_gradient(chain sample)),    F = free energy,

its gradient is exactly the textbook CD update, provided autodiff does not also
differentiate the chain that produced the samples. The chain ends on visible probabilities
(the usual mean-field last step), which depend smoothly on the weights, so without
``tf_stopgrad.stop_gradient`` the gradient would pick up a term through the chain.

The data are scikit-learn's bundled 8x8 digits, binarised (pixel > 8).

Run ``python -m tf_stopgrad demo rbm [--plot reconstruction.png]``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, NamedTuple

import numpy as np
import tensorflow as tf
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

import tf_stopgrad
from tf_stopgrad import _plots, _progress

StopGradientFn = Callable[[tf.Tensor], tf.Tensor]

# Largest accepted difference between the autodiff gradient and the hand-written CD update.
GRADIENT_TOLERANCE = 1e-5


class RBMParams(NamedTuple):
    """Weights and biases of a binary RBM with V visible and H hidden units."""

    weights: tf.Tensor  # (V, H)
    visible_bias: tf.Tensor  # (V,)
    hidden_bias: tf.Tensor  # (H,)


def hidden_probabilities(visible: tf.Tensor, params: RBMParams) -> tf.Tensor:
    """p(h_j = 1 | v) for a batch of visible vectors, shape (B, H)."""
    return tf.sigmoid(visible @ params.weights + params.hidden_bias)


def visible_probabilities(hidden: tf.Tensor, params: RBMParams) -> tf.Tensor:
    """p(v_i = 1 | h) for a batch of hidden vectors, shape (B, V)."""
    return tf.sigmoid(tf.matmul(hidden, params.weights, transpose_b=True) + params.visible_bias)


def free_energy(visible: tf.Tensor, params: RBMParams) -> tf.Tensor:
    """F(v) = -v.b - sum_j softplus(c_j + v.W_j), per row of ``visible``, shape (B,)."""
    return -tf.linalg.matvec(visible, params.visible_bias) - tf.reduce_sum(
        tf.nn.softplus(visible @ params.weights + params.hidden_bias), axis=-1
    )


def sample_bernoulli(probabilities: tf.Tensor, rng: tf.random.Generator) -> tf.Tensor:
    """Draws 0/1 values with the given probabilities (no gradient flows through a draw)."""
    uniform = rng.uniform(tf.shape(probabilities), dtype=probabilities.dtype)
    return tf.cast(uniform < probabilities, probabilities.dtype)


def gibbs_chain(
    data: tf.Tensor, params: RBMParams, steps: int, rng: tf.random.Generator
) -> tf.Tensor:
    """Runs ``steps`` (k of CD-k, at least 1) rounds of block Gibbs sampling v -> h -> v from
    binary ``data`` (B, V). Returns the visible probabilities of the last round; earlier rounds
    sample binary visibles."""
    visible = data
    for _ in range(steps - 1):
        hidden = sample_bernoulli(hidden_probabilities(visible, params), rng)
        visible = sample_bernoulli(visible_probabilities(hidden, params), rng)
    hidden = sample_bernoulli(hidden_probabilities(visible, params), rng)
    return visible_probabilities(hidden, params)


def contrastive_divergence_loss(
    data: tf.Tensor,
    chain_end: tf.Tensor,
    params: RBMParams,
    stop_gradient: StopGradientFn = tf_stopgrad.stop_gradient,
) -> tf.Tensor:
    """Mean free energy of the data minus that of the chain's samples ``chain_end``, held
    constant by ``stop_gradient`` (pass an identity to see what goes wrong without it): the
    scalar loss whose gradient is the (negated) CD update."""
    return tf.reduce_mean(free_energy(data, params)) - tf.reduce_mean(
        free_energy(stop_gradient(chain_end), params)
    )


def cd_gradients(
    data: tf.Tensor,
    params: RBMParams,
    cd_steps: int,
    rng: tf.random.Generator,
    stop_gradient: StopGradientFn = tf_stopgrad.stop_gradient,
) -> tuple[RBMParams, tf.Tensor]:
    """Runs the Gibbs chain and differentiates the CD loss, all under one tape; returns the gradient
    of the loss for each parameter (tensors or variables), and the chain's final visible vectors."""
    with tf.GradientTape() as tape:
        tape.watch(params)
        chain_end = gibbs_chain(data, params, cd_steps, rng)
        loss = contrastive_divergence_loss(data, chain_end, params, stop_gradient)
    return tape.gradient(loss, params), chain_end


def textbook_cd_update(data: tf.Tensor, chain_end: tf.Tensor, params: RBMParams) -> RBMParams:
    """The CD update written out: data statistics minus chain statistics, batch averages.

    dW = <v p(h|v)>_data - <v p(h|v)>_chain, db = <v>_data - <v>_chain,
    dc = <p(h|v)>_data - <p(h|v)>_chain: the ascent direction for each parameter.
    """
    batch_size = tf.cast(tf.shape(data)[0], data.dtype)
    data_hidden = hidden_probabilities(data, params)
    chain_hidden = hidden_probabilities(chain_end, params)
    return RBMParams(
        weights=(
            tf.matmul(data, data_hidden, transpose_a=True)
            - tf.matmul(chain_end, chain_hidden, transpose_a=True)
        )
        / batch_size,
        visible_bias=tf.reduce_mean(data - chain_end, axis=0),
        hidden_bias=tf.reduce_mean(data_hidden - chain_hidden, axis=0),
    )


def reconstruction_error(data: tf.Tensor, params: RBMParams) -> float:
    """Mean squared error of the mean-field reconstruction v -> p(h|v) -> p(v|h)."""
    reconstruction = visible_probabilities(hidden_probabilities(data, params), params)
    return float(tf.reduce_mean((data - reconstruction) ** 2))


def initial_params(num_visible: int, num_hidden: int, seed: int) -> RBMParams:
    """Small random weights and zero biases, as variables."""
    weights = np.random.default_rng(seed).normal(0.0, 0.01, size=(num_visible, num_hidden))
    return RBMParams(
        tf.Variable(weights.astype(np.float32)),
        tf.Variable(tf.zeros([num_visible])),
        tf.Variable(tf.zeros([num_hidden])),
    )


def train(
    train_data: np.ndarray,
    held_out: np.ndarray,
    params: RBMParams,
    epochs: int,
    batch_size: int,
    learning_rate: float,
    cd_steps: int,
    seed: int,
) -> list[float]:
    """Trains the RBM's variables in place by minibatch gradient descent on the CD loss; returns
    the reconstruction error of ``held_out`` before training and after each epoch."""
    rng = tf.random.Generator.from_seed(seed)
    shuffler = np.random.default_rng(seed)

    @tf.function
    def descend(batch: tf.Tensor) -> None:
        gradients, _ = cd_gradients(batch, params, cd_steps, rng)
        for variable, gradient in zip(params, gradients):
            variable.assign_sub(learning_rate * gradient)

    errors = [reconstruction_error(held_out, params)]
    with _progress.Progress("RBM epoch", epochs) as progress:
        for epoch in range(1, epochs + 1):
            order = shuffler.permutation(len(train_data))
            for start in range(0, len(order), batch_size):
                descend(tf.constant(train_data[order[start : start + batch_size]]))
            errors.append(reconstruction_error(held_out, params))
            progress(epoch)
    return errors


@dataclasses.dataclass
class RBMFigures:
    """Everything the RBM example measures."""

    reconstruction_errors: list[float]
    pixel_mean_error: float
    cd_update_difference: float
    builtin_stop_gradient_difference: float
    no_stop_gradient_difference: float

    @property
    def initial_error(self) -> float:
        """Held-out reconstruction error before training."""
        return self.reconstruction_errors[0]

    @property
    def final_error(self) -> float:
        """Held-out reconstruction error after training."""
        return self.reconstruction_errors[-1]

    def failures(self) -> list[str]:
        missed = []
        if self.final_error > 0.5 * self.initial_error:
            missed.append("the reconstruction error did not fall by half")
        if self.cd_update_difference > GRADIENT_TOLERANCE:
            missed.append("the autodiff gradient differs from the textbook CD update")
        if self.builtin_stop_gradient_difference > GRADIENT_TOLERANCE:
            missed.append("tf_stopgrad.stop_gradient and tf.stop_gradient give different gradients")
        return missed

    def summary(self) -> str:
        return (
            f"held-out reconstruction MSE: {self.initial_error:.4f} at initialisation, "
            f"{self.final_error:.4f} after {len(self.reconstruction_errors) - 1} epochs "
            f"(predicting pixel means: {self.pixel_mean_error:.4f})\n"
            f"max |autodiff gradient - textbook CD update|: {self.cd_update_difference:.2e}; "
            f"max |tf_stopgrad - tf.stop_gradient| gradient: "
            f"{self.builtin_stop_gradient_difference:.2e}\n"
            f"without stop_gradient the gradient is off by up to "
            f"{self.no_stop_gradient_difference:.2e}"
        )

    def save_plot(self, path: str) -> None:
        """The held-out reconstruction error per epoch."""
        _plots.save_curve(
            path,
            ("RBM (CD)", self.reconstruction_errors),
            ("pixel means", self.pixel_mean_error),
            ("epoch", "held-out reconstruction MSE"),
            reference_color="tab:gray",
        )


def largest_difference(first: RBMParams, second: RBMParams) -> float:
    """Largest absolute elementwise difference over all parameters."""
    return max(float(tf.reduce_max(tf.abs(a - b))) for a, b in zip(first, second))


def compare_gradients(
    data: tf.Tensor, params: RBMParams, cd_steps: int, seed: int
) -> tuple[float, float, float]:
    """Compares the CD loss's autodiff gradient with the textbook update and tf.stop_gradient.

    Every variant runs the same chain (same seed), so only the gradient computation differs.
    Returns the largest absolute differences: autodiff gradient vs. the textbook update's
    descent direction, tf_stopgrad vs. tf.stop_gradient, and no stop_gradient vs. that direction.
    """

    def gradients_with(stop_gradient: StopGradientFn) -> tuple[RBMParams, tf.Tensor]:
        rng = tf.random.Generator.from_seed(seed)
        return cd_gradients(data, params, cd_steps, rng, stop_gradient)

    gradients, chain_end = gradients_with(tf_stopgrad.stop_gradient)
    descent = RBMParams(*(-step for step in textbook_cd_update(data, chain_end, params)))
    builtin_gradients, _ = gradients_with(tf.stop_gradient)
    unstopped_gradients, _ = gradients_with(tf.identity)
    return (
        largest_difference(gradients, descent),
        largest_difference(gradients, builtin_gradients),
        largest_difference(unstopped_gradients, descent),
    )


def run(
    num_hidden: int = 64,
    epochs: int = 20,
    batch_size: int = 32,
    learning_rate: float = 0.1,
    cd_steps: int = 1,
    seed: int = 0,
) -> RBMFigures:
    """Trains an RBM on binarised digits and checks its gradient against the CD update (after
    training), on the bundled digits binarised at pixel > 8 and split 80/20 into train/held-out."""
    pixels = (load_digits().data > 8).astype(np.float32)
    train_data, held_out = train_test_split(pixels, test_size=0.2, random_state=seed)
    params = initial_params(train_data.shape[1], num_hidden, seed)
    errors = train(train_data, held_out, params, epochs, batch_size, learning_rate, cd_steps, seed)
    pixel_mean_error = float(np.mean((held_out - train_data.mean(axis=0)) ** 2))
    differences = compare_gradients(tf.constant(held_out[:64]), params, cd_steps, seed)
    return RBMFigures(errors, pixel_mean_error, *differences)


QUICK_SETTINGS: dict[str, Any] = {"epochs": 8}
PLOT_HELP = "save the reconstruction-error curve"
