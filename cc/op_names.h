// The registered op type names, shared by the op library and the build-info module.
// Deliberately free of TensorFlow includes: the build-info module does not link TensorFlow.
#ifndef TF_STOPGRAD_OP_NAMES_H_
#define TF_STOPGRAD_OP_NAMES_H_

namespace tf_stopgrad {

inline constexpr char kStopGradientOp[] = "TfStopgrad>StopGradient";
inline constexpr char kPreventGradientOp[] = "TfStopgrad>PreventGradient";

}  // namespace tf_stopgrad

#endif  // TF_STOPGRAD_OP_NAMES_H_
