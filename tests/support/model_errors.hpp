#pragma once

// What the model suites expect of a refusal: a model::error whose message
// names what was wrong (a file, a key, a value).

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "model/core/error.hpp"

namespace baton::model::testing {

/// Expects `f` to throw model::error whose message contains every one of
/// `needles`.
template <typename F>
void expect_error_naming(F&& f, const std::vector<std::string>& needles) {
  try {
    f();
    ADD_FAILURE() << "expected model::error naming " << ::testing::PrintToString(needles);
  } catch (const error& e) {
    for (const auto& needle : needles)
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
        << "message: " << e.what() << "\nexpected it to name: " << needle;
  }
}

/// Expects `f` to throw model::error whose message contains `needle`.
template <typename F>
void expect_error_naming(F&& f, const std::string& needle) {
  expect_error_naming(std::forward<F>(f), std::vector<std::string>{needle});
}

} // namespace baton::model::testing
