// Gives the plugin's nodes the built-in op types before a graph is placed and run: session
// graphs and function graphs alike.
//
// TensorFlow's runtime special-cases StopGradient and PreventGradient by type name: Grappler's
// model pruner removes them, XLA's clustering knows them. The plugin's ops are the same
// identities, and their gradient effect was applied when the gradients were built, long
// before this runs on the runtime's own copy of the graph. So each plugin node becomes a
// built-in node with the same name, attributes, device and edges; from then on the runtime
// treats the two alike, including what it must keep: a node that a session fetches, feeds or
// targets keeps its name, and Grappler preserves it exactly as it preserves the built-in.
#include <string>
#include <utility>
#include <vector>

#include "op_names.h"
#include "tensorflow/core/common_runtime/optimization_registry.h"
#include "tensorflow/core/framework/function.h"
#include "tensorflow/core/framework/function.pb.h"
#include "tensorflow/core/framework/node_def.pb.h"
#include "tensorflow/core/graph/graph.h"

namespace tf_stopgrad {
namespace {

using ::tensorflow::Edge;
using ::tensorflow::FunctionDef;
using ::tensorflow::FunctionLibraryDefinition;
using ::tensorflow::Graph;
using ::tensorflow::Node;

absl::Status ReplaceWithBuiltin(Graph* graph, Node* node, const char* builtin_type) {
  tensorflow::NodeDef def = node->def();
  def.set_op(builtin_type);
  const std::vector<const Edge*> in_edges(node->in_edges().begin(), node->in_edges().end());
  const std::vector<const Edge*> out_edges(node->out_edges().begin(), node->out_edges().end());
  absl::Status status;
  Node* builtin = graph->AddNode(std::move(def), &status);
  TF_RETURN_IF_ERROR(status);
  builtin->set_assigned_device_name(node->assigned_device_name());
  for (const Edge* edge : in_edges) {
    graph->AddEdge(edge->src(), edge->src_output(), builtin, edge->dst_input());
  }
  for (const Edge* edge : out_edges) {
    graph->AddEdge(builtin, edge->src_output(), edge->dst(), edge->dst_input());
  }
  graph->RemoveNode(node);
  return absl::OkStatus();
}

bool UsesPluginOps(const FunctionDef& function) {
  for (const tensorflow::NodeDef& node : function.node_def()) {
    if (BuiltinTypeFor(node.op()) != nullptr) return true;
  }
  return false;
}

// A session's Grappler inlines function calls after placement, taking the bodies from the
// session's own copy of the function library: that copy gets the built-in types too. A
// function graph's library can be shared with the eager context, which saving and tracing read
// later, so it is left alone; the functions it calls get this pass when they are instantiated.
absl::Status UseBuiltinOpTypesInLibrary(FunctionLibraryDefinition* library) {
  for (const std::string& name : library->ListFunctionNames()) {
    const FunctionDef* original = library->Find(name);
    if (original == nullptr || !UsesPluginOps(*original)) continue;
    FunctionDef function = *original;
    for (tensorflow::NodeDef& node : *function.mutable_node_def()) {
      if (const char* builtin_type = BuiltinTypeFor(node.op())) node.set_op(builtin_type);
    }
    const tensorflow::StackTracesMap* traces = library->GetStackTraces(name);
    TF_RETURN_IF_ERROR(library->ReplaceFunction(
        name, function, traces ? *traces : tensorflow::StackTracesMap()));
  }
  return absl::OkStatus();
}

class UseBuiltinOpTypesPass : public tensorflow::GraphOptimizationPass {
 public:
  absl::Status Run(const tensorflow::GraphOptimizationPassOptions& options) override {
    if (options.graph == nullptr) return absl::OkStatus();
    Graph* graph = options.graph->get();
    std::vector<std::pair<Node*, const char*>> plugin_nodes;
    for (Node* node : graph->op_nodes()) {
      if (const char* builtin_type = BuiltinTypeFor(node->type_string())) {
        plugin_nodes.emplace_back(node, builtin_type);
      }
    }
    for (const auto& [node, builtin_type] : plugin_nodes) {
      TF_RETURN_IF_ERROR(ReplaceWithBuiltin(graph, node, builtin_type));
    }
    if (!options.is_function_graph && options.flib_def != nullptr) {
      TF_RETURN_IF_ERROR(UseBuiltinOpTypesInLibrary(options.flib_def));
    }
    return absl::OkStatus();
  }
};

// Phase 20: after LowerFunctionalOpsPass (phase 10), which inlines the bodies of If, While and
// function calls into the graph, so their nodes are replaced too; before the placer.
REGISTER_OPTIMIZATION(tensorflow::OptimizationPassRegistry::PRE_PLACEMENT, 20,
                      UseBuiltinOpTypesPass);

}  // namespace
}  // namespace tf_stopgrad
