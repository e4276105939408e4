"""How much memory a persistent GradientTape keeps alive for a large intermediate that passes
through a stop-gradient op.

Inside a persistent tape watching a scalar ``w``, the forward pass builds a large intermediate
``large = fill(w)``, stops it, and reduces it into the loss ``w * reduce_sum(stopped)``. None
of the ops the tape may record needs ``large`` for its gradient, so once the caller drops its
references the tape should hold nothing of it, unless the stop-gradient op itself was
recorded: a recorded op keeps its input and output for a backward function.

What the tape holds is measured with the CPU allocator's byte counters
(``tf.config.experimental.get_memory_info('CPU:0')``) when this TensorFlow keeps them, and
otherwise by checking, through weak references, whether the intermediate's tensors outlive
the caller's references. As a control, the plugin's op runs without pausing the tape, which
then records it like any other op.
"""

from __future__ import annotations

import dataclasses
import gc
import weakref
from typing import Callable

import tensorflow as tf

import tf_stopgrad
from tf_stopgrad import _compat
from tf_stopgrad.benchmarks.report import Row, ratio

_CPU = "CPU:0"
_MIB = float(1 << 20)


@dataclasses.dataclass(frozen=True)
class TapeFootprint:
    """What one forward pass left in memory.

    Attributes:
      held_bytes: Bytes of the intermediate still alive, with the tape alive, after the caller
        dropped its references. A tape only accumulates during the forward pass, so this is
        also the most it ever holds.
      forward_peak_bytes: The allocator's peak during the forward pass, above where it
        started; None when the allocator keeps no counters.
    """

    held_bytes: int
    forward_peak_bytes: int | None


def allocator_counts_bytes() -> bool:
    """Whether ``get_memory_info`` reports this process's CPU allocations.

    Some releases keep counters that stay at zero; others (2.19) raise ValueError instead.
    """
    probe_bytes = 1 << 20
    try:
        before = tf.config.experimental.get_memory_info(_CPU)["current"]
    except ValueError:
        return False
    probe = tf.zeros([probe_bytes // 4])
    after = tf.config.experimental.get_memory_info(_CPU)["current"]
    del probe
    return after - before >= probe_bytes


def measure(
    stop_gradient: Callable[[tf.Tensor], tf.Tensor], intermediate_bytes: int, use_allocator: bool
) -> TapeFootprint:
    """Run the forward pass described in the module docstring through ``stop_gradient``."""
    watched = tf.constant(2.0)
    gc.collect()
    if use_allocator:
        start = tf.config.experimental.get_memory_info(_CPU)["current"]
        tf.config.experimental.reset_memory_stats(_CPU)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(watched)
        large = tf.fill([intermediate_bytes // 4], watched)
        stopped = stop_gradient(large)
        loss = watched * tf.reduce_sum(stopped)
    references = (weakref.ref(large), weakref.ref(stopped))
    del large, stopped, loss
    gc.collect()
    if use_allocator:
        memory = tf.config.experimental.get_memory_info(_CPU)
        footprint = TapeFootprint(memory["current"] - start, memory["peak"] - start)
    else:
        alive = any(reference() is not None for reference in references)
        footprint = TapeFootprint(intermediate_bytes if alive else 0, None)
    del tape
    return footprint


def _record_unpaused(tensor: tf.Tensor) -> tf.Tensor:
    """The plugin's op run without pausing the tape: a tape records it, like any other op."""
    return _compat.fast_path_execute(_compat.context(), tf_stopgrad.STOP_GRADIENT_OP, None, tensor)


def row(intermediate_bytes: int) -> Row:
    """Ours against the built-in, with an unpaused recording as control."""
    use_allocator = allocator_counts_bytes()
    ours = measure(tf_stopgrad.stop_gradient, intermediate_bytes, use_allocator)
    builtin = measure(tf.stop_gradient, intermediate_bytes, use_allocator)
    control = measure(_record_unpaused, intermediate_bytes, use_allocator)
    method = "weak references to the intermediate's tensors (allocator keeps no counters)"
    if use_allocator:
        method = "CPU allocator counters (tf.config.experimental.get_memory_info('CPU:0'))"
    peaks = ""
    if ours.forward_peak_bytes is not None and builtin.forward_peak_bytes is not None:
        peaks = (
            f" Forward-pass peak: ours {ours.forward_peak_bytes / _MIB:.1f} MiB, built-in "
            f"{builtin.forward_peak_bytes / _MIB:.1f} MiB."
        )
    return Row(
        case=f"Tape memory: held by a persistent tape after a {intermediate_bytes / _MIB:g} MiB "
        f"intermediate passes through",
        ours=ours.held_bytes / _MIB,
        reference=builtin.held_bytes / _MIB,
        unit="MiB",
        ratio=ratio(ours.held_bytes, builtin.held_bytes),
        target=1.0,
        note=f"Measured with {method}. Control: the plugin op "
        f"recorded by the tape (no pause) holds {control.held_bytes / _MIB:.1f} MiB.{peaks}",
    )
