// Takes the plugin's nodes out of function graphs before they run, as Grappler's model
// pruner does for the built-in StopGradient and PreventGradient (it recognizes those by type
// name only, so it keeps ours). At run time both ops are identities: their gradient effect
// was applied when the function was traced and differentiated, long before execution.
#include <vector>

#include "op_names.h"
#include "tensorflow/core/common_runtime/optimization_registry.h"
#include "tensorflow/core/graph/graph.h"

namespace tf_stopgrad {
namespace {

using ::tensorflow::Edge;
using ::tensorflow::Graph;
using ::tensorflow::Node;

bool IsForwardingNode(const Node* node) {
  return node->type_string() == kStopGradientOp || node->type_string() == kPreventGradientOp;
}

// Bypass only where nothing observable can change: no control edges to re-route, an input
// that is not a control-flow primitive (whose outputs carry deadness and frames), and no
// device request of the node's own.
bool CanBypass(const Node* node, const Edge* input) {
  for (const Edge* edge : node->in_edges()) {
    if (edge->IsControlEdge()) return false;
  }
  for (const Edge* edge : node->out_edges()) {
    if (edge->IsControlEdge()) return false;
  }
  const Node* source = input->src();
  return !source->IsControlFlow() &&
         (node->requested_device().empty() ||
          node->requested_device() == source->requested_device());
}

absl::Status BypassForwardingNodes(Graph* graph) {
  std::vector<Node*> forwarding_nodes;
  for (Node* node : graph->op_nodes()) {
    if (IsForwardingNode(node)) forwarding_nodes.push_back(node);
  }
  for (Node* node : forwarding_nodes) {
    const Edge* input = nullptr;
    TF_RETURN_IF_ERROR(node->input_edge(0, &input));
    if (!CanBypass(node, input)) continue;
    Node* source = input->src();
    const int source_output = input->src_output();
    const std::vector<const Edge*> outputs(node->out_edges().begin(), node->out_edges().end());
    for (const Edge* output : outputs) {
      Node* consumer = output->dst();
      const int consumer_input = output->dst_input();
      graph->RemoveEdge(output);
      graph->AddEdge(source, source_output, consumer, consumer_input);
    }
    graph->RemoveNode(node);
  }
  return absl::OkStatus();
}

class BypassForwardingNodesPass : public tensorflow::GraphOptimizationPass {
 public:
  // Session graphs are left alone: a session can fetch any node by name.
  absl::Status Run(const tensorflow::GraphOptimizationPassOptions& options) override {
    if (!options.is_function_graph || options.graph == nullptr) return absl::OkStatus();
    return BypassForwardingNodes(options.graph->get());
  }
};

REGISTER_OPTIMIZATION(tensorflow::OptimizationPassRegistry::PRE_PLACEMENT, 0,
                      BypassForwardingNodesPass);

}  // namespace
}  // namespace tf_stopgrad
