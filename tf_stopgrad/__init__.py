"""tf_stopgrad: StopGradient and PreventGradient as a TensorFlow custom-op plugin.

Importing the package loads the op library once (after checking it was built for the running
TensorFlow) and registers the ops' gradient functions and vectorization converters.
"""

from . import _gradients, _pfor
from ._loader import build_info, include_dir, library_path
from .ops import PREVENT_GRADIENT_OP, STOP_GRADIENT_OP, prevent_gradient, stop_gradient

_gradients.register()
_pfor.register()

__version__: str = build_info()["version"]

__all__ = [
    "PREVENT_GRADIENT_OP",
    "STOP_GRADIENT_OP",
    "__version__",
    "build_info",
    "include_dir",
    "library_path",
    "prevent_gradient",
    "stop_gradient",
]
