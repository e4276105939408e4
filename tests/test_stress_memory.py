"""Many calls on a 1 MiB tensor: RSS stays flat and no EagerTensor is left behind.

Each workload is measured for ours and for the built-in the same way, after a warm-up: RSS
before and after (after gc.collect()), and the number of live EagerTensor objects.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import tensorflow as tf
from stress_support import MIB, live_eager_tensors, report, rss, scaled
from support import as_bits

import tf_stopgrad

RSS_LIMIT = 16 * MIB
EAGER_CALLS = scaled(short=20_000, long=100_000)
TAPED_CALLS = scaled(short=1_000, long=10_000)
MESSAGE = "memory stress"


def stop_ops():
    return tf_stopgrad.stop_gradient, tf.stop_gradient


def prevent_ops():
    return (
        lambda x: tf_stopgrad.prevent_gradient(x, message=MESSAGE),
        lambda x: tf.raw_ops.PreventGradient(input=x, message=MESSAGE),
    )


def eager(op):
    return op


def taped_with_gradient(op):
    """Record ``op(x) * x`` on a tape and differentiate it; the result is the gradient."""

    def call(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = op(x) * x
        return tape.gradient(y, x)

    return call


def taped_with_refused_gradient(op):
    """Record ``op(x)`` on a tape and ask for the gradient, which PreventGradient refuses."""

    def call(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = op(x)
        try:
            tape.gradient(y, x)
        except LookupError as error:
            return type(error)
        raise AssertionError("the gradient through PreventGradient was not refused")

    return call


WORKLOADS = {
    "eager stop_gradient": (stop_ops, eager, EAGER_CALLS),
    "eager prevent_gradient": (prevent_ops, eager, EAGER_CALLS),
    "taped stop_gradient with gradient": (stop_ops, taped_with_gradient, TAPED_CALLS),
    "taped prevent_gradient with gradient": (prevent_ops, taped_with_refused_gradient, TAPED_CALLS),
}


@dataclass
class Growth:
    rss: int
    eager_tensors: int

    def __str__(self):
        return f"RSS {self.rss / MIB:+.2f} MiB, live EagerTensors {self.eager_tensors:+d}"


def fingerprint(result):
    return as_bits(result) if isinstance(result, tf.Tensor) else result


def call_repeatedly(call, x, times):
    for _ in range(times):
        call(x)


def growth_over(call, x, calls):
    call_repeatedly(call, x, max(calls // 10, 100))  # warm-up: caches, allocator pools
    tensors_before = live_eager_tensors()
    rss_before = rss()
    call_repeatedly(call, x, calls)
    tensors_after = live_eager_tensors()
    return Growth(rss() - rss_before, tensors_after - tensors_before)


@pytest.fixture(scope="module")
def one_mib_tensor():
    return tf.random.stateless_uniform([MIB // 4], seed=[1, 2], dtype=tf.float32)


@pytest.mark.parametrize("workload", list(WORKLOADS))
def test_repeated_calls_do_not_grow_memory_or_leak_tensors(workload, one_mib_tensor):
    ops, wrap, calls = WORKLOADS[workload]
    ours, builtin = (wrap(op) for op in ops())
    assert fingerprint(ours(one_mib_tensor)) == fingerprint(builtin(one_mib_tensor))

    builtin_growth = growth_over(builtin, one_mib_tensor, calls)
    ours_growth = growth_over(ours, one_mib_tensor, calls)

    report(
        f"memory: {workload}, {calls} calls on 1 MiB: ours {ours_growth}; built-in {builtin_growth}"
    )
    assert ours_growth.rss < RSS_LIMIT
    assert ours_growth.eager_tensors == 0
