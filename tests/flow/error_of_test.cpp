#include "actors/flow/error_of.hpp"

#include <new>
#include <stdexcept>
#include <string>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "messages/errc.hpp"
#include "model/core/dataset.hpp"
#include "model/core/error.hpp"

using baton::errc;
using baton::actors::error_of;

namespace {

/// The error of what `f` throws.
template <class F>
caf::error error_of_call(F f, const std::string& doing = "") {
  try {
    f();
  } catch (const std::exception& e) {
    return error_of(e, doing);
  }
  ADD_FAILURE() << "nothing was thrown";
  return caf::none;
}

} // namespace

TEST(error_of, a_model_file_error_is_bad_file) {
  auto err = error_of_call(
    [] { baton::model::load_fashion_mnist("/nonexistent/fashion", baton::model::split::train, 1); },
    "source");
  EXPECT_TRUE(err == errc::bad_file) << baton::describe(err);
  EXPECT_EQ(baton::context_of(err).rfind("source: /nonexistent/fashion/", 0), 0u)
    << baton::describe(err);
}

TEST(error_of, a_libtorch_error_is_compute_failed_without_its_backtrace) {
  auto multiply = [] { (void) at::matmul(at::ones({2, 3}), at::ones({2, 3})); };
  auto err = error_of_call(multiply, "forward");
  EXPECT_TRUE(err == errc::compute_failed) << baton::describe(err);
  auto text = baton::context_of(err);
  EXPECT_EQ(text.rfind("forward: ", 0), 0u) << text;
  EXPECT_NE(text.find("cannot be multiplied"), std::string::npos) << text;
  EXPECT_EQ(text.find("Exception raised from"), std::string::npos) << text;
}

TEST(error_of, other_errors_are_actor_failed) {
  // A model error that is not about a file: a protocol violation of a peer.
  auto model = error_of(baton::model::error("stage backward: microbatch 3 is not in flight"));
  EXPECT_TRUE(model == errc::actor_failed) << baton::describe(model);
  EXPECT_EQ(baton::context_of(model), "stage backward: microbatch 3 is not in flight");
  auto plain = error_of(std::runtime_error("replica sent step twice"), "step");
  EXPECT_TRUE(plain == errc::actor_failed) << baton::describe(plain);
  EXPECT_EQ(baton::context_of(plain), "step: replica sent step twice");
  EXPECT_TRUE(error_of(std::bad_alloc{}) == errc::actor_failed);
}
