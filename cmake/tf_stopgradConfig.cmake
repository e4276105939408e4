# find_package(tf_stopgrad CONFIG) defines two imported targets: tf_stopgrad::tf_stopgrad, the op
# library and its header, which links tf_stopgrad::tensorflow, TensorFlow's compile flags,
# libraries and their run-time path (what an op library of one's own builds with). A Python
# that imports TensorFlow and tf_stopgrad says what they are (tf_stopgrad/_cmake_package.py):
# Python_EXECUTABLE if set, else the interpreter of the environment this file is installed in.
if(CMAKE_VERSION VERSION_LESS 3.19)
  message(FATAL_ERROR "tf_stopgrad's CMake package needs CMake 3.19 or newer; this is ${CMAKE_VERSION}")
endif()
if(TARGET tf_stopgrad::tf_stopgrad)
  return()
endif()

# Installed in <prefix>/lib/pythonX.Y/site-packages/tf_stopgrad/share/cmake/tf_stopgrad, whose
# interpreter is <prefix>/bin/pythonX.Y.
if(NOT Python_EXECUTABLE AND CMAKE_CURRENT_LIST_DIR MATCHES
   "^(.*)/lib(64)?/(python[0-9.]*)/(site|dist)-packages/tf_stopgrad/")
  set(_tf_stopgrad_python "${CMAKE_MATCH_1}/bin/${CMAKE_MATCH_3}")
  if(EXISTS "${_tf_stopgrad_python}")
    set(Python_EXECUTABLE "${_tf_stopgrad_python}")
  endif()
endif()
include(CMakeFindDependencyMacro)
find_dependency(Python COMPONENTS Interpreter)

execute_process(
  COMMAND "${CMAKE_COMMAND}" -E env TF_CPP_MIN_LOG_LEVEL=2
          "${Python_EXECUTABLE}" -m tf_stopgrad._cmake_package
  WORKING_DIRECTORY "${CMAKE_CURRENT_LIST_DIR}"
  OUTPUT_VARIABLE _tf_stopgrad_json
  RESULT_VARIABLE _tf_stopgrad_result)
if(NOT _tf_stopgrad_result EQUAL 0)
  message(FATAL_ERROR "${Python_EXECUTABLE} cannot describe tf_stopgrad for CMake (its error is "
    "above). Set Python_EXECUTABLE to the Python whose python -m tf_stopgrad --cmake-dir "
    "printed ${CMAKE_CURRENT_LIST_DIR}.")
endif()
foreach(_tf_stopgrad_field cmake_dir version tensorflow_version library include_dir include_dirs
        compile_options link_libraries runtime_dirs)
  string(JSON _tf_stopgrad_${_tf_stopgrad_field} GET "${_tf_stopgrad_json}" ${_tf_stopgrad_field})
endforeach()

# Headers from one install and the op library from another would not match.
file(REAL_PATH "${_tf_stopgrad_cmake_dir}" _tf_stopgrad_imported_dir)
file(REAL_PATH "${CMAKE_CURRENT_LIST_DIR}" _tf_stopgrad_this_dir)
if(NOT _tf_stopgrad_imported_dir STREQUAL _tf_stopgrad_this_dir)
  message(FATAL_ERROR "tf_stopgrad_DIR is ${CMAKE_CURRENT_LIST_DIR}, but ${Python_EXECUTABLE} "
    "imports the tf_stopgrad whose CMake package is ${_tf_stopgrad_cmake_dir}. Set "
    "Python_EXECUTABLE to the Python whose python -m tf_stopgrad --cmake-dir printed "
    "tf_stopgrad_DIR, or tf_stopgrad_DIR to that directory.")
endif()

string(REPLACE ";" ":" _tf_stopgrad_rpath "${_tf_stopgrad_runtime_dirs}")
add_library(tf_stopgrad::tensorflow INTERFACE IMPORTED)
set_target_properties(tf_stopgrad::tensorflow PROPERTIES
  INTERFACE_INCLUDE_DIRECTORIES "${_tf_stopgrad_include_dirs}"
  INTERFACE_COMPILE_OPTIONS "${_tf_stopgrad_compile_options}"
  INTERFACE_LINK_LIBRARIES "${_tf_stopgrad_link_libraries}"
  INTERFACE_LINK_OPTIONS "LINKER:-rpath,${_tf_stopgrad_rpath}")
add_library(tf_stopgrad::tf_stopgrad SHARED IMPORTED)
set_target_properties(tf_stopgrad::tf_stopgrad PROPERTIES
  IMPORTED_LOCATION "${_tf_stopgrad_library}"
  INTERFACE_INCLUDE_DIRECTORIES "${_tf_stopgrad_include_dir}"
  INTERFACE_LINK_LIBRARIES tf_stopgrad::tensorflow)
message(STATUS "Found tf_stopgrad ${_tf_stopgrad_version}: ${_tf_stopgrad_library} (TensorFlow "
  "${_tf_stopgrad_tensorflow_version}, from ${Python_EXECUTABLE})")
