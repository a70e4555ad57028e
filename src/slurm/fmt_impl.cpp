// fmt's out-of-line functions, compiled into tally_spank.so from the header
// libfmt.so itself is built from, so the plugin loads no libfmt.so (and the
// libstdc++.so it needs) into srun and slurmstepd (src/CMakeLists.txt says why).
#include <fmt/format-inl.h>

// format.h declares these two `extern template` (libfmt.so holds them), so
// nothing above instantiates them: the plugin's integer formatting needs them.
FMT_BEGIN_NAMESPACE
namespace detail {
template auto thousands_sep_impl(locale_ref) -> thousands_sep_result<char>;
template auto decimal_point_impl(locale_ref) -> char;
}  // namespace detail
FMT_END_NAMESPACE
