/* Uses tf_stopgrad's ops through TensorFlow's C API only, as the Java, Go, Rust and C#
 * bindings do: TF_LoadLibrary, TF_NewOperation, TF_SessionRun and TF_AddGradients.
 * Each op is paired with TensorFlow's built-in one in the same kind of graph.
 *
 * Usage: c_api_ops OP_LIBRARY MESSAGE
 * Prints one `label: value` line per fact; exits non-zero if the C API itself fails. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensorflow/c/c_api.h"

static const float kInput[] = {3.0f, -1.5f, 0.25f, 8.0f};
enum { kInputSize = sizeof(kInput) / sizeof(kInput[0]) };

static void check(TF_Status* status, const char* what) {
  if (TF_GetCode(status) != TF_OK) {
    fprintf(stderr, "%s failed: %s\n", what, TF_Message(status));
    exit(1);
  }
}

static TF_Output finish(TF_OperationDescription* description, TF_Status* status,
                        const char* what) {
  TF_Operation* operation = TF_FinishOperation(description, status);
  check(status, what);
  TF_Output output = {operation, 0};
  return output;
}

static TF_Output add_constant(TF_Graph* graph, TF_Status* status, const char* name,
                              TF_DataType dtype, const int64_t* dims, int num_dims,
                              const void* data, size_t bytes) {
  TF_Tensor* value = TF_AllocateTensor(dtype, dims, num_dims, bytes);
  memcpy(TF_TensorData(value), data, bytes);
  TF_OperationDescription* description = TF_NewOperation(graph, "Const", name);
  TF_SetAttrTensor(description, "value", value, status);
  check(status, name);
  TF_SetAttrType(description, "dtype", dtype);
  TF_DeleteTensor(value);
  return finish(description, status, name);
}

static TF_Output add_input_constant(TF_Graph* graph, TF_Status* status) {
  const int64_t dims[] = {kInputSize};
  return add_constant(graph, status, "x", TF_FLOAT, dims, 1, kInput, sizeof(kInput));
}

static TF_Output add_axis_zero(TF_Graph* graph, TF_Status* status) {
  const int32_t axis = 0;
  return add_constant(graph, status, "axis", TF_INT32, NULL, 0, &axis, sizeof(axis));
}

/* One node of a forwarding op type; `message` is set only if not NULL. */
static TF_Output add_forwarding(TF_Graph* graph, TF_Status* status, const char* op_type,
                                TF_Output input, const char* message) {
  TF_OperationDescription* description = TF_NewOperation(graph, op_type, "forwarded");
  TF_AddInput(description, input);
  if (message != NULL) TF_SetAttrString(description, "message", message, strlen(message));
  return finish(description, status, op_type);
}

/* sum(forwarded * x): its gradient with respect to x is forwarded's value when the
 * forwarding op is a constant to autodiff. */
static TF_Output add_weighted_sum(TF_Graph* graph, TF_Status* status, TF_Output forwarded,
                                  TF_Output x) {
  TF_OperationDescription* multiply = TF_NewOperation(graph, "Mul", "product");
  TF_AddInput(multiply, forwarded);
  TF_AddInput(multiply, x);
  TF_Output product = finish(multiply, status, "Mul");
  TF_OperationDescription* sum = TF_NewOperation(graph, "Sum", "loss");
  TF_AddInput(sum, product);
  TF_AddInput(sum, add_axis_zero(graph, status));
  return finish(sum, status, "Sum");
}

static void print_values(TF_Graph* graph, TF_Status* status, const char* label,
                         TF_Output fetch) {
  TF_SessionOptions* options = TF_NewSessionOptions();
  TF_Session* session = TF_NewSession(graph, options, status);
  check(status, "TF_NewSession");
  TF_Tensor* result = NULL;
  TF_SessionRun(session, NULL, NULL, NULL, 0, &fetch, &result, 1, NULL, 0, NULL, status);
  check(status, "TF_SessionRun");
  const float* values = (const float*)TF_TensorData(result);
  const size_t count = TF_TensorByteSize(result) / sizeof(float);
  printf("%s:", label);
  for (size_t i = 0; i < count; ++i) printf(" %.9g", values[i]);
  printf("\n");
  TF_DeleteTensor(result);
  TF_CloseSession(session, status);
  TF_DeleteSession(session, status);
  TF_DeleteSessionOptions(options);
}

/* Forward value and op type of one forwarding op, then the gradient of
 * sum(op(x) * x) through TF_AddGradients, or the status it returned. */
static void report(const char* label, const char* op_type, const char* message) {
  TF_Status* status = TF_NewStatus();
  TF_Graph* graph = TF_NewGraph();
  TF_Output x = add_input_constant(graph, status);
  TF_Output forwarded = add_forwarding(graph, status, op_type, x, message);
  TF_Output loss = add_weighted_sum(graph, status, forwarded, x);
  char key[128];

  snprintf(key, sizeof(key), "%s_op_type", label);
  printf("%s: %s\n", key, TF_OperationOpType(forwarded.oper));
  snprintf(key, sizeof(key), "%s_forward", label);
  print_values(graph, status, key, forwarded);

  TF_Output gradient;
  TF_AddGradients(graph, &loss, 1, &x, 1, NULL, status, &gradient);
  snprintf(key, sizeof(key), "%s_gradient", label);
  if (TF_GetCode(status) == TF_OK) {
    print_values(graph, status, key, gradient);
  } else {
    printf("%s_status: %d %s\n", key, (int)TF_GetCode(status), TF_Message(status));
  }
  TF_DeleteGraph(graph);
  TF_DeleteStatus(status);
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s OP_LIBRARY MESSAGE\n", argv[0]);
    return 2;
  }
  TF_Status* status = TF_NewStatus();
  TF_Library* library = TF_LoadLibrary(argv[1], status);
  check(status, "TF_LoadLibrary");
  printf("input:");
  for (int i = 0; i < kInputSize; ++i) printf(" %.9g", kInput[i]);
  printf("\n");

  report("stop", "TfStopgrad>StopGradient", NULL);
  report("builtin_stop", "StopGradient", NULL);
  report("prevent", "TfStopgrad>PreventGradient", argv[2]);
  report("builtin_prevent", "PreventGradient", argv[2]);

  TF_DeleteLibraryHandle(library);
  TF_DeleteStatus(status);
  return 0;
}
