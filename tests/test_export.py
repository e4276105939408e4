"""tf_stopgrad.export: models trained with the plugin run where it is not installed.

Models are saved or traced here with the plugin's ops, exported to the built-in ops, and
then run by real consumers in a fresh process in which ``import tf_stopgrad`` is impossible
(tests/workers/run_without_plugin.py): ``tf.saved_model.load``, TensorFlow Lite's
interpreter and onnxruntime; ``saved_model_cli``; and a C program on TensorFlow's C API
(tests/c/run_saved_model.c). The same models built with ``tf.stop_gradient`` give the
expected values.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from c_programs import build_c_program, needs_gcc, run_c_program
from support import REPO_ROOT, run_command
from tensorflow.core.protobuf import saved_model_pb2
from workers.convert_models import SPEC, keras_model, stop_only
from workers.launch import run_worker

import tf_stopgrad
from tf_stopgrad import _compat, export

pytestmark = pytest.mark.core

MESSAGE = "sampled, not learned"
INPUTS = [[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]]
WORKER_TIMEOUT_S = 240


def builtin_prevent_gradient(x, message):
    return tf.raw_ops.PreventGradient(input=x, message=message)


class Model(tf.Module):
    """``serving_default`` computes ``y``; its gradient depends on the stop."""

    def __init__(self, stop, prevent):
        super().__init__()
        self._stop, self._prevent = stop, prevent
        self.scale = tf.Variable([1.5, -2.0, 0.5])

    @tf.function(input_signature=[SPEC])
    def serve(self, x):
        stopped = self._stop(tf.square(x) * self.scale)
        return {"y": tf.reduce_sum(stopped * x + self.scale * x, axis=1)}

    @tf.function(input_signature=[SPEC])
    def prevented(self, x):
        return self._prevent(tf.sin(x) * self.scale, MESSAGE)


def plugin_model() -> Model:
    return Model(tf_stopgrad.stop_gradient, tf_stopgrad.prevent_gradient)


def save(model: Model, path: Path) -> Path:
    tf.saved_model.save(model, str(path), signatures={"serving_default": model.serve})
    return path


def expected_results() -> dict:
    """The built-in model's outputs and gradients, computed here."""
    model = Model(tf.stop_gradient, builtin_prevent_gradient)
    x = tf.constant(INPUTS)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = model.serve(x)["y"]
        total = tf.reduce_sum(y)
    gradient_x, gradient_scale = tape.gradient(total, [x, model.scale])
    return {
        "y": y.numpy(),
        "gradient_x": gradient_x.numpy(),
        "gradient_scale": gradient_scale.numpy(),
        "prevented": model.prevented(x).numpy(),
    }


def file_digests(directory: Path) -> dict[str, str]:
    return {
        str(path.relative_to(directory)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("export")


@pytest.fixture(scope="module")
def exported(workdir) -> dict:
    """The plugin SavedModel, its two exports, and what the export reported."""
    source = save(plugin_model(), workdir / "plugin")
    digests_before = file_digests(source)
    rewritten = export.to_builtin_saved_model(source, workdir / "builtin")
    rewritten_for_inference = export.to_builtin_saved_model(
        source, workdir / "inference", inference=True
    )
    return {
        "source": source,
        "builtin": workdir / "builtin",
        "inference": workdir / "inference",
        "rewritten": rewritten,
        "rewritten_for_inference": rewritten_for_inference,
        "source_unchanged": file_digests(source) == digests_before,
    }


def read_saved_model(path: Path) -> saved_model_pb2.SavedModel:
    saved_model = saved_model_pb2.SavedModel()
    saved_model.ParseFromString((path / "saved_model.pb").read_bytes())
    return saved_model


def op_types(path: Path) -> set[str]:
    (meta_graph,) = read_saved_model(path).meta_graphs
    nodes = list(meta_graph.graph_def.node)
    for function in meta_graph.graph_def.library.function:
        nodes.extend(function.node_def)
    return {node.op for node in nodes}


def stripped_ops(path: Path) -> set[str]:
    (meta_graph,) = read_saved_model(path).meta_graphs
    return {op.name for op in meta_graph.meta_info_def.stripped_op_list.op}


# --- The rewrite --------------------------------------------------------------------------


def test_every_plugin_node_becomes_the_builtin_op(exported):
    assert exported["rewritten"] == exported["rewritten_for_inference"] >= 2
    assert tf_stopgrad.STOP_GRADIENT_OP in op_types(exported["source"])
    for kind in ("builtin", "inference"):
        assert not {tf_stopgrad.STOP_GRADIENT_OP, tf_stopgrad.PREVENT_GRADIENT_OP} & op_types(
            exported[kind]
        )
    assert {"StopGradient", "PreventGradient"} <= op_types(exported["builtin"])
    assert not {"StopGradient", "PreventGradient"} & op_types(exported["inference"])


def test_stripped_op_list_names_the_ops_actually_used(exported):
    for kind in ("builtin", "inference"):
        used = op_types(exported[kind])
        listed = stripped_ops(exported[kind])
        assert listed <= used
        function_names = {f.signature.name for f in read_saved_model(exported[kind])
                          .meta_graphs[0].graph_def.library.function}  # fmt: skip
        assert used - function_names == listed
    assert "PreventGradient" in stripped_ops(exported["builtin"])
    assert "PreventGradient" not in stripped_ops(exported["inference"])


def test_ops_this_process_does_not_know_keep_their_source_op_def(exported, workdir):
    # Another plugin's op, unknown here: its OpDef can only come from the source's list.
    source = workdir / "with_foreign_op"
    shutil.copytree(exported["source"], source)
    saved_model = read_saved_model(source)
    (meta_graph,) = saved_model.meta_graphs
    meta_graph.graph_def.node.add(name="foreign", op="Other>CustomOp")
    meta_graph.meta_info_def.stripped_op_list.op.add(name="Other>CustomOp")
    (source / "saved_model.pb").write_bytes(saved_model.SerializeToString())

    export.to_builtin_saved_model(source, workdir / "with_foreign_op_export")

    assert "Other>CustomOp" in stripped_ops(workdir / "with_foreign_op_export")


def test_fingerprint_describes_the_rewritten_model(exported):
    source = tf.saved_model.experimental.read_fingerprint(str(exported["source"]))
    written = tf.saved_model.experimental.read_fingerprint(str(exported["builtin"]))
    assert written.saved_model_checksum != source.saved_model_checksum
    # TensorFlow's own fingerprint of the directory as it is now.
    recomputed = Path(exported["builtin"]) / "recomputed"
    recomputed.mkdir()
    try:
        for name in ("saved_model.pb", "variables"):
            target = recomputed / name
            target.symlink_to(Path(exported["builtin"]) / name)
        _compat.write_saved_model_fingerprint(str(recomputed))
        fresh = tf.saved_model.experimental.read_fingerprint(str(recomputed))
    finally:
        for child in recomputed.iterdir():
            child.unlink()
        recomputed.rmdir()
    assert written == fresh


def test_variables_are_copied_and_the_source_is_untouched(exported):
    assert exported["source_unchanged"]
    variables = Path(exported["source"]) / "variables"
    for path in variables.iterdir():
        copy = Path(exported["builtin"]) / "variables" / path.name
        assert copy.read_bytes() == path.read_bytes()


def test_graph_def_rewrite_returns_a_new_proto_and_leaves_the_input(exported):
    (meta_graph,) = read_saved_model(exported["source"]).meta_graphs
    original = meta_graph.graph_def.SerializeToString()

    rewritten = export.to_builtin_graph_def(meta_graph.graph_def)

    assert meta_graph.graph_def.SerializeToString() == original
    assert export.count_plugin_nodes(meta_graph.graph_def) == exported["rewritten"]
    assert export.count_plugin_nodes(rewritten) == 0
    function_ops = {n.op for f in rewritten.library.function for n in f.node_def}
    assert {"StopGradient", "PreventGradient"} <= function_ops


# --- Consumers without the plugin ---------------------------------------------------------


def keras_tflite_broken() -> str | None:
    """Why TFLiteConverter.from_keras_model cannot be used with this TensorFlow, or None."""
    if tf.__version__.startswith("2.16."):
        return (
            "TensorFlow 2.16's TFLiteConverter.from_keras_model aborts on every Keras 3 model, "
            "with the built-in tf.stop_gradient too ('missing attribute value')"
        )
    return None


@pytest.fixture(scope="module")
def converted(workdir, exported) -> Path:
    """TFLite and ONNX conversions, made by tests/workers/convert_models.py."""
    out = workdir / "converted"
    out.mkdir()
    options = ["--no-keras-tflite"] if keras_tflite_broken() else []
    run_worker("convert_models.py", str(exported["builtin"]), str(exported["inference"]), str(out),
               *options, cwd=workdir, timeout=WORKER_TIMEOUT_S)  # fmt: skip
    return out


@pytest.fixture(scope="module")
def tflite_models(converted) -> dict[str, Path]:
    """.tflite files: from the export, and traced in memory under builtin_ops()."""
    names = ("tflite_saved_model", "tflite_keras", "tflite_concrete")
    return {
        name: converted / f"{name}.tflite"
        for name in names
        if (converted / f"{name}.tflite").exists()
    }


@pytest.fixture(scope="module")
def onnx_models(converted) -> dict[str, Path]:
    """.onnx files: tf2onnx's CLI on the inference export, and from_keras / from_function
    traced in memory under builtin_ops(). Empty when the tools are missing."""
    if (converted / "onnx_missing.txt").exists():
        return {}
    names = ("onnx_cli", "onnx_keras", "onnx_function")
    return {name: converted / f"{name}.onnx" for name in names}


@pytest.fixture(scope="module")
def without_plugin(workdir, exported, tflite_models, onnx_models) -> dict:
    """Every model, run in one fresh process where tf_stopgrad cannot be imported."""
    jobs = [["saved_model", "saved-model", str(exported["builtin"])],
            ["source_model", "load-error", str(exported["source"])]]  # fmt: skip
    jobs += [[name, "tflite", str(path)] for name, path in tflite_models.items()]
    jobs += [[name, "onnx", str(path)] for name, path in onnx_models.items()]
    (workdir / "jobs.json").write_text(json.dumps({"inputs": INPUTS, "jobs": jobs}))
    run_worker("run_without_plugin.py", "jobs.json", "results.json", cwd=workdir,
               timeout=WORKER_TIMEOUT_S)  # fmt: skip
    return json.loads((workdir / "results.json").read_text())


@pytest.mark.slow
def test_the_consumer_process_cannot_import_the_plugin(without_plugin):
    assert without_plugin["plugin_importable"] is False


@pytest.mark.slow
def test_the_model_as_saved_does_not_load_without_the_plugin(without_plugin):
    # The message deploying.md quotes, for whichever of the two ops the load meets first.
    error = without_plugin["source_model"]
    assert error["type"] == "RuntimeError"
    not_registered = r"Op type not registered 'TfStopgrad>(Stop|Prevent)Gradient' in binary running"
    assert re.match(not_registered, error["message"]), error["message"]
    assert "Make sure the Op and Kernel are registered in the binary" in error["message"]


@pytest.mark.slow
def test_loaded_export_gives_bit_identical_outputs(without_plugin):
    plugin = plugin_model()
    x = tf.constant(INPUTS)
    loaded = without_plugin["saved_model"]
    np.testing.assert_array_equal(np.float32(loaded["y"]), plugin.serve(x)["y"].numpy())
    np.testing.assert_array_equal(np.float32(loaded["prevented"]), plugin.prevented(x).numpy())


@pytest.mark.slow
def test_gradients_through_the_loaded_export_equal_the_plugin_models(without_plugin):
    expected = expected_results()
    loaded = without_plugin["saved_model"]
    np.testing.assert_array_equal(np.float32(loaded["gradient_x"]), expected["gradient_x"])
    np.testing.assert_array_equal(np.float32(loaded["gradient_scale"]), expected["gradient_scale"])


@pytest.mark.slow
def test_differentiating_through_the_exported_prevent_raises_with_the_message(without_plugin):
    error = without_plugin["saved_model"]["prevent_error"]
    assert error is not None and "explicitly disabled" in error and MESSAGE in error


def expected_output(name: str) -> np.ndarray:
    """What TensorFlow computes, with the built-in op, for the model a converter was given."""
    x = tf.constant(INPUTS)
    if name.endswith(("saved_model", "cli")):
        return expected_results()["y"]
    if name.endswith("keras"):
        return keras_model()(x).numpy()  # same initializers, same weights
    return tf.reduce_sum(tf.stop_gradient(tf.square(x)) * x + x, axis=1).numpy()


@pytest.mark.parametrize("name", ["tflite_saved_model", "tflite_keras", "tflite_concrete"])
@pytest.mark.slow
def test_tflite_interpreter_matches_tensorflow(without_plugin, name):
    if name == "tflite_keras" and keras_tflite_broken():
        pytest.skip(keras_tflite_broken())
    np.testing.assert_allclose(
        np.float32(without_plugin[name]["y"]), expected_output(name), atol=1e-6
    )


@pytest.mark.parametrize("name", ["onnx_cli", "onnx_keras", "onnx_function"])
@pytest.mark.slow
def test_onnxruntime_matches_tensorflow(without_plugin, converted, name):
    if (converted / "onnx_missing.txt").exists():
        pytest.skip((converted / "onnx_missing.txt").read_text())
    np.testing.assert_allclose(
        np.float32(without_plugin[name]["y"]), expected_output(name), atol=1e-5
    )


def readme_says_onnx_is_not_tested(python_minor: int, tensorflow_minor: int) -> bool:
    """Whether the README's ONNX row names this pair among its exceptions, each "not (or nor)
    on 2.A–2.B with [Python ]3.X[ or later]"."""
    [row] = re.findall(r"^\| ONNX .*", (REPO_ROOT / "README.md").read_text(), re.M)
    exception = r"\bno[rt] on 2\.(\d+)–2\.(\d+) with (?:Python )?3\.(\d+)( or later)?"
    exceptions = re.findall(exception, row)
    assert exceptions, f"the README's ONNX row names no exception the test can read: {row}"
    return any(int(first) <= tensorflow_minor <= int(last)
               and (python_minor == int(python) or later and python_minor > int(python))
               for first, last, python, later in exceptions)  # fmt: skip


@pytest.mark.slow
def test_the_readme_s_onnx_row_says_whether_the_onnx_export_runs_here(converted):
    if not all(importlib.util.find_spec(tool) for tool in ("tf2onnx", "onnxruntime")):
        pytest.skip('tf2onnx/onnxruntime not installed: pip install ".[onnx]"')
    runs = not (converted / "onnx_missing.txt").exists()
    tensorflow_minor = int(tf.__version__.split(".")[1])
    assert runs != readme_says_onnx_is_not_tested(sys.version_info.minor, tensorflow_minor), (
        (converted / "onnx_missing.txt").read_text() if not runs else "the ONNX export runs here"
    )


def saved_model_cli() -> list[str]:
    """TensorFlow's ``saved_model_cli`` console script, run by this interpreter: its entry point,
    found as pip finds it (a ``pip --target`` install has no script beside the interpreter)."""
    entry_points = importlib.metadata.entry_points()
    if hasattr(entry_points, "select"):  # Python 3.10+
        scripts = entry_points.select(group="console_scripts", name="saved_model_cli")
    else:  # Python 3.9: a dict of groups
        scripts = [e for e in entry_points["console_scripts"] if e.name == "saved_model_cli"]
    (script,) = scripts
    run = f"import sys; from {script.module} import {script.attr}; sys.exit({script.attr}())"
    return [sys.executable, "-c", run]


@pytest.mark.slow
def test_saved_model_cli_runs_the_export_and_not_the_plugin_model(exported, workdir):
    command, outputs = saved_model_cli(), {}
    for kind in ("builtin", "source"):
        outdir = workdir / f"cli_{kind}"
        outputs[kind] = subprocess.run(
            [*command, "run", "--dir", str(exported[kind]), "--tag_set", "serve",
             "--signature_def", "serving_default", "--input_exprs", f"x={INPUTS}",
             "--outdir", str(outdir)],
            capture_output=True, text=True, timeout=WORKER_TIMEOUT_S,
        )  # fmt: skip
    assert outputs["builtin"].returncode == 0, outputs["builtin"].stderr[-3000:]
    y = np.load(workdir / "cli_builtin" / "y.npy")
    plugin = plugin_model()  # held: a tf.function method keeps only a weak reference to it
    np.testing.assert_array_equal(y, plugin.serve(tf.constant(INPUTS))["y"].numpy())
    assert outputs["source"].returncode != 0
    assert "Op type not registered" in outputs["source"].stderr


@pytest.mark.compiler
@needs_gcc
@pytest.mark.slow
def test_c_api_loader_runs_the_export_without_the_plugin(exported, workdir):
    (meta_graph,) = read_saved_model(exported["builtin"]).meta_graphs
    signature = meta_graph.signature_def["serving_default"]
    executable = build_c_program("run_saved_model", workdir)
    output = run_c_program(
        executable, str(exported["builtin"]), signature.inputs["x"].name,
        signature.outputs["y"].name, json.dumps(INPUTS),
    )  # fmt: skip
    y = np.array([float(v) for v in output["y"].split()], dtype=np.float32)
    np.testing.assert_array_equal(y, expected_results()["y"])


# --- Bad input ----------------------------------------------------------------------------


def test_not_a_saved_model_is_refused(workdir):
    (workdir / "empty").mkdir(exist_ok=True)
    with pytest.raises(FileNotFoundError, match=r"empty is not a SavedModel directory"):
        export.to_builtin_saved_model(workdir / "empty", workdir / "out_empty")
    assert not (workdir / "out_empty").exists()


@pytest.mark.parametrize("where", ["same", "inside"])
def test_destination_in_the_source_is_refused(exported, where):
    source = exported["source"]
    before = file_digests(source)
    destination = source if where == "same" else source / "export"
    with pytest.raises(ValueError, match=r"is the SavedModel .* or inside it"):
        export.to_builtin_saved_model(source, destination)
    assert file_digests(source) == before
    assert not (source / "export").exists()


def test_non_empty_destination_is_refused(exported, workdir):
    occupied = workdir / "occupied"
    occupied.mkdir(exist_ok=True)
    (occupied / "keep.txt").write_text("mine")
    with pytest.raises(FileExistsError, match=r"occupied already exists and is not an empty"):
        export.to_builtin_saved_model(exported["source"], occupied)
    assert [p.name for p in occupied.iterdir()] == ["keep.txt"]


def test_corrupt_saved_model_is_refused(exported, workdir):
    corrupt = workdir / "corrupt"
    if not corrupt.exists():
        corrupt.mkdir()
        data = (exported["source"] / "saved_model.pb").read_bytes()
        (corrupt / "saved_model.pb").write_bytes(data[: len(data) // 3] + b"\xff\xff\xff")
    before = file_digests(corrupt)
    with pytest.raises(ValueError, match=r"saved_model.pb is not a readable SavedModel"):
        export.to_builtin_saved_model(corrupt, workdir / "out_corrupt")
    assert file_digests(corrupt) == before
    assert not (workdir / "out_corrupt").exists()


# --- Command line and the tracing context -------------------------------------------------


@pytest.mark.slow
def test_command_line_export_says_what_it_rewrote(exported, workdir):
    result = run_command(
        "export", str(exported["source"]), str(workdir / "cli_export"), timeout=WORKER_TIMEOUT_S
    )
    assert result.returncode == 0, result.stderr
    assert f"Rewrote {exported['rewritten']} tf_stopgrad node(s)" in result.stdout
    assert op_types(workdir / "cli_export") == op_types(exported["builtin"])


@pytest.mark.slow
def test_command_line_export_of_bad_input_exits_with_one_line(workdir):
    result = run_command(
        "export", str(workdir / "missing"), str(workdir / "never"), timeout=WORKER_TIMEOUT_S
    )
    assert result.returncode != 0
    assert result.stderr.strip().count("\n") == 0
    assert "is not a SavedModel directory" in result.stderr


def test_keras_model_export_under_builtin_ops_writes_the_builtin_op(workdir):
    model = keras_model()
    with export.builtin_ops():
        model.export(str(workdir / "keras_export"))
    used = op_types(workdir / "keras_export")
    assert "StopGradient" in used
    assert tf_stopgrad.STOP_GRADIENT_OP not in used


def traced_op_types(function) -> set[str]:
    graph = function.get_concrete_function(SPEC).graph
    return {op.type for op in graph.get_operations()}


def test_builtin_ops_context_traces_builtin_ops_and_keeps_earlier_traces():
    earlier = tf.function(stop_only)
    before = traced_op_types(earlier)
    with export.builtin_ops():
        inside = traced_op_types(tf.function(stop_only))
        reused = traced_op_types(earlier)
    after = traced_op_types(tf.function(stop_only))
    with export.builtin_ops():
        with export.builtin_ops():
            pass
        after_nested = traced_op_types(tf.function(stop_only))

    assert tf_stopgrad.STOP_GRADIENT_OP in before and "StopGradient" not in before
    assert "StopGradient" in inside and tf_stopgrad.STOP_GRADIENT_OP not in inside
    assert reused == before  # a trace made before the context is reused as it was
    assert after == before
    assert after_nested == inside  # leaving an inner context restores the outer one
