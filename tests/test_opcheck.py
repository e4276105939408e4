"""opcheck: it fails an op built wrong on purpose on that op's check and no other, passes
TensorFlow's own ops and tf_stopgrad's, and refuses bad arguments before running anything."""

import contextlib
import functools
import re
import subprocess
import sys

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
from tensorflow.python.ops.parallel_for import pfor

import tf_stopgrad
from tf_stopgrad._cmake_package import cmake_dir
from tf_stopgrad.testing import CHECKS, OpcheckResults, assert_opcheck, opcheck

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
}
# What each failure must say, so that the op's author knows what to do.
SAYS = {
    "opcheck_shape_function_lies": "sample 0 (float32[2, 3]), known shapes: output 0 is inferred "
                                   "float32[2, 3, 1], the kernel gives float32[2, 3]",
    "opcheck_no_kernel_for_double": "no kernel for (Opcheck>NoKernelForDouble, CPU, float64)",
    "opcheck_no_gradient": "no gradient is registered for Opcheck>NoGradient: register one with "
                           "@tf.RegisterGradient, or declare that it has none with tf.no_gradient",
    "opcheck_writes_into_input": "sample 0 (float32[2, 3]): called eagerly, fn changed its input 0",
    "opcheck_random_but_stateless": "Opcheck>RandomButStateless is declared stateless, yet two "
                                    "calls on sample 0 (float32[2, 3]) gave other outputs",
    "opcheck_no_xla_kernel": "jit_compile fails: InvalidArgumentError: No registered "
                             "'Opcheck>NoXlaKernel' OpKernel for XLA_CPU_JIT devices",
    "opcheck_no_pfor_converter": "No pfor vectorization defined for Opcheck>NoPforConverter",
    "opcheck_needs_known_batch": "fn cannot be traced for an unknown batch dimension ([?, 3]): "
                                 "ValueError: Opcheck>NeedsKnownBatch needs a known batch size",
}  # fmt: skip


@pytest.fixture(scope="module")
def broken_ops(tmp_path_factory):
    """tests/opcheck_ops built as an op author builds a library, with tf_stopgrad's CMake
    package; loaded, with an identity gradient and a pfor converter for every op but the two
    that must lack one."""
    build = tmp_path_factory.mktemp("opcheck_ops")
    for command in (["cmake", "-S", str(REPO_ROOT / "tests" / "opcheck_ops"), "-B", str(build),
                     f"-Dtf_stopgrad_DIR={cmake_dir()}", f"-DPython_EXECUTABLE={sys.executable}"],
                    ["cmake", "--build", str(build)]):  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-5000:]
    path = str(build / "libopcheck_ops.so")
    library = tf.load_op_library(path)
    for name in BROKEN.keys() | {"opcheck_correct"}:
        op_type = "Opcheck>" + name[len("opcheck_"):].title().replace("_", "")
        op = getattr(library, name)
        if name != "opcheck_no_gradient":
            with contextlib.suppress(KeyError):  # registered by an earlier test in this process
                tf.RegisterGradient(op_type)(lambda _, grad: grad)
        if name != "opcheck_no_pfor_converter":
            tf_stopgrad._compat.register_pfor_converter(
                op_type, lambda pfor_input, op=op: pfor.wrap(op(pfor_input.stacked_input(0)), True))
    return library, path


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


@pytest.mark.slow
@pytest.mark.core
@pytest.mark.compiler
@needs_cmake
def test_the_same_op_built_right_fails_no_check(broken_ops):
    library, path = broken_ops
    results = assert_opcheck(library.opcheck_correct, FLOAT_SAMPLES, library=path)

    assert all(str(result).startswith("ok: ") for result in results.values()), str(results)
    assert results["saved_model"].reason.endswith(
        "without it, it cannot load: TensorFlow alone registers no Opcheck>Correct")


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


# Every check but saved_model starts no process: the emulated aarch64 and ASan lanes run these.
IN_PROCESS = [name for name in CHECKS if name != "saved_model"]


@pytest.mark.core
@pytest.mark.parametrize("op_name", sorted(OP_PAIRS))
def test_the_plugins_ops_fail_no_check_in_process(op_name):
    assert_opcheck(OP_PAIRS[op_name][0], PLUGIN_SAMPLES, checks=IN_PROCESS)


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
     (tf.nn.relu, FLOAT_SAMPLES), (tf.math.add, [(*s, *s) for s in NUMBER_SAMPLES])],
    ids=["identity", "stop_gradient", "relu", "add"],
)  # fmt: skip
def test_tensorflows_own_ops_fail_no_check(fn, samples):
    results = assert_opcheck(fn, samples)

    assert list(results) == list(CHECKS)
    assert "loads only TensorFlow" in results["saved_model"].reason


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

    assert "(XLA has no type for string: jit_compile not tried)" in results["modes"].reason


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
    # retrace traces fn, which works; that the batches made from the sample are refused at run
    # time is noted: those inputs are opcheck's, not the author's.
    assert set(results.failures()) == set(CHECKS) - {"registered", "retrace"}, str(results)
    assert "fn refused a batch of 2 made from sample 0" in results["retrace"].reason
    assert "found a NaN : Tensor had NaN values" in results["saved_model"].reason
    with pytest.raises(AssertionError, match=r"opcheck: 6 of 8 checks failed\n  shape_fn: "
                       r"failed: sample 0 \(float32\[2\]\): fn raised") as raised:
        results.raise_on_failure()
    assert raised.value.args[0].count("\n  ") == 6


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
         r"unknown check \['shapes'\]: the checks are registered, shape_fn, gradient, modes"),
        (tf.identity, [(X,)], {"checks": "pure"}, ValueError, "unknown check pure"),
        (tf.identity, [(X,)], {"library": "no/such/lib.so"}, ValueError,
         "library 'no/such/lib.so' is neither an op library file nor a module that can be "
         "imported"),
        (tf.identity, [(X,)], {"library": "no_such_module"}, ValueError,
         "library 'no_such_module'"),
    ],
    ids=["fn", "no-samples", "samples-array", "sample-not-tuple", "argument-list", "variable",
         "unknown-check", "checks-string", "library-path", "library-module"],
)  # fmt: skip
def test_bad_arguments_are_refused_before_any_check_runs(fn, samples, options, error, message):
    with pytest.raises(error, match=re.escape(message) if "\\" not in message else message):
        opcheck(fn, samples, **options)
