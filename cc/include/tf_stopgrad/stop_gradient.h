// C++ client API for the tf_stopgrad ops, shaped like TensorFlow's generated
// tensorflow::ops::StopGradient. Link the op library (tf_stopgrad.library_path()) together
// with libtensorflow_cc.so.2 and libtensorflow_framework.so.2; see BUILD_NOTES.md.
#ifndef TF_STOPGRAD_STOP_GRADIENT_H_
#define TF_STOPGRAD_STOP_GRADIENT_H_

#include <string>
#include <utility>

#include "tensorflow/cc/framework/ops.h"
#include "tensorflow/cc/framework/scope.h"

// The op library is built with hidden visibility; this marks what it exports.
#define TF_STOPGRAD_API __attribute__((visibility("default")))

namespace tf_stopgrad {

// Outputs `input` unchanged; gradients do not flow back through it.
class TF_STOPGRAD_API StopGradient {
 public:
  StopGradient(const tensorflow::Scope& scope, tensorflow::Input input);
  operator tensorflow::Output() const { return output; }
  operator tensorflow::Input() const { return output; }
  tensorflow::Node* node() const { return output.node(); }

  tensorflow::Operation operation;
  tensorflow::Output output;
};

// Outputs `input` unchanged; asking for a gradient through it is an error carrying `message`.
class TF_STOPGRAD_API PreventGradient {
 public:
  struct Attrs {
    Attrs Message(std::string message) const {
      Attrs copy = *this;
      copy.message_ = std::move(message);
      return copy;
    }
    std::string message_;
  };

  PreventGradient(const tensorflow::Scope& scope, tensorflow::Input input,
                  const Attrs& attrs = Attrs());
  operator tensorflow::Output() const { return output; }
  operator tensorflow::Input() const { return output; }
  tensorflow::Node* node() const { return output.node(); }

  static Attrs Message(std::string message) { return Attrs().Message(std::move(message)); }

  tensorflow::Operation operation;
  tensorflow::Output output;
};

}  // namespace tf_stopgrad

#endif  // TF_STOPGRAD_STOP_GRADIENT_H_
