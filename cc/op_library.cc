// The op library as one translation unit: a wheel build for every supported TensorFlow release
// parses TensorFlow's headers once per release instead of once per source file. (CMake's own unity
// build writes absolute #include paths, which break on checkout paths holding a quote.)
//
// portable_libstdcxx.cc comes first: its definitions are hidden only if they are the first
// declarations of those names in the unit (the standard headers declare them too).
#include "portable_libstdcxx.cc"
#include "ops.cc"
#include "kernels.cc"
#include "xla_kernels.cc"
#include "graph_pass.cc"
#include "gradients.cc"
#include "client.cc"
