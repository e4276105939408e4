"""Numerically stable softmax: shift the logits by their maximum, held constant.

Softmax is unchanged by subtracting the same number from every logit. Subtracting the
maximum keeps ``exp`` from overflowing, and because the result does not depend on the shift,
its gradient through ``reduce_max`` is zero anyway. Passing the maximum through
``tf_stopgrad.stop_gradient`` says so to autodiff, which then skips that branch: the values
and gradients stay equal to ``tf.nn.softmax`` and the backward graph gets smaller.

Run ``python -m tf_stopgrad demo softmax [--plot ops.png]``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import numpy as np
import tensorflow as tf

import tf_stopgrad
from tf_stopgrad import _plots

SoftmaxFn = Callable[[tf.Tensor], tf.Tensor]
StopGradientFn = Callable[[tf.Tensor], tf.Tensor]

# Largest accepted difference from tf.nn.softmax, for values and gradients (float32).
TOLERANCE = 1e-6


def stable_softmax(
    logits: tf.Tensor, stop_gradient: StopGradientFn = tf_stopgrad.stop_gradient
) -> tf.Tensor:
    """Softmax over the last axis, shifted by the maximum logit, which ``stop_gradient`` holds
    constant."""
    shift = stop_gradient(tf.reduce_max(logits, axis=-1, keepdims=True))
    exps = tf.exp(logits - shift)
    return exps / tf.reduce_sum(exps, axis=-1, keepdims=True)


def unstopped_softmax(logits: tf.Tensor) -> tf.Tensor:
    """The same shift as :func:`stable_softmax`, but autodiff differentiates through it."""
    # A Python no-op, not tf.identity: the graphs compared in run() differ only in stop_gradient.
    return stable_softmax(logits, lambda shift: shift)


def naive_softmax(logits: tf.Tensor) -> tf.Tensor:
    """Softmax straight from the definition, without a shift: NaN where ``exp`` overflows."""
    exps = tf.exp(logits)
    return exps / tf.reduce_sum(exps, axis=-1, keepdims=True)


def softmax_and_gradient(
    softmax: SoftmaxFn, logits: tf.Tensor, output_weights: tf.Tensor
) -> tuple[tf.Tensor, tf.Tensor]:
    """The probabilities and the gradient, with respect to ``logits``, of their sum weighted
    by ``output_weights`` (same shape): a plain sum is always one and has a zero gradient."""
    with tf.GradientTape() as tape:
        tape.watch(logits)
        probabilities = softmax(logits)
        objective = tf.reduce_sum(output_weights * probabilities)
    return probabilities, tape.gradient(objective, logits)


def count_graph_ops(softmax: SoftmaxFn, shape: tuple[int, ...], with_gradient: bool) -> int:
    """The number of operations in a traced ``tf.function`` that evaluates ``softmax`` on
    float32 logits of ``shape``: the forward pass, and its gradient if ``with_gradient``."""
    spec = tf.TensorSpec(shape, tf.float32)
    if with_gradient:
        traced = tf.function(lambda logits, weights: softmax_and_gradient(softmax, logits, weights))
        concrete = traced.get_concrete_function(spec, spec)
    else:
        concrete = tf.function(softmax).get_concrete_function(spec)
    return len(concrete.graph.get_operations())


@dataclasses.dataclass
class CaseResult:
    """How :func:`stable_softmax` compares with ``tf.nn.softmax`` on one set of logits."""

    name: str
    max_value_error: float
    max_gradient_error: float
    finite: bool
    naive_finite: bool


@dataclasses.dataclass
class SoftmaxFigures:
    """Everything the softmax example measures."""

    cases: list[CaseResult]
    forward_ops_with_stop: int
    forward_ops_without_stop: int
    gradient_ops_with_stop: int
    gradient_ops_without_stop: int

    def failures(self) -> list[str]:
        missed = []
        for case in self.cases:
            if not case.finite:
                missed.append(f"{case.name}: stable softmax is not finite")
            if case.max_value_error > TOLERANCE or case.max_gradient_error > TOLERANCE:
                missed.append(f"{case.name}: differs from tf.nn.softmax by more than {TOLERANCE}")
        if next(case for case in self.cases if case.name == "large").naive_finite:
            missed.append("large: the naive softmax was expected to overflow but did not")
        if self.gradient_ops_with_stop >= self.gradient_ops_without_stop:
            missed.append("the backward graph with stop_gradient is not smaller")
        return missed

    def summary(self) -> str:
        lines = [
            f"{case.name:>9}: max |p - tf.nn.softmax| = {case.max_value_error:.2e}, "
            f"max |grad - reference| = {case.max_gradient_error:.2e}, finite: {case.finite}, "
            f"naive softmax finite: {case.naive_finite}"
            for case in self.cases
        ]
        with_stop, without_stop = self.backward_ops()
        lines += [
            f"graph ops, forward only:  {self.forward_ops_with_stop} with stop_gradient, "
            f"{self.forward_ops_without_stop} without",
            f"graph ops, with gradient: {self.gradient_ops_with_stop} with stop_gradient, "
            f"{self.gradient_ops_without_stop} without (the backward pass adds "
            f"{with_stop} vs. {without_stop})",
        ]
        return "\n".join(lines)

    def backward_ops(self) -> tuple[int, int]:
        """The ops the gradient adds to the graph, with and without stop_gradient."""
        return (
            self.gradient_ops_with_stop - self.forward_ops_with_stop,
            self.gradient_ops_without_stop - self.forward_ops_without_stop,
        )

    def save_plot(self, path: str) -> None:
        """A bar chart of the backward-pass op counts with and without stop_gradient."""
        fig, ax = _plots.pyplot().subplots(figsize=(4, 3))
        ax.bar(
            ["stop_gradient(max)", "plain max"],
            self.backward_ops(),
            color=["tab:green", "tab:gray"],
        )
        ax.set_ylabel("ops added by the gradient")
        ax.set_title("Stable softmax: backward graph size")
        _plots.save_figure(fig, path)


def example_logits(batch: int, classes: int, seed: int) -> dict[str, np.ndarray]:
    """The logits the example checks, ``batch`` rows of ``classes`` (at least 3) each:
    ``ordinary`` (unit-scale logits), ``large`` (around 1e4, where exp overflows float32),
    and ``tied_max`` (each row's maximum appears three times)."""
    rng = np.random.default_rng(seed)
    ordinary = rng.normal(size=(batch, classes)).astype(np.float32)
    large = (1e4 + 3.0 * rng.normal(size=(batch, classes))).astype(np.float32)
    tied_max = rng.normal(size=(batch, classes)).astype(np.float32)
    tied_max[:, :3] = tied_max.max(axis=-1, keepdims=True) + 1.0
    return {"ordinary": ordinary, "large": large, "tied_max": tied_max}


def _all_finite(*tensors: tf.Tensor) -> bool:
    return all(bool(tf.reduce_all(tf.math.is_finite(tensor))) for tensor in tensors)


def run(batch: int = 8, classes: int = 10, seed: int = 0) -> SoftmaxFigures:
    """Compares :func:`stable_softmax` with ``tf.nn.softmax`` on the logits of
    :func:`example_logits` and counts the traced graphs' operations."""
    output_weights = tf.constant(
        np.random.default_rng(seed + 1).normal(size=(batch, classes)), tf.float32
    )
    cases = []
    for name, logits in example_logits(batch, classes, seed).items():
        logits = tf.constant(logits)
        (values, gradient), (reference_values, reference_gradient), naive = (
            softmax_and_gradient(softmax, logits, output_weights)
            for softmax in (stable_softmax, tf.nn.softmax, naive_softmax)
        )
        cases.append(
            CaseResult(
                name=name,
                max_value_error=float(tf.reduce_max(tf.abs(values - reference_values))),
                max_gradient_error=float(tf.reduce_max(tf.abs(gradient - reference_gradient))),
                finite=_all_finite(values, gradient),
                naive_finite=_all_finite(*naive),
            )
        )
    shape = (batch, classes)
    return SoftmaxFigures(
        cases=cases,
        forward_ops_with_stop=count_graph_ops(stable_softmax, shape, with_gradient=False),
        forward_ops_without_stop=count_graph_ops(unstopped_softmax, shape, with_gradient=False),
        gradient_ops_with_stop=count_graph_ops(stable_softmax, shape, with_gradient=True),
        gradient_ops_without_stop=count_graph_ops(unstopped_softmax, shape, with_gradient=True),
    )


QUICK_SETTINGS: dict[str, Any] = {"batch": 4, "classes": 5}
PLOT_HELP = "save a bar chart of op counts"
