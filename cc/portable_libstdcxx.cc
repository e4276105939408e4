// Keeps the op library loadable with the glibc and libstdc++ of older Linux distributions.
//
// Built with a current GCC and glibc, two references raise the library's floor far above that
// of the TensorFlow it runs in (auditwheel: manylinux_2_34), each satisfied here, hidden,
// inside the library:
// - since GCC 11, std::allocator's headers call std::__throw_bad_array_new_length(), which
//   libstdc++ exports only from GCC 11 on (GLIBCXX_3.4.29). Ours throws std::bad_alloc, as
//   std::allocator did before GCC 11 (bad_array_new_length derives from it; its type_info
//   would need CXXABI_1.3.8, GCC 4.9's libstdc++);
// - with glibc 2.32's headers, libstdc++'s reference counting (std::shared_ptr) reads
//   __libc_single_threaded (GLIBC_2.32) to skip atomic operations in single-threaded
//   processes. Our copy says "not single-threaded", so they are always atomic: correct, and
//   what older systems do anyway.
#include <new>

#if defined(_GLIBCXX_RELEASE) && _GLIBCXX_RELEASE >= 11
namespace std {
__attribute__((visibility("hidden"))) void __throw_bad_array_new_length() { throw bad_alloc(); }
}  // namespace std
#endif

#if __has_include(<sys/single_threaded.h>)
extern "C" {
__attribute__((visibility("hidden"))) char __libc_single_threaded = 0;
}
#endif
