"""Worker for test_stress_huge.py: pass huge tensors through both ops, ours and the built-in.

Usage: huge_tensors.py '<json list of {"name", "dtype", "shape"}>'
Prints one JSON object a line: a "created" record per tensor, then one record per
(tensor, op, mode, implementation). Runs in its own process so the gigabytes it allocates
(which TensorFlow's CPU allocator keeps pooled) are returned to the system when it exits.
"""

import json
import resource
import sys
import time

import psutil
import tensorflow as tf

import tf_stopgrad
from tf_stopgrad._compat import buffer_address

MESSAGE = "huge"
OPS = {
    "stop_gradient": {
        "ours": tf_stopgrad.stop_gradient,
        "built-in": tf.stop_gradient,
    },
    "prevent_gradient": {
        "ours": lambda x: tf_stopgrad.prevent_gradient(x, message=MESSAGE),
        "built-in": lambda x: tf.raw_ops.PreventGradient(input=x, message=MESSAGE),
    },
}
FUNCTIONS = {  # one tf.function per op and implementation, shared by all tensors
    (op, implementation): tf.function(call)
    for op, implementations in OPS.items()
    for implementation, call in implementations.items()
}


def rss():
    return psutil.Process().memory_info().rss


def emit(**record):
    print(json.dumps(record), flush=True)


def marked_positions(count):
    """Element positions checked by value: both ends, and past 2**31 when the tensor reaches it."""
    return sorted({0, count // 2, count - 1} | ({2**31, 2**31 + 1} if count > 2**31 + 1 else set()))


def make(dtype, shape):
    """A tensor of ``shape`` made with a single allocation, with marker values written in place."""
    x = tf.fill(shape, tf.constant(1, dtype))
    flat = x._numpy().reshape(-1)  # a writable view of x's own buffer, not a copy
    for i, position in enumerate(marked_positions(flat.size)):
        flat[position] = i + 2
    return x


def values_at(tensor, positions):
    flat = tf.reshape(tensor, [-1])  # no copy
    return [flat[position].numpy().item() for position in positions]


def main(specs):
    for spec in specs:
        dtype = tf.as_dtype(spec["dtype"])
        shape = spec["shape"]
        began = time.perf_counter()
        x = make(dtype, shape)
        positions = marked_positions(x.shape.num_elements())
        emit(
            kind="created",
            tensor=spec["name"],
            seconds=time.perf_counter() - began,
            bytes=x.shape.num_elements() * dtype.size,
            rss=rss(),
        )
        expected_values = values_at(x, positions)
        for op, implementations in OPS.items():
            for implementation, eager_call in implementations.items():
                function = FUNCTIONS[op, implementation]
                for mode, call in (("eager", eager_call), ("tf.function", function)):
                    rss_before = rss()
                    began = time.perf_counter()
                    out = call(x)
                    seconds = time.perf_counter() - began
                    rss_growth = rss() - rss_before
                    emit(
                        kind="result",
                        tensor=spec["name"],
                        op=op,
                        mode=mode,
                        implementation=implementation,
                        seconds=seconds,
                        rss_growth=rss_growth,
                        dtype=out.dtype.name,
                        shape=list(out.shape),
                        aliased=buffer_address(out) == buffer_address(x),
                        values_match=values_at(out, positions) == expected_values,
                    )
                    del out
        del x
    emit(kind="peak", peak_rss=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)


if __name__ == "__main__":
    # On the CPU whatever else is visible: the test measures host memory, and make() writes
    # through _numpy(), which is a view of the buffer only there.
    with tf.device("/CPU:0"):
        main(json.loads(sys.argv[1]))
