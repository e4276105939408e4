// Implementation of the C++ client API in include/tf_stopgrad/stop_gradient.h. It lives in
// the op library, so a program using it references the library and the linker keeps it.
#include "tf_stopgrad/stop_gradient.h"

#include "op_names.h"
#include "tensorflow/cc/ops/const_op.h"
#include "tensorflow/core/graph/node_builder.h"

namespace tf_stopgrad {
namespace {

// Adds one node of `op_type` to the scope's graph; returns nullptr if the scope is in error.
tensorflow::Node* AddForwardingNode(const tensorflow::Scope& scope, const char* op_type,
                                    const char* short_name, const tensorflow::Input& input,
                                    const std::string* message = nullptr) {
  if (!scope.ok()) return nullptr;
  auto node_input = tensorflow::ops::AsNodeOut(scope, input);
  if (!scope.ok()) return nullptr;
  auto builder = tensorflow::NodeBuilder(scope.GetUniqueNameForOp(short_name), op_type)
                     .Input(node_input);
  if (message != nullptr) builder.Attr("message", *message);
  scope.UpdateBuilder(&builder);
  tensorflow::Node* node = nullptr;
  scope.UpdateStatus(builder.Finalize(scope.graph(), &node));
  if (!scope.ok()) return nullptr;
  scope.UpdateStatus(scope.DoShapeInference(node));
  return scope.ok() ? node : nullptr;
}

}  // namespace

StopGradient::StopGradient(const tensorflow::Scope& scope, tensorflow::Input input) {
  tensorflow::Node* node = AddForwardingNode(scope, kStopGradientOp, "StopGradient", input);
  if (node == nullptr) return;
  operation = tensorflow::Operation(node);
  output = tensorflow::Output(node, 0);
}

PreventGradient::PreventGradient(const tensorflow::Scope& scope, tensorflow::Input input,
                                 const Attrs& attrs) {
  tensorflow::Node* node =
      AddForwardingNode(scope, kPreventGradientOp, "PreventGradient", input, &attrs.message_);
  if (node == nullptr) return;
  operation = tensorflow::Operation(node);
  output = tensorflow::Output(node, 0);
}

}  // namespace tf_stopgrad
