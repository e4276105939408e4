"""opcheck: it fails an op built wrong on purpose on that op's check and no other, passes
TensorFlow's own ops and tf_stopgrad's, and refuses bad arguments before running anything."""

import functools
import importlib
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import numpy as np
import pytest
import tensorflow as tf
from support import (
    ALL_PLAIN_DTYPES,
    DTYPE_KINDS,
    OP_PAIRS,
    REPO_ROOT,
    builtin_prevent_gradient,
    needs_cmake,
    sample,
    special_tensor,
)

import tf_stopgrad
from tf_stopgrad import _compat, testing
from tf_stopgrad._cmake_package import cmake_dir
from tf_stopgrad.testing import (
    CHECKS,
    OpcheckResults,
    assert_opcheck,
    library_tests,
    opcheck,
    opcheck_library,
)

RNG = np.random.default_rng(7)
FLOAT_SAMPLES = [(RNG.standard_normal([2, 3]).astype(np.float32),),
                 (RNG.standard_normal([4]).astype(np.float64),),
                 (np.float32(-1.5),)]  # fmt: skip
NUMBER_SAMPLES = [*FLOAT_SAMPLES, (np.arange(-3, 3, dtype=np.int32).reshape(3, 2),),
                  (np.array([], np.int64),), (tf.constant([0.5, -2.0], tf.bfloat16),)]  # fmt: skip


# --- ops built wrong on purpose ---------------------------------------------------------------

# Each op of tests/opcheck_ops/ops.cc, and the one check it must fail.
BROKEN = {
    "opcheck_shape_function_lies": "shape_fn",
    "opcheck_no_kernel_for_double": "registered",
    "opcheck_no_gradient": "gradient",
    "opcheck_writes_into_input": "pure",
    "opcheck_random_but_stateless": "pure",
    "opcheck_no_xla_kernel": "modes",
    "opcheck_no_pfor_converter": "vmap",
    "opcheck_needs_known_batch": "retrace",
    "opcheck_reads_first_of_empty": "edges",
    "opcheck_divides_by_last_axis": "edges",
    "opcheck_checks_rank": "edges",
    "opcheck_random_on_extremes": "edges",
    "opcheck_gradient_differs_in_graph": "modes",
}
# What each failure must say, so that the op's author knows what to do.
SAYS = {
    "opcheck_shape_function_lies": "sample 0 (float32[2, 3]), known shapes: output 0: the shape "
                                   "function says float32[2, 3, 1], the kernel gives float32[2, 3]",
    "opcheck_no_kernel_for_double": "no kernel for (Opcheck>NoKernelForDouble, CPU, float64)",
    "opcheck_no_gradient": "no gradient is registered for Opcheck>NoGradient: register one with "
                           "@tf.RegisterGradient, or declare that it has none with tf.no_gradient",
    "opcheck_writes_into_input": "sample 0 (float32[2, 3]): called eagerly, fn changed its input 0",
    "opcheck_random_but_stateless": "Opcheck>RandomButStateless is declared stateless, yet two "
                                    "calls on sample 0 (float32[2, 3]) gave other outputs",
    "opcheck_no_xla_kernel": "jit_compile fails: InvalidArgumentError: No registered "
                             "'Opcheck>NoXlaKernel' OpKernel for XLA_CPU_JIT devices",
    "opcheck_no_pfor_converter": "No pfor vectorization defined for Opcheck>NoPforConverter",
    "opcheck_needs_known_batch": "fn cannot be traced for an unknown batch dimension ([None, 3]): "
                                 "ValueError: Opcheck>NeedsKnownBatch needs a known batch size",
    "opcheck_reads_first_of_empty": "edge sample 2 (float32[0, 3]: sample 0 with an empty batch) "
                                    "ends the process with SIGSEGV eagerly",
    "opcheck_divides_by_last_axis": "edge sample 5 (float32[2, 0]: sample 0 with input 0 empty in "
                                    "axis 1) ends the process with SIGFPE eagerly",
    "opcheck_checks_rank": "edge sample 6 (float32[]: sample 0 with input 0 a scalar) ends the "
                           "process with SIGABRT eagerly (Check failed: context->input(0)"
                           ".dims() >= 1 (",  # then (0 vs. 1), or (1 vs. 0) before TF 2.16's absl
    # Noise where an input is not finite, as tf.image.extract_glimpse outside the image.
    "opcheck_random_on_extremes": "edge sample 4 (float32[2, 3]: sample 0 with extreme values), "
                                  "eagerly three times: output 0: at [0, 0] ",
    "opcheck_gradient_differs_in_graph": "sample 0 (float32[2, 3]): the gradient of floating input "
                                         "0 on CPU:0 in tf.function: at [0, 0]",
}  # fmt: skip


@pytest.fixture(scope="module")
def broken_ops(tmp_path_factory):
    """tests/opcheck_ops built as an op author builds a library, with tf_stopgrad's CMake
    package, beside its Python (opcheck_ops.py, which registers the gradients and pfor
    converters), imported; its directory is on PYTHONPATH for processes that import it."""
    build = tmp_path_factory.mktemp("opcheck_ops")
    for command in (["cmake", "-S", str(REPO_ROOT / "tests" / "opcheck_ops"), "-B", str(build),
                     f"-Dtf_stopgrad_DIR={cmake_dir()}", f"-DPython_EXECUTABLE={sys.executable}"],
                    ["cmake", "--build", str(build)]):  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-5000:]
    shutil.copy(REPO_ROOT / "tests" / "opcheck_ops" / "opcheck_ops.py", build)
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(build))
        patch.setenv("PYTHONPATH", os.pathsep.join([str(build), os.environ.get("PYTHONPATH", "")]))
        yield importlib.import_module("opcheck_ops").ops, str(build / "libopcheck_ops.so")


@pytest.mark.slow
@pytest.mark.core
@pytest.mark.compiler
@needs_cmake
@pytest.mark.parametrize("name", sorted(BROKEN))
def test_an_op_built_wrong_fails_its_check_and_no_other(broken_ops, name):
    library, path = broken_ops
    results = opcheck(getattr(library, name), FLOAT_SAMPLES[:2], library=path)

    assert list(results.failures()) == [BROKEN[name]], str(results)
    assert SAYS[name] in results[BROKEN[name]].reason


X23 = FLOAT_SAMPLES[0][0]
# Ops whose kernels crash (or leave an output unwritten) only where a shape function or another
# input's refusal hid it: the ordinary samples each is given, and what edges must say of it.
CRASHING = {
    "opcheck_checks_required_rank": (
        [(X23,), (RNG.standard_normal([3, 2]),)],
        "edge sample 6 (float32[]: sample 0 with input 0 a scalar) ends the process with SIGABRT "
        "eagerly (Check failed: context->input(0).dims() == 2 ("),
    "opcheck_reads_past_indices": (
        [(X23, np.array([1, 0], np.int32))],
        "edge sample 8 (float32[2, 3], int32[0]: sample 0 with input 1 empty in axis 0) ends the "
        "process with SIGSEGV eagerly; eagerly only: the shape function refuses it in a graph"),
    # The empty input has no buffer, as one that a TensorFlow op makes: from NumPy, it would have
    # one, and the read past it would go unseen (or be taken for memory the kernel never wrote).
    "opcheck_reads_label_per_row": (
        [(X23, np.array([1, 0], np.int32))],
        "edge sample 8 (float32[2, 3], int32[0]: sample 0 with input 1 empty in axis 0) ends the "
        "process with SIGSEGV eagerly, and in tf.function too"),
    "opcheck_overflows_on_largest_count": (
        [(X23, np.int32(2))],
        "edge sample 8 (float32[2, 3], int32[]: sample 0 with input 1 at its maximum) ends the "
        "process with SIG"),
    # Each edge sample with a shorter input 1 leaves the output's tail unwritten.
    "opcheck_leaves_tail_unwritten": (
        [(X23, X23)],
        re.compile(r"edge sample \d+ \(float32\[2, 3\], float32\[[\d, ]*\]: sample 0 with input 1 "
                   r"(empty in axis \d|a scalar)\), eagerly twice: output 0: at \[[^]]*\] [^:]*: "
                   r"an output depends on memory no one wrote, left unwritten by the kernel or "
                   r"read past an input")),
    # glibc's words depend on its version and the heap's state: "free(): double free detected in
    # tcache 2", "double free or corruption (out)" (2.36), "corrupted size vs. prev_size while
    # consolidating" (2.31).
    "opcheck_frees_twice_after_empty": (
        [(X23,)],
        re.compile(r"edge sample 1 \(float32\[0, 3\]: sample 0 with an empty batch\) ends the "
                   r"process with SIGABRT eagerly again \((free\(\): |double free or corruption|"
                   r"corrupted size)")),
}  # fmt: skip


@pytest.mark.slow
@pytest.mark.core
@pytest.mark.compiler
@needs_cmake
@pytest.mark.parametrize("name", sorted(CRASHING))
def test_a_crash_that_only_an_eager_call_or_one_extreme_reaches_fails_edges(broken_ops, name):
    library, path = broken_ops
    samples, says = CRASHING[name]
    results = opcheck(getattr(library, name), samples, library=path,
                      checks=["shape_fn", "crash", "edges", "saved_model"])  # fmt: skip

    assert list(results.failures()) == ["edges"], str(results)  # and this process lives on
    reason = results["edges"].reason
    assert says.search(reason) if isinstance(says, re.Pattern) else says in reason, reason


@pytest.mark.slow
@pytest.mark.core
@pytest.mark.compiler
@needs_cmake
def test_an_edge_of_a_crashed_sample_is_not_compared_with_a_way_the_crash_left_untried(broken_ops):
    # As tensorflow-io's DrawBoundingBoxesV3 on float16: the given sample crashes eagerly, so
    # whether jit_compile fails on it (no XLA kernel) is never seen; an edge of it runs.
    library, _ = broken_ops
    results = opcheck(lambda x: library.opcheck_no_xla_kernel(library.opcheck_reads_first_of_empty(
        tf.boolean_mask(x, x > 0))), [(np.float32([-1, -2]),), (np.float32([1, 2]),)],
        checks=["crash", "modes", "edges"], expect={"modes": "with jit_compile fails"})

    assert str(results["crash"]) == ("failed: sample 0 (float32[2]) ends the process with "
                                     "SIGSEGV eagerly, and in tf.function too")  # fmt: skip
    assert results["modes"].status == "ok", str(results)
    assert "edge sample 3 (float32[1]: sample 0 with a batch of one) ends the process with " \
        "SIGSEGV eagerly" in results["edges"].reason
    assert "jit_compile" not in results["edges"].reason, results["edges"].reason


@pytest.mark.slow
@pytest.mark.core
@pytest.mark.compiler
@needs_cmake
def test_a_given_sample_the_shape_function_refuses_still_runs_eagerly_and_fails_crash(broken_ops):
    library, path = broken_ops
    results = opcheck(library.opcheck_checks_required_rank, FLOAT_SAMPLES[:2], library=path,
                      checks=["shape_fn", "crash"])  # fmt: skip

    assert str(results["crash"]).startswith(
        "failed: sample 1 (float64[4]) ends the process with SIGABRT eagerly (Check failed: "
        "context->input(0).dims() == 2 (")  # then (1 vs. 2), or (2 vs. 1) before TF 2.16's absl
    # library=None finds the op's library though the shape function refuses every sample.
    alone = opcheck(library.opcheck_checks_required_rank, FLOAT_SAMPLES[1:2], checks=["crash"])
    assert str(alone["crash"]).startswith("failed: sample 0 (float64[4]) ends the process with "
                                          "SIGABRT eagerly (Check failed: ")  # fmt: skip


@pytest.mark.slow
@pytest.mark.core
@pytest.mark.compiler
@needs_cmake
def test_a_sample_that_crashes_the_kernel_fails_crash_and_the_others_leave_it_out(broken_ops):
    library, path = broken_ops
    empty = (np.zeros([0, 3], np.float32),)
    results = opcheck(library.opcheck_reads_first_of_empty, [FLOAT_SAMPLES[0], empty],
                      library=path, checks=["crash", "modes", "saved_model"])  # fmt: skip

    assert str(results["crash"]) == ("failed: sample 1 (float32[0, 3]) ends the process with "
                                     "SIGSEGV eagerly, and in tf.function too")  # fmt: skip
    for name in ("modes", "saved_model"):  # this process lives on, and runs sample 0 only
        assert results[name].status == "ok", str(results)
        assert results[name].reason.endswith(
            " (see crash: sample 1 (float32[0, 3]) left out)")
    alone = opcheck(library.opcheck_reads_first_of_empty, [empty], library=path,
                    checks=["shape_fn", "crash", "edges"])  # fmt: skip
    for name in ("shape_fn", "edges"):
        assert alone[name].reason == ("fn builds and runs its ops on no sample (see crash: "
                                      "sample 0 (float32[0, 3]) left out)")  # fmt: skip


@pytest.mark.slow
@pytest.mark.core
@pytest.mark.compiler
@needs_cmake
def test_the_same_op_built_right_fails_no_check(broken_ops):
    library, path = broken_ops
    results = assert_opcheck(library.opcheck_correct, FLOAT_SAMPLES, library=path)

    assert all(str(result).startswith("ok: ") for result in results.values()), str(results)
    assert str(results["crash"]) == ("ok: the 3 given samples: none ends a fresh process, "
                                     "eagerly, in tf.function or with jit_compile; edge samples: "
                                     "see edges")  # fmt: skip
    assert results["saved_model"].reason.endswith(
        "without it, it cannot load: TensorFlow alone registers no Opcheck>Correct")


@pytest.mark.slow
@pytest.mark.core
@pytest.mark.compiler
@needs_cmake
def test_without_library_the_fresh_process_loads_the_op_libraries_that_registered_the_ops(
        broken_ops):
    library, path = broken_ops
    both = lambda x: [library.opcheck_correct(x), tf_stopgrad.stop_gradient(x)]  # noqa: E731
    results = assert_opcheck(both, FLOAT_SAMPLES[:1], checks=["saved_model"])

    loaded = sorted(str(Path(p).resolve()) for p in (path, tf_stopgrad._loader.library_path()))
    lacks = sorted(["Opcheck>Correct", tf_stopgrad.STOP_GRADIENT_OP])
    assert results["saved_model"].reason == (
        f"a fresh process that loads {', '.join(loaded)} gives the same outputs; without it, it "
        f"cannot load: TensorFlow alone registers no {', '.join(lacks)}")


@pytest.mark.slow
@pytest.mark.core
@pytest.mark.compiler
@needs_cmake
def test_a_module_whose_import_registers_no_op_is_told_which_library_to_pass(
        broken_ops, tmp_path, monkeypatch):
    library, path = broken_ops
    (tmp_path / "lazy_ops.py").write_text("def load():  # loads its ops on first use\n    pass\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.syspath_prepend(str(tmp_path))
    results = opcheck(library.opcheck_correct, FLOAT_SAMPLES[:1], checks=["saved_model"],
                      library="lazy_ops")  # fmt: skip

    assert str(results["saved_model"]) == (
        "failed: in a fresh process that loads lazy_ops, the SavedModel does not load and run: "
        "LookupError: loading module:lazy_ops registers no Opcheck>Correct: its import must "
        f"register them; library={[str(Path(path).resolve())]} (loaded here, they registered "
        "them) does")


# --- a whole library, given no samples ----------------------------------------------------

# What each op of tests/opcheck_ops must fail, and say, given no samples: the sound one nothing;
# each crasher edges, naming its signal, and the checks of what its library lacks by design (the
# Python registers gradients and pfor converters for ops of one input, ops.cc XLA kernels for
# some); those that derived samples cannot call are skipped.
NO_XLA, NO_PFOR = "OpKernel for XLA_CPU_JIT devices", "No pfor vectorization defined"
NO_GRADIENT = "no gradient is registered"
LIBRARY = {
    "Opcheck>Correct": {},
    "Opcheck>ReadsLabelPerRow": {
        "gradient": NO_GRADIENT, "modes": NO_XLA, "vmap": NO_PFOR,
        "edges": "int32[0]: sample 0 with input 1 empty in axis 0) ends the process with SIGSEGV "
                 "eagerly, and in tf.function too"},
    "Opcheck>DividesByLastAxis": {"edges": "ends the process with SIGFPE eagerly"},
    # Its shape function refuses unknown sizes: the derivation asks it with sizes of 2.
    "Opcheck>NeedsKnownBatch": {"retrace": "cannot be traced for an unknown batch dimension"},
    "Opcheck>ChecksRequiredRank": {
        "modes": NO_XLA, "edges": "ends the process with SIGABRT eagerly (Check failed: "
                                  "context->input(0).dims() == 2 (",
        # opcheck_ops.py's converter calls it on the stacked batch, which it refuses: true.
        "vmap": "Shape must be rank 2 but is rank 3"},
    "Opcheck>LeavesTailUnwritten": {
        "gradient": NO_GRADIENT, "modes": NO_XLA, "vmap": NO_PFOR,
        "edges": "an output depends on memory no one wrote"},
    # Frees twice only after a call on a non-empty input: its command makes that call first.
    "Opcheck>FreesTwiceAfterEmpty": {
        "modes": NO_XLA, "edges": "ends the process with SIGABRT eagerly again ("},
    # Float and double, with axis -1 (the first set of attributes), its row splits rising from 0
    # to the rows: each derived sample runs; with axis 0 (the second), the kernel refuses each.
    "Opcheck>TakesRowSplits": {"gradient": NO_GRADIENT, "modes": NO_XLA, "vmap": NO_PFOR},
    "Opcheck>TakesAFunction": "skipped: attribute f is a func, which derived samples cannot give",
    "Opcheck>TakesAResource": "skipped: an input is a resource or a variant, which derived "
                              "samples cannot make",
}  # fmt: skip


@pytest.mark.slow
@pytest.mark.core
@pytest.mark.compiler
@needs_cmake
def test_a_library_given_no_samples_fails_each_crasher_naming_its_signal_and_the_sound_op_not(
        broken_ops):
    results = opcheck_library("opcheck_ops", ops=list(LIBRARY))

    for op_type, expected in LIBRARY.items():
        result = results[op_type]
        if isinstance(expected, str):
            assert {str(check) for check in result.values()} == {expected}, str(result)
            continue
        assert 0 < result.ran <= result.accepted <= result.derived, op_type
        assert set(result.failures()) == set(expected), f"{op_type}:\n{result}"
        for name, words in expected.items():
            assert words in result[name].reason, result[name].reason
            assert len(result[name].commands) == len(result[name].problems)
    splits = results["Opcheck>TakesRowSplits"]
    assert (splits.derived, splits.ran) == (4, 2), str(splits)
    command = results["Opcheck>FreesTwiceAfterEmpty"]["edges"].commands[0]
    shown = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=300)
    assert shown.returncode in (-signal.SIGABRT, 128 + signal.SIGABRT), shown.stderr[-3000:]


@pytest.mark.slow
@pytest.mark.compiler
@needs_cmake
def test_the_command_line_lists_each_op_and_each_failure_with_a_command_that_shows_it(
        broken_ops, tmp_path):
    junit = tmp_path / "opcheck.xml"
    ran = subprocess.run(
        [sys.executable, "-m", "tf_stopgrad", "opcheck", "opcheck_ops", "Opcheck>Correct",
         "Opcheck>DividesByLastAxis", "--checks", "crash", "edges", "--junit", str(junit)],
        capture_output=True, text=True, timeout=600)  # fmt: skip

    assert ran.returncode == 1, ran.stdout + ran.stderr[-3000:]
    lines = ran.stdout.splitlines()
    assert re.match(r"1/2 Opcheck>Correct: [\d.]+ s$", lines[0]), lines[0]
    assert re.match(r"Opcheck>DividesByLastAxis +\d+ +\d+ +\d+  ✓      ✗", lines[5]), lines
    failure = lines.index("Opcheck>DividesByLastAxis: edges failed:")
    assert "ends the process with SIGFPE eagerly" in lines[failure + 1]
    end = next((i for i, line in enumerate(lines) if i > failure + 1 and line.startswith("  - ")),
               len(lines))
    command = "\n".join(lines[failure + 2:end]).removeprefix("    $ ")  # to the next problem
    shown = subprocess.run(["bash", "-c", command], capture_output=True, timeout=300)
    assert shown.returncode == -signal.SIGFPE or shown.returncode == 128 + signal.SIGFPE
    suite = ElementTree.parse(junit).getroot()
    assert (suite.get("tests"), suite.get("failures")) == ("2", "1")
    assert [case.get("name") for case in suite.iter("testcase") if case.find("failure")
            is not None] == ["Opcheck>DividesByLastAxis"]
    test = library_tests("opcheck_ops", ops=["Opcheck>Correct"], checks=["crash"])
    assert test.pytestmark[0].args == ("op_type", ["Opcheck>Correct"])
    test("Opcheck>Correct")


# --- tf_stopgrad's ops, beside the built-ins ---------------------------------------------

# Every plain dtype in random bits (NaN payloads, -0.0, subnormals), and values chosen to catch
# any conversion, in shapes with no element, one, and more.
PLUGIN_SAMPLES = [
    *((sample(dtype, (2, 3), seed),) for seed, dtype in enumerate(ALL_PLAIN_DTYPES)),
    *((special_tensor(dtype),) for dtype in DTYPE_KINDS),
    *((sample(tf.float32, shape),) for shape in [(), (0,), (4, 0, 3), (7,)]),
]
OP_TYPES = {"stop_gradient": tf_stopgrad.STOP_GRADIENT_OP,
            "prevent_gradient": tf_stopgrad.PREVENT_GRADIENT_OP}


@functools.cache
def checked(op_name: str, side: int) -> OpcheckResults:
    """opcheck's results for our op (side 0) or the built-in (side 1), once per process."""
    return opcheck(OP_PAIRS[op_name][side], PLUGIN_SAMPLES, library=None if side else "tf_stopgrad")


# The checks that start no process: the emulated aarch64 and ASan lanes run these.
IN_PROCESS = list(testing.IN_PROCESS)


@pytest.mark.core
@pytest.mark.parametrize("op_name", sorted(OP_PAIRS))
def test_the_plugins_ops_fail_no_check_in_process(op_name):
    assert_opcheck(OP_PAIRS[op_name][0], PLUGIN_SAMPLES, checks=IN_PROCESS)


# --- with a GPU visible ---------------------------------------------------------------------


@pytest.fixture
def gpu_visible(monkeypatch):
    """opcheck sees CPU:0 and GPU:0, as on a GPU machine. Without a GPU, TensorFlow's CUDA build
    still registers its GPU kernels, which `registered` reads, and runs what `modes` places on
    GPU:0 on the CPU (soft placement): a GPU run checks the placement itself."""
    if not any(k.device_type == "GPU" for k in _compat.registered_kernels("StopGradient")):
        pytest.skip("this TensorFlow registers no GPU kernel")
    monkeypatch.setattr(testing._run, "_visible_devices", lambda: ["CPU:0", "GPU:0"])


@pytest.mark.core
@pytest.mark.parametrize(("op_name", "side"), [(name, side) for name in sorted(OP_PAIRS)
                                               for side in (0, 1)])  # fmt: skip
def test_with_a_gpu_visible_our_ops_and_the_builtins_fail_nothing_and_name_the_cpu_fallback(
        gpu_visible, op_name, side):
    # TensorFlow has no GPU kernel of StopGradient for quantized types, nor of PreventGradient
    # for int32: its placer runs them on the CPU, which is not a defect.
    expect = {"vmap": "No pfor vectorization defined for PreventGradient"} if side and \
        op_name == "prevent_gradient" else {}  # fmt: skip
    results = assert_opcheck(OP_PAIRS[op_name][side], PLUGIN_SAMPLES, checks=IN_PROCESS,
                             expect=expect)  # fmt: skip

    op_type = (OP_TYPES[op_name], OP_TYPES[op_name].partition(">")[2])[side]
    assert f"on GPU, {op_type} runs on the CPU for " in results["registered"].reason
    assert "qint8" in results["registered"].reason.partition("runs on the CPU for")[2]
    assert "agree on CPU:0, GPU:0" in results["modes"].reason


def every_declared(op_type: str, arguments: int) -> list[tuple]:
    """A sample of each dtype that the OpDef of ``op_type`` declares for its attribute T."""
    attr = next(a for a in _compat.registered_op_def(op_type).attr if a.name == "T")
    return [(sample(tf.as_dtype(t), (2, 4), seed),) * arguments  # Relu<qint8>: 4 per row
            for seed, t in enumerate(attr.allowed_values.list.type)]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("fn", "samples", "fallback"),
    [(tf.identity, PLUGIN_SAMPLES, "on GPU, Identity runs on the CPU for qint16, qint32, qint8"),
     (tf.stop_gradient, PLUGIN_SAMPLES, "on GPU, StopGradient runs on the CPU for qint16"),
     (tf.nn.relu, every_declared("Relu", 1), "on CPU, Relu runs on the GPU only, and is left out "
                                             "for qint8; on GPU, Relu runs on the CPU for int32"),
     (tf.math.add, every_declared("AddV2", 2), "AddV2: an OpDef, and a kernel on CPU, GPU for "
                                               "every sample")],
    ids=["identity", "stop_gradient", "relu", "add"],
)  # fmt: skip
def test_with_a_gpu_visible_tensorflows_own_ops_fail_nothing(gpu_visible, fn, samples, fallback):
    results = assert_opcheck(fn, samples, checks=IN_PROCESS)

    assert fallback in results["registered"].reason
    assert "agree on CPU:0, GPU:0" in results["modes"].reason


def test_with_a_gpu_visible_a_dtype_no_device_has_a_kernel_for_still_fails(gpu_visible):
    # MatrixSquareRoot declares float16, and no device has a kernel for it.
    spd = np.array([[2.0, 0.5], [0.5, 1.0]])
    results = opcheck(tf.linalg.sqrtm, [(spd.astype(np.float32),), (spd.astype(np.float16),)],
                      checks=["registered"])  # fmt: skip

    assert str(results["registered"]) == ("failed: no kernel for (MatrixSquareRoot, CPU, "
                                          "float16); no kernel for (MatrixSquareRoot, GPU, "
                                          "float16)")  # fmt: skip


def test_with_a_gpu_visible_modes_compares_the_gpus_outputs_with_the_cpus(gpu_visible):
    def differs_on_gpu(x):  # as a GPU kernel that computes something else
        return x + float("GPU" in (_compat.context().device_name or ""))

    results = opcheck(differs_on_gpu, FLOAT_SAMPLES[:1], checks=["modes"])

    # Its traces (made on the CPU first) run unchanged under GPU:0: its eager call differs.
    assert results["modes"].reason.startswith(
        "sample 0 (float32[2, 3]), GPU:0, eagerly: output 0: at [0, 0] np.float32(1.0")
    testing._run._visible_devices = lambda: ["CPU:0"]  # monkeypatch restores it
    assert opcheck(differs_on_gpu, FLOAT_SAMPLES[:1], checks=["modes"])["modes"].status == "ok"


@pytest.mark.slow
@pytest.mark.core
def test_a_model_of_the_plugins_ops_loads_with_it_in_a_fresh_process_and_only_with_it():
    both = [OP_PAIRS[op_name][0] for op_name in sorted(OP_PAIRS)]  # one process for the two
    results = assert_opcheck(lambda x: [op(x) for op in both], PLUGIN_SAMPLES,
                             checks=["saved_model"], library="tf_stopgrad")  # fmt: skip

    assert results["saved_model"].reason == (
        "a fresh process that loads tf_stopgrad gives the same outputs; without it, it cannot "
        f"load: TensorFlow alone registers no {', '.join(sorted(OP_TYPES.values()))}")


@pytest.mark.slow
@pytest.mark.parametrize("op_name", sorted(OP_PAIRS))
def test_the_plugins_ops_get_the_builtins_verdicts(op_name):
    ours, builtin = checked(op_name, 0), checked(op_name, 1)
    verdicts = {name: result.status for name, result in builtin.items()}
    assert ours["crash"].status == ours["edges"].status == "ok", str(ours)  # and so the built-in

    if op_name == "prevent_gradient":  # the built-in lacks the pfor converter the plugin has
        assert verdicts.pop("vmap") == "failed"
        assert ours["gradient"].reason.startswith("the gradient refuses by design")
        assert builtin["gradient"].reason.startswith("the gradient refuses by design")
    assert {name: ours[name].status for name in verdicts} == verdicts


# --- TensorFlow's own ops ------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    ("fn", "samples"),
    [(tf.identity, NUMBER_SAMPLES), (tf.stop_gradient, NUMBER_SAMPLES),
     (tf.nn.relu, FLOAT_SAMPLES), (tf.math.add, [(*s, *s) for s in NUMBER_SAMPLES]),
     (tf.math.negative, FLOAT_SAMPLES)],  # its outputs fed back as inputs would not agree
    ids=["identity", "stop_gradient", "relu", "add", "negative"],
)  # fmt: skip
def test_tensorflows_own_ops_fail_no_check(fn, samples):
    results = assert_opcheck(fn, samples)

    assert list(results) == list(CHECKS)
    assert "loads only TensorFlow" in results["saved_model"].reason


@pytest.mark.slow
def test_a_kernels_shape_that_its_shape_function_contradicts_fails_shape_fn_with_both_shapes():
    # ResizeBilinearGrad's kernel takes the batch and channels from grads, its shape function from
    # original_image. On Inf and NaN, its kernel and XLA give other non-finite values: no defect.
    grads, image = (RNG.standard_normal(shape).astype(np.float32)
                    for shape in ([2, 4, 4, 1], [2, 3, 3, 1]))
    results = opcheck(lambda g, i: tf.raw_ops.ResizeBilinearGrad(grads=g, original_image=i),
                      [(grads, image)], checks=["shape_fn", "edges"], rtol=1e-5)

    assert list(results.failures()) == ["shape_fn"], str(results)
    assert ("edge sample 4 (float32[0, 4, 4, 1], float32[2, 3, 3, 1]: sample 0 with input 0 empty "
            "in axis 0), known shapes: output 0: the shape function says float32[2, 3, 3, 1], the "
            "kernel gives float32[0, 3, 3, 1]") in results["shape_fn"].problems
    assert results["edges"].reason.endswith("; 4 whose shapes the shape function contradicts, "
                                            "compared eagerly only (see shape_fn)")


@pytest.mark.slow
def test_a_variant_output_is_held_to_its_shape_on_edge_samples_too():
    # The fresh process writes a variant as bools of its shape: no dtype to contradict.
    results = opcheck(lambda x: tf.raw_ops.TensorListFromTensor(
        tensor=x, element_shape=tf.constant([-1], tf.int32)), [(np.ones([2, 3], np.float32),)],
        checks=["shape_fn", "edges"])

    assert not results.failures(), str(results)
    assert results["shape_fn"].reason.startswith("inferred shapes and dtypes agree")


def test_ways_may_give_other_values_on_an_inf_or_a_nan_but_not_other_shapes():
    def infinity_to(x, eager, graph):  # two right algorithms may make other non-finite values
        return tf.where(tf.math.is_finite(x), x, eager if tf.executing_eagerly() else graph)

    inf = [(np.float32([1.0, np.inf]),)]
    assert_opcheck(lambda x: infinity_to(x, np.inf, np.nan), inf, checks=["modes"])
    shorter = opcheck(lambda x: infinity_to(x, 0.0, 1.0)[:1 + tf.executing_eagerly()], inf,
                      checks=["modes"])  # fmt: skip
    assert str(shorter["modes"]).startswith("failed: sample 0 (float32[2]), CPU:0, in "
                                            "tf.function: output 0: float32[1], expected "
                                            "float32[2]")  # fmt: skip
    finite = opcheck(lambda x: x + float(tf.executing_eagerly()), [(np.float32([1.0, 2.0]),)],
                     checks=["modes"])  # fmt: skip
    assert finite["modes"].status == "failed"


def test_every_problem_is_in_the_result_and_its_reason_says_so():
    results = opcheck(lambda x: x + float(tf.executing_eagerly()),
                      [(np.float32([k]),) for k in range(6)], checks=["modes"])  # fmt: skip

    assert len(results["modes"].problems) == 12  # tf.function and jit_compile, on each sample
    assert str(results["modes"]).endswith("; and 8 more (.problems lists them all)")
    assert results["modes"].reason.startswith(results["modes"].problems[0])


@pytest.mark.slow
def test_tensorflows_prevent_gradient_fails_only_vmap_and_says_why():
    results = opcheck(functools.partial(builtin_prevent_gradient, message="m"), FLOAT_SAMPLES)

    assert list(results.failures()) == ["vmap"], str(results)
    assert "No pfor vectorization defined for PreventGradient" in results["vmap"].reason
    assert "the gradient refuses by design (LookupError: Gradient explicitly disabled. Reason: " \
        "b'm')" in results["gradient"].reason  # fmt: skip


def test_checks_that_cannot_apply_are_skipped_with_the_reason():
    results = opcheck(tf.math.logical_not, [(np.array([True, False]),), (np.bool_(True),)],
                      checks=IN_PROCESS)  # fmt: skip

    assert str(results["gradient"]) == "skipped: no sample has a floating input"
    assert results["retrace"].status == "ok"
    assert not results.failures(), str(results)


@pytest.mark.slow
def test_strings_are_checked_without_xla_which_has_no_string_type():
    results = assert_opcheck(tf.identity, [(np.array([b"a", b"bc"], object),)])

    assert results["modes"].reason == ("eager and tf.function agree on CPU:0 (XLA has no type "
                                       "for string: jit_compile not tried)")  # fmt: skip
    # One expect serves a suite of ops without XLA kernels: here jit_compile cannot be tried.
    expected = assert_opcheck(tf.identity, [(np.array([b"a"], object),)], checks=["modes"],
                              expect={"modes": "with jit_compile fails"})  # fmt: skip
    assert expected["modes"].reason.startswith("expected to fail with 'with jit_compile fails', "
                                               "not tried: eager and tf.function agree")
    with pytest.raises(AssertionError, match="expected to fail with 'tf.function fails', but ok"):
        assert_opcheck(tf.identity, [(np.array([b"a"], object),)], checks=["modes"],
                       expect={"modes": "tf.function fails"})  # fmt: skip


@pytest.mark.slow
def test_a_scalar_string_keeps_its_trailing_nul_bytes():
    # A file's bytes often end in NULs (a WAV's empty data chunk): cut off, DecodeRaw refuses them.
    word = np.array(b"\x01\x00\x00\x00\x00\x00\x00\x00", object)
    results = assert_opcheck(lambda x: tf.io.decode_raw(x, tf.int32), [(word,)],
                             expect={"vmap": "No pfor vectorization defined for DecodeRaw"})

    assert results["saved_model"].status == "ok"


@pytest.mark.parametrize("fn", [tf.math.is_nan, tf.math.is_finite,
                                lambda p: tf.math.in_top_k([0, 2], p, 1)],
                         ids=["is_nan", "is_finite", "in_top_k"])  # fmt: skip
def test_an_op_without_a_floating_output_needs_no_gradient(fn):
    x = tf.constant([[1.0, np.nan, np.inf], [0.5, -2.0, 3.0]])
    with tf.GradientTape() as tape:  # a tape through it works: no gradient flows through it
        tape.watch(x)
        y = tf.reduce_sum(tf.cast(fn(x), tf.float32)) * tf.reduce_sum(x)
    assert tape.gradient(y, x) is not None
    results = opcheck(fn, [(x,)], checks=["gradient"])

    assert str(results["gradient"]) == ("skipped: no output is floating: a gradient through fn "
                                        "is None, as through tf.math.is_nan")  # fmt: skip


def test_a_sample_the_shape_function_refuses_fails_nothing_and_its_kernel_is_not_run():
    run_eagerly_on = []

    def inverse(x):
        if tf.executing_eagerly():
            run_eagerly_on.append(x.shape.rank)
        return tf.linalg.inv(x)

    # tf.linalg.inv's shape function and kernel both refuse a scalar, with a clean error.
    invertible = np.array([[1, 1], [0, 1]], np.float32)  # and so are vmap's rotations of it
    results = assert_opcheck(inverse, [(invertible,), (np.float32(2),)],
                             checks=IN_PROCESS)  # fmt: skip

    assert results["shape_fn"].reason.startswith(
        "inferred shapes and dtypes agree with the kernel's; the shape function refuses sample 1 "
        "(float32[]) (ValueError: Shape must be at least rank 2 but is rank 0")
    assert results["shape_fn"].reason.endswith("so it is left out, and its kernel not run on it "
                                               "in this process (the fresh process calls it "
                                               "eagerly)")
    assert 0 not in run_eagerly_on  # a kernel that CHECKs its rank would end the process


FN_OF_NOTHING = "lambda: tf.math.add(tf.range(3.0), 1.0)"


@pytest.mark.slow
def test_a_function_of_no_arguments_fails_nothing_whatever_ran_before():
    results = assert_opcheck(eval(FN_OF_NOTHING), [()])

    assert str(results["vmap"]) == "skipped: fn takes no argument to batch"
    assert str(results["modes"]) == "ok: eager, tf.function and jit_compile agree on CPU:0"
    # A fresh process, where no eager op has run yet (XLA registers its kernels at the first).
    fresh = subprocess.run(
        [sys.executable, "-c", "import tensorflow as tf; from tf_stopgrad.testing import opcheck; "
         f"print(opcheck({FN_OF_NOTHING}, [()], checks=['modes'])['modes'])"],
        capture_output=True, text=True, timeout=300)  # fmt: skip
    assert fresh.stdout.strip() == str(results["modes"]), fresh.stderr[-3000:]


def test_retrace_that_tried_no_larger_batch_says_so_and_gives_the_whole_refusal():
    def two_rows_per_group(x):  # refuses any batch but a multiple of two rows
        return tf.reshape(x, tf.stack([2, -1, tf.shape(x)[1]]))

    results = opcheck(two_rows_per_group, [(np.ones([2, 3], np.float32),)], checks=["retrace"])

    assert str(results["retrace"]) == (
        "skipped: fn refused every batch larger than its sample, so no other batch size was "
        "tried: a batch of 3 made from sample 0 (float32[2, 3]): InvalidArgumentError: Input to "
        "reshape is a tensor with 9 values, but the requested shape requires a multiple of 6; "
        "and 1 more")


# State a test file reaches through a module global, as the natural way to write one.
WORDS = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(["a", "b"], [1, 2]), -1)


def look_up(words):
    return WORDS.lookup(words)


@pytest.mark.slow
@pytest.mark.parametrize("fn", [look_up, lambda words: look_up(words),
                                functools.partial(look_up)], ids=["global", "wrapper", "partial"])
def test_a_model_saves_the_state_fn_reaches_through_a_global_or_a_wrapper(fn):
    results = assert_opcheck(fn, [(np.array([b"a", b"c", b"b"], object),)],
                             checks=["saved_model"])  # fmt: skip

    assert results["saved_model"].reason.startswith("a fresh process that loads only TensorFlow "
                                                    "gives the same outputs")  # fmt: skip


def test_a_failure_by_design_can_be_expected_and_only_it():
    prevent = functools.partial(builtin_prevent_gradient, message="m")
    results = assert_opcheck(prevent, FLOAT_SAMPLES[:1], checks=["vmap", "pure"],
                             expect={"vmap": "No pfor vectorization defined"})  # fmt: skip

    assert results["vmap"].reason.startswith(
        "fails as expected, with 'No pfor vectorization defined': sample 0 (float32[2, 3]): "
        "tf.vectorized_map fails without its while_loop fallback")
    with pytest.raises(AssertionError, match=r"  pure: failed: expected to fail with 'x', but ok: "
                       r"inputs unchanged"):  # fmt: skip
        assert_opcheck(prevent, FLOAT_SAMPLES[:1], checks=["pure"], expect={"pure": "x"})
    # XLA's float16 sum rounds otherwise than the eager kernel's, on both samples.
    samples = [(RNG.standard_normal([64, 256]).astype(np.float16),) for _ in range(2)]
    partly = opcheck(functools.partial(tf.reduce_sum, axis=1), samples, checks=["modes"],
                     expect={"modes": "sample 0 "})  # fmt: skip
    assert partly["modes"].reason.startswith("sample 1 (float16[64, 256]), CPU:0, with jit_compile")


def test_an_op_without_an_xla_kernel_by_design_keeps_the_other_comparisons():
    # MatrixSquareRoot has no XLA kernel; the eager and tf.function outputs are still compared.
    spd = (np.array([[2.0, 0.5], [0.5, 1.0]], np.float32),)
    results = assert_opcheck(tf.linalg.sqrtm, [spd], checks=["modes"],
                             expect={"modes": "with jit_compile fails"})  # fmt: skip

    assert results["modes"].reason.startswith(
        "fails as expected, with 'with jit_compile fails': sample 0 (float32[2, 2]) on CPU:0: "
        "with jit_compile fails: InvalidArgumentError: ")
    with pytest.raises(AssertionError, match=r"modes: failed: sample 0 \(float32\[2, 2\]\), "
                       r"CPU:0, in tf.function: output 0"):  # fmt: skip
        assert_opcheck(lambda x: tf.linalg.sqrtm(x) + float(tf.executing_eagerly()), [spd],
                       checks=["modes"],
                       expect={"modes": "with jit_compile fails"})  # fmt: skip


@pytest.mark.slow
def test_what_a_check_reports_is_not_printed_between_the_results_too():
    # TensorFlow's C++ code writes a failed XLA compilation's traceback to stderr, and pfor logs
    # the graph it cannot vectorize, in opcheck's own process.
    loop = ("lambda x: tf.while_loop(lambda i, y: i < 2, lambda i, y: (i + 1, "
            "tf.linalg.sqrtm(y)), (0, x))[1]")
    ran = subprocess.run(
        [sys.executable, "-c", "import numpy as np, tensorflow as tf; from tf_stopgrad.testing "
         "import opcheck; print(opcheck(tf.linalg.sqrtm, [(np.eye(2, dtype=np.float32),)], "
         f"checks=['modes'])['modes']); print(opcheck({loop}, [(np.ones([1, 2, 2], np.float32),)], "
         "checks=['vmap'])['vmap'])"], capture_output=True, text=True, timeout=300)

    assert "with jit_compile fails: InvalidArgumentError: No registered 'MatrixSquareRoot'" \
        in ran.stdout, ran.stderr[-3000:]
    assert "No pfor vectorization defined for MatrixSquareRoot" in ran.stdout, ran.stderr[-3000:]
    assert "MatrixSquareRoot" not in ran.stderr, ran.stderr[-3000:]


def test_an_op_whose_outputs_vary_has_no_values_compared_though_some_agree_by_chance():
    def coin(x):  # RandomUniformInt is stateful: its outputs may vary
        return x + tf.random.uniform([], 0, 2, tf.int32)

    # Two calls on one scalar agree half the time: a verdict per sample would compare its values.
    # On 16 samples, every pair agrees once in 65,536 runs: then this test fails.
    results = assert_opcheck(coin, [(np.int32(k),) for k in range(16)], checks=["modes", "pure"])

    assert results["pure"].reason == ("inputs unchanged; outputs vary, as stateful "
                                      "RandomUniformInt may make them")  # fmt: skip


@pytest.mark.slow
def test_saved_model_says_it_compares_no_values_of_an_op_whose_outputs_vary():
    def coin(x):
        return x + tf.random.uniform([], 0, 2, tf.int32)

    results = assert_opcheck(coin, [(np.int32(k),) for k in range(16)], checks=["saved_model"])

    assert results["saved_model"].reason.startswith(
        "a fresh process that loads only TensorFlow gives outputs of the same dtypes and ranks "
        "(fn's vary: see pure)")


def test_checks_runs_the_checks_named_in_its_order():
    results = opcheck(tf.identity, FLOAT_SAMPLES, checks=["pure", "registered"])

    assert list(results) == ["registered", "pure"]


def test_a_tolerance_admits_rounding_that_bit_for_bit_refuses():
    # XLA's float16 sum rounds otherwise than the eager kernel's.
    samples = [(RNG.standard_normal([64, 256]).astype(np.float16),)]
    reduce = functools.partial(tf.reduce_sum, axis=1)
    bitwise, within = opcheck(reduce, samples, checks=["modes"]), opcheck(
        reduce, samples, checks=["modes"], rtol=1e-2, atol=1e-1)

    assert bitwise["modes"].status == "failed"
    assert "jit_compile: output 0: at [" in bitwise["modes"].reason
    assert within["modes"].status == "ok", str(within)


# --- a broken op never makes opcheck raise; raise_on_failure lists every failure ----------


@pytest.mark.slow
def test_an_op_that_raises_when_it_runs_fails_the_checks_that_run_it_and_opcheck_does_not_raise():
    nan = (np.array([1.0, np.nan], np.float32),)
    results = opcheck(lambda x: tf.debugging.check_numerics(x, "found a NaN"), [nan])

    assert results["registered"].status == "ok"
    assert results["shape_fn"].reason.startswith(
        "sample 0 (float32[2]): fn raised InvalidArgumentError: found a NaN : Tensor had NaN "
        "values")
    # retrace traces fn, which works; the batches made from the sample are refused at run time,
    # which is no failure (those inputs are opcheck's, not the author's), but verifies nothing.
    assert set(results.failures()) == set(CHECKS) - {"registered", "crash", "retrace"}, str(results)
    # XLA's CheckNumerics checks nothing: TensorFlow's own op, found by an edge sample.
    assert results["edges"].reason.startswith(
        "edge sample 3 (float32[2]: sample 0 with extreme values): eagerly, fn fails: "
        "InvalidArgumentError: found a NaN : Tensor had Inf and NaN values")
    assert results["edges"].reason.endswith("; with jit_compile, it gives outputs")
    assert str(results["retrace"]).startswith(
        "skipped: fn refused every batch larger than its sample, so no other batch size was tried: "
        "a batch of 2 made from sample 0 (float32[2]): InvalidArgumentError: found a NaN")
    assert "found a NaN : Tensor had NaN values" in results["saved_model"].reason
    with pytest.raises(AssertionError, match=r"opcheck: 7 of 10 checks failed\n  shape_fn: "
                       r"failed: sample 0 \(float32\[2\]\): fn raised") as raised:
        results.raise_on_failure()
    assert raised.value.args[0].count("\n  ") == 7


@pytest.mark.slow
def test_an_op_that_cannot_be_built_fails_registered_and_the_others_leave_it_out():
    def broken(x):
        raise RuntimeError("kernel exploded")

    results = opcheck(broken, FLOAT_SAMPLES[:1])

    assert str(results["registered"]) == ("failed: sample 0 (float32[2, 3]): fn cannot build its "
                                          "ops: RuntimeError: kernel exploded")  # fmt: skip
    assert {str(result) for name, result in results.items() if name != "registered"} == {
        "skipped: fn builds and runs its ops on no sample (see registered)"}


def test_assert_opcheck_raises_with_the_failures():
    with pytest.raises(AssertionError, match=r"1 of 7 checks failed\n  vmap: failed: .*No pfor"):
        assert_opcheck(functools.partial(builtin_prevent_gradient, message="m"), FLOAT_SAMPLES[:1],
                       checks=IN_PROCESS)  # fmt: skip


# --- bad arguments: a clear error before any check runs ------------------------------------

X = np.ones([2], np.float32)


@pytest.mark.parametrize(
    ("fn", "samples", "options", "error", "message"),
    [
        (3, [(X,)], {}, TypeError, "fn must be a callable that builds the op from tensors"),
        (tf.identity, [], {}, ValueError, "samples must be a non-empty list of tuples"),
        (tf.identity, X, {}, ValueError, "samples must be a non-empty list of tuples"),
        (tf.identity, [X], {}, TypeError, r"sample 0 is a ndarray, not a tuple of arguments: "
                                          r"write \(x,\) for one argument"),
        (tf.identity, [(X,), ([1.0],)], {}, TypeError, "sample 1, argument 0 is a list: give a "
                                                       "tf.Tensor or a NumPy array"),
        (tf.identity, [(tf.Variable(X),)], {}, TypeError, "argument 0 is a ResourceVariable"),
        (tf.identity, [(X,)], {"checks": ["shapes"]}, ValueError,
         r"unknown check \['shapes'\]: the checks are registered, shape_fn, crash, gradient"),
        (tf.identity, [(X,)], {"checks": "pure"}, TypeError,
         "checks must be a list of check names, such as ['pure']; got the string 'pure'"),
        (tf.identity, [(X,)], {"expect": {"vmap": ""}}, TypeError,
         "expect maps a check to words its failure says"),
        (tf.identity, [(X,)], {"expect": {"vmapp": "No pfor"}}, ValueError,
         "unknown check ['vmapp']"),
        (tf.identity, [(X,)], {"checks": ["pure"], "expect": {"vmap": "No pfor"}}, ValueError,
         "expect names ['vmap'], which checks leaves out"),
        (tf.identity, [(X,)], {"library": "no/such/lib.so"}, ValueError,
         "library 'no/such/lib.so' is neither an op library file nor a module that can be "
         "imported"),
        (tf.identity, [(X,)], {"library": "no_such_module"}, ValueError,
         "library 'no_such_module'"),
    ],
    ids=["fn", "no-samples", "samples-array", "sample-not-tuple", "argument-list", "variable",
         "unknown-check", "checks-string", "expect-no-words", "expect-unknown-check",
         "expect-unrun", "library-path", "library-module"],
)  # fmt: skip
def test_bad_arguments_are_refused_before_any_check_runs(fn, samples, options, error, message):
    with pytest.raises(error, match=re.escape(message) if "\\" not in message else message):
        opcheck(fn, samples, **options)
