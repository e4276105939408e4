"""Shared test setup: run against the installed tf_stopgrad (an editable install included)."""

import os
import sys
from pathlib import Path

# `python -m pytest` puts the working directory on sys.path, where ./tf_stopgrad would shadow
# a regular install (the source tree has no op library). Without any install, importing it
# raises the loader's ImportError, which says how to install.
_checkout = Path(__file__).resolve().parent.parent
sys.path[:] = [p for p in sys.path if Path(p or os.curdir).resolve() != _checkout]
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

import tf_stopgrad  # noqa: E402

__all__ = ["tf", "tf_stopgrad"]
