"""Runnable examples of the four jobs stop_gradient exists for (installed as tf_stopgrad.examples)."""
