"""The library's Python, as an op author ships one beside the op library: it loads
libopcheck_ops.so from its own directory and registers, for each op of one input, a gradient
(the identity; for Opcheck>GradientDiffersInGraph, one that doubles in a graph) and a pfor
converter, but for the two ops that must lack one."""

import contextlib
import re
from pathlib import Path

import tensorflow as tf
from tensorflow.python.ops.parallel_for import pfor

from tf_stopgrad import _compat

PATH = str(Path(__file__).with_name("libopcheck_ops.so"))
ops = tf.load_op_library(PATH)


def differs_in_graph(_, grad):
    return grad * (1.0 if tf.executing_eagerly() else 2.0)


for op_type in sorted(_compat.op_library_ops(PATH)):
    if len(_compat.registered_op_def(op_type).input_arg) != 1:
        continue
    op = getattr(ops, re.sub(r"(?<!^)(?=[A-Z])", "_", op_type.replace(">", "")).lower())
    if op_type != "Opcheck>NoGradient":
        with contextlib.suppress(KeyError):  # registered already in this process
            tf.RegisterGradient(op_type)(
                differs_in_graph if op_type.endswith("Graph") else lambda _, grad: grad)
    if op_type != "Opcheck>NoPforConverter":
        _compat.register_pfor_converter(
            op_type, lambda pfor_input, op=op: pfor.wrap(op(pfor_input.stacked_input(0)), True))
