"""Print what CMake needs to know about the installed TensorFlow, as CMake ``set()`` lines.

Run by CMakeLists.txt with the interpreter whose TensorFlow the plugin is built against.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402


def cmake_list(items):
    return ";".join(str(item) for item in items)


compile_flags = tf.sysconfig.get_compile_flags()
link_flags = tf.sysconfig.get_link_flags()
lib_dir = tf.sysconfig.get_lib()

values = {
    "TF_VERSION": tf.__version__,
    "TF_INCLUDE_DIRS": cmake_list(f[2:] for f in compile_flags if f.startswith("-I")),
    "TF_COMPILE_OPTIONS": cmake_list(f for f in compile_flags if not f.startswith("-I")),
    "TF_LINK_DIRS": cmake_list(f[2:] for f in link_flags if f.startswith("-L")),
    "TF_LINK_LIBS": cmake_list(f[2:] for f in link_flags if f.startswith("-l")),
    # The XLA and C++ client API symbols live here, not in libtensorflow_framework.
    "TF_CC_LIBRARY": os.path.join(lib_dir, "libtensorflow_cc.so.2"),
    "TF_LIB_DIR": lib_dir,
}
for key, value in values.items():
    print(f'set({key} "{value}")')
