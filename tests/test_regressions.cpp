// Inputs found by the fuzzers (fuzz/, tools/run_fuzz.sh), kept as tests.
#include "common.hpp"

TEST_CASE("fuzz: a NaN in a lane whose two-pass reference stays low gives all NaN", "[regression]") {
  // Found by fuzz_softmax: two_pass flushed the lane holding the NaN (its
  // exponent reference never moved) when rescaling the partial sums.
  for (const auto& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    for (auto a : {smax::algorithm::two_pass, smax::algorithm::online, smax::algorithm::automatic}) {
      INFO("isa " << isa << " algorithm " << static_cast<int>(a));
      std::vector<double> xd = {std::numeric_limits<double>::quiet_NaN(), 31.0}, yd(2);
      smax::dynamic::softmax(xd.data(), yd.data(), 2, a);
      CHECK(std::isnan(yd[0]));
      CHECK(std::isnan(yd[1]));
      // Same shape in float, the NaN in different lanes and unroll slots.
      for (std::size_t pos : {0, 1, 5, 17, 40}) {
        std::vector<float> x(67, -0.0009765625f), y(67);
        x[50] = 30.0f;
        x[pos] = std::numeric_limits<float>::quiet_NaN();
        smax::dynamic::softmax(x.data(), y.data(), x.size(), a);
        for (float v : y) CHECK(std::isnan(v));
      }
    }
  }
}

TEST_CASE("fuzz: softmax_backward does not overflow when the result is representable", "[regression]") {
  // Found by fuzz_backward: y_i * (dy_i - dot) overflowed in dy_i - dot for
  // dy_i = -DBL_MAX although the result is ~2^-10 * DBL_MAX.
  for (const auto& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    const double big = std::numeric_limits<double>::max();
    std::vector<double> y = {-0x1p-10, -0x1p-10, 0.5}, dy = {-0x1p-10, -big, -0x1p-10}, dx(3);
    smax::dynamic::softmax_backward(y.data(), dy.data(), dx.data(), 3);
    INFO("isa " << isa);
    for (double v : dx) CHECK(std::isfinite(v));
    const long double dot = static_cast<long double>(y[0]) * dy[0] + static_cast<long double>(y[1]) * dy[1] +
                            static_cast<long double>(y[2]) * dy[2];
    CHECK(std::fabs((dx[1] - y[1] * (dy[1] - dot)) / (y[1] * (dy[1] - dot))) < 1e-15);
  }
}
