"""What ``tf_stopgrad.testing.opcheck`` costs an op's author: ``stop_gradient`` checked on ten
samples of as many dtypes and shapes (two with ``--quick``), once, in this process.

* The checks that start no process: all but ``crash``, ``edges`` and ``saved_model`` (target:
  10 s).
* Every check, edge samples included: the samples and the edge samples derived from them run
  first in a fresh process (forked from one that has imported TensorFlow) that imports
  tf_stopgrad and loads the SavedModel, then the checks in this one (target: 20 s).
* A whole library, given no samples (``opcheck_library``): tf_stopgrad's op library, each op
  in a process of its own that derives its samples from the OpDef and the shape function and
  runs every check (``--quick``: ``crash`` and ``edges``), per op (target: 30 s).
"""

from __future__ import annotations

import time

import numpy as np

import tf_stopgrad
from tf_stopgrad.benchmarks.report import Row
from tf_stopgrad.testing import CHECKS, IN_PROCESS, opcheck, opcheck_library

DTYPES = (np.float32, np.float64, np.float16, np.complex64, np.int32, np.int64, np.int8,
          np.uint8, np.bool_, np.float32)  # fmt: skip
SHAPES = ((2, 3), (), (4,), (3, 1), (2, 2), (0,), (5,), (2, 1, 2), (6,), (64, 64))


def _samples(count: int) -> list[tuple[np.ndarray]]:
    rng = np.random.default_rng(0)
    pairs = list(zip(DTYPES, SHAPES))[:count]
    return [(rng.standard_normal(shape).astype(dtype),) for dtype, shape in pairs]


def rows(quick: bool) -> list[Row]:
    samples = _samples(2 if quick else 10)
    timed = []
    for checks in (IN_PROCESS, CHECKS):
        start = time.perf_counter()
        results = opcheck(tf_stopgrad.stop_gradient, samples, checks=checks, library="tf_stopgrad")
        timed.append(time.perf_counter() - start)
        results.raise_on_failure()
    start = time.perf_counter()
    library = opcheck_library(tf_stopgrad.library_path(),
                              checks=["crash", "edges"] if quick else None)  # fmt: skip
    per_op = (time.perf_counter() - start) / len(library)
    if failed := [op for op, results in library.items() if results.failures()]:
        raise AssertionError(f"opcheck_library fails {failed}: {library[failed[0]]}")
    where = f"stop_gradient, {len(samples)} samples"
    return [
        Row(f"opcheck: the checks in this process ({where})", timed[0], "s", target=10.0),
        Row(f"opcheck: every check, edge samples included ({where})", timed[1], "s", target=20.0),
        Row(f"opcheck_library: per op, its samples derived (tf_stopgrad's {len(library)} ops)",
            per_op, "s", target=30.0),
    ]
