// One ISA's instantiation of every kernel in the dispatch list. The CMake
// helper smax_add_dynamic_dispatch() compiles this file once per ISA, with
// SMAX_DYNAMIC_ISA=<name> and that ISA's -m flags; nothing here may run
// before the dispatcher has checked the CPU.
#include <smax/detail/dispatch.hpp>
#include <smax/smax.hpp>

#ifndef SMAX_DYNAMIC_ISA
#error "compile with -DSMAX_DYNAMIC_ISA=<isa> (see cmake/smaxDispatch.cmake)"
#endif

namespace smax {
namespace detail {
namespace {

// The typed and 16-bit lists share one entry shape.
#define SMAX_TYPED_ENTRY(ret, field, name, params, args) \
  t.field = +[] params -> ret { return smax::name(Arch{}, SMAX_EXPAND args); };

template <class Arch, class T>
kernel_table<T> make_table() noexcept {
  kernel_table<T> t{};
#define SMAX_TABLE_ENTRY(name, params, args) \
  t.name = +[] params { return smax::name(Arch{}, SMAX_EXPAND args); };
  SMAX_FUNCTIONS(T, SMAX_TABLE_ENTRY)
#undef SMAX_TABLE_ENTRY
#define SMAX_BATCHED_ENTRY(name, params, args) \
  t.batched_##name = +[] params { return smax::name(Arch{}, SMAX_EXPAND args); };
  SMAX_BATCHED_FUNCTIONS(T, SMAX_BATCHED_ENTRY)
#undef SMAX_BATCHED_ENTRY
  SMAX_TYPED_FUNCTIONS(T, SMAX_TYPED_ENTRY)
  return t;
}

template <class Arch, class H>
half_table<H> make_half_table() noexcept {
  half_table<H> t{};
  SMAX_HALF_FUNCTIONS(H, SMAX_TYPED_ENTRY)
  return t;
}
#undef SMAX_TYPED_ENTRY

}  // namespace

#define SMAX_CAT2(a, b) a##b
#define SMAX_CAT(a, b) SMAX_CAT2(a, b)
#define SMAX_BF16_VARIANT_avx512_bf16 1

#if SMAX_CAT(SMAX_BF16_VARIANT_, SMAX_DYNAMIC_ISA)
// The avx512 level's bf16 variant (dispatch.hpp): only its bf16 table.
const half_table<bf16>& bf16_table_avx512_bf16() noexcept {
  static const half_table<bf16> t = make_half_table<avx512_bf16, bf16>();
  return t;
}
#else
#define SMAX_SELECT(isa, arch, check)                                     \
  namespace isa_##isa {                                                   \
  using selected = arch;                                                  \
  [[maybe_unused]] constexpr const char* name = #isa;                     \
  }
SMAX_ISAS(SMAX_SELECT)
#undef SMAX_SELECT

namespace current_isa = SMAX_CAT(isa_, SMAX_DYNAMIC_ISA);

const isa_tables& SMAX_CAT(tables_, SMAX_DYNAMIC_ISA)() noexcept {
  using Arch = current_isa::selected;
  static const isa_tables t{current_isa::name, make_table<Arch, float>(), make_table<Arch, double>(),
                              make_half_table<Arch, bf16>(), make_half_table<Arch, fp16>()};
  return t;
}
#endif

}  // namespace detail
}  // namespace smax
