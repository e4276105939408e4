"""What must happen before TensorFlow is imported when this package runs as a command.

TensorFlow's C++ logging reads ``TF_CPP_MIN_LOG_LEVEL`` once, at its first log line, and it
logs while it is being imported. ``python -m tf_stopgrad`` and the ``tf_stopgrad`` script
import this package, and with it TensorFlow, before ``__main__`` runs, so the command's
quiet default has to be chosen here. Library users who ``import tf_stopgrad`` keep whatever
logging they have.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

SHOW_TF_LOGS_FLAG = "--tf-logs"


def running_as_command() -> bool:
    """Whether this process is ``python -m tf_stopgrad ...`` or the ``tf_stopgrad`` script."""
    command = getattr(sys, "orig_argv", [])  # Python >= 3.10
    for index, arg in enumerate(command[:-1]):
        if arg == "-m":
            return command[index + 1] in ("tf_stopgrad", "tf_stopgrad.__main__")
    return bool(sys.argv) and Path(sys.argv[0]).name == "tf_stopgrad"


def quiet_tensorflow_unless_asked() -> None:
    """For the command, hide TensorFlow's C++ log lines below FATAL, unless it was given
    ``--tf-logs`` or the user chose a level in ``TF_CPP_MIN_LOG_LEVEL``."""
    if not running_as_command() or SHOW_TF_LOGS_FLAG in sys.argv:
        return
    if "TF_CPP_MIN_LOG_LEVEL" in os.environ:
        return
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    _import_tensorflow_capturing_stderr()


def _import_tensorflow_capturing_stderr() -> None:
    """Import TensorFlow with file descriptor 2 captured.

    A few lines (the CUDA stub's, with absl's note that logging is not initialized yet) are
    written while TensorFlow loads, before the log level applies. What was captured is written
    out again if the import fails, so no error is lost.
    """
    sys.stderr.flush()
    saved_stderr = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            import tensorflow  # noqa: F401
        except BaseException:
            os.dup2(saved_stderr, 2)
            captured.seek(0)
            os.write(2, captured.read())
            raise
        finally:
            os.dup2(saved_stderr, 2)
            os.close(saved_stderr)
