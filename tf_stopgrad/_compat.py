"""The private TensorFlow APIs tf_stopgrad relies on, gathered in one place.

Each name here exists, with the same behaviour, in every supported TensorFlow (the range in
pyproject.toml). A TensorFlow release that moves one of them needs a change here and nowhere else.
"""

import ctypes
import importlib

import tensorflow as tf
from tensorflow.core.framework import op_def_pb2 as _op_def_pb2
from tensorflow.dtensor.python import api as _dtensor_api
from tensorflow.python import pywrap_tfe
from tensorflow.python.client import pywrap_tf_session as _tf_session
from tensorflow.python.eager import context as _context
from tensorflow.python.eager import core as _core
from tensorflow.python.eager import execute as _execute
from tensorflow.python.eager import record as _record
from tensorflow.python.framework import composite_tensor as _composite_tensor
from tensorflow.python.framework import func_graph as _func_graph
from tensorflow.python.framework import kernels as _kernels
from tensorflow.python.framework import op_def_registry as _op_def_registry
from tensorflow.python.framework import ops as _ops
from tensorflow.python.ops.parallel_for import pfor as _pfor
from tensorflow.python.saved_model import fingerprinting_utils as _fingerprinting_utils
from tensorflow.python.util import _pywrap_kernel_registry, _pywrap_utils

stop_recording = _record.stop_recording

EagerTensor = _ops.EagerTensor
CompositeTensor = _composite_tensor.CompositeTensor
is_resource_variable = _pywrap_utils.IsResourceVariable

context = _context.context
executing_eagerly = _context.executing_eagerly


def eager_context():
    """The eager context if this thread executes eagerly, else None; checked the way
    TensorFlow's generated op wrappers check it, the cheapest way there is."""
    ctx = _context._context or _context.context()
    return ctx if ctx._thread_local_data.is_eager else None


# Runs one op eagerly from C++, recording it on any active tape: (ctx, op_type, name, *inputs,
# *attr_name_value_pairs). The generated op wrappers call the same function.
fast_path_execute = pywrap_tfe.TFE_Py_FastPathExecute
NotOkStatus = _core._NotOkStatusException
raise_from_not_ok_status = _ops.raise_from_not_ok_status

# True when no tape or forward accumulator could record an op on this thread.
no_tape_can_record = pywrap_tfe.TFE_Py_TapeSetIsEmpty

wrap_pfor_output = _pfor.wrap

# The gradient function registered for an op type: None if it is declared not differentiable;
# LookupError if the registry has no entry.
gradient_function = _ops._gradient_registry.lookup
# A graph that a tf.function traces into: it may capture eager tensors and resources.
FuncGraph = _func_graph.FuncGraph
Trackable = tf.__internal__.tracking.Trackable
# The registered OpDef of an op type, or None.
registered_op_def = _op_def_registry.get


def execute_op(op_type: str, output_count: int, inputs: list, attrs: tuple) -> list:
    """Runs one op eagerly (no shape function runs), its attributes as names and values."""
    return _execute.execute(op_type, output_count, inputs, attrs, _context.context())


def op_library_ops(path: str) -> set[str]:
    """The names of the ops that the op library at ``path`` registered when it was loaded (it is
    loaded now if it was not), as ``tf.load_op_library`` reads them."""
    handle = _tf_session.TF_LoadLibrary(path)
    try:
        ops = _op_def_pb2.OpList.FromString(_tf_session.TF_GetOpList(handle))
    finally:
        _tf_session.TF_DeleteLibraryHandle(handle)
    return {op.name for op in ops.op}
# Writes fingerprint.pb for the SavedModel in a directory, as tf.saved_model.save does.
write_saved_model_fingerprint = _fingerprinting_utils.write_fingerprint

is_dtensor = _dtensor_api.is_dtensor


# Its own prototype, so that the shared ctypes.pythonapi function keeps its settings.
_capsule_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi)
)


def buffer_address(tensor) -> int:
    """Where an eager tensor's data is on its device, CPU or GPU, read without a copy (``_numpy()``
    copies from a GPU): DLPack's data pointer. Quantized dtypes raise InvalidArgumentError; string,
    variant and resource raise TypeError (TF 2.21's ``to_dlpack`` aborts the process on them)."""
    if tensor.dtype in (tf.string, tf.variant, tf.resource):
        raise TypeError(f"DLPack cannot carry a {tensor.dtype.name} tensor")
    # A DLManagedTensor, which begins with the data pointer. Dropped unconsumed, the capsule
    # releases its reference to the buffer.
    capsule = tf.experimental.dlpack.to_dlpack(tensor)
    return ctypes.c_void_p.from_address(_capsule_pointer(capsule, b"dltensor")).value or 0


def registered_kernels(op_type: str) -> list:
    """The KernelDefs registered for ``op_type``, on every device type."""
    return list(_kernels.get_registered_kernels_for_op(op_type).kernel)


def has_kernel(node_def, device_type: str) -> bool:
    """Whether a kernel registered on ``device_type`` (or ``DEFAULT``) admits ``node_def``, its
    label and type constraints, as TensorFlow finds one to run it."""
    placed = type(node_def)()
    placed.CopyFrom(node_def)
    placed.device = f"/device:{device_type}:0"
    return bool(_pywrap_kernel_registry.TryFindKernelClass(placed.SerializeToString()))


def dtensor_device_exists() -> bool:
    """True once this process uses DTensor; before that, asking ``is_dtensor`` would create it."""
    return _dtensor_api._dtensor_singleton is not None


def register_pfor_converter(op_type, converter):
    """Register a pfor converter unless one is already registered (pfor asserts on repeats)."""
    if op_type not in _pfor._pfor_converter_registry:
        _pfor.RegisterPFor(op_type)(converter)


def keras_package():
    """The Keras package whose layers ``tf.keras`` gives in this TensorFlow.

    That is Keras 2 on TF 2.15, ``tf_keras`` when ``TF_USE_LEGACY_KERAS`` is set, and Keras 3
    otherwise. The package itself is returned because Keras 3's ``tf.keras`` is a reduced
    namespace without ``keras.saving``.
    """
    return importlib.import_module(tf.keras.layers.Layer.__module__.split(".")[0])
