// smax — MultiMax's parameters (seeds.hpp), in a header of their own so that
// the dynamic API (dynamic.hpp) declares multimax without the kernels.
#pragma once

namespace smax {

// The modulator's parameters as the official code's nn.Parameters `ranges`
// and `ts` (ZhouYuxuanYX/MultiMax, SeLU), 4 each, in its order:
//   sigma(x) = x + ts[0] relu(ranges[0] - x) + ts[1] relu(x - ranges[1])
//                + ts[2] relu(ranges[2] - x)^2 + ts[3] relu(x - ranges[3])^2
// All zero (the default): sigma is the identity and multimax is softmax.
struct multimax_params {
  double ranges[4] = {0, 0, 0, 0};
  double ts[4] = {0, 0, 0, 0};
};

}  // namespace smax
