"""``opcheck``: does a TensorFlow custom op behave as TensorFlow's own ops do? (docs/opcheck.md)

Here, the API. The checks are in _checks.py (a new check is a function there and a row in its
``TABLE``); what they ask of one call, ``Run``, in _run.py; the samples in _samples.py; the fresh
process that a crashing kernel ends in _fresh_process.py; a library in _library.py.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import logging
import os
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import tensorflow as tf

from . import _samples
from ._checks import CHECKS, IN_PROCESS, TABLE, Check
from ._run import Run, Verdict, as_bits, told

__all__ = ["CHECKS", "IN_PROCESS", "TABLE", "CheckResult", "OpcheckResults", "as_bits",
           "assert_opcheck", "library_tests", "opcheck", "opcheck_library"]


@dataclasses.dataclass(frozen=True)
class CheckResult:
    """One check's verdict: ``status`` is ``ok``, ``skipped`` or ``failed``; ``reason`` says why,
    with the first of its ``problems``, which lists every one; ``traceback``, where the check
    itself raised, says where; ``commands`` (opcheck_library's) reproduce each problem."""

    status: str
    reason: str
    traceback: str = dataclasses.field(default="", repr=False)
    problems: tuple[str, ...] = dataclasses.field(default=(), repr=False)
    commands: tuple[str, ...] = dataclasses.field(default=(), repr=False)

    def __str__(self) -> str:
        return f"{self.status}: {self.reason}"


class OpcheckResults(dict):
    """Each check's name, mapped to its :class:`CheckResult`; ``samples``, each sample by its
    index (edge samples too), and ``screened``, what the fresh process found; from
    opcheck_library, how many samples it ``derived``, the shape function ``accepted``, ``ran``."""

    samples: dict[int, Any]
    screened: Any
    derived = accepted = ran = 0

    def failures(self) -> dict[str, CheckResult]:
        return {name: result for name, result in self.items() if result.status == "failed"}

    def raise_on_failure(self) -> None:
        """Raises ``AssertionError`` with every failed check and its reason."""
        if failures := self.failures():
            listed = "".join(f"\n  {name}: {result}" for name, result in failures.items())
            raise AssertionError(f"opcheck: {len(failures)} of {len(self)} checks failed{listed}")

    def __str__(self) -> str:
        return "\n".join(f"{name}: {result}" for name, result in self.items())


def opcheck(fn: Callable[..., Any], samples: Sequence[tuple], *,
            checks: Sequence[str] | None = None,
            library: str | os.PathLike | Sequence[str | os.PathLike] | None = None,
            rtol: float = 0.0, atol: float = 0.0, expect: Mapping[str, str] | None = None
            ) -> OpcheckResults:
    """Checks the TensorFlow op(s) that ``fn`` builds, on each of ``samples`` (docs/opcheck.md).

    Args:
      fn: Builds the op(s) from tensors: ``my_ops.my_op``, ``lambda x: my_ops.my_op(x, attr=2)``.
      samples: A list of tuples of positional arguments for ``fn``: tensors or NumPy arrays.
      checks: The names of the checks to run (``CHECKS``); all of them by default.
      library: What a fresh process loads to have the ops: an op library's path, a module whose
        import registers them, or a list of those; None: those loaded here, found.
      rtol, atol: Tolerances for values compared across ways and processes; zero (the default)
        compares outputs bit for bit, and gradients as values.
      expect: Failures by design: a check's name, mapped to words its failure says; that check
        is ``ok`` if it fails with those words and for no other reason.

    Returns :class:`OpcheckResults`; raises TypeError or ValueError, before anything runs, on
    bad arguments.
    """
    if not callable(fn):
        raise TypeError(f"opcheck: fn must be a callable that builds the op from tensors, such as "
                        f"my_ops.my_op or lambda x: my_ops.my_op(x); got a {type(fn).__name__}")
    if not isinstance(samples, (list, tuple)) or not samples:
        raise ValueError("opcheck: samples must be a non-empty list of tuples of arguments, such "
                         "as [(np.ones([2, 3], np.float32),)]")
    if isinstance(checks, str):
        raise TypeError(f"opcheck: checks must be a list of check names, such as [{checks!r}]; "
                        f"got the string {checks!r}")
    expect = dict(expect or {})
    if not all(isinstance(words, str) and words for words in expect.values()):
        raise TypeError("opcheck: expect maps a check to words its failure says, such as "
                        "{'vmap': 'No pfor vectorization'}")
    if unknown := sorted((set(checks or ()) | set(expect)) - set(CHECKS)):
        raise ValueError(f"opcheck: unknown check {unknown}: the checks are {', '.join(CHECKS)}")
    if checks is not None and (unrun := sorted(set(expect) - set(checks))):
        raise ValueError(f"opcheck: expect names {unrun}, which checks leaves out")
    names = [name for name in CHECKS if checks is None or name in checks]
    run = Run(fn, _samples.checked(samples), _checked_library(library), rtol, atol, TABLE, names)
    if any(check.fresh_process for check in run.checks):
        run.run_fresh_process()  # first: the checks leave out what crashes it
    results = OpcheckResults()
    results.samples, results.screened = {s.index: s for s in run.samples + run.edges}, run.screen
    tf.get_logger().addFilter(_not_told_by_a_check)
    try:
        for check in run.checks:
            results[check.name] = _result(check, run, expect.get(check.name))
    finally:
        tf.get_logger().removeFilter(_not_told_by_a_check)
    return results


def assert_opcheck(fn: Callable[..., Any], samples: Sequence[tuple], **options: Any
                   ) -> OpcheckResults:
    """:func:`opcheck`, then ``raise_on_failure()``: a test in one call."""
    results = opcheck(fn, samples, **options)
    results.raise_on_failure()
    return results


def _result(check: Check, run: Run, expected: str | None) -> CheckResult:
    """What ``check`` says of the run, with the note of the samples it leaves out, held to the
    words of ``expect`` where there are any."""
    try:
        result = CheckResult("ok", check.function(run))
    except Verdict as verdict:
        result = CheckResult(verdict.status, verdict.reason, problems=tuple(verdict.problems))
    except Exception as error:  # the op under test broke the check itself: keep the story
        reason = f"the check raised {told(error)}"
        result = CheckResult("failed", reason, traceback.format_exc(), (reason,))
    if check.runs_given_samples and run.left_out not in result.reason:
        result = dataclasses.replace(result, reason=result.reason + run.left_out)
    if expected is None:
        return result
    # A failure by design, whose every problem says the words, is ok, and so are words that the
    # check could not try (jit_compile, where XLA has the types of no sample).
    untried, start = check.untried
    if untried and untried in expected and result.status == "ok" and result.reason.startswith(
            start):
        return CheckResult("ok", f"expected to fail with {expected!r}, not tried: {result.reason}")
    if not any(expected in problem for problem in result.problems):
        said = f"expected to fail with {expected!r}, but {result}"
        return CheckResult("failed", said, problems=(said,))
    if others := [problem for problem in result.problems if expected not in problem]:
        return CheckResult("failed", Verdict("failed", others).reason, problems=tuple(others))
    return CheckResult("ok", f"fails as expected, with {expected!r}: {result.reason}",
                       result.traceback)


def _not_told_by_a_check(record: logging.LogRecord) -> bool:
    """TensorFlow's warning of retracing (tracing for every sample's signature is the point) and
    pfor's errors, with the graph it cannot vectorize (vmap gives the error), are not logged."""
    pfor = record.levelno == logging.ERROR and "parallel_for" in record.pathname
    return not pfor and "triggered tf.function retracing" not in record.getMessage()


def _checked_library(library: Any) -> list[str] | None:
    """Each library as the fresh process takes it, ``path:FILE`` or ``module:NAME``; None to find
    them."""
    if library is None:
        return None
    if isinstance(library, (list, tuple)):
        return [name for each in library for name in _checked_library(each) or ()]
    if Path(library).is_file():
        return [f"path:{Path(library).resolve()}"]
    with contextlib.suppress(ImportError, ValueError):  # find_spec on a name no module can have
        if isinstance(library, str) and importlib.util.find_spec(library) is not None:
            return [f"module:{library}"]
    raise ValueError(f"opcheck: library {str(library)!r} is neither an op library file nor a "
                     "module that can be imported: give the path tf.load_op_library takes, or a "
                     "module name such as 'tensorflow_text'")


from ._library import library_tests, opcheck_library  # noqa: E402 (it calls opcheck)
