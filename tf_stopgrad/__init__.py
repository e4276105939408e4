"""tf_stopgrad: StopGradient and PreventGradient as a TensorFlow custom-op plugin.

Importing the package loads the op library once (after checking it was built for the running
TensorFlow) and registers the ops' gradient functions and vectorization converters. The Keras layers
in ``tf_stopgrad.keras`` are imported on first access, so the package itself never imports Keras.
"""

import importlib
from types import ModuleType

from ._source_checkout import hand_over_to_installed_copy
from ._tensorflow_logs import quiet_tensorflow_unless_asked

# Only acts for `python -m tf_stopgrad` and the `tf_stopgrad` script. It cannot move to
# __main__: Python runs this file first, and TensorFlow logs while it is being imported.
quiet_tensorflow_unless_asked()

# In a source checkout, the installed copy becomes this package. The lines below then only
# re-bind names from it, and the import system returns the installed copy.
hand_over_to_installed_copy(__name__, __file__, list(__path__))

from . import _gradients, _pfor  # noqa: E402
from ._loader import build_info, include_dir, library_path  # noqa: E402
from .ops import PREVENT_GRADIENT_OP, STOP_GRADIENT_OP, prevent_gradient, stop_gradient  # noqa: E402

_gradients.register()
_pfor.register()

__version__: str = build_info()["version"]


def __getattr__(name: str) -> ModuleType:
    if name == "keras":
        return importlib.import_module(f"{__name__}.keras")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
