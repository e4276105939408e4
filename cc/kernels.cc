// The forwarding kernel's CPU, GPU and DEFAULT-device registrations.
//
// The GPU and DEFAULT registrations mirror TensorFlow's built-in StopGradient and
// PreventGradient exactly (tests/test_kernel_registry.py compares the two registries).
// Forwarding a buffer needs no device code, so no CUDA compiler is involved.
#include "forward_input_kernel.h"
#include "op_names.h"
#include "tensorflow/core/framework/register_types.h"

namespace tf_stopgrad {

using ::tensorflow::DEVICE_CPU;
using ::tensorflow::DEVICE_DEFAULT;
using ::tensorflow::DEVICE_GPU;

REGISTER_KERNEL_BUILDER(Name(kStopGradientOp).Device(DEVICE_CPU), ForwardInputOp);
REGISTER_KERNEL_BUILDER(Name(kPreventGradientOp).Device(DEVICE_CPU), ForwardInputOp);

#define TF_STOPGRAD_REGISTER_DEVICE_KERNELS(device, type)                                    \
  REGISTER_KERNEL_BUILDER(Name(kStopGradientOp).Device(device).TypeConstraint<type>("T"),    \
                          ForwardInputOp);                                                   \
  REGISTER_KERNEL_BUILDER(Name(kPreventGradientOp).Device(device).TypeConstraint<type>("T"), \
                          ForwardInputOp)
#define TF_STOPGRAD_REGISTER_GPU_KERNELS(type) TF_STOPGRAD_REGISTER_DEVICE_KERNELS(DEVICE_GPU, type)
#define TF_STOPGRAD_REGISTER_DEFAULT_KERNELS(type) \
  TF_STOPGRAD_REGISTER_DEVICE_KERNELS(DEVICE_DEFAULT, type)

TF_CALL_NUMBER_TYPES_NO_INT32(TF_STOPGRAD_REGISTER_GPU_KERNELS);
TF_STOPGRAD_REGISTER_GPU_KERNELS(tensorflow::Variant);
TF_STOPGRAD_REGISTER_GPU_KERNELS(bool);
TF_CALL_NUMBER_TYPES_NO_INT32(TF_STOPGRAD_REGISTER_DEFAULT_KERNELS);
TF_STOPGRAD_REGISTER_DEFAULT_KERNELS(tensorflow::Variant);
TF_STOPGRAD_REGISTER_DEFAULT_KERNELS(bool);

#undef TF_STOPGRAD_REGISTER_DEFAULT_KERNELS
#undef TF_STOPGRAD_REGISTER_GPU_KERNELS
#undef TF_STOPGRAD_REGISTER_DEVICE_KERNELS

// Like the built-in, int32, string and resource values stay in host memory on accelerators,
// and only the stop-gradient op has these registrations.
#define TF_STOPGRAD_REGISTER_HOST_MEMORY_KERNELS(device, type) \
  REGISTER_KERNEL_BUILDER(Name(kStopGradientOp)                \
                              .Device(device)                  \
                              .HostMemory("input")             \
                              .HostMemory("output")            \
                              .TypeConstraint<type>("T"),      \
                          ForwardInputOp)

TF_STOPGRAD_REGISTER_HOST_MEMORY_KERNELS(DEVICE_GPU, int32_t);
TF_STOPGRAD_REGISTER_HOST_MEMORY_KERNELS(DEVICE_GPU, tensorflow::tstring);
TF_STOPGRAD_REGISTER_HOST_MEMORY_KERNELS(DEVICE_GPU, tensorflow::ResourceHandle);
TF_STOPGRAD_REGISTER_HOST_MEMORY_KERNELS(DEVICE_DEFAULT, int32_t);
TF_STOPGRAD_REGISTER_HOST_MEMORY_KERNELS(DEVICE_DEFAULT, tensorflow::tstring);
TF_STOPGRAD_REGISTER_HOST_MEMORY_KERNELS(DEVICE_DEFAULT, tensorflow::ResourceHandle);

#undef TF_STOPGRAD_REGISTER_HOST_MEMORY_KERNELS

}  // namespace tf_stopgrad
