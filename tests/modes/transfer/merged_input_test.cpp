// merged_input: a head fed by several replicas of the frozen backbone takes
// their microbatches and controls in the source's order, whatever the
// order in which the replicas' streams interleave.

#include <string>
#include <variant>
#include <vector>

#include <gtest/gtest.h>

#include "actors/modes/transfer/merged_input.hpp"

using baton::actors::transfer::merged_input;
using baton::messages::control;
using baton::messages::control_kind;
using baton::messages::microbatch;

namespace {

microbatch mb(int64_t id, int32_t epoch = 0, bool eval = false) {
  microbatch m;
  m.id = id;
  m.epoch = epoch;
  m.eval = eval;
  return m;
}

control epoch_end(int32_t epoch) {
  return control{control_kind::epoch_end, epoch, 0, "", {}};
}

control end_of_stream(int32_t epoch) {
  return control{control_kind::end_of_stream, epoch, 0, "", {}};
}

/// What came, one input at a time: a microbatch's id, or "E<epoch>" and
/// "S<epoch>" for the controls.
using came = std::variant<microbatch, control>;

/// What the head takes, in order, after each arrival takes what may go.
std::vector<std::string> merged(merged_input in, const std::vector<came>& arrivals) {
  std::vector<std::string> out;
  for (const auto& a : arrivals) {
    if (auto* m = std::get_if<microbatch>(&a))
      in.add(*m);
    else
      in.add(std::get<control>(a));
    while (auto next = in.next()) {
      if (auto* m = std::get_if<microbatch>(&*next))
        out.push_back(std::to_string(m->id));
      else {
        const auto& c = std::get<control>(*next);
        out.push_back((c.kind == control_kind::epoch_end ? "E" : "S") + std::to_string(c.epoch));
      }
    }
  }
  EXPECT_EQ(in.held(), 0u) << "every microbatch taken by the end of the stream";
  return out;
}

} // namespace

TEST(merged_input, one_replica_takes_them_as_they_come) {
  EXPECT_EQ(merged(merged_input{1}, {mb(0), mb(1), mb(2, 0, true), epoch_end(0), mb(3, 1),
                                    end_of_stream(2)}),
            (std::vector<std::string>{"0", "1", "2", "E0", "3", "S2"}));
}

TEST(merged_input, two_replicas_in_the_source_s_order_however_they_interleave) {
  // Replica 0 has the even ids, replica 1 the odd ones, each in order; the
  // epoch's control comes from both, each after its own microbatches.
  const std::vector<std::string> order{"0", "1", "2", "3", "4", "E0", "5", "6", "S1"};
  EXPECT_EQ(merged(merged_input{2}, {mb(0), mb(1), mb(2), mb(3), mb(4, 0, true), epoch_end(0),
                                    epoch_end(0), mb(5, 1), mb(6, 1), end_of_stream(1),
                                    end_of_stream(1)}),
            order);
  // Replica 0 far ahead: its next epoch comes before replica 1's last.
  EXPECT_EQ(merged(merged_input{2}, {mb(0), mb(2), mb(4, 0, true), epoch_end(0), mb(6, 1),
                                    mb(1), mb(3), epoch_end(0), end_of_stream(1), mb(5, 1),
                                    end_of_stream(1)}),
            order);
  // Replica 1 far ahead.
  EXPECT_EQ(merged(merged_input{2}, {mb(1), mb(3), epoch_end(0), mb(5, 1), end_of_stream(1),
                                    mb(0), mb(2), mb(4, 0, true), epoch_end(0), mb(6, 1),
                                    end_of_stream(1)}),
            order);
}

TEST(merged_input, nothing_goes_before_every_replica_has_spoken) {
  merged_input in{2};
  in.add(mb(0));
  in.add(mb(2));
  EXPECT_FALSE(in.next()) << "id 1 may still come from replica 1";
  in.add(mb(1));
  for (int64_t id : {0, 1})
    EXPECT_EQ(std::get<microbatch>(*in.next()).id, id);
  EXPECT_FALSE(in.next()) << "id 3 may still come";
  EXPECT_EQ(in.held(), 1u);
}

TEST(merged_input, a_microbatch_that_never_comes_holds_up_nothing) {
  // Id 3 (replica 1's) was dropped: the ones after it go as its replica's
  // next arrives, and the epoch's control lets the rest go.
  EXPECT_EQ(merged(merged_input{2}, {mb(0), mb(1), mb(2), mb(4), mb(5), mb(6), epoch_end(0),
                                    epoch_end(0)}),
            (std::vector<std::string>{"0", "1", "2", "4", "5", "6", "E0"}));
}

TEST(merged_input, three_replicas) {
  EXPECT_EQ(merged(merged_input{3}, {mb(2), mb(5), mb(1), mb(0), mb(3), mb(4), epoch_end(0),
                                    mb(6, 0, true), epoch_end(0), epoch_end(0)}),
            (std::vector<std::string>{"0", "1", "2", "3", "4", "5", "6", "E0"}));
}
