"""Eight threads calling both ops at once, eagerly, under tapes and through one shared tf.function.

Every output must be bit-identical to its input and to the built-in op's output, and no call
may raise. The shared tf.function is traced from several threads at once.
"""

from __future__ import annotations

import sys
import threading
import time

import pytest
import tensorflow as tf
from stress_support import report, scaled
from support import ALL_PLAIN_DTYPES, as_bits, sample

import tf_stopgrad

THREADS = 8
ITERATIONS_PER_THREAD = scaled(short=500, long=10_000)
SHAPES = [(), (5,), (2, 0, 3), (4, 33)]
MESSAGE = "stress: no gradient here"
MODES = ("eager", "eager under a tape", "shared tf.function")


def all_four(x):
    """Ours and the built-in, for both ops."""
    return (
        tf_stopgrad.stop_gradient(x),
        tf_stopgrad.prevent_gradient(x, message=MESSAGE),
        tf.stop_gradient(x),
        tf.raw_ops.PreventGradient(input=x, message=MESSAGE),
    )


def check_one_call(mode, x, expected, shared_function):
    if mode == "shared tf.function":
        outputs = shared_function(x)
    elif mode == "eager":
        outputs = all_four(x)
    else:
        with tf.GradientTape(persistent=True) as tape:
            if x.dtype.is_floating:
                tape.watch(x)
            outputs = all_four(x)
        if x.dtype.is_floating:
            ours_stopped, _, builtin_stopped, _ = outputs
            assert tape.gradient(ours_stopped, x) is None
            assert tape.gradient(builtin_stopped, x) is None
    ours_stop, ours_prevent, builtin_stop, builtin_prevent = (as_bits(t) for t in outputs)
    assert ours_stop == builtin_stop == expected
    assert ours_prevent == builtin_prevent == expected


@pytest.fixture(scope="module")
def inputs():
    """Mixed dtypes (strings included), shapes and a variable, with the bits each must give."""
    tensors = [
        sample(dtype, shape, seed=index)
        for index, (dtype, shape) in enumerate(
            (dtype, shape) for dtype in ALL_PLAIN_DTYPES for shape in SHAPES
        )
    ]
    variable = tf.Variable([1.5, -0.0, float("nan")])  # read by all threads at once
    return [(x, as_bits(x)) for x in [*tensors, variable]]


@pytest.fixture
def frequent_thread_switches():
    """Make the interpreter switch threads far more often than usual, to shake out races."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    yield
    sys.setswitchinterval(previous)


def test_eight_threads_get_bit_identical_outputs_and_no_errors(inputs, frequent_thread_switches):
    shared_function = tf.function(all_four)
    start = threading.Barrier(THREADS)
    completed = [0] * THREADS
    failures = []

    def worker(thread):
        start.wait()
        for i in range(ITERATIONS_PER_THREAD):
            x, expected = inputs[(thread * 7 + i) % len(inputs)]
            mode = MODES[(thread + i) % len(MODES)]
            try:
                check_one_call(mode, x, expected, shared_function)
            except BaseException as error:  # Every failure is reported below.
                failures.append(
                    f"thread {thread}, call {i}, {mode}, {x.dtype.name} "
                    f"{tuple(x.shape)}: {type(error).__name__}: {error}"
                )
                return
            completed[thread] += 1

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=1800)
    elapsed = time.perf_counter() - began

    assert not any(thread.is_alive() for thread in threads), "a thread is stuck"
    assert failures == []
    assert completed == [ITERATIONS_PER_THREAD] * THREADS
    report(
        f"threads: {THREADS} threads x {ITERATIONS_PER_THREAD} iterations, each calling "
        f"stop_gradient and prevent_gradient (ours and built-in) on one of {len(inputs)} "
        f"dtype/shape inputs; {elapsed:.1f} s"
    )
