"""The cost of ``tf_stopgrad.export.to_builtin_saved_model`` against ``tf.saved_model.save``.

A module of many ``tf.function``s, each a long chain of ops with a stop-gradient every few links, is
traced once, saved, and the SavedModel exported to the built-in ops. Both are timed the same way
(best of a few runs, each into a fresh directory). Target: the rewrite (parse, rewrite, copy,
fingerprint, write) costs at most a quarter of the save. ``--variables-mb N`` adds a float32
variable of N MB, so that copying the variables weighs as it does in a large model.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Callable, NamedTuple

import tensorflow as tf

import tf_stopgrad
from tf_stopgrad import export
from tf_stopgrad.benchmarks.report import Row, ratio


class ExportCost(NamedTuple):
    nodes: int
    plugin_nodes: int
    save_s: float
    export_s: float


def build_module(functions: int, links: int, variables_mb: int = 0) -> tf.Module:
    def chain(x):
        for link in range(links):
            x = x * 1.0001 + 0.5
            if link % 4 == 0:
                x = x - tf_stopgrad.stop_gradient(x * 0.001)
        return x

    module = tf.Module()
    if variables_mb:
        module.weights = tf.Variable(tf.random.uniform([variables_mb, 1 << 18]))
    for index in range(functions):
        function = tf.function(chain, input_signature=[tf.TensorSpec([None], tf.float32)])
        function.get_concrete_function()  # traced here, so the save below only saves
        setattr(module, f"f{index}", function)
    return module


def best_seconds(action: Callable[[Path], object], repeats: int, tmp: Path, label: str) -> float:
    best = float("inf")
    for run in range(repeats):
        destination = tmp / f"{label}{run}"
        start = time.perf_counter()
        action(destination)
        best = min(best, time.perf_counter() - start)
        if run:  # keep the first copy for the next step
            shutil.rmtree(destination)
    return best


def measure(functions: int, links: int, repeats: int, variables_mb: int = 0) -> ExportCost:
    module = build_module(functions, links, variables_mb)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        save_s = best_seconds(lambda d: tf.saved_model.save(module, str(d)), repeats, tmp, "save")
        source = tmp / "save0"
        export_s = best_seconds(
            lambda d: export.to_builtin_saved_model(source, d), repeats, tmp, "export"
        )
        graph_def = export._read_saved_model(source / "saved_model.pb").meta_graphs[0].graph_def
    nodes = sum(1 for _ in export._all_nodes(graph_def))
    return ExportCost(nodes, export.count_plugin_nodes(graph_def), save_s, export_s)


def row(quick: bool, variables_mb: int) -> Row:
    functions, links, repeats = (3, 10, 1) if quick else (120, 300, 3)
    cost = measure(functions, links, repeats, variables_mb)
    return Row(
        case=f"Export: to_builtin_saved_model / tf.saved_model.save of a SavedModel of "
        f"{cost.nodes} nodes ({cost.plugin_nodes} tf_stopgrad) in {functions} functions, "
        f"{variables_mb} MB of variables, best of {repeats}",
        ours=cost.export_s,
        reference=cost.save_s,
        unit="s",
        ratio=ratio(cost.export_s, cost.save_s),
        target=0.25,
    )
