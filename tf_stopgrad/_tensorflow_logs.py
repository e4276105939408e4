"""Hiding TensorFlow's C++ log lines when this package runs as a command.

TensorFlow's C++ logging reads ``TF_CPP_MIN_LOG_LEVEL`` once, at its first log line, and it
logs while it is being imported. ``python -m tf_stopgrad`` and the ``tf_stopgrad`` script
import this package, and with it TensorFlow, before ``__main__`` runs, so the command's
quiet default is chosen from the package's ``__init__``. Library users who
``import tf_stopgrad`` keep whatever logging they have.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import typing
from pathlib import Path

SHOW_TF_LOGS_FLAG = "--tf-logs"
COMMAND_MODULES = ("tf_stopgrad", "tf_stopgrad.__main__")
# The interpreter's options that take the next word as their argument when given alone.
_OPTIONS_WITH_ARGUMENT = {"-W", "-X", "--check-hash-based-pycs"}


def running_as_command() -> bool:
    """Whether this process is ``python -m tf_stopgrad ...`` or the ``tf_stopgrad`` script."""
    if sys.argv and Path(sys.argv[0]).name == "tf_stopgrad":
        return True
    # While -m imports the module's package, sys.argv[0] is "-m"; orig_argv (Python 3.10+)
    # then says which module.
    if not sys.argv or sys.argv[0] != "-m":
        return False
    command_line = getattr(sys, "orig_argv", None)
    return command_line is None or module_run_by(command_line) in COMMAND_MODULES


def module_run_by(command_line: list[str]) -> str | None:
    """The module that an interpreter command line runs with ``-m``, read the way the
    interpreter reads its options (``-m mod``, ``-mmod``, ``-Im mod``); None for a script,
    ``-c`` or standard input."""
    words = iter(command_line[1:])
    for word in words:
        if word in _OPTIONS_WITH_ARGUMENT:
            next(words, None)
            continue
        if word.startswith("--") and word != "--":
            continue
        if not word.startswith("-") or word in ("-", "--"):
            return None
        for index, flag in enumerate(word[1:], start=1):
            if flag == "m":
                return word[index + 1 :] or next(words, None)
            if flag == "c":
                return None
            if flag in "WX":  # its argument is the rest of this word
                break
    return None


_quiet = False


def quiet_tensorflow_unless_asked() -> None:
    """For the command, hide TensorFlow's C++ log lines below FATAL, unless it was given
    ``--tf-logs`` or the user chose a level in ``TF_CPP_MIN_LOG_LEVEL``."""
    global _quiet
    asked = SHOW_TF_LOGS_FLAG in sys.argv or "TF_CPP_MIN_LOG_LEVEL" in os.environ
    if asked or not running_as_command():
        return
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    _quiet = True
    with native_stderr_captured():
        import tensorflow  # noqa: F401


class _CapturedStderr:
    def __init__(self, file: typing.BinaryIO | None = None, real_stderr: int = 2) -> None:
        self._file, self._real_stderr = file, real_stderr

    def replay(self) -> None:
        """Write what was captured so far to the real stderr (for a failure)."""
        if self._file is not None:
            self._file.seek(0)
            os.write(self._real_stderr, self._file.read())


@contextlib.contextmanager
def native_stderr_captured() -> typing.Iterator[_CapturedStderr]:
    """While the command is quiet, capture what C++ code writes to file descriptor 2.

    Some of TensorFlow's lines bypass its log level: the CUDA stub's while it loads, with
    absl's note that logging is not initialized yet, and XLA's in some releases (2.15). The
    capture is written out again if the block raises, or when ``replay()`` is called, so an
    error is never lost. Without a quiet command, nothing is captured.
    """
    if not _quiet:
        yield _CapturedStderr()
        return
    sys.stderr.flush()
    saved_stderr = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        capture = _CapturedStderr(captured, saved_stderr)
        try:
            yield capture
        except BaseException:
            capture.replay()
            raise
        finally:
            sys.stderr.flush()
            os.dup2(saved_stderr, 2)
            os.close(saved_stderr)
