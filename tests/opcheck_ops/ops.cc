// Ops built wrong on purpose, one way each, for tests/test_opcheck.py: opcheck must fail each on
// its own check. Every op is an identity on float and double; Opcheck>Correct is the control,
// and each other op differs from it in the one way its name says.
#include <cstring>
#include <random>
#include <string>

#include "tensorflow/compiler/tf2xla/xla_op_registry.h"
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/kernel_def.pb.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"

namespace opcheck_ops {

using ::tensorflow::OpKernel;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpKernelContext;
using ::tensorflow::Status;
using ::tensorflow::Tensor;
using ::tensorflow::shape_inference::InferenceContext;
using ::tensorflow::shape_inference::ShapeHandle;

#define OPCHECK_IDENTITY_OP(name, shape_fn) \
  REGISTER_OP(name).Input("input: T").Output("output: T").Attr("T: {float, double}").SetShapeFn(shape_fn)

OPCHECK_IDENTITY_OP("Opcheck>Correct", tensorflow::shape_inference::UnchangedShape);
OPCHECK_IDENTITY_OP("Opcheck>NoKernelForDouble", tensorflow::shape_inference::UnchangedShape);
OPCHECK_IDENTITY_OP("Opcheck>NoGradient", tensorflow::shape_inference::UnchangedShape);
OPCHECK_IDENTITY_OP("Opcheck>WritesIntoInput", tensorflow::shape_inference::UnchangedShape);
OPCHECK_IDENTITY_OP("Opcheck>RandomButStateless", tensorflow::shape_inference::UnchangedShape);
OPCHECK_IDENTITY_OP("Opcheck>NoXlaKernel", tensorflow::shape_inference::UnchangedShape);
OPCHECK_IDENTITY_OP("Opcheck>NoPforConverter", tensorflow::shape_inference::UnchangedShape);

// Says the output has one more dimension than the kernel gives it.
OPCHECK_IDENTITY_OP("Opcheck>ShapeFunctionLies", [](InferenceContext* c) {
  ShapeHandle output;
  TF_RETURN_IF_ERROR(c->Concatenate(c->input(0), c->Vector(1), &output));
  c->set_output(0, output);
  return Status();
});

// Refuses an unknown batch dimension, so a tf.function can only be traced for a known one.
OPCHECK_IDENTITY_OP("Opcheck>NeedsKnownBatch", [](InferenceContext* c) {
  if (!c->RankKnown(c->input(0)) || !c->ValueKnown(c->Dim(c->input(0), 0))) {
    return tensorflow::errors::InvalidArgument("Opcheck>NeedsKnownBatch needs a known batch size");
  }
  c->set_output(0, c->input(0));
  return Status();
});

// The output is a copy of the input; the variants below change what happens around the copy.
template <typename T>
class CopyOp : public OpKernel {
 public:
  explicit CopyOp(OpKernelConstruction* context) : OpKernel(context) {}
  void Compute(OpKernelContext* context) override {
    const Tensor& input = context->input(0);
    Tensor* output = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, input.shape(), &output));
    std::memcpy(output->data(), input.data(), input.TotalBytes());
    Change(const_cast<T*>(input.flat<T>().data()), output->flat<T>().data(), input.NumElements());
  }
  virtual void Change(T* input, T* output, int64_t size) {}
};

template <typename T>
class WritesIntoInputOp : public CopyOp<T> {
 public:
  using CopyOp<T>::CopyOp;
  void Change(T* input, T* output, int64_t size) override { std::fill(input, input + size, T(0)); }
};

template <typename T>
class RandomOp : public CopyOp<T> {
 public:
  using CopyOp<T>::CopyOp;
  void Change(T* input, T* output, int64_t size) override {
    static std::mt19937 generator(std::random_device{}());
    std::uniform_real_distribution<T> noise(0, 1);
    for (int64_t i = 0; i < size; ++i) output[i] += noise(generator);
  }
};

#define OPCHECK_CPU_KERNEL(name, kernel, type) \
  REGISTER_KERNEL_BUILDER(Name(name).Device(tensorflow::DEVICE_CPU).TypeConstraint<type>("T"), kernel<type>)
#define OPCHECK_CPU_KERNELS(name, kernel) \
  OPCHECK_CPU_KERNEL(name, kernel, float); \
  OPCHECK_CPU_KERNEL(name, kernel, double)

OPCHECK_CPU_KERNELS("Opcheck>Correct", CopyOp);
OPCHECK_CPU_KERNEL("Opcheck>NoKernelForDouble", CopyOp, float);
OPCHECK_CPU_KERNELS("Opcheck>NoGradient", CopyOp);
OPCHECK_CPU_KERNELS("Opcheck>WritesIntoInput", WritesIntoInputOp);
OPCHECK_CPU_KERNELS("Opcheck>RandomButStateless", RandomOp);
OPCHECK_CPU_KERNELS("Opcheck>NoXlaKernel", CopyOp);
OPCHECK_CPU_KERNELS("Opcheck>NoPforConverter", CopyOp);
OPCHECK_CPU_KERNELS("Opcheck>ShapeFunctionLies", CopyOp);
OPCHECK_CPU_KERNELS("Opcheck>NeedsKnownBatch", CopyOp);

// In XLA, an identity forwards its input's expression.
class XlaForwardOp : public OpKernel {
 public:
  explicit XlaForwardOp(OpKernelConstruction* context) : OpKernel(context) {}
  void Compute(OpKernelContext* context) override { context->set_output(0, context->input(0)); }
};

constexpr const char* kXlaOps[] = {"Opcheck>Correct", "Opcheck>NoKernelForDouble", "Opcheck>NoGradient",
                                  "Opcheck>WritesIntoInput", "Opcheck>RandomButStateless", "Opcheck>NoPforConverter",
                                  "Opcheck>ShapeFunctionLies", "Opcheck>NeedsKnownBatch"};

// TensorFlow makes kernels of REGISTER_XLA_OP's entries once per process, before this library
// is loaded in a test; so the compilation kernels are registered here directly.
const bool xla_kernels_registered = [] {
  for (const char* op : kXlaOps) {
    for (const char* device : {tensorflow::DEVICE_CPU_XLA_JIT, tensorflow::DEVICE_GPU_XLA_JIT}) {
      if (!tensorflow::XlaOpRegistry::IsBackendRegistered(device)) continue;
      auto* def = new tensorflow::KernelDef;
      def->set_op(op);
      def->set_device_type(device);
      auto* constraint = def->add_constraint();
      constraint->set_name("T");
      constraint->mutable_allowed_values()->mutable_list()->add_type(tensorflow::DT_FLOAT);
      constraint->mutable_allowed_values()->mutable_list()->add_type(tensorflow::DT_DOUBLE);
      new tensorflow::kernel_factory::OpKernelRegistrar(
          def, "XlaForwardOp", [](OpKernelConstruction* c) -> OpKernel* { return new XlaForwardOp(c); });
    }
  }
  return true;
}();

}  // namespace opcheck_ops
