// XLA lowering: both ops forward their input expression, so they add nothing to the HLO.
//
// Only xla_op_registry.h is needed: the forwarding kernel is a plain OpKernel, so nothing
// here includes xla_op_kernel.h, whose include chain reaches XLA's StreamExecutor headers
// (TensorFlow 2.19's wheels ship those incomplete).
#include <string>

#include "forward_input_kernel.h"
#include "op_names.h"
#include "tensorflow/compiler/tf2xla/xla_op_registry.h"
#include "tensorflow/core/framework/kernel_def.pb.h"
#include "tensorflow/core/framework/op_kernel.h"

namespace tf_stopgrad {
namespace {

using ::tensorflow::KernelDef;
using ::tensorflow::OpKernel;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::XlaOpRegistry;

REGISTER_XLA_OP(Name(kStopGradientOp).AllowVariantTypes(), ForwardInputOp);
REGISTER_XLA_OP(Name(kPreventGradientOp), ForwardInputOp);

OpKernel* CreateForwardInputOp(OpKernelConstruction* context) {
  return new ForwardInputOp(context);
}

bool HasKernelOn(const std::string& op, const std::string& device_type) {
  const tensorflow::KernelList registered = tensorflow::GetRegisteredKernelsForOp(op);
  for (const KernelDef& def : registered.kernel()) {
    if (def.device_type() == device_type) return true;
  }
  return false;
}

// TensorFlow turns the REGISTER_XLA_OP entries above into kernels on the XLA compilation devices
// only once per process: the first time it creates a tensor or runs an op (an eager tf.constant is
// enough), well before any XLA compilation. When this library is loaded after that, nothing would
// ever register ours, and jit_compile would reject the ops. In that case the built-in op's
// compilation kernels already exist: register ours with the same device and type constraints.
void RegisterMissedXlaCompilationKernels() {
  for (const auto& [ours, builtin] : kPluginOps) {
    const tensorflow::KernelList builtin_kernels = tensorflow::GetRegisteredKernelsForOp(builtin);
    for (const KernelDef& builtin_def : builtin_kernels.kernel()) {
      const std::string& device = builtin_def.device_type();
      if (!XlaOpRegistry::IsBackendRegistered(device) || HasKernelOn(ours, device)) continue;
      auto* def = new KernelDef(builtin_def);
      def->set_op(ours);
      // Registrars live for the whole process, like the static ones REGISTER_KERNEL_BUILDER makes.
      new tensorflow::kernel_factory::OpKernelRegistrar(def, "XlaJitOp", CreateForwardInputOp);
    }
  }
}

const bool missed_xla_kernels_registered = (RegisterMissedXlaCompilationKernels(), true);

}  // namespace
}  // namespace tf_stopgrad
