// The one kernel behind both ops, on every device and in XLA compilation alike.
#ifndef TF_STOPGRAD_FORWARD_INPUT_KERNEL_H_
#define TF_STOPGRAD_FORWARD_INPUT_KERNEL_H_

#include "tensorflow/core/framework/op_kernel.h"

namespace tf_stopgrad {

// Sets the output to the input tensor itself. On a device the output aliases the input
// buffer, so nothing is copied or allocated. On an XLA compilation device the tensor holds
// the symbolic XLA expression, so the output is the same expression and the op adds nothing
// to the HLO (TensorFlow's own Identity lowering forwards the same way).
class ForwardInputOp : public tensorflow::OpKernel {
 public:
  explicit ForwardInputOp(tensorflow::OpKernelConstruction* context) : OpKernel(context) {}

  void Compute(tensorflow::OpKernelContext* context) override {
    context->set_output(0, context->input(0));
  }

  // Lets the executor run the kernel inline instead of scheduling it on a thread pool.
  bool IsExpensive() override { return false; }
};

}  // namespace tf_stopgrad

#endif  // TF_STOPGRAD_FORWARD_INPUT_KERNEL_H_
