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

import gc
import weakref
from typing import Callable

import tensorflow as tf

import tf_stopgrad
from tf_stopgrad import _compat
from tf_stopgrad.benchmarks.report import Row, ratio

_CPU = "CPU:0"
_MIB = float(1 << 20)


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
) -> tuple[int, int | None]:
    """Run the forward pass described in the module docstring through ``stop_gradient``.

    Returns the bytes of the intermediate still alive, with the tape alive, after the caller
    dropped its references (a tape only accumulates during the forward pass, so this is also
    the most it ever holds), and the allocator's peak during the forward pass above where it
    started (None when the allocator keeps no counters).
    """
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
    if not use_allocator:
        alive = any(reference() is not None for reference in references)
        return intermediate_bytes if alive else 0, None
    memory = tf.config.experimental.get_memory_info(_CPU)
    return memory["current"] - start, memory["peak"] - start


def _record_unpaused(tensor: tf.Tensor) -> tf.Tensor:
    """The plugin's op run without pausing the tape: a tape records it, like any other op."""
    return _compat.fast_path_execute(_compat.context(), tf_stopgrad.STOP_GRADIENT_OP, None, tensor)


def row(quick: bool) -> Row:
    """Ours against the built-in, with an unpaused recording as control."""
    intermediate_bytes = (1 if quick else 64) << 20
    use_allocator = allocator_counts_bytes()
    ours, ours_peak = measure(tf_stopgrad.stop_gradient, intermediate_bytes, use_allocator)
    builtin, builtin_peak = measure(tf.stop_gradient, intermediate_bytes, use_allocator)
    control, _ = measure(_record_unpaused, intermediate_bytes, use_allocator)
    method = "weak references to the intermediate's tensors (allocator keeps no counters)"
    peaks = ""
    if ours_peak is not None and builtin_peak is not None:  # the allocator keeps counters
        method = "CPU allocator counters (tf.config.experimental.get_memory_info('CPU:0'))"
        peaks = (
            f" Forward-pass peak: ours {ours_peak / _MIB:.1f} MiB, built-in "
            f"{builtin_peak / _MIB:.1f} MiB."
        )
    return Row(
        case=f"Tape memory: held by a persistent tape after a {intermediate_bytes / _MIB:g} MiB "
        f"intermediate passes through",
        ours=ours / _MIB,
        reference=builtin / _MIB,
        unit="MiB",
        ratio=ratio(ours, builtin),
        target=1.0,
        note=f"Measured with {method}. Control: the plugin op "
        f"recorded by the tape (no pause) holds {control / _MIB:.1f} MiB.{peaks}",
    )
