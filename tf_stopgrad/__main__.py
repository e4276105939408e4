"""``python -m tf_stopgrad``: a report and self-check, the use-case demos, and the benchmark.

    python -m tf_stopgrad                      versions, kernels, self-check, softmax demo
    python -m tf_stopgrad demo {softmax,em,rbm,adversarial,all} [--quick] [--plot FILE.png]
    python -m tf_stopgrad bench [--quick] [--rounds N] [--plot FILE.png] [--markdown FILE.md]
                                [--wheel WHEEL] [--variables-mb N]
    python -m tf_stopgrad export SRC DST [--inference]
    python -m tf_stopgrad --cmake-dir          where find_package(tf_stopgrad CONFIG) looks

TensorFlow's C++ log lines are hidden unless --tf-logs is given (anywhere on the line) or
TF_CPP_MIN_LOG_LEVEL is set.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

import numpy as np
import tensorflow as tf

import tf_stopgrad
from tf_stopgrad import _compat, examples
from tf_stopgrad._cmake_package import cmake_dir
from tf_stopgrad._tensorflow_logs import SHOW_TF_LOGS_FLAG, native_stderr_captured
from tf_stopgrad.testing import as_bits

KERNEL_DEVICES = {
    "CPU": "CPU", "GPU": "GPU", "XLA_CPU_JIT": "XLA (CPU)", "XLA_GPU_JIT": "XLA (GPU)",
}  # fmt: skip


def _check_forward_identical() -> bool:
    samples = [
        np.array([0.0, -0.0, np.nan, np.inf, 1e-45], np.float32),
        np.arange(-5, 5, dtype=np.int64),
        np.array([b"a\x00b", b""], dtype=object),
        np.array([True, False]),
    ]
    return all(
        as_bits(tf_stopgrad.stop_gradient(tf.constant(sample)))
        == as_bits(tf.stop_gradient(tf.constant(sample)))
        for sample in samples
    )


def _check_gradient_masked() -> bool:
    x = tf.constant([1.0, 2.0, 3.0])
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = tf.reduce_sum(tf_stopgrad.stop_gradient(x * x) + 2.0 * x)
    return bool(np.array_equal(tape.gradient(y, x).numpy(), [2.0, 2.0, 2.0]))


def _check_jit_compile() -> bool:
    @tf.function(jit_compile=True)
    def scaled(x: tf.Tensor) -> tf.Tensor:
        return tf_stopgrad.stop_gradient(x) * 3.0

    x = tf.constant([1.5, -2.0])
    y = scaled(x)
    return _on_checked_device(y) and np.array_equal(y.numpy(), (tf.stop_gradient(x) * 3.0).numpy())


def _check_zero_copy() -> bool:
    x = tf.random.uniform([1 << 16])
    y = tf_stopgrad.stop_gradient(x)
    return _on_checked_device(y) and _compat.buffer_address(y) == _compat.buffer_address(x)


def _on_checked_device(tensor: tf.Tensor) -> bool:
    """Whether ``tensor`` is on the device of report()'s tf.device scope, not on another that
    soft placement chose."""
    return tensor.device == _compat.context().device_name


SELF_CHECKS: dict[str, Callable[[], bool]] = {
    "forward values identical to tf.stop_gradient": _check_forward_identical,
    "gradient masked": _check_gradient_masked,
    "jit_compile works": _check_jit_compile,
    "output aliases the input (zero copy)": _check_zero_copy,
}


def report() -> int:
    info = tf_stopgrad.build_info()
    print(f"tf_stopgrad {tf_stopgrad.__version__}")
    print(f"  TensorFlow at run time : {tf.__version__}{_untested(info['tested_tf_versions'])}")
    print(f"  built against          : TensorFlow {info['tf_version']} with {info['compiler']}")
    print(f"  _GLIBCXX_USE_CXX11_ABI : {info['cxx11_abi']}")
    print(f"  op library             : {tf_stopgrad.library_path()}")
    gpus = len(tf.config.list_physical_devices("GPU"))
    print(f"  GPUs visible           : {gpus}")

    checks_passed = True
    for device in ["CPU:0", "GPU:0"] if gpus else ["CPU:0"]:
        print(f"Self-check on {device}{'' if gpus else ' (no GPU visible)'}")
        with tf.device(f"/{device}"):
            for name, check in SELF_CHECKS.items():
                passed = _run_check(check)
                checks_passed &= passed
                print(f"  [{'ok' if passed else 'FAILED'}] {name}")

    print("Kernels")
    for op_type in (tf_stopgrad.STOP_GRADIENT_OP, tf_stopgrad.PREVENT_GRADIENT_OP):
        registered = {kernel.device_type for kernel in _compat.registered_kernels(op_type)}
        devices = [label for device, label in KERNEL_DEVICES.items() if device in registered]
        print(f"  {op_type}: {', '.join(devices)}")

    print("Stable softmax demo")
    demo_status = examples.demo("softmax", ["--quick"])
    passed = checks_passed and demo_status == 0
    print("All checks passed." if passed else "Some checks FAILED.")
    return 0 if passed else 1


def _untested(tested: str) -> str:
    """Words for the report where the running TensorFlow is newer than ``tested`` (X.A-X.B),
    the releases this version of tf_stopgrad is tested with: a source build runs on it."""
    running = tuple(int(part) for part in tf.__version__.split(".")[:2])
    newest = tested.rpartition("-")[2]
    if not newest or running <= tuple(int(part) for part in newest.split(".")):
        return ""
    return f" (untested: tf_stopgrad {tf_stopgrad.__version__} is tested with TensorFlow {tested})"


def _run_check(check: Callable[[], bool]) -> bool:
    with native_stderr_captured() as native_stderr:
        try:
            passed = check()
        except Exception as error:  # A self-check reports failures instead of dying on them.
            print(f"  ! {check.__name__} raised {type(error).__name__}: {error}")
            passed = False
        if not passed:
            native_stderr.replay()
    return passed


def export(src: str, dst: str, inference: bool) -> int:
    from tf_stopgrad import export as exporting

    try:
        rewritten = exporting.to_builtin_saved_model(src, dst, inference=inference)
    except (OSError, ValueError) as error:
        print(f"python -m tf_stopgrad export: {error}", file=sys.stderr)
        return 1
    ops = "Identity" if inference else "StopGradient / PreventGradient"
    print(f"Rewrote {rewritten} tf_stopgrad node(s) of {src} to TensorFlow's {ops}: {dst}")
    print("It loads and runs without tf_stopgrad (tf.saved_model.load, the C API, TFLite, ...).")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tf_stopgrad",
        description="Report on the tf_stopgrad plugin and self-check it (no arguments), run "
        "the use-case demos, or run the side-by-side benchmark against tf.stop_gradient.",
    )
    parser.add_argument(
        SHOW_TF_LOGS_FLAG,
        action="store_true",
        help="show TensorFlow's C++ log lines (hidden by default; TF_CPP_MIN_LOG_LEVEL, when "
        "set, is respected)",
    )
    parser.add_argument(
        "--cmake-dir",
        action="store_true",
        help="print the directory of tf_stopgrad's CMake package (tf_stopgradConfig.cmake) for "
        "a C++ project's find_package(tf_stopgrad CONFIG): -Dtf_stopgrad_DIR=..., then exit",
    )
    commands = parser.add_subparsers(dest="command")
    demo_parser = commands.add_parser(
        "demo",
        help="run a use-case example",
        description="Run the use-case examples. Extra options (e.g. --quick, --plot FILE.png) "
        "are passed to each example.",
    )
    demo_parser.add_argument("name", choices=(*examples.EXAMPLES, "all"))
    commands.add_parser(
        "bench",
        help="benchmark against tf.stop_gradient",
        description="Side-by-side benchmark. Extra options (--quick, --rounds N, --plot "
        "FILE.png, --markdown FILE.md, --wheel WHEEL, --variables-mb N) are passed to the "
        "benchmark.",
    )
    export_parser = commands.add_parser(
        "export",
        help="rewrite a SavedModel to TensorFlow's built-in ops, for deployment",
        description="Write a copy of the SavedModel SRC at DST in which tf_stopgrad's ops are "
        "TensorFlow's built-in StopGradient and PreventGradient, so that it runs where "
        "tf_stopgrad is not installed (tf.saved_model.load, the C API, TFLite, saved_model_cli).",
    )
    commands.add_parser(
        "opcheck",
        help="check each op of an op library, on samples derived from its OpDefs",
        description="opcheck on each op of LIBRARY (an op library's file, or a module), or on "
        "each OP: python -m tf_stopgrad opcheck LIBRARY [OP ...] [--checks CHECK ...] [--junit "
        "FILE]. Exit 1 if a check fails.",
        add_help=False,
    )
    export_parser.add_argument("src", metavar="SRC", help="the SavedModel directory to read")
    export_parser.add_argument("dst", metavar="DST", help="a new or empty directory to write")
    export_parser.add_argument(
        "--inference",
        action="store_true",
        help="write Identity for both ops (for ONNX and TF.js, which lack PreventGradient); "
        "gradients are then no longer masked or refused",
    )
    args, rest = parser.parse_known_args(argv)
    # Read before TensorFlow was imported (see _tensorflow_logs.py), wherever it stands.
    rest = [arg for arg in rest if arg != SHOW_TF_LOGS_FLAG]
    if args.cmake_dir:
        if args.command or rest:
            parser.error("--cmake-dir takes no command or other arguments")
        print(cmake_dir())
        return 0
    if args.command == "demo":
        return examples.demo(args.name, rest)
    if args.command == "bench":
        from tf_stopgrad.benchmarks import bench

        return bench.main(rest)
    if args.command == "opcheck":
        from tf_stopgrad.testing import _library

        return _library.main(rest)
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.command == "export":
        return export(args.src, args.dst, args.inference)
    return report()


if __name__ == "__main__":
    sys.exit(main())
