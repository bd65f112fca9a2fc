#include "common.hpp"

TEST_CASE("softmax matches the long-double reference on every ISA and algorithm", "[softmax]") {
  for (const auto& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    for (auto a : {smax::algorithm::automatic, smax::algorithm::three_pass_recompute,
                   smax::algorithm::three_pass_reload, smax::algorithm::two_pass, smax::algorithm::online})
      for (std::size_t n : smax_test::sizes()) {
        const auto x = smax_test::normal<float>(n, 5.0, n);
        std::vector<float> y(n);
        smax::dynamic::softmax(x.data(), y.data(), n, a);
        INFO("isa " << isa << " algorithm " << static_cast<int>(a) << " n " << n);
        CHECK(smax_test::max_rel_err(y, smax_test::ref_softmax(x)) < 1e-6);
      }
  }
}
