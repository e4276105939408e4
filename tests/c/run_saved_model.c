/* Loads a SavedModel through TensorFlow's C API, as the Java and Go bindings
 * do, and runs one signature on a float32 matrix. It links TensorFlow only, never the
 * plugin, so a model that still used the plugin's ops would fail to load.
 *
 * Usage: run_saved_model SAVED_MODEL_DIR INPUT_TENSOR OUTPUT_TENSOR JSON_MATRIX
 *   INPUT_TENSOR, OUTPUT_TENSOR: the signature's tensor names, e.g. serving_default_x:0.
 *   JSON_MATRIX: rows of numbers, e.g. [[0.5, -1.0], [1.5, 0.25]].
 * Prints `y: <values>`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensorflow/c/c_api.h"

enum { kMaxValues = 4096 };

static void check(TF_Status* status, const char* what) {
  if (TF_GetCode(status) != TF_OK) {
    fprintf(stderr, "%s failed: %s\n", what, TF_Message(status));
    exit(1);
  }
}

/* "name:index" -> the graph output it names. */
static TF_Output output_named(TF_Graph* graph, const char* tensor_name) {
  char operation_name[512];
  const char* colon = strrchr(tensor_name, ':');
  const size_t length = colon ? (size_t)(colon - tensor_name) : strlen(tensor_name);
  if (length >= sizeof(operation_name)) exit(2);
  memcpy(operation_name, tensor_name, length);
  operation_name[length] = '\0';
  TF_Output output = {TF_GraphOperationByName(graph, operation_name), colon ? atoi(colon + 1) : 0};
  if (output.oper == NULL) {
    fprintf(stderr, "no operation %s in the graph\n", operation_name);
    exit(1);
  }
  return output;
}

/* Reads a JSON matrix of numbers: counts rows and columns, fills values. */
static void parse_matrix(const char* text, float* values, int64_t* rows, int64_t* columns) {
  int64_t count = 0, row_count = 0;
  for (const char* p = text; *p != '\0';) {
    if (*p == '[' && p != text) ++row_count;
    if (*p == '-' || *p == '.' || (*p >= '0' && *p <= '9')) {
      char* end;
      if (count == kMaxValues) exit(2);
      values[count++] = strtof(p, &end);
      p = end;
    } else {
      ++p;
    }
  }
  *rows = row_count;
  *columns = row_count ? count / row_count : 0;
}

int main(int argc, char** argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: %s SAVED_MODEL_DIR INPUT_TENSOR OUTPUT_TENSOR JSON_MATRIX\n", argv[0]);
    return 2;
  }
  static float values[kMaxValues];
  int64_t dims[2];
  parse_matrix(argv[4], values, &dims[0], &dims[1]);

  TF_Status* status = TF_NewStatus();
  TF_Graph* graph = TF_NewGraph();
  TF_SessionOptions* options = TF_NewSessionOptions();
  const char* tags[] = {"serve"};
  TF_Session* session =
      TF_LoadSessionFromSavedModel(options, NULL, argv[1], tags, 1, graph, NULL, status);
  check(status, "TF_LoadSessionFromSavedModel");

  const size_t bytes = (size_t)(dims[0] * dims[1]) * sizeof(float);
  TF_Tensor* input = TF_AllocateTensor(TF_FLOAT, dims, 2, bytes);
  memcpy(TF_TensorData(input), values, bytes);
  TF_Output input_output = output_named(graph, argv[2]);
  TF_Output fetch = output_named(graph, argv[3]);
  TF_Tensor* result = NULL;
  TF_SessionRun(session, NULL, &input_output, &input, 1, &fetch, &result, 1, NULL, 0, NULL,
                status);
  check(status, "TF_SessionRun");

  const float* y = (const float*)TF_TensorData(result);
  printf("y:");
  for (size_t i = 0; i < TF_TensorByteSize(result) / sizeof(float); ++i) printf(" %.9g", y[i]);
  printf("\n");

  TF_DeleteTensor(input);
  TF_DeleteTensor(result);
  TF_CloseSession(session, status);
  TF_DeleteSession(session, status);
  TF_DeleteSessionOptions(options);
  TF_DeleteGraph(graph);
  TF_DeleteStatus(status);
  return 0;
}
