// Uses the tf_stopgrad C++ client API next to TensorFlow's own StopGradient and
// PreventGradient, and prints what each gives, one `label: values` line per fact.
// tests/test_cpp_client.py compiles and runs it, then compares the lines.
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "tensorflow/cc/framework/gradients.h"
#include "tensorflow/cc/framework/scope.h"
#include "tensorflow/cc/ops/standard_ops.h"
#include "tensorflow/core/public/session.h"
#include "tf_stopgrad/stop_gradient.h"

namespace {

namespace ops = tensorflow::ops;
using tensorflow::Output;
using tensorflow::Scope;

const char kMessage[] = "labels are sampled, not learned";

// Prints `label: ok` or `label: <error>`; returns whether the status is ok.
bool PrintStatus(const std::string& label, const absl::Status& status) {
  std::cout << label << ": " << (status.ok() ? "ok" : status.ToString()) << "\n";
  return status.ok();
}

// Prints the float tensor `output` evaluates to, or the error running it.
bool RunAndPrint(tensorflow::Session& session, const std::string& label, Output output) {
  std::vector<tensorflow::Tensor> results;
  const absl::Status status = session.Run({}, {output.name()}, {}, &results);
  if (!status.ok()) {
    PrintStatus(label, status);
    return false;
  }
  std::cout << label << ":";
  const auto values = results[0].flat<float>();
  for (int i = 0; i < values.size(); ++i) std::cout << " " << values(i);
  std::cout << "\n";
  return true;
}

// Adds d/dx sum(stop(x) * x) to the graph.
Output GradientOfStoppedProduct(const Scope& scope, Output x, Output stopped_x) {
  std::vector<Output> gradients;
  const absl::Status status =
      tensorflow::AddSymbolicGradients(scope, {ops::Mul(scope, stopped_x, x)}, {x}, &gradients);
  scope.UpdateStatus(status);
  return status.ok() ? gradients[0] : Output();
}

// Asks for d/dx sum(prevented_x * x), which must fail.
absl::Status GradientThroughPrevented(const Scope& scope, Output x, Output prevented_x) {
  std::vector<Output> gradients;
  return tensorflow::AddSymbolicGradients(scope, {ops::Mul(scope, prevented_x, x)}, {x},
                                          &gradients);
}

}  // namespace

int main() {
  const Scope scope = Scope::NewRootScope();
  const auto x = ops::Const(scope, {3.0f, -1.5f, 0.25f, 8.0f});

  const tf_stopgrad::StopGradient stopped(scope, x);
  const tf_stopgrad::PreventGradient prevented(scope, x,
                                               tf_stopgrad::PreventGradient::Message(kMessage));
  const auto builtin_stopped = ops::StopGradient(scope, x);
  const auto builtin_prevented =
      ops::PreventGradient(scope, x, ops::PreventGradient::Message(kMessage));
  const Output gradient = GradientOfStoppedProduct(scope, x, stopped);
  const Output builtin_gradient = GradientOfStoppedProduct(scope, x, builtin_stopped);

  std::cout << "stop_op_type: " << stopped.node()->type_string() << "\n";
  std::cout << "prevent_op_type: " << prevented.node()->type_string() << "\n";
  std::cout << "prevent_message_attr: " << prevented.node()->attrs().Find("message")->s() << "\n";
  std::cout << "node_names: " << stopped.node()->name() << " " << prevented.node()->name() << " "
            << builtin_stopped.node()->name() << " " << builtin_prevented.node()->name() << "\n";
  if (!PrintStatus("graph", scope.status())) return 1;

  // The wheel's libtensorflow_cc does not export tensorflow::ClientSession; a plain Session
  // running the scope's GraphDef does the same job.
  tensorflow::GraphDef graph;
  if (!PrintStatus("to_graph_def", scope.ToGraphDef(&graph))) return 1;
  const std::unique_ptr<tensorflow::Session> session(
      tensorflow::NewSession(tensorflow::SessionOptions()));
  if (!PrintStatus("session_create", session->Create(graph))) return 1;
  bool ok = RunAndPrint(*session, "input", x);
  ok &= RunAndPrint(*session, "stop_forward", stopped);
  ok &= RunAndPrint(*session, "builtin_stop_forward", builtin_stopped);
  ok &= RunAndPrint(*session, "prevent_forward", prevented);
  ok &= RunAndPrint(*session, "builtin_prevent_forward", builtin_prevented);
  ok &= RunAndPrint(*session, "stop_gradient", gradient);
  ok &= RunAndPrint(*session, "builtin_stop_gradient", builtin_gradient);

  PrintStatus("prevent_gradient", GradientThroughPrevented(scope, x, prevented));
  PrintStatus("builtin_prevent_gradient", GradientThroughPrevented(scope, x, builtin_prevented));
  return ok ? 0 : 1;
}
