# check_tensorflow_headers(VERSION INCLUDE_DIRS COMPILE_OPTIONS): stop at configure time if a
# TensorFlow release ships C++ headers that include headers it does not ship. Some wheels have had
# incomplete headers (TensorFlow 2.19's XLA headers include LLVM headers that it does not
# ship, tensorflow#90026); without this check the build would die later in a raw compiler
# error deep inside TensorFlow.
#
# The probe includes every TensorFlow, XLA, TSL and Abseil header that the plugin's own C++
# files include, so it covers exactly what the build needs and cannot drift from it.
function(check_tensorflow_headers tf_version tf_include_dirs tf_compile_options)
  file(GLOB_RECURSE plugin_sources CONFIGURE_DEPENDS
    "${PROJECT_SOURCE_DIR}/cc/*.cc" "${PROJECT_SOURCE_DIR}/cc/*.h")
  set(tensorflow_includes "")
  foreach(source IN LISTS plugin_sources)
    file(STRINGS "${source}" includes REGEX "^#include \"(tensorflow|xla|tsl|absl)/")
    list(APPEND tensorflow_includes ${includes})
  endforeach()
  list(REMOVE_DUPLICATES tensorflow_includes)
  list(SORT tensorflow_includes)
  list(JOIN tensorflow_includes "\n" probe_text)
  set(probe "${CMAKE_CURRENT_BINARY_DIR}/tensorflow_headers_probe-${tf_version}.cc")
  file(WRITE "${probe}" "${probe_text}\n")

  # The compiler itself, not try_compile: its arguments are passed as they are, so paths with
  # quotes or spaces are safe. The preprocessor alone finds a header that is not shipped, sooner
  # than a parse (which the build then does once, not twice).
  list(TRANSFORM tf_include_dirs PREPEND "-I" OUTPUT_VARIABLE include_flags)
  execute_process(
    COMMAND "${CMAKE_CXX_COMPILER}" -E -o /dev/null -w ${include_flags} ${tf_compile_options} "${probe}"
    RESULT_VARIABLE probe_result
    OUTPUT_VARIABLE probe_output
    ERROR_VARIABLE probe_output)
  list(LENGTH tensorflow_includes header_count)
  if(probe_result EQUAL 0)
    message(STATUS "TensorFlow ${tf_version}'s headers: the ${header_count} the plugin includes are complete")
    return()
  endif()

  string(REGEX MATCH "[^\n]*(error|Error)[^\n]*" first_error "${probe_output}")
  string(STRIP "${first_error}" first_error)
  message(FATAL_ERROR
    "TensorFlow ${tf_version}'s C++ headers cannot be compiled, so no custom op can be built "
    "against this TensorFlow. The first error, from ${probe}:\n"
    "  ${first_error}\n"
    "This is a defect of the TensorFlow ${tf_version} wheel (TensorFlow 2.19's XLA headers, for "
    "example, include LLVM headers the wheel does not ship), not of tf_stopgrad. To fix it, "
    "install a TensorFlow release whose headers are complete, for example a newer patch "
    "release or another minor release (pip install --upgrade \"tensorflow==<major>.<minor>.*\"), "
    "then build tf_stopgrad again.")
endfunction()
