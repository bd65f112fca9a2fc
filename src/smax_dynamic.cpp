// The runtime dispatcher: picks the per-ISA table once (the best ISA the CPU
// has, or SMAX_ISA / set_isa()), then forwards every smax::dynamic call. This
// TU is compiled with the target's baseline flags.
#include <atomic>
#include <cstdlib>
#include <cstring>

#include <smax/detail/dispatch.hpp>
#include <smax/dynamic.hpp>

namespace smax {
namespace detail {
namespace {

struct isa_entry {
  const char* name;
  const isa_tables& (*tables)() noexcept;
  bool (*cpu_has)() noexcept;
};

#define SMAX_ENTRY(isa, arch, check) {#isa, &tables_##isa, +[]() noexcept -> bool { return check; }},
const isa_entry entries[] = {SMAX_ISAS(SMAX_ENTRY)};
#undef SMAX_ENTRY
constexpr std::size_t n_entries = sizeof(entries) / sizeof(entries[0]);

const isa_entry* find(const char* name) noexcept {
  for (const auto& e : entries)
    if (std::strcmp(e.name, name) == 0 && e.cpu_has()) return &e;
  return nullptr;
}

// An entry's tables as this CPU runs them: the avx512 level takes its bf16
// variant's table where the CPU has AVX512_BF16 (dispatch.hpp).
const isa_tables& tables_of(const isa_entry& e) noexcept {
#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__)
  if (e.tables == &tables_avx512) {
    static const isa_tables with_bf16 = [] {
      isa_tables t = tables_avx512();
      const char* env = std::getenv("SMAX_AVX512_BF16");
      if (cpu_has_avx512_bf16() && !(env && std::strcmp(env, "0") == 0)) t.b16 = bf16_table_avx512_bf16();
      return t;
    }();
    return with_bf16;
  }
#endif
  return e.tables();
}

const isa_tables* default_tables() noexcept {
  if (const char* forced = std::getenv("SMAX_ISA"))
    if (const isa_entry* e = find(forced)) return &tables_of(*e);
  for (const auto& e : entries)
    if (e.cpu_has()) return &tables_of(e);
  return &tables_of(entries[n_entries - 1]);  // the baseline
}

std::atomic<const isa_tables*> active{nullptr};

const isa_tables& current() noexcept {
  const isa_tables* t = active.load(std::memory_order_acquire);
  if (!t) {
    // Racing first calls compute the same answer; any store wins.
    t = default_tables();
    active.store(t, std::memory_order_release);
  }
  return *t;
}

}  // namespace

const isa_tables& active_tables() noexcept { return current(); }

}  // namespace detail

namespace dynamic {

const char* active_isa() noexcept { return detail::current().name; }

std::size_t available_isas(const char** names, std::size_t cap) noexcept {
  std::size_t count = 0;
  for (const auto& e : detail::entries)
    if (e.cpu_has()) {
      if (count < cap) names[count] = e.name;
      ++count;
    }
  return count;
}

bool set_isa(const char* isa) noexcept {
  if (!isa) {
    detail::active.store(detail::default_tables(), std::memory_order_release);
    return true;
  }
  const detail::isa_entry* e = detail::find(isa);
  if (!e) return false;
  detail::active.store(&detail::tables_of(*e), std::memory_order_release);
  return true;
}

#define SMAX_FORWARD(name, params, args) \
  void name params { detail::current().FIELD.name args; }
#define FIELD f32
SMAX_FUNCTIONS(float, SMAX_FORWARD)
#undef FIELD
#define FIELD f64
SMAX_FUNCTIONS(double, SMAX_FORWARD)
#undef FIELD
#undef SMAX_FORWARD

#define SMAX_FORWARD_BATCHED(name, params, args) \
  void name params { detail::current().FIELD.batched_##name args; }
#define FIELD f32
SMAX_BATCHED_FUNCTIONS(float, SMAX_FORWARD_BATCHED)
#undef FIELD
#define FIELD f64
SMAX_BATCHED_FUNCTIONS(double, SMAX_FORWARD_BATCHED)
#undef FIELD
#undef SMAX_FORWARD_BATCHED

#define SMAX_FORWARD_TYPED(ret, field, name, params, args) \
  ret name params { return detail::current().FIELD.field args; }
#define FIELD f32
SMAX_TYPED_FUNCTIONS(float, SMAX_FORWARD_TYPED)
#undef FIELD
#define FIELD f64
SMAX_TYPED_FUNCTIONS(double, SMAX_FORWARD_TYPED)
#undef FIELD
#define FIELD b16
SMAX_HALF_FUNCTIONS(bf16, SMAX_FORWARD_TYPED)
#undef FIELD
#define FIELD h16
SMAX_HALF_FUNCTIONS(fp16, SMAX_FORWARD_TYPED)
#undef FIELD
#undef SMAX_FORWARD_TYPED

}  // namespace dynamic
}  // namespace smax
