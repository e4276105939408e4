"""opcheck's samples: the author's, checked and copied (``checked``), and the edge samples derived
from them (``edge_samples``), the inputs that op authors forget."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import ml_dtypes
import numpy as np
import tensorflow as tf

from ._fresh_process import OPAQUE


@dataclasses.dataclass(frozen=True, eq=False)  # hashed by identity, for the run's caches
class Sample:
    index: int
    arrays: tuple[np.ndarray, ...]
    dtypes: tuple[tf.DType, ...]
    derived: str = ""  # for an edge sample: the sample it comes from, and how
    base: int = -1  # for an edge sample: the index of that sample

    def tensors(self, arrays: Sequence[np.ndarray] = ()) -> list[tf.Tensor]:
        """New tensors of the sample's values (or of ``arrays``), copied: TensorFlow may share a
        NumPy array's memory, and an op that writes into its input must spoil no other call."""
        pairs = zip(arrays or self.arrays, self.dtypes)
        return [tf.constant(np.array(array, copy=True), dtype) for array, dtype in pairs]

    def specs(self, unknown: str = "") -> list[tf.TensorSpec]:
        """The sample's signature: its shapes, or ``unknown`` dimensions or rank."""
        return [tf.TensorSpec(None if unknown == "rank" else [None] * a.ndim if unknown
                              else a.shape, d) for a, d in zip(self.arrays, self.dtypes)]

    @property
    def finite(self) -> bool:
        """Whether no input holds an Inf or a NaN."""
        return all(np.isfinite(a).all() for a, d in zip(self.arrays, self.dtypes)
                   if d.is_floating or d.is_complex)

    def __str__(self) -> str:
        args = ", ".join(f"{d.name}{list(a.shape)}" for a, d in zip(self.arrays, self.dtypes))
        if self.derived:
            return f"edge sample {self.index} ({args}: {self.derived})"
        return f"sample {self.index} ({args})"


def checked(samples: Sequence[tuple]) -> list[Sample]:
    """The samples as opcheck keeps them, copied to NumPy; TypeError for what is not a sample."""
    kept = []
    for index, sample in enumerate(samples):
        if not isinstance(sample, tuple):
            raise TypeError(f"opcheck: sample {index} is a {type(sample).__name__}, not a tuple of "
                            "arguments: write (x,) for one argument")
        for position, value in enumerate(sample):
            if not isinstance(value, (tf.Tensor, np.ndarray, np.generic)) or (
                    isinstance(value, tf.Tensor) and value.dtype in OPAQUE):
                raise TypeError(f"opcheck: sample {index}, argument {position} is a "
                                f"{type(value).__name__}: give a tf.Tensor or a NumPy array of "
                                "numbers, bools or strings")
        tensors = [tf.convert_to_tensor(value) for value in sample]
        kept.append(Sample(index, tuple(np.array(readable(t)) for t in tensors),
                           tuple(t.dtype for t in tensors)))
    return kept


def readable(tensor: tf.Tensor) -> np.ndarray:
    """A tensor's values; strings as Python bytes, which keep their trailing NUL bytes (NumPy's
    bytes type drops them: a WAV's)."""
    return np.asarray(tensor.numpy(), object if tensor.dtype == tf.string else None)


def edge_samples(samples: Sequence[Sample], first_index: int) -> list[Sample]:
    """The inputs that op authors forget, derived from the first sample of each signature (its
    dtypes and ranks): an empty batch, a batch of one, extreme values in every input at once,
    each input empty in each axis in turn, each input a scalar, and each input's extreme values
    with the others as given; none a copy of a sample. So a signature of n inputs of ranks r
    gives at most 3 + Σ(r + 3) edge samples."""
    bases: dict[tuple, Sample] = {}
    for sample in samples:
        bases.setdefault((sample.dtypes, tuple(a.ndim for a in sample.arrays)), sample)

    def values(arrays):  # an object array's bytes are its pointers: the same strings, or not
        return tuple((a.shape, a.tobytes()) for a in arrays)

    seen, edges = {values(s.arrays) for s in samples}, list[Sample]()
    for base in bases.values():
        arrays = base.arrays
        batched = in_batch(arrays, empty_too=True)
        derived = {"an empty batch": [a[:0] if b else a for a, b in zip(arrays, batched)],
                   "a batch of one": [a[:1] if b else a for a, b in zip(arrays, batched)],
                   "extreme values": [next(iter(extremes(a, d)), ("", a))[1]
                                      for a, d in zip(arrays, base.dtypes)]}
        for i, array in enumerate(arrays):
            changed = {f"input {i} empty in axis {axis}": np.take(array, np.zeros(0, int), axis)
                       for axis in range(array.ndim)}
            if array.ndim and array.size:
                changed[f"input {i} a scalar"] = array.reshape(-1)[:1].reshape(())
            for what, extreme in extremes(array, base.dtypes[i]):
                changed[f"input {i} {what}"] = extreme
            for how, new in changed.items():
                derived[how] = [new if j == i else a for j, a in enumerate(arrays)]
        for how, inputs in derived.items():
            if values(inputs) not in seen:
                seen.add(values(inputs))
                edges.append(Sample(first_index + len(edges), tuple(inputs), base.dtypes,
                                    f"sample {base.index} with {how}", base.index))
    return edges


def batch_size(arrays: Sequence[np.ndarray]) -> int:
    """The size of the first axis of the first input that has an axis (0 if none has)."""
    return next((a.shape[0] for a in arrays if a.ndim), 0)


def in_batch(arrays: Sequence[np.ndarray], empty_too: bool) -> list[bool]:
    """Which inputs have the batch dimension: those whose first axis has the batch size (a size
    of zero too, if ``empty_too``)."""
    size = batch_size(arrays)
    return [a.ndim > 0 and a.shape[0] == size and (empty_too or size > 0) for a in arrays]


def extremes(array: np.ndarray, dtype: tf.DType) -> list[tuple[str, np.ndarray]]:
    """``array``'s shape filled with extreme values, each fill named: NaN, ±Inf, -0.0 and
    subnormals in turn (floats and complex numbers); the minimum and maximum in turn (a scalar
    gets the minimum), then the maximum alone (integers); empty and blank strings; none for
    other dtypes (bools). The first is what every input gets at once."""
    def filled(*values: Any) -> np.ndarray:
        return np.resize(np.array(values, array.dtype), array.shape)

    if dtype.is_floating or dtype.is_complex:
        real = dtype.real_dtype.as_numpy_dtype
        tiny = ml_dtypes.finfo(real).smallest_subnormal
        values = np.array([np.nan, np.inf, -np.inf, -0.0, tiny, -tiny], real)
        return [("extreme values", np.resize(values, array.shape).astype(array.dtype))]
    if dtype.is_integer and not dtype.is_quantized:
        return [("at its limits", filled(dtype.min, dtype.max)),
                ("at its maximum", filled(dtype.max))]
    if dtype == tf.string:
        return [("blank strings", filled(b"", b" ", b"\t\n "))]
    return []
