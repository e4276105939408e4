"""``opcheck_library``: every op of an op library checked on samples derived from its OpDef and
shape function (docs/opcheck.md, "A whole library"), each in a process of its own."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import inspect
import itertools
import json
import re
import shlex
import tempfile
import time
import warnings
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

from .. import _compat
from . import CHECKS, CheckResult, OpcheckResults, _checked_library, _fresh_process, opcheck
from ._run import Verdict, kept

# Ways are compared within these on derived inputs, whose rounding may differ rightly.
RTOL, ATOL = 1e-2, 1e-3
RANKS, SIZES = range(5), (2, 3, 4, 1)  # asked of the shape function, in this order
COMMON = (tf.float32, tf.float64, tf.int32, tf.int64, tf.string)  # for a type attr left open
AXIS = re.compile(r"(.*_)?(axis|dim)")  # an int attribute so named, without a minimum: -1 first
ATTRS = 4  # opcheck calls per op at the most: the attributes' first values, then others
TIMEOUT_S, FRESH_TIMEOUT_S = 900, 60  # an op's process, each of its fresh processes
UNSHOWN = "without finishing within"  # a fresh process that ran out of time, no command shows
MARKS = {"ok": "✓", "failed": "✗", "skipped": "-"}
# What shows a problem, by its first words found: Python that calls F, the op, on x, its inputs.
SHOWS = (
    ("the shape function says", "print(tf.function(F).get_concrete_function(*[tf.TensorSpec("
     "t.shape, t.dtype) for t in x]).output_shapes, [t.shape for t in tf.nest.flatten(F(*x))])"),
    ("gradient", "def G(*x):\n  with tf.GradientTape() as tape:\n    tape.watch(x)\n    y = F(*x)"
     "\n  return tape.gradient(y, [t for t in x if t.dtype.is_floating])\n"
     "print(G(*x)); print(tf.function(G)(*x)); print(tf.function(G, jit_compile=True)(*x))"),
    ("vectorized_map", "print(tf.vectorized_map(lambda e: F(*e), [tf.stack([t, t]) for t in x], "
     "fallback_to_while_loop=False))"),
    ("unknown batch dimension", "tf.function(F, input_signature=[tf.TensorSpec([None, *t.shape["
     "1:]], t.dtype) for t in x]).get_concrete_function()"),
    ("changed its input", "y = [t.numpy() for t in x]; F(*x); print([np.array_equal(a, t.numpy())"
     " for a, t in zip(y, x)])"),
    ("with jit_compile", "print(F(*x)); print(tf.function(F, jit_compile=True)(*x))"),
    ("in tf.function", "print(F(*x)); print(tf.function(F)(*x))"),
    ("", "print(F(*x)); print(F(*x)); print(F(*x))"),
)


def opcheck_library(library: Any, *, ops: Sequence[str] | None = None,
                    checks: Sequence[str] | None = None,
                    progress: Callable[[str], None] | None = None) -> dict[str, OpcheckResults]:
    """opcheck's results for each op that ``library`` (as opcheck takes it) registers, or each
    of ``ops``, on samples derived from its OpDef and shape function; each also says how many
    were ``derived``, ``accepted`` by the shape function and ``ran`` without an error, and each
    failure gives ``commands`` that show it. ``progress`` is given a line as each op ends."""
    found, modules = _op_libraries(library)
    if unknown := sorted(set(ops or ()) - set(found)):
        raise ValueError(f"opcheck_library: {library!r} registers no {', '.join(unknown)}; it "
                         f"registers {', '.join(sorted(found))}")
    names, results = sorted(ops or found), {}
    for number, op_type in enumerate(names, 1):
        start = time.perf_counter()
        results[op_type] = _check_apart({"path": found[op_type], "op_type": op_type,
                                         "modules": modules, "checks": list(checks or CHECKS)})
        if progress:
            progress(f"{number}/{len(names)} {op_type}: {time.perf_counter() - start:.1f} s")
    return results


def library_tests(library: Any, *, ops: Sequence[str] | None = None,
                  checks: Sequence[str] | None = None) -> Callable[[str], None]:
    """A pytest test for each op of ``library``, its op type in the test's id: in a test file,
    ``test_my_ops = library_tests("build/libmy_ops.so")``."""
    import pytest

    @pytest.mark.parametrize("op_type", [op for op in sorted(_op_libraries(library)[0])
                                         if ops is None or op in ops])
    def test_op(op_type: str) -> None:
        results = opcheck_library(library, ops=[op_type], checks=checks)[op_type]
        if all(result.status == "skipped" for result in results.values()):
            pytest.skip(next(iter(results.values())).reason)
        if failures := results.failures():
            raise AssertionError("\n".join(_told(op_type, failures)))

    return test_op


def main(argv: Sequence[str]) -> int:
    """``python -m tf_stopgrad opcheck LIBRARY [OP ...] [--checks ...] [--junit FILE]``."""
    parser = argparse.ArgumentParser(
        prog="python -m tf_stopgrad opcheck", description="Check each op of an op library (or "
        "each OP) on samples derived from its OpDef and shape function; exit 1 if one fails.")
    parser.add_argument("library", help="an op library's file, or a module whose ops to check")
    parser.add_argument("ops", nargs="*", metavar="OP", help="op types, all by default")
    parser.add_argument("--checks", nargs="+", choices=CHECKS, help="all by default")
    parser.add_argument("--junit", metavar="FILE", help="also write the results as JUnit XML")
    args = parser.parse_args(argv)
    try:
        results = opcheck_library(args.library, ops=args.ops or None, checks=args.checks,
                                  progress=lambda line: print(line, flush=True))
    except (ValueError, ImportError, OSError, tf.errors.OpError) as error:
        parser.error(str(error))
    checks, width = args.checks or CHECKS, max(map(len, results))
    print(f"\n{'op':{width}}  derived accepted ran  {'  '.join(checks)}")
    for op, result in results.items():
        marks = "  ".join(f"{MARKS[result[check].status]:{len(check)}}" for check in checks)
        print(f"{op:{width}}  {result.derived:7} {result.accepted:8} {result.ran:3}  {marks}")
    print(", ".join(f"{mark} {status}" for status, mark in MARKS.items()))
    for op, result in results.items():
        if failures := result.failures():
            print("\n" + "\n".join(_told(op, failures)))
    if args.junit:
        suite = ElementTree.Element("testsuite", name=f"opcheck {args.library}", tests=str(len(
            results)), failures=str(sum(bool(r.failures()) for r in results.values())))
        for op, result in results.items():
            case = ElementTree.SubElement(suite, "testcase", classname="opcheck", name=op)
            if failures := result.failures():
                ElementTree.SubElement(case, "failure", message=", ".join(failures)).text = \
                    "\n".join(_told(op, failures))
            elif all(check.status == "skipped" for check in result.values()):
                ElementTree.SubElement(case, "skipped", message=result[checks[0]].reason)
        ElementTree.ElementTree(suite).write(args.junit, encoding="utf-8", xml_declaration=True)
    return 1 if any(result.failures() for result in results.values()) else 0


def _told(op_type: str, failures: dict[str, CheckResult]) -> list[str]:
    """Each failed check of an op: every problem, and the command that reproduces it."""
    lines = []
    for name, result in failures.items():
        lines.append(f"{op_type}: {name} failed:")
        for problem, command in itertools.zip_longest(result.problems, result.commands):
            lines += [f"  - {problem}"] + [f"    $ {command}"] * bool(command)
    return lines


def _op_libraries(library: Any) -> tuple[dict[str, str], list[str]]:
    """The op library file of each op type ``library`` registers (for a module, the .so files
    in its package that name TensorFlow's framework and load: a warning names one that does
    not), and its modules, whose import registers the ops' Python (gradients, pfor converters)."""
    found = _checked_library(library) or []
    modules = [name.partition(":")[2] for name in found if name.startswith("module:")]
    paths = [name.partition(":")[2] for name in found if name.startswith("path:")]
    ops = {op: path for path in paths for op in _compat.op_library_ops(path)}
    for path in (str(p) for m in modules for p in sorted(Path(importlib.import_module(m).__file__
                 or "").parent.rglob("*.so")) if b"libtensorflow_framework" in p.read_bytes()):
        try:
            ops.update(dict.fromkeys(_compat.op_library_ops(path), path))
        except tf.errors.NotFoundError as error:  # a plugin whose own libraries are absent
            warnings.warn(f"opcheck_library: {path} does not load: {error}", stacklevel=3)
    return ops, modules


def _check_apart(spec: dict[str, Any]) -> OpcheckResults:
    """An op's results, from a process of its own; if that ends otherwise, ones that say how."""
    with tempfile.TemporaryDirectory(prefix="opcheck-library-") as directory:
        spec["out"] = out = str(Path(directory, "results.json"))
        ended, said = _fresh_process.forked(directory, [json.dumps(spec)], f"{__name__}:_check",
                                            TIMEOUT_S)
        ended = ended + said if ended or not said else "with " + said.replace("\n", ": ", 1)[-300:]
        if not ended:
            found = json.loads(Path(out).read_text())
            results = OpcheckResults({name: CheckResult(status, why, "", *map(tuple, told)) for
                                      name, (status, why, *told) in found.pop("results").items()})
            results.__dict__.update(found)  # derived, accepted, ran
            return results
        stage = Path(directory, "stage")
        said = f"opcheck's process for {spec['op_type']} ended {ended}" + (
            f" while {stage.read_text()}" if stage.exists() else "")
    return OpcheckResults({name: CheckResult("failed", said, problems=(said,)) if name == "crash"
                           else CheckResult("skipped", f"see crash: {said}")
                           for name in spec["checks"]})


# --- in the op's own process --------------------------------------------------------------
def _check(spec: str) -> None:
    """Derives an op's samples and checks it with each set of attributes (``spec``, as JSON: op
    type, library path, modules, checks, and ``out``, the results' file, beside a ``stage`` one)."""
    path, op_type, out, modules, checks = map(json.loads(spec).get, (
        "path", "op_type", "out", "modules", "checks"))
    _fresh_process.TIMEOUT_S = FRESH_TIMEOUT_S  # its fresh processes': out of time is no failure
    module, op_def = tf.load_op_library(path), _compat.registered_op_def(op_type)
    defaults = _python_defaults([importlib.import_module(m) for m in modules])
    try:
        variants, dtypes, none = _attribute_variants(op_def, defaults), _dtype_variants(op_def), ""
    except Verdict as why:  # samples cannot be derived: every check is skipped, saying why
        variants, dtypes, none = [], [], why.reason
    stage = Path(out).with_name("stage")
    simple = re.sub(r"[^a-z0-9]", "", op_type.lower())
    name = next((n for n in dir(module) if n.islower() and n.replace("_", "") == simple), "")
    op = f"import {', '.join(['numpy as np', 'tensorflow as tf', *modules])}\nop = " \
         f"tf.load_op_library({_py(path)}).{name}"
    found, calls = {"derived": 0, "accepted": 0, "ran": 0}, list[dict[str, tuple]]()
    for attrs in variants:
        stage.write_text(f"its shape function was asked, with {attrs}")
        fn = _call(op_def, getattr(module, name), attrs)
        samples, derived = _derived_samples(fn, op_def, dtypes)
        found["derived"] += derived
        found["accepted"] += len(samples)
        if not samples:
            continue
        stage.write_text(f"opcheck checked it, with {attrs}, on {len(samples)} derived samples")
        results = opcheck(fn, samples, library=[*modules, path], checks=checks, rtol=RTOL,
                          atol=ATOL)
        eager = [results.screened.outputs.get((i, "eagerly")) for i in range(len(samples))]
        found["ran"] += sum(isinstance(outputs, list) for outputs in eager)
        # A sample the kernel refuses with an error is no input of the op's, and a process that
        # did not finish in time (a kernel's error may leave a lock held) no command shows.
        refused = tuple(f"sample {i} (" for i, said in enumerate(eager) if isinstance(said, str))
        named, calls = f"with {attrs}: " if len(variants) > 1 else "", [*calls, {}]
        for check, r in results.items():
            problems = [p for p in r.problems if not p.startswith(refused) and UNSHOWN not in p]
            if r.problems and not problems:
                calls[-1][check] = ("skipped", f"{check} fails only on samples the kernel "
                                    f"refuses, or out of time: {r.problems[0]}", [], [])
            else:
                calls[-1][check] = (r.status, r.reason, [named + p for p in problems], [
                    _command(op_def, op, attrs, results.samples, p) for p in problems])
    merged = {}
    none = none or f"its shape function accepts none of {found['derived']} samples"
    for check in checks:  # it fails where it fails with any of the attributes
        each = [call[check] for call in calls] or [("skipped", none, [], [])]
        failed = [result for result in each if result[0] == "failed"]
        problems = [problem for result in failed for problem in result[2]]
        merged[check] = ("failed", Verdict("failed", problems).reason, problems, [
            command for result in failed for command in result[3]]) if failed else next(
            (result for result in each if result[0] == "ok"), each[0])
    Path(out).write_text(json.dumps({**found, "results": merged}))
    _fresh_process.stop_servers()  # before the exit that skips atexit


def _attribute_variants(op_def: Any, defaults: dict[str, list[str]]) -> list[dict[str, Any]]:
    """Values of the attributes that the inputs do not set, but for those with a default, left
    to it: each one's first allowed value, an integer's minimum (or 0), False, a string's
    ``defaults`` (or ""); then, one attribute at a time, its other allowed values, an integer's
    next, True."""
    inferred = {name for arg in op_def.input_arg
                for name in (arg.type_attr, arg.number_attr, arg.type_list_attr)}
    choices: dict[str, list[Any]] = {}
    for attr in op_def.attr:
        low = attr.minimum if attr.has_minimum else 0
        if attr.name in inferred or attr.HasField("default_value"):
            continue
        if "func" in attr.type or attr.type == "tensor":
            raise Verdict("skipped", f"attribute {attr.name} is a {attr.type}, which derived "
                          "samples cannot give")
        if attr.type in ("type", "list(type)"):
            choices[attr.name] = [[t.name] * max(low, 1) if "list" in attr.type else t.name
                                  for t in _allowed(attr)]
        elif attr.type == "string" and attr.allowed_values.list.s:
            choices[attr.name] = [s.decode() for s in attr.allowed_values.list.s]
        else:
            axis = attr.type == "int" and not attr.has_minimum and AXIS.fullmatch(attr.name)
            plain: dict[str, list] = {"bool": [False, True], "float": [0.5], "shape": [[2]],
                                      "int": [-1, 0] if axis else [low, low + 1],
                                      "string": defaults.get(attr.name, [""])}
            choices[attr.name] = plain.get(attr.type, [[max(low, 1)] * max(low, 1)])
    base = {name: values[0] for name, values in choices.items()}
    others = [{**base, name: value} for name, values in choices.items() for value in values[1:]]
    return [base, *others][:ATTRS]


def _python_defaults(modules: list[Any]) -> dict[str, list[str]]:
    """The strings that the modules' public functions, classes and methods give as defaults, by
    parameter name: for an attribute of that name with no default of its own (tensorflow-text's
    ``normalization_form="NFKC"``)."""
    public = [getattr(m, name) for m in modules for name in dir(m) if not name.startswith("_")]
    found: dict[str, set[str]] = {}
    for thing in public + [method for c in public if inspect.isclass(c)
                           for name, method in vars(c).items() if not name.startswith("_")]:
        with contextlib.suppress(TypeError, ValueError):  # no function, or no signature
            for parameter in inspect.signature(thing).parameters.values():
                if isinstance(parameter.default, str) and parameter.default:
                    found.setdefault(parameter.name, set()).add(parameter.default)
    return {name: sorted(values) for name, values in found.items()}


def _dtype_variants(op_def: Any) -> list[list[tf.DType]]:
    """The inputs' dtypes: each type attribute's allowed dtypes in turn, the others at their
    first; a list input (N * T) at N's minimum, then one longer."""
    attrs = {attr.name: attr for attr in op_def.attr}
    allowed = {arg.type_attr: _allowed(attrs[arg.type_attr])
               for arg in op_def.input_arg if arg.type_attr}
    chosen = [{**{a: types[0] for a, types in allowed.items()}, a: t}
              for a, types in allowed.items() for t in types] or [{}]
    longer = [(chosen[0], 1)] * any(arg.number_attr for arg in op_def.input_arg)
    variants = []
    for types, more in [(types, 0) for types in chosen] + longer:
        dtypes = []
        for arg in op_def.input_arg:
            listed = arg.number_attr or arg.type_list_attr
            minimum = attrs[listed].minimum if listed else 1
            count = minimum + more if arg.number_attr else max(minimum, 1)
            dtypes += [_allowed(attrs[arg.type_list_attr])[0] if arg.type_list_attr else
                       tf.as_dtype(arg.type) if arg.type else types[arg.type_attr]] * count
        if {tf.resource, tf.variant} & set(dtypes):
            raise Verdict("skipped", "an input is a resource or a variant, which derived "
                          "samples cannot make")
        variants.append(dtypes)
    return variants


def _derived_samples(fn: Callable[..., Any], op_def: Any, variants: list[list[tf.DType]]
                     ) -> tuple[list, int]:
    """A sample of each dtype variant at the ranks and sizes the shape function accepts (each
    input's first rank, 1 or more unless only a scalar, asked with the others unknown, then at
    theirs), for the first variant the next ranks too; and how many were derived."""
    rng, samples, derived = np.random.default_rng(0), [], 0
    for number, dtypes in enumerate(variants):
        accepted: dict[int, list[int]] = {}  # twice: a shape function may refuse unknown ranks
        for i in [*range(len(dtypes))] * 2:  # each rank with sizes unknown, or 2 if they must be
            known = {j: [None] * ranks[0] for j, ranks in accepted.items() if ranks and j != i}
            accepted[i] = sorted((r for r in RANKS if any(
                _accepts(fn, dtypes, {**known, i: [size] * r}) for size in (None, 2))),
                key=lambda r: (r == 0, r))
        for k in range(1 if number else 2):
            if any(len(ranks) <= k for ranks in accepted.values()):
                break
            derived += 1
            if (shapes := _sizes(fn, dtypes, [r[k] for r in accepted.values()])) is not None:
                samples.append(_sample(rng, op_def, dtypes, shapes))
    return samples, max(derived, 1)


def _sizes(fn: Callable[..., Any], dtypes: list[tf.DType], ranks: list[int]):
    """Each dimension's first size of ``SIZES`` that the shape function accepts, fixed one by
    one; None if it refuses every size of one."""
    shapes: dict[int, list] = {i: [None] * rank for i, rank in enumerate(ranks)}
    for i, axis in ((i, axis) for i, rank in enumerate(ranks) for axis in range(rank)):
        if not any(_accepts(fn, dtypes, shapes) for shapes[i][axis] in SIZES):  # the first kept
            return None
    return [shapes[i] for i in range(len(ranks))] if _accepts(fn, dtypes, shapes) else None


def _accepts(fn: Callable[..., Any], dtypes: list[tf.DType], shapes: dict[int, list]) -> bool:
    """Whether the op builds in a graph on inputs of ``shapes`` (others of unknown shape)."""
    with tf.Graph().as_default():
        try:
            fn(*(tf.compat.v1.placeholder(d, shapes.get(i)) for i, d in enumerate(dtypes)))
            return True
        except Exception as error:  # refused; kept, as a C++ exception leaves the graph locked
            return kept(error) is None


def _sample(rng: np.random.Generator, op_def: Any, dtypes: list[tf.DType], shapes: list) -> tuple:
    """Each input's values: floats from a normal distribution; integers 1 (a count, an index
    within every size), but a vector named as row splits, which rises from 0 to input 0's rows,
    as a ragged tensor's must; strings of two bytes, within an input sized per byte."""
    names = [arg.name for arg, at in zip(op_def.input_arg, _grouping(op_def, len(dtypes)))
             for _ in range(1 if isinstance(at, int) else at.stop - at.start)]
    arrays: list[np.ndarray] = []
    for name, dtype, shape in zip(names, dtypes, shapes):
        if dtype == tf.string:
            arrays.append(rng.choice(np.array([b"ab", b"c ", b" d"], object), shape))
        elif dtype.is_floating or dtype.is_complex:
            imaginary = 1j * rng.standard_normal(shape) if dtype.is_complex else 0
            arrays.append(np.asarray(rng.standard_normal(shape) + imaginary).astype(
                dtype.as_numpy_dtype))
        else:
            rows = len(arrays[0]) if arrays and arrays[0].ndim else 0
            arrays.append((np.linspace(0, rows, shape[0]) if name.endswith("splits") and len(
                shape) == 1 else np.ones(shape)).astype(dtype.as_numpy_dtype))
    return tuple(arrays)


def _call(op_def: Any, wrapper: Callable[..., Any], attrs: dict[str, Any]) -> Callable[..., Any]:
    """The op with ``attrs``, as a function of its inputs flat (a list input's one by one)."""
    return lambda *flat: wrapper(*(flat[at] if isinstance(at, int) else list(flat[at])
                                   for at in _grouping(op_def, len(flat))), **attrs)


def _grouping(op_def: Any, count: int) -> list[int | slice]:
    """Where each input argument's tensors are among ``count`` flat ones (lists share alike)."""
    lists = [bool(arg.number_attr or arg.type_list_attr) for arg in op_def.input_arg]
    length = (count - lists.count(False)) // max(lists.count(True), 1)
    starts = itertools.accumulate([length if is_list else 1 for is_list in lists], initial=0)
    return [slice(at, at + length) if is_list else at for at, is_list in zip(starts, lists)]


def _command(op_def: Any, op: str, attrs: dict[str, Any], samples: dict[int, Any],
             problem: str) -> str:
    """A shell command that shows ``problem`` without opcheck: the op on the sample it names,
    called after the one an edge sample comes from (which may raise), as in the fresh process."""
    found = re.search(r"\b(?:edge )?sample (\d+) \((?:[^:]*: sample (\d+) with)?", problem)
    sample = samples[int(found[1])] if found else next(
        (s for s in samples.values() if all(d.name in problem for d in s.dtypes)), samples[0])
    called = [samples[int(found[2])], sample] if found and found[2] else [sample]
    inputs = [", ".join(map(_tensor_source, s.arrays, s.dtypes)) for s in called]
    args = [f"x[{at}]" if isinstance(at, int) else f"x[{at.start}:{at.stop}]" for at in
            _grouping(op_def, len(sample.arrays))] + [f"{k}={_py(v)}" for k, v in attrs.items()]
    shows = next(shows for words, shows in SHOWS if words in problem)
    first = "".join(f"try: F(*[{made}])\nexcept Exception: pass\n" for made in inputs[:-1])
    script = f"{op}\nF = lambda *x: op({', '.join(args)})\n{first}x = [{inputs[-1]}]\n{shows}"
    fills = [str(fill) for fill in _fresh_process.PERTURB.values()]  # as its eager calls
    if "memory no one wrote" in problem or "outputs vary" in problem:
        return f"for p in {' '.join(fills)}; do GLIBC_TUNABLES=glibc.malloc.tcache_count=0 " \
               f"MALLOC_PERTURB_=$p python -c {shlex.quote(script)}; done"
    return f"MALLOC_PERTURB_={fills[0]} python -c {shlex.quote(script)}"


def _tensor_source(array: np.ndarray, dtype: tf.DType) -> str:
    """Python that makes a sample's tensor as the fresh process does (_fresh_process.made)."""
    shape, name = list(array.shape), f"tf.{dtype.name}"
    if not array.size:
        return f"tf.zeros({shape}, {name})"
    made = f"np.array({_py(array.reshape(-1).tolist())}, object)" if dtype == tf.string else \
        f"np.frombuffer(bytes.fromhex({_py(array.tobytes().hex())}), {name}.as_numpy_dtype)"
    made = f"tf.constant({made}.reshape({shape}), {name})"
    return made if dtype.is_quantized else f"tf.raw_ops.DeepCopy(x={made})"


def _py(value: Any) -> str:
    """Python source of ``value``, in double quotes where it has none (for a shell's single)."""
    return repr(value) if '"' in repr(value) else repr(value).replace("'", '"')


def _allowed(attr: Any) -> list[tf.DType]:
    return [tf.as_dtype(t) for t in attr.allowed_values.list.type] or list(COMMON)
