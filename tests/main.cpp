// Catch2's main, for builds where the prebuilt Catch2WithMain is missing
// (the aarch64 cross build).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
