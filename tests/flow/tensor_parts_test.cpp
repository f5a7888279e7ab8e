// A tensor set over a message's size goes as parts (actors/flow/tensor_parts.hpp):
// an actor's final weights over 64 MiB were refused by the sender's codec
// over TCP and `--save-model` failed after the whole run. The parts fit,
// and put back together they are the set, bit for bit; a malformed part is
// refused by name and drops its set.

#include "actors/flow/tensor_parts.hpp"

#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

using namespace baton::actors;
using baton::messages::tensor_set;

namespace {

tensor_set weights() {
  at::manual_seed(3);
  return {"weights", "worker.0", 0, 12, 1,
          {at::randn({40, 10}), at::randn({10}), at::randn({3, 2, 2}),
           at::tensor(int64_t{7}), at::randn({1, 30})},
          {}};
}

uint64_t tensor_bytes(const tensor_set& w) {
  uint64_t n = 0;
  for (const auto& t : w.tensors)
    n += static_cast<uint64_t>(t.numel()) * t.element_size();
  return n;
}

void expect_same(const tensor_set& a, const tensor_set& b) {
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.from, b.from);
  EXPECT_EQ(a.step, b.step);
  EXPECT_EQ(a.step_size, b.step_size);
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    EXPECT_EQ(a.tensors[i].sizes(), b.tensors[i].sizes()) << i;
    EXPECT_TRUE(at::equal(a.tensors[i], b.tensors[i])) << i;
  }
}

} // namespace

TEST(tensor_parts, a_set_that_fits_goes_whole) {
  auto parts = in_parts(weights());
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_FALSE(is_part(parts[0]));
  expect_same(parts[0], weights());
}

TEST(tensor_parts, a_large_set_goes_in_parts_that_fit_and_comes_back_bit_for_bit) {
  const uint64_t most = 400; // bytes: the [40, 10] floats (1,600) go in blocks of 10 rows
  auto parts = in_parts(weights(), most);
  ASSERT_GT(parts.size(), 4u);
  tensor_set_assembler assembler;
  std::string error;
  std::optional<tensor_set> whole;
  // Parts of two senders interleaved, one of them in reverse order.
  auto other = weights();
  other.from = "worker.1";
  auto other_parts = in_parts(other, most);
  for (size_t i = 0; i < parts.size(); ++i) {
    ASSERT_TRUE(is_part(parts[i]));
    EXPECT_LE(tensor_bytes(parts[i]) - parts[i].tensors.front().numel() * 8, most);
    if (i < other_parts.size()) {
      auto other_whole = assembler.add(other_parts[other_parts.size() - 1 - i], error);
      EXPECT_EQ(other_whole.has_value(), i + 1 == other_parts.size());
      if (other_whole)
        expect_same(*other_whole, other);
    }
    whole = assembler.add(parts[i], error);
    EXPECT_EQ(error, "");
    EXPECT_EQ(whole.has_value(), i + 1 == parts.size());
  }
  ASSERT_TRUE(whole);
  expect_same(*whole, weights());
}

TEST(tensor_parts, a_malformed_or_repeated_part_is_refused_by_name) {
  auto parts = in_parts(weights(), 400);
  tensor_set_assembler assembler;
  std::string error;
  EXPECT_FALSE(assembler.add(parts[0], error));
  EXPECT_FALSE(assembler.add(parts[0], error));
  EXPECT_NE(error.find("part 0 arrived twice"), std::string::npos) << error;
  EXPECT_NE(error.find("'worker.0'"), std::string::npos) << error;

  auto bad = parts[1];
  bad.tensors.front() = at::zeros({2, 3}, at::kLong);
  error.clear();
  EXPECT_FALSE(assembler.add(bad, error));
  EXPECT_NE(error.find("header"), std::string::npos) << error;

  auto gap = parts[0];
  gap.tensors.front()[1][1] = 5; // a block that claims to start at row 5
  error.clear();
  tensor_set_assembler fresh;
  for (size_t i = 1; i < parts.size(); ++i)
    fresh.add(parts[i], error);
  EXPECT_FALSE(fresh.add(gap, error));
  EXPECT_NE(error, "");
}
