// A user's program, built against smax the way a user would (find_package or
// add_subdirectory; see the CMakeLists.txt beside this file's users). Uses
// the header API on the TU's own ISA and the runtime-dispatch API, and checks
// both against each other and the version macros against CMake's.
#include <cmath>
#include <cstdio>
#include <vector>

#include <smax/dynamic.hpp>
#include <smax/smax.hpp>

int main() {
  std::vector<float> x(1000), a(x.size()), b(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = 8.0f * std::sin(0.37f * static_cast<float>(i));
  smax::softmax(x.data(), a.data(), x.size());
  smax::dynamic::softmax(x.data(), b.data(), x.size(), smax::algorithm::two_pass);
  double sa = 0, sb = 0, diff = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    sa += a[i];
    sb += b[i];
    diff = std::fmax(diff, std::fabs(a[i] - b[i]) / b[i]);
  }
  const bool version_ok = SMAX_VERSION_MAJOR == CONSUMER_EXPECT_MAJOR && SMAX_VERSION_MINOR == CONSUMER_EXPECT_MINOR;
  std::printf("smax %d.%d.%d consumer: isa = %s, sums %.7f %.7f, max relative difference %.2g, version %s\n",
              SMAX_VERSION_MAJOR, SMAX_VERSION_MINOR, SMAX_VERSION_PATCH, smax::dynamic::active_isa(), sa, sb, diff,
              version_ok ? "ok" : "MISMATCH");
  return (std::fabs(sa - 1) < 1e-6 && std::fabs(sb - 1) < 1e-6 && diff < 1e-6 && version_ok) ? 0 : 1;
}
