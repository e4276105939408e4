"""FGSM adversarial training of a small classifier on the bundled 8x8 digits.

The fast gradient sign method perturbs an image by ``epsilon * sign(d loss / d image)``.
Adversarial training adds the loss on such perturbed images to the ordinary loss. The
perturbation is computed from the model's own gradient, inside the training tape, so it
passes through ``tf_stopgrad.stop_gradient``: the adversarial image is treated as a fixed
input, and training does not backpropagate through the gradient computation that made it.

Two identical MLPs are trained from the same start, one normally and one adversarially, and
both are attacked with FGSM on held-out digits.

Run ``python -m tf_stopgrad demo adversarial [--plot accuracy.png]``.
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

# Success criteria: the adversarially trained model must beat the normal one under attack
# by this much, and both must keep this accuracy on clean images.
REQUIRED_ROBUSTNESS_GAIN = 0.2
REQUIRED_CLEAN_ACCURACY = 0.85


class MLPParams(NamedTuple):
    """A one-hidden-layer ReLU network: 64 pixels -> hidden units -> 10 logits."""

    hidden_weights: tf.Tensor
    hidden_bias: tf.Tensor
    output_weights: tf.Tensor
    output_bias: tf.Tensor


def logits(params: MLPParams, images: tf.Tensor) -> tf.Tensor:
    """Class scores, shape (B, 10), for flattened images of shape (B, 64)."""
    hidden = tf.nn.relu(images @ params.hidden_weights + params.hidden_bias)
    return hidden @ params.output_weights + params.output_bias


def cross_entropy(params: MLPParams, images: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
    """Mean softmax cross-entropy of the network on a labelled batch."""
    return tf.reduce_mean(
        tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits(params, images))
    )


def fgsm_examples(
    params: MLPParams,
    images: tf.Tensor,
    labels: tf.Tensor,
    epsilon: float,
    stop_gradient: StopGradientFn = tf_stopgrad.stop_gradient,
) -> tf.Tensor:
    """Perturbs images (B, 64) of pixels in [0, 1] by epsilon * sign(gradient of the loss),
    kept within [0, 1].

    ``stop_gradient`` is applied to the perturbation so that an enclosing tape does not
    differentiate how it was made. Pass an identity to see the cost of omitting it.
    """
    with tf.GradientTape() as attack_tape:
        attack_tape.watch(images)
        loss = cross_entropy(params, images, labels)
    perturbation = stop_gradient(epsilon * tf.sign(attack_tape.gradient(loss, images)))
    return tf.clip_by_value(images + perturbation, 0.0, 1.0)


def adversarial_training_loss(
    params: MLPParams,
    images: tf.Tensor,
    labels: tf.Tensor,
    epsilon: float,
    stop_gradient: StopGradientFn = tf_stopgrad.stop_gradient,
) -> tf.Tensor:
    """Average of the loss on the clean batch and on its FGSM-perturbed copy.

    The arguments are those of :func:`fgsm_examples`: here ``params`` is the network being
    trained and ``epsilon`` the size of the training perturbation.
    """
    adversarial = fgsm_examples(params, images, labels, epsilon, stop_gradient)
    return 0.5 * cross_entropy(params, images, labels) + 0.5 * cross_entropy(
        params, adversarial, labels
    )


def accuracy(params: MLPParams, images: tf.Tensor, labels: tf.Tensor) -> float:
    """Fraction of images classified correctly."""
    predictions = tf.argmax(logits(params, images), axis=-1, output_type=labels.dtype)
    return float(tf.reduce_mean(tf.cast(predictions == labels, tf.float32)))


def initial_params(num_hidden: int, seed: int) -> MLPParams:
    """He-initialised weights and zero biases, as variables."""
    rng = np.random.default_rng(seed)

    def he_normal(fan_in: int, fan_out: int) -> tf.Variable:
        weights = rng.normal(0.0, np.sqrt(2.0 / fan_in), (fan_in, fan_out))
        return tf.Variable(weights.astype(np.float32))

    return MLPParams(
        he_normal(64, num_hidden),
        tf.Variable(tf.zeros([num_hidden])),
        he_normal(num_hidden, 10),
        tf.Variable(tf.zeros([10])),
    )


def train(
    params: MLPParams,
    images: tf.Tensor,
    labels: tf.Tensor,
    epochs: int,
    batch_size: int,
    learning_rate: float,
    epsilon: float | None,
    seed: int,
) -> None:
    """Trains the network's variables in place by minibatch gradient descent, adversarially
    with FGSM perturbations of size ``epsilon`` unless it is None."""
    shuffler = np.random.default_rng(seed)

    @tf.function
    def descend(batch_images: tf.Tensor, batch_labels: tf.Tensor) -> None:
        with tf.GradientTape() as tape:
            if epsilon is None:
                loss = cross_entropy(params, batch_images, batch_labels)
            else:
                loss = adversarial_training_loss(params, batch_images, batch_labels, epsilon)
        for variable, gradient in zip(params, tape.gradient(loss, params)):
            variable.assign_sub(learning_rate * gradient)

    kind = "normal" if epsilon is None else "adversarial"
    with _progress.Progress(f"{kind} training epoch", epochs) as progress:
        for epoch in range(1, epochs + 1):
            order = shuffler.permutation(len(labels))
            for start in range(0, len(order), batch_size):
                batch = order[start : start + batch_size]
                descend(tf.gather(images, batch), tf.gather(labels, batch))
            progress(epoch)


def training_gradient_ops(params: MLPParams, epsilon: float, stop_gradient: StopGradientFn) -> int:
    """Counts the ops of a traced function returning the adversarial training gradient, with
    ``stop_gradient`` applied to the perturbation (only the shapes of ``params`` matter)."""

    @tf.function
    def training_gradient(images: tf.Tensor, labels: tf.Tensor) -> list[tf.Tensor]:
        with tf.GradientTape() as tape:
            tape.watch(params)
            loss = adversarial_training_loss(params, images, labels, epsilon, stop_gradient)
        return tape.gradient(loss, params)

    concrete = training_gradient.get_concrete_function(
        tf.TensorSpec([None, 64], tf.float32), tf.TensorSpec([None], tf.int32)
    )
    return len(concrete.graph.get_operations())


@dataclasses.dataclass
class ModelAccuracy:
    """Test accuracy of one model on clean and on FGSM-attacked images."""

    clean: float
    attacked: float


@dataclasses.dataclass
class AdversarialFigures:
    """Everything the adversarial-training example measures."""

    epsilon: float
    normal: ModelAccuracy
    adversarial: ModelAccuracy
    gradient_ops_with_stop: int
    gradient_ops_without_stop: int

    def models(self) -> tuple[tuple[str, ModelAccuracy], ...]:
        return ("normal", self.normal), ("adversarial", self.adversarial)

    def failures(self) -> list[str]:
        missed = []
        gain = self.adversarial.attacked - self.normal.attacked
        if gain < REQUIRED_ROBUSTNESS_GAIN:
            missed.append(
                f"adversarial training gained only {gain:.3f} accuracy under attack "
                f"(needs {REQUIRED_ROBUSTNESS_GAIN})"
            )
        for kind, result in self.models():
            if result.clean < REQUIRED_CLEAN_ACCURACY:
                missed.append(f"{kind} model's clean accuracy {result.clean:.3f} is too low")
        return missed

    def summary(self) -> str:
        lines = [
            f"{kind:>11} training: test accuracy {result.clean:.3f} clean, "
            f"{result.attacked:.3f} under FGSM (eps={self.epsilon:g})"
            for kind, result in self.models()
        ]
        lines.append(
            f"adversarial training gradient graph: {self.gradient_ops_with_stop} ops with "
            f"stop_gradient on the perturbation, {self.gradient_ops_without_stop} without"
        )
        return "\n".join(lines)

    def save_plot(self, path: str) -> None:
        """Grouped bars of clean and attacked accuracy for both models."""
        positions = np.arange(2)
        fig, ax = _plots.pyplot().subplots(figsize=(5, 3))
        for offset, (kind, result) in zip((-0.2, 0.2), self.models()):
            ax.bar(positions + offset, [result.clean, result.attacked], width=0.4, label=kind)
        ax.set_xticks(positions, ["clean", f"FGSM eps={self.epsilon:g}"])
        ax.set_ylim(0.0, 1.0)
        ax.set_ylabel("test accuracy")
        ax.legend(title="training")
        _plots.save_figure(fig, path)


def run(
    num_hidden: int = 128,
    epochs: int = 100,
    batch_size: int = 32,
    learning_rate: float = 0.2,
    epsilon: float = 0.2,
    seed: int = 0,
) -> AdversarialFigures:
    """Trains a normal and an adversarial model from the same start and attacks both, with
    FGSM of size ``epsilon``, on the bundled digits with pixels scaled to [0, 1] and split
    75/25 (stratified)."""
    digits = load_digits()
    split = train_test_split(
        (digits.data / 16.0).astype(np.float32),
        digits.target.astype(np.int32),
        test_size=0.25,
        random_state=seed,
        stratify=digits.target,
    )
    train_images, test_images, train_labels, test_labels = (tf.constant(a) for a in split)
    results = {}
    for kind, fgsm_eps in (("normal", None), ("adversarial", epsilon)):
        params = initial_params(num_hidden, seed)
        train(params, train_images, train_labels, epochs, batch_size, learning_rate, fgsm_eps, seed)
        attacked_images = fgsm_examples(params, test_images, test_labels, epsilon)
        results[kind] = ModelAccuracy(
            clean=accuracy(params, test_images, test_labels),
            attacked=accuracy(params, attacked_images, test_labels),
        )
    return AdversarialFigures(
        epsilon=epsilon,
        normal=results["normal"],
        adversarial=results["adversarial"],
        gradient_ops_with_stop=training_gradient_ops(params, epsilon, tf_stopgrad.stop_gradient),
        gradient_ops_without_stop=training_gradient_ops(params, epsilon, tf.identity),
    )


QUICK_SETTINGS: dict[str, Any] = {"num_hidden": 64, "epochs": 30, "learning_rate": 0.3}
PLOT_HELP = "save a bar chart of the accuracies"
