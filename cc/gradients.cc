// Gradients for the C++ client API (tensorflow::AddSymbolicGradients). Python registers its
// own in tf_stopgrad/_gradients.py.
#include "op_names.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tensorflow/cc/framework/grad_op_registry.h"
#include "tensorflow/core/framework/node_def_util.h"
#include "tensorflow/core/platform/errors.h"

namespace tf_stopgrad {
namespace {

absl::Status RefusePreventGradient(const tensorflow::Scope& scope,
                                   const tensorflow::Operation& op,
                                   const std::vector<tensorflow::Output>& grad_inputs,
                                   std::vector<tensorflow::Output>* grad_outputs) {
  std::string message;
  TF_RETURN_IF_ERROR(tensorflow::GetNodeAttr(op.node()->attrs(), "message", &message));
  // The Python gradient's wording, which starts with the built-in's.
  return absl::InvalidArgumentError(absl::StrCat(
      "Gradient explicitly disabled. Reason: ", message.empty() ? "(none given)" : message,
      " (op ", kPreventGradientOp, ", node '", op.node()->name(), "')"));
}

REGISTER_NO_GRADIENT_OP(kStopGradientOp);
REGISTER_GRADIENT_OP(kPreventGradientOp, RefusePreventGradient);

}  // namespace
}  // namespace tf_stopgrad
