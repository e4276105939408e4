// The plugin's op types, and the built-in op each one stands for. Python and Java write the
// same names; tests/test_package.py checks them against the ops the loaded library registers.
#ifndef TF_STOPGRAD_OP_NAMES_H_
#define TF_STOPGRAD_OP_NAMES_H_

#include <string_view>

namespace tf_stopgrad {

inline constexpr char kStopGradientOp[] = "TfStopgrad>StopGradient";
inline constexpr char kPreventGradientOp[] = "TfStopgrad>PreventGradient";

struct PluginOp {
  const char* type;
  const char* builtin_type;  // the built-in op with the same forward value and gradient
};
inline constexpr PluginOp kPluginOps[] = {
    {kStopGradientOp, "StopGradient"},
    {kPreventGradientOp, "PreventGradient"},
};

// The built-in op type that a plugin op type stands for, or nullptr for any other op type.
inline const char* BuiltinTypeFor(std::string_view op_type) {
  for (const PluginOp& op : kPluginOps) {
    if (op_type == op.type) return op.builtin_type;
  }
  return nullptr;
}

}  // namespace tf_stopgrad

#endif  // TF_STOPGRAD_OP_NAMES_H_
