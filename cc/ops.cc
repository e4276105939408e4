// Op interfaces. Both ops are identities going forward; they differ only in the gradient
// registered for them (tf_stopgrad/_gradients.py and cc/gradients.cc).
#include "op_names.h"
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/full_type_inference_util.h"
#include "tensorflow/core/framework/op.h"

namespace tf_stopgrad {

REGISTER_OP(kStopGradientOp)
    .Input("input: T")
    .Output("output: T")
    .Attr("T: type")
    .SetForwardTypeFn(tensorflow::full_type::ReplicateInput())
    .SetShapeFn(tensorflow::shape_inference::UnchangedShape);

REGISTER_OP(kPreventGradientOp)
    .Input("input: T")
    .Output("output: T")
    .Attr("T: type")
    .Attr("message: string = ''")
    .SetForwardTypeFn(tensorflow::full_type::ReplicateInput())
    .SetShapeFn(tensorflow::shape_inference::UnchangedShape);

}  // namespace tf_stopgrad
