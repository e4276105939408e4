"""Worker for test_stress_malformed_input.py: feed malformed input to ours and to the built-in.

Usage: malformed_inputs.py <number of fuzzed nested structures>
Prints JSON lines: a "started" record before each attempt (so a crash can be attributed), a
"result" record with both outcomes after it, and one "fuzz" record for the fuzzed structures.
An outcome is the exception type raised, or the type and exact components returned.
"""

import json
import sys

import numpy as np
import tensorflow as tf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tf_stopgrad

COMPOSITES = (tf.SparseTensor, tf.RaggedTensor, tf.IndexedSlices)


def ragged(splits, values=(1, 2, 3)):
    return tf.RaggedTensor.from_row_splits(values, row_splits=splits, validate=False)


def sparse(indices, values, dense_shape):
    return tf.SparseTensor(indices=indices, values=values, dense_shape=dense_shape)


# Input cases: a factory for the value, passed to both ops.
INPUTS = {
    "object()": object,
    "None": lambda: None,
    "a function": lambda: len,
    "a dict": lambda: {"a": 1},
    "a set": lambda: {1, 2},
    "a generator": lambda: (i for i in range(3)),
    "ragged nested list": lambda: [[1, 2], [3]],
    "deeply ragged nested list": lambda: [[[1], [2, 3]]],
    "list of mixed types": lambda: [1, "a"],
    "list containing None": lambda: [1.0, None],
    "int beyond int64": lambda: 2**70,
    "NumPy array of objects": lambda: np.array([object()], dtype=object),
    "NumPy array of ragged arrays": lambda: np.array([np.arange(2), np.arange(1)], dtype=object),
    "NumPy structured array": lambda: np.zeros(2, dtype=[("a", "i4"), ("b", "f4")]),
    "NumPy datetime64 array": lambda: np.array(["2020-01-01"], dtype="datetime64[D]"),
    "SparseTensor with indices out of bounds": lambda: sparse([[0, 0], [5, 5]], [1.0, 2.0], [2, 2]),
    "SparseTensor with negative, unsorted, duplicate indices": lambda: sparse(
        [[1, 1], [-1, 0], [1, 1]], [1.0, 2.0, 3.0], [2, 2]
    ),
    "RaggedTensor with decreasing row_splits": lambda: ragged([0, 5, 2]),
    "RaggedTensor with row_splits past its values": lambda: ragged([0, 1, 9]),
    "RaggedTensor with a negative first split": lambda: ragged([-4, 1, 3]),
    "RaggedTensor with empty row_splits": lambda: ragged(tf.zeros([0], tf.int64)),
    "RaggedTensor with negative row_lengths": lambda: tf.RaggedTensor.from_row_lengths(
        [1, 2, 3], row_lengths=[5, -1], validate=False
    ),
    "IndexedSlices with more indices than values": lambda: tf.IndexedSlices(
        tf.ones([2, 3]), tf.constant([0, 7, 9]), tf.constant([1, 3])
    ),
}

# Message cases for prevent_gradient, applied to a valid tensor.
MESSAGES = {
    "an int": 3,
    "a float": 1.5,
    "a list": ["a"],
    "a tensor": tf.constant("why"),
    "bytes that are not UTF-8": b"\xff\xfe",
    "text with NUL": "a\x00b",
    "a lone surrogate": "\ud800",
}

OPS = ("stop_gradient", "prevent_gradient")
MODES = ("eager", "tf.function")


def ours(op, value, message=""):
    if op == "stop_gradient":
        return tf_stopgrad.stop_gradient(value)
    return tf_stopgrad.prevent_gradient(value, message=message)


def builtin(op, value, message=""):
    if op == "stop_gradient":
        return tf.stop_gradient(value)

    def prevent(component):
        return tf.raw_ops.PreventGradient(input=component, message=message)

    if isinstance(value, COMPOSITES):  # as tf.stop_gradient does: every component
        return tf.nest.map_structure(prevent, value, expand_composites=True)
    return prevent(value)


def component_bits(tensor):
    array = np.asarray(tensor.numpy(), dtype=object if tensor.dtype == tf.string else None)
    if array.dtype == object:
        payload = [bytes(item).hex() for item in array.ravel()]
    else:
        payload = array.tobytes().hex()
    return [tensor.dtype.name, list(tensor.shape), payload]


def outcome(call):
    """What ``call`` did: the exception type it raised, or what it returned, exactly."""
    try:
        result = call()
    except Exception as error:  # The type is the outcome.
        return {"raised": type(error).__name__}
    components = tf.nest.flatten(result, expand_composites=True)
    return {"returned": type(result).__name__, "components": list(map(component_bits, components))}


def in_mode(mode, call):
    return call if mode == "eager" else tf.function(call)


def emit(**record):
    print(json.dumps(record), flush=True)


def compare(kind, case, op, mode, value, message=""):
    emit(kind="started", case=case, op=op, mode=mode)
    emit(
        kind=kind,
        case=case,
        op=op,
        mode=mode,
        ours=outcome(in_mode(mode, lambda: ours(op, value, message))),
        builtin=outcome(in_mode(mode, lambda: builtin(op, value, message))),
    )


def fuzz_nested_structures(examples):
    """Nested lists, tuples and dicts of mixed scalars: mostly ragged or of mixed types."""
    scalars = st.one_of(
        st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(),
        st.complex_numbers(), st.text(max_size=3), st.binary(max_size=3),
    )  # fmt: skip
    nested = st.recursive(
        scalars,
        lambda children: st.one_of(
            st.lists(children, max_size=3),
            st.tuples(children, children),
            st.dictionaries(st.text(max_size=2), children, max_size=2),
        ),
        max_leaves=8,
    )
    tried, mismatches = [], []

    @settings(
        max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )
    @given(value=nested, op=st.sampled_from(OPS))
    def same_outcome(value, op):
        tried.append(1)
        ours_outcome = outcome(lambda: ours(op, value))
        builtin_outcome = outcome(lambda: builtin(op, value))
        if ours_outcome != builtin_outcome:
            mismatches.append(
                {
                    "value": repr(value)[:200],
                    "op": op,
                    "ours": ours_outcome,
                    "builtin": builtin_outcome,
                }
            )

    same_outcome()
    emit(kind="fuzz", examples=len(tried), mismatches=mismatches[:20])


def main(fuzz_examples):
    for case, factory in INPUTS.items():
        for op in OPS:
            for mode in MODES:
                compare("input", case, op, mode, factory())
    for case, message in MESSAGES.items():
        for mode in MODES:
            compare("message", case, "prevent_gradient", mode, tf.constant([1.0]), message)
    fuzz_nested_structures(fuzz_examples)


if __name__ == "__main__":
    main(int(sys.argv[1]))
