#pragma once

// What the mode suites expect of a settings codec (the YAML a plan hands a
// role): garbage, a field out of range or another role's settings are
// refused as bad_config, never taken.

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "messages/errc.hpp"

namespace baton::testing {

/// Expects `parse` (a codec's reader: text -> caf::expected<settings>) to
/// refuse each of `texts` with errc::bad_config.
template <class Parse>
void expect_bad_config(Parse&& parse, const std::vector<std::string>& texts) {
  for (const auto& text : texts) {
    auto refused = parse(text);
    ASSERT_FALSE(refused) << text;
    EXPECT_TRUE(refused.error() == errc::bad_config) << text;
  }
}

} // namespace baton::testing
