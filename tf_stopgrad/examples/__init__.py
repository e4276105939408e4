"""Runnable examples of the four jobs stop_gradient exists for.

Installed as ``tf_stopgrad.examples``; run them with ``python -m tf_stopgrad demo NAME``.
"""

# Example name -> module, imported only when run (the examples need TensorFlow and scikit-learn).
EXAMPLES: dict[str, str] = {
    "softmax": "tf_stopgrad.examples.softmax",
    "em": "tf_stopgrad.examples.em",
    "rbm": "tf_stopgrad.examples.rbm",
    "adversarial": "tf_stopgrad.examples.adversarial",
}
