"""Shared test setup: run against the installed tf_stopgrad, never the source tree."""

import os
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent

# `python -m pytest` puts the working directory on sys.path, where ./tf_stopgrad would shadow
# the installed package (which alone has the compiled op library).
sys.path[:] = [p for p in sys.path if Path(p or os.curdir).resolve() != REPO_ROOT]
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

import tf_stopgrad  # noqa: E402

if Path(tf_stopgrad.__file__).resolve().parent == REPO_ROOT / "tf_stopgrad":
    raise RuntimeError(
        "tests imported tf_stopgrad from the source tree; install it first: pip install '.[test]'"
    )

__all__ = ["tf", "tf_stopgrad"]
