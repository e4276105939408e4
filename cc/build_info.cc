// The `_build_info` extension module: what the op library was compiled against. It is built
// with the same flags as the op library but does not link TensorFlow, so the loader can
// read it before it loads the library.
#include <pybind11/pybind11.h>

#include "op_names.h"

namespace py = pybind11;

PYBIND11_MODULE(_build_info, m) {
  m.attr("version") = TF_STOPGRAD_VERSION;
  m.attr("tf_version") = TF_STOPGRAD_TF_VERSION;
  m.attr("cxx11_abi") = _GLIBCXX_USE_CXX11_ABI;
  m.attr("compiler") = TF_STOPGRAD_COMPILER;
  m.attr("source_dir") = TF_STOPGRAD_SOURCE_DIR;
  m.attr("library_name") = TF_STOPGRAD_LIBRARY_NAME;
  m.attr("stop_gradient_op") = tf_stopgrad::kStopGradientOp;
  m.attr("prevent_gradient_op") = tf_stopgrad::kPreventGradientOp;
}
