"""Side-by-side benchmarks against the built-in op (installed as tf_stopgrad.benchmarks)."""
