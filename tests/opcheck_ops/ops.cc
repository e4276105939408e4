// Ops built wrong on purpose, one way each, for tests/test_opcheck.py: opcheck must fail each
// one on its own check. Every op is an identity on float and double; Opcheck>Correct is the
// control, and each other op differs from it in the one way its name says (its gradient and pfor
// converter are registered in Python, by the test, or not).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "tensorflow/compiler/tf2xla/xla_op_registry.h"
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/kernel_def.pb.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"

namespace opcheck_ops {

using ::tensorflow::OpKernel;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpKernelContext;
using ::tensorflow::Tensor;
using ::tensorflow::shape_inference::InferenceContext;
using ::tensorflow::shape_inference::ShapeHandle;
using ::tensorflow::shape_inference::UnchangedShape;

#define OPCHECK_OP(name, shape_fn) \
  REGISTER_OP(name).Input("input: T").Output("output: T").Attr("T: {float, double}").SetShapeFn(shape_fn)

OPCHECK_OP("Opcheck>Correct", UnchangedShape);
OPCHECK_OP("Opcheck>NoKernelForDouble", UnchangedShape);
OPCHECK_OP("Opcheck>NoGradient", UnchangedShape);
OPCHECK_OP("Opcheck>WritesIntoInput", UnchangedShape);
OPCHECK_OP("Opcheck>RandomButStateless", UnchangedShape);
OPCHECK_OP("Opcheck>NoXlaKernel", UnchangedShape);
OPCHECK_OP("Opcheck>NoPforConverter", UnchangedShape);
OPCHECK_OP("Opcheck>ReadsFirstOfEmpty", UnchangedShape);
OPCHECK_OP("Opcheck>DividesByLastAxis", UnchangedShape);
OPCHECK_OP("Opcheck>ChecksRank", UnchangedShape);
OPCHECK_OP("Opcheck>RandomOnExtremes", UnchangedShape);
OPCHECK_OP("Opcheck>GradientDiffersInGraph", UnchangedShape);

// Says the output has one more dimension than the kernel gives it.
OPCHECK_OP("Opcheck>ShapeFunctionLies", [](InferenceContext* c) {
  ShapeHandle output;
  TF_RETURN_IF_ERROR(c->Concatenate(c->input(0), c->Vector(1), &output));
  c->set_output(0, output);
  return absl::OkStatus();
});

// Refuses an unknown batch dimension: a tf.function can only be traced for a known one.
OPCHECK_OP("Opcheck>NeedsKnownBatch", [](InferenceContext* c) {
  ShapeHandle input;
  TF_RETURN_IF_ERROR(c->WithRankAtLeast(c->input(0), 1, &input));  // Dim(input, 0) needs an axis
  if (!c->RankKnown(input) || !c->ValueKnown(c->Dim(input, 0))) {
    return absl::InvalidArgumentError("Opcheck>NeedsKnownBatch needs a known batch size");
  }
  c->set_output(0, c->input(0));
  return absl::OkStatus();
});

// Requires a matrix, as its kernel CHECKs: eagerly, no shape function stands in front of the CHECK.
OPCHECK_OP("Opcheck>ChecksRequiredRank", [](InferenceContext* c) {
  ShapeHandle input;
  TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 2, &input));
  c->set_output(0, input);
  return absl::OkStatus();
});

// Two inputs whose batches the shape function merges; the kernel reads one index per row of
// input 0, trusting input 1 to have as many.
REGISTER_OP("Opcheck>ReadsPastIndices")
    .Input("input: T").Input("indices: int32").Output("output: T").Attr("T: {float, double}")
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle input, indices;
      TF_RETURN_IF_ERROR(c->WithRankAtLeast(c->input(0), 1, &input));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 1, &indices));
      tensorflow::shape_inference::DimensionHandle batch;
      TF_RETURN_IF_ERROR(c->Merge(c->Dim(input, 0), c->Dim(indices, 0), &batch));
      c->set_output(0, input);
      return absl::OkStatus();
    });

// Rows in input 0 and a vector in input 1, of any size: the output is shaped as input 0.
absl::Status RowsAndAVector(InferenceContext* c) {
  ShapeHandle rows, vector;
  TF_RETURN_IF_ERROR(c->WithRankAtLeast(c->input(0), 1, &rows));
  TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 1, &vector));
  c->set_output(0, rows);
  return absl::OkStatus();
}

// Adds to each row of input 0 the label that input 1 holds for it, trusting input 1 to have one
// per row.
REGISTER_OP("Opcheck>ReadsLabelPerRow")
    .Input("input: T").Input("labels: int32").Output("output: T").Attr("T: {float, double}")
    .SetShapeFn(RowsAndAVector);

// An input refused at its extremes (NaN, Inf), and a count whose maximum overflows count + 1.
REGISTER_OP("Opcheck>OverflowsOnLargestCount")
    .Input("input: T").Input("count: int32").Output("output: T").Attr("T: {float, double}")
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle count;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 0, &count));
      c->set_output(0, c->input(0));
      return absl::OkStatus();
    });

// Adds input 1 to input 0 as far as input 1 goes, leaving the rest of the output unwritten.
REGISTER_OP("Opcheck>LeavesTailUnwritten")
    .Input("input: T").Input("addend: T").Output("output: T").Attr("T: {float, double}")
    .SetShapeFn(UnchangedShape);

OPCHECK_OP("Opcheck>FreesTwiceAfterEmpty", UnchangedShape);

// Sound, but takes only what its OpDef cannot say, as ragged ops do: an axis of -1, and row
// splits that rise from 0 to input 0's number of rows; it refuses anything else.
REGISTER_OP("Opcheck>TakesRowSplits")
    .Input("values: T").Input("row_splits: int64").Output("output: T").Attr("T: {float, double}")
    .Attr("axis: int")
    .SetShapeFn(RowsAndAVector);

// Ops that samples derived from an OpDef cannot call: opcheck_library skips them, saying why.
REGISTER_OP("Opcheck>TakesAFunction")
    .Input("input: float").Output("output: float").Attr("f: func").SetShapeFn(UnchangedShape);
REGISTER_OP("Opcheck>TakesAResource")
    .Input("handle: resource").Output("output: float")
    .SetShapeFn(tensorflow::shape_inference::ScalarShape);

// The output is a new copy of the input; subclasses change what happens after the copy.
template <typename T>
class CopyOp : public OpKernel {
 public:
  explicit CopyOp(OpKernelConstruction* context) : OpKernel(context) {}

  void Compute(OpKernelContext* context) override {
    const Tensor& input = context->input(0);
    Tensor* output = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, input.shape(), &output));
    std::memcpy(output->data(), input.data(), input.TotalBytes());
    AfterCopy(const_cast<T*>(input.flat<T>().data()), output->flat<T>().data(), input.NumElements());
  }

  virtual void AfterCopy(T* input, T* output, int64_t size) {}
};

template <typename T>
class WritesIntoInputOp : public CopyOp<T> {
 public:
  using CopyOp<T>::CopyOp;
  void AfterCopy(T* input, T* output, int64_t size) override { std::fill(input, input + size, T(0)); }
};

template <typename T>
class RandomOp : public CopyOp<T> {
 public:
  using CopyOp<T>::CopyOp;
  void AfterCopy(T* input, T* output, int64_t size) override {
    static std::mt19937 generator(std::random_device{}());
    std::uniform_real_distribution<T> noise(1, 2);
    for (int64_t i = 0; i < size; ++i) output[i] += noise(generator);
  }
};

// Replaces a value that is not finite with noise, as an image op may fill what lies outside the
// image: deterministic on finite inputs only.
template <typename T>
class RandomOnExtremesOp : public CopyOp<T> {
 public:
  using CopyOp<T>::CopyOp;
  void AfterCopy(T* input, T* output, int64_t size) override {
    static std::mt19937 generator(std::random_device{}());
    std::uniform_real_distribution<T> noise(1, 2);
    for (int64_t i = 0; i < size; ++i) {
      if (!std::isfinite(output[i])) output[i] = noise(generator);
    }
  }
};

// Reads the first of its values, copied into a vector, which an empty input leaves empty: its
// data() is null.
template <typename T>
class ReadsFirstOfEmptyOp : public CopyOp<T> {
 public:
  using CopyOp<T>::CopyOp;
  void AfterCopy(T* input, T* output, int64_t size) override {
    std::vector<T> values(input, input + size);
    volatile T first = *values.data();
    (void)first;
  }
};

// Counts its rows as its size over its last axis's, which an empty last axis makes a division by
// zero.
template <typename T>
class DividesByLastAxisOp : public CopyOp<T> {
 public:
  using CopyOp<T>::CopyOp;
  void Compute(OpKernelContext* context) override {
    const Tensor& input = context->input(0);
    if (input.dims() > 0) {
      volatile int64_t rows = input.NumElements() / input.dim_size(input.dims() - 1);
      (void)rows;
    }
    CopyOp<T>::Compute(context);
  }
};

// CHECKs that its input has an axis, where its shape function accepts a scalar.
template <typename T>
class ChecksRankOp : public CopyOp<T> {
 public:
  using CopyOp<T>::CopyOp;
  void Compute(OpKernelContext* context) override {
    CHECK_GE(context->input(0).dims(), 1) << "Opcheck>ChecksRank needs an axis";
    CopyOp<T>::Compute(context);
  }
};

// CHECKs the rank its shape function requires.
template <typename T>
class ChecksRequiredRankOp : public CopyOp<T> {
 public:
  using CopyOp<T>::CopyOp;
  void Compute(OpKernelContext* context) override {
    CHECK_EQ(context->input(0).dims(), 2) << "Opcheck>ChecksRequiredRank needs a matrix";
    CopyOp<T>::Compute(context);
  }
};

// Reads one index per row of input 0, from a copy of input 1 (whose data() is null when empty).
template <typename T>
class ReadsPastIndicesOp : public CopyOp<T> {
 public:
  using CopyOp<T>::CopyOp;
  void Compute(OpKernelContext* context) override {
    const Tensor& indices = context->input(1);
    std::vector<int32_t> copied(indices.flat<int32_t>().data(),
                                indices.flat<int32_t>().data() + indices.NumElements());
    volatile int64_t sum = 0;
    for (int64_t i = 0; i < context->input(0).dim_size(0); ++i) sum += copied.data()[i];
    (void)sum;
    CopyOp<T>::Compute(context);
  }
};

// Reads input 1's buffer, where an empty tensor that TensorFlow made has none (one made from NumPy
// has one, so the read goes past it unseen).
template <typename T>
class ReadsLabelPerRowOp : public CopyOp<T> {
 public:
  using CopyOp<T>::CopyOp;
  void Compute(OpKernelContext* context) override {
    CopyOp<T>::Compute(context);
    const Tensor& input = context->input(0);
    if (!context->status().ok() || input.NumElements() == 0) return;
    const int32_t* labels = context->input(1).flat<int32_t>().data();
    const int64_t per_row = input.dims() ? input.NumElements() / input.dim_size(0) : 1;
    auto output = context->mutable_output(0)->flat<T>();
    for (int64_t i = 0; i < output.size(); ++i) output(i) += static_cast<T>(labels[i / per_row]);
  }
};

template <typename T>
class TakesRowSplitsOp : public CopyOp<T> {
 public:
  explicit TakesRowSplitsOp(OpKernelConstruction* context) : CopyOp<T>(context) {
    OP_REQUIRES_OK(context, context->GetAttr("axis", &axis_));
  }
  void Compute(OpKernelContext* context) override {
    OP_REQUIRES(context, axis_ == -1,
                absl::InvalidArgumentError("Opcheck>TakesRowSplits: axis must be -1"));
    const Tensor& values = context->input(0);
    auto splits = context->input(1).flat<int64_t>();
    bool rows = values.dims() >= 1 && splits.size() >= 1 && splits(0) == 0 &&
                splits(splits.size() - 1) == values.dim_size(0);
    for (int64_t i = 1; rows && i < splits.size(); ++i) rows = splits(i - 1) <= splits(i);
    OP_REQUIRES(context, rows, absl::InvalidArgumentError(
        "Opcheck>TakesRowSplits: row_splits must rise from 0 to the number of rows"));
    CopyOp<T>::Compute(context);
  }

 private:
  int64_t axis_;
};

// Refuses a non-finite input, then makes a scratch buffer of count + 1 elements, computed in 32
// bits: the largest count wraps to a negative size, which std::vector refuses by aborting.
template <typename T>
class OverflowsOnLargestCountOp : public CopyOp<T> {
 public:
  using CopyOp<T>::CopyOp;
  void Compute(OpKernelContext* context) override {
    auto input = context->input(0).flat<T>();
    for (int64_t i = 0; i < input.size(); ++i) {
      OP_REQUIRES(context, std::isfinite(input(i)),
                  absl::InvalidArgumentError("Opcheck>OverflowsOnLargestCount: a non-finite input"));
    }
    const int32_t count = context->input(1).scalar<int32_t>()();
    OP_REQUIRES(context, count >= 0, absl::InvalidArgumentError("count must not be negative"));
    const int32_t size = static_cast<int32_t>(static_cast<uint32_t>(count) + 1u);
    std::vector<T> scratch(size);
    CopyOp<T>::Compute(context);
  }
};

template <typename T>
class LeavesTailUnwrittenOp : public OpKernel {
 public:
  explicit LeavesTailUnwrittenOp(OpKernelConstruction* context) : OpKernel(context) {}
  void Compute(OpKernelContext* context) override {
    auto input = context->input(0).flat<T>();
    auto addend = context->input(1).flat<T>();
    Tensor* output = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, context->input(0).shape(), &output));
    auto written = output->flat<T>();
    for (int64_t i = 0; i < std::min(input.size(), addend.size()); ++i) {
      written(i) = input(i) + addend(i);
    }
  }
};

// Keeps the first values of its last input; an empty input deletes them and forgets that it did,
// so the next call deletes them again.
template <typename T>
class FreesTwiceAfterEmptyOp : public CopyOp<T> {
 public:
  using CopyOp<T>::CopyOp;
  void AfterCopy(T* input, T* output, int64_t size) override {
    struct Kept {
      T values[100];
    };
    static Kept* kept = nullptr;
    delete kept;
    if (size == 0) return;
    kept = new Kept;
    std::copy(input, input + std::min<int64_t>(size, 100), kept->values);
  }
};

#define OPCHECK_KERNEL(name, kernel, type) \
  REGISTER_KERNEL_BUILDER(                 \
      Name(name).Device(tensorflow::DEVICE_CPU).TypeConstraint<type>("T"), kernel<type>)
#define OPCHECK_KERNELS(name, kernel)   \
  OPCHECK_KERNEL(name, kernel, float); \
  OPCHECK_KERNEL(name, kernel, double)

OPCHECK_KERNELS("Opcheck>Correct", CopyOp);
OPCHECK_KERNEL("Opcheck>NoKernelForDouble", CopyOp, float);
OPCHECK_KERNELS("Opcheck>NoGradient", CopyOp);
OPCHECK_KERNELS("Opcheck>WritesIntoInput", WritesIntoInputOp);
OPCHECK_KERNELS("Opcheck>RandomButStateless", RandomOp);
OPCHECK_KERNELS("Opcheck>NoXlaKernel", CopyOp);
OPCHECK_KERNELS("Opcheck>NoPforConverter", CopyOp);
OPCHECK_KERNELS("Opcheck>ShapeFunctionLies", CopyOp);
OPCHECK_KERNELS("Opcheck>NeedsKnownBatch", CopyOp);
OPCHECK_KERNELS("Opcheck>ReadsFirstOfEmpty", ReadsFirstOfEmptyOp);
OPCHECK_KERNELS("Opcheck>DividesByLastAxis", DividesByLastAxisOp);
OPCHECK_KERNELS("Opcheck>ChecksRank", ChecksRankOp);
OPCHECK_KERNELS("Opcheck>ChecksRequiredRank", ChecksRequiredRankOp);
OPCHECK_KERNELS("Opcheck>ReadsPastIndices", ReadsPastIndicesOp);
OPCHECK_KERNELS("Opcheck>OverflowsOnLargestCount", OverflowsOnLargestCountOp);
OPCHECK_KERNELS("Opcheck>LeavesTailUnwritten", LeavesTailUnwrittenOp);
OPCHECK_KERNELS("Opcheck>FreesTwiceAfterEmpty", FreesTwiceAfterEmptyOp);
OPCHECK_KERNELS("Opcheck>ReadsLabelPerRow", ReadsLabelPerRowOp);
OPCHECK_KERNELS("Opcheck>TakesRowSplits", TakesRowSplitsOp);
OPCHECK_KERNELS("Opcheck>RandomOnExtremes", RandomOnExtremesOp);
OPCHECK_KERNELS("Opcheck>GradientDiffersInGraph", CopyOp);

// On an XLA compilation device an identity forwards its input's expression, adding no HLO.
class XlaIdentityOp : public OpKernel {
 public:
  explicit XlaIdentityOp(OpKernelConstruction* context) : OpKernel(context) {}
  void Compute(OpKernelContext* context) override { context->set_output(0, context->input(0)); }
};

OpKernel* CreateXlaIdentityOp(OpKernelConstruction* context) { return new XlaIdentityOp(context); }

// Every op but Opcheck>NoXlaKernel. TensorFlow makes kernels of REGISTER_XLA_OP's entries only
// once per process, before a test loads this library, so these are registered as kernels here.
const bool xla_kernels_registered = [] {
  for (const char* op : {"Opcheck>Correct", "Opcheck>NoKernelForDouble", "Opcheck>NoGradient",
                         "Opcheck>WritesIntoInput", "Opcheck>RandomButStateless",
                         "Opcheck>NoPforConverter", "Opcheck>ShapeFunctionLies",
                         "Opcheck>NeedsKnownBatch", "Opcheck>ReadsFirstOfEmpty",
                         "Opcheck>DividesByLastAxis", "Opcheck>ChecksRank",
                         "Opcheck>RandomOnExtremes", "Opcheck>GradientDiffersInGraph"}) {
    for (const char* device : {tensorflow::DEVICE_CPU_XLA_JIT, tensorflow::DEVICE_GPU_XLA_JIT}) {
      if (!tensorflow::XlaOpRegistry::IsBackendRegistered(device)) continue;
      auto* kernel = new tensorflow::KernelDef;
      kernel->set_op(op);
      kernel->set_device_type(device);
      auto* types = kernel->add_constraint();
      types->set_name("T");
      types->mutable_allowed_values()->mutable_list()->add_type(tensorflow::DT_FLOAT);
      types->mutable_allowed_values()->mutable_list()->add_type(tensorflow::DT_DOUBLE);
      // Registrars live as long as the process, like those REGISTER_KERNEL_BUILDER makes.
      new tensorflow::kernel_factory::OpKernelRegistrar(kernel, "XlaIdentityOp", CreateXlaIdentityOp);
    }
  }
  return true;
}();

}  // namespace opcheck_ops
