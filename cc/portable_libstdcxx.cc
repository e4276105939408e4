// Keeps the op library loadable with the libstdc++ of older Linux distributions.
//
// Since GCC 11, std::allocator's headers call std::__throw_bad_array_new_length(), which
// libstdc++ exports only from GCC 11 on (GLIBCXX_3.4.29). That one reference would raise the
// library's floor from the manylinux_2_17 of TensorFlow's own plugins to manylinux_2_34. A
// hidden definition here satisfies it inside the library, with the same behaviour.
#include <new>

#if defined(_GLIBCXX_RELEASE) && _GLIBCXX_RELEASE >= 11
namespace std {
__attribute__((visibility("hidden"))) void __throw_bad_array_new_length() {
  throw bad_array_new_length();
}
}  // namespace std
#endif
