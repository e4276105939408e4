"""Loads a SavedModel in a process that never imported tf_stopgrad (expected to fail).

Usage: python load_without_plugin.py SAVED_MODEL_DIR
"""

import sys

import tensorflow as tf

assert "tf_stopgrad" not in sys.modules, "this process must not have the ops registered"
tf.saved_model.load(sys.argv[1])
