"""EM for a Gaussian mixture, with the M-step taken from the gradient of the Q function.

The E-step computes each point's responsibilities (posterior component probabilities) under
the current parameters. The M-step maximises the expected complete-data log-likelihood

    Q(theta) = sum_n sum_k r_nk * (log pi_k + log N(x_n | mu_k, diag(var_k)))

with the responsibilities r held fixed. Here both steps are written as one differentiable
function of the current parameters, and ``tf_stopgrad.stop_gradient`` on the responsibilities
is what makes its gradient the M-step's gradient: without it, autodiff would also
differentiate the E-step. The M-step solves grad Q = 0 in closed form from that gradient.

The data are a synthetic 2-D mixture of three diagonal Gaussians; the fit is checked against
scikit-learn's ``GaussianMixture`` started from the same parameters.

Run ``python -m tf_stopgrad demo em [--plot loglik.png]``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, NamedTuple

import numpy as np
import tensorflow as tf
from sklearn.mixture import GaussianMixture

import tf_stopgrad
from tf_stopgrad import _plots, _progress

StopGradientFn = Callable[[tf.Tensor], tf.Tensor]

# Largest accepted relative drop of the log-likelihood between iterations (float64 round-off).
MONOTONE_TOLERANCE = 1e-9
# Largest accepted relative difference from scikit-learn's final average log-likelihood.
SKLEARN_TOLERANCE = 1e-3


class MixtureParams(NamedTuple):
    """Parameters of a Gaussian mixture with diagonal covariances (K components, D dims)."""

    weights: tf.Tensor  # (K,)
    means: tf.Tensor  # (K, D)
    variances: tf.Tensor  # (K, D)


def weighted_log_densities(data: tf.Tensor, params: MixtureParams) -> tf.Tensor:
    """log(pi_k) + log N(x_n | mu_k, diag(var_k)) for points (N, D) and components: (N, K)."""
    offsets = data[:, tf.newaxis, :] - params.means[tf.newaxis, :, :]
    log_normal = -0.5 * tf.reduce_sum(
        tf.math.log(2.0 * math.pi * params.variances) + offsets**2 / params.variances, axis=-1
    )
    return tf.math.log(params.weights) + log_normal


def average_log_likelihood(data: tf.Tensor, params: MixtureParams) -> tf.Tensor:
    """Mean over points of log p(x_n), the quantity scikit-learn's ``score`` reports."""
    return tf.reduce_mean(tf.reduce_logsumexp(weighted_log_densities(data, params), axis=-1))


def q_function(
    data: tf.Tensor,
    params: MixtureParams,
    stop_gradient: StopGradientFn = tf_stopgrad.stop_gradient,
) -> tf.Tensor:
    """Q at ``params``, sum_n sum_k r_nk * (log pi_k + log N(x_n | mu_k, var_k)), with the
    responsibilities r computed from ``params`` too (E-step).

    ``stop_gradient`` on the responsibilities makes the gradient of Q treat them as the
    constants of the E-step. Pass an identity to see what goes wrong without it.
    """
    log_densities = weighted_log_densities(data, params)
    responsibilities = stop_gradient(tf.nn.softmax(log_densities, axis=-1))
    return tf.reduce_sum(responsibilities * log_densities)


def m_step(data: tf.Tensor, params: MixtureParams) -> MixtureParams:
    """Maximises Q exactly, using only its value and gradient at the current parameters.

    Q is linear in the expected sufficient statistics N_k = sum_n r_nk, sum_n r_nk x_n and
    sum_n r_nk (x_n - mu_k)^2, so its gradient at the current parameters recovers them:

        dQ/dpi_k  = N_k / pi_k
        dQ/dmu_k  = (sum_n r_nk x_n - N_k mu_k) / var_k
        dQ/dvar_k = (sum_n r_nk (x_n - mu_k)^2 - N_k var_k) / (2 var_k^2)

    and the maximiser of Q follows in closed form (its weights normalised to sum to one).
    """
    with tf.GradientTape() as tape:
        tape.watch(params)
        q = q_function(data, params)
    grad = tape.gradient(q, params)
    counts = params.weights * grad.weights
    per_dim_counts = counts[:, tf.newaxis]
    means = params.means + params.variances * grad.means / per_dim_counts
    spread_about_old_means = (
        params.variances + 2.0 * params.variances**2 * grad.variances / per_dim_counts
    )
    variances = spread_about_old_means - (means - params.means) ** 2
    return MixtureParams(counts / tf.reduce_sum(counts), means, variances)


def make_data(num_points: int, seed: int) -> np.ndarray:
    """Samples ``num_points`` float64 2-D points from a fixed, overlapping 3-Gaussian mixture."""
    rng = np.random.default_rng(seed)
    weights = np.array([0.5, 0.3, 0.2])
    means = np.array([[-2.0, 0.0], [1.5, 0.5], [0.0, 2.5]])
    stddevs = np.array([[0.8, 0.6], [0.6, 1.0], [1.0, 0.7]])
    components = rng.choice(len(weights), size=num_points, p=weights)
    return means[components] + stddevs[components] * rng.normal(size=(num_points, 2))


def initial_params(data: np.ndarray, num_components: int, seed: int) -> MixtureParams:
    """Random data points as means, the data's variance and equal weights, as float64 tensors."""
    means = data[np.random.default_rng(seed).choice(len(data), size=num_components, replace=False)]
    variances = np.tile(data.var(axis=0), (num_components, 1))
    weights = np.full(num_components, 1.0 / num_components)
    return MixtureParams(*(tf.constant(a, tf.float64) for a in (weights, means, variances)))


def fit_em(
    data: tf.Tensor, params: MixtureParams, max_iter: int, tol: float
) -> tuple[MixtureParams, list[float]]:
    """Alternates E- and M-steps until the average log-likelihood gains less than ``tol``; returns
    the fitted mixture, and the average log-likelihood before the first and after every M-step
    (at most ``max_iter``)."""

    @tf.function
    def em_iteration(current: MixtureParams) -> tuple[MixtureParams, tf.Tensor]:
        updated = m_step(data, current)
        return updated, average_log_likelihood(data, updated)

    history = [float(average_log_likelihood(data, params))]
    with _progress.Progress("EM iteration", max_iter) as progress:
        for iteration in range(1, max_iter + 1):
            params, log_likelihood = em_iteration(params)
            history.append(float(log_likelihood))
            progress(iteration)
            if abs(history[-1] - history[-2]) < tol:
                break
    return params, history


def sklearn_reference(
    data: np.ndarray, init: MixtureParams, max_iter: int, tol: float
) -> GaussianMixture:
    """Fits scikit-learn's EM from the same initial mixture (without covariance regularisation)."""
    return GaussianMixture(
        n_components=len(init.weights),
        covariance_type="diag",
        tol=tol,
        reg_covar=0.0,
        max_iter=max_iter,
        weights_init=init.weights.numpy(),
        means_init=init.means.numpy(),
        precisions_init=1.0 / init.variances.numpy(),
        random_state=0,
    ).fit(data)


@dataclasses.dataclass
class EMFigures:
    """Everything the EM example measures."""

    log_likelihoods: list[float]
    smallest_relative_gain: float
    sklearn_score: float
    sklearn_iterations: int
    relative_difference: float

    def failures(self) -> list[str]:
        missed = []
        if self.smallest_relative_gain < -MONOTONE_TOLERANCE:
            missed.append(
                f"the log-likelihood decreased by {-self.smallest_relative_gain:.2e} (relative)"
            )
        if self.relative_difference > SKLEARN_TOLERANCE:
            missed.append(
                f"final log-likelihood differs from scikit-learn's by "
                f"{self.relative_difference:.2e}"
            )
        return missed

    def summary(self) -> str:
        history = self.log_likelihoods
        return (
            f"average log-likelihood: {history[0]:.6f} at the start, {history[-1]:.6f} after "
            f"{len(history) - 1} iterations\n"
            f"smallest relative gain from one iteration to the next: "
            f"{self.smallest_relative_gain:.2e} (must be >= -{MONOTONE_TOLERANCE:.0e})\n"
            f"scikit-learn GaussianMixture from the same start: {self.sklearn_score:.6f} after "
            f"{self.sklearn_iterations} iterations (relative difference "
            f"{self.relative_difference:.2e})"
        )

    def save_plot(self, path: str) -> None:
        """The log-likelihood trace, with scikit-learn's final score as a dashed line."""
        _plots.save_curve(
            path,
            ("EM with stop_gradient", self.log_likelihoods),
            ("scikit-learn", self.sklearn_score),
            ("iteration", "average log-likelihood"),
        )


def run(
    num_points: int = 1000,
    num_components: int = 3,
    max_iter: int = 300,
    tol: float = 1e-10,
    seed: int = 0,
) -> EMFigures:
    """Fits the mixture by EM and compares with scikit-learn from the same start (the same
    ``max_iter`` and ``tol`` for both fits)."""
    data = make_data(num_points, seed)
    init = initial_params(data, num_components, seed)
    _, history = fit_em(tf.constant(data), init, max_iter, tol)
    reference = sklearn_reference(data, init, max_iter, tol)
    sklearn_score = float(reference.score(data))
    gains = [(after - before) / abs(before) for before, after in zip(history, history[1:])]
    return EMFigures(
        log_likelihoods=history,
        smallest_relative_gain=min(gains),
        sklearn_score=sklearn_score,
        sklearn_iterations=int(reference.n_iter_),
        relative_difference=abs(history[-1] - sklearn_score) / abs(sklearn_score),
    )


QUICK_SETTINGS: dict[str, Any] = {"num_points": 300, "max_iter": 100, "tol": 1e-8}
PLOT_HELP = "save the log-likelihood curve"
