"""tf_stopgrad/_staging.py for the build backend: the same lock-and-publish code, loaded by its
path, as importing it as ``tf_stopgrad._staging`` would import the package and TensorFlow."""

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "_tf_stopgrad_staging", Path(__file__).resolve().parent.parent / "tf_stopgrad" / "_staging.py"
)
_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_module)

lock = _module.lock
remove_unless_locked = _module.remove_unless_locked
new_staging_directory = _module.new_staging_directory
