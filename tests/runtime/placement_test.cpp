#include "actors/runtime/placement.hpp"

#include <gtest/gtest.h>

using baton::actors::node_for;
using baton::actors::placement;

TEST(placement, an_actor_stays_on_its_node_while_it_is_not_lost) {
  placement nodes{{"a", "b"}, {}, {{"a", 3}}, {}};
  auto choice = node_for("a", nodes);
  EXPECT_EQ(choice.node, "a");
  EXPECT_FALSE(choice.moves);
  // The embedded process ("") is never lost.
  EXPECT_EQ(node_for("", placement{{""}, {}, {}, {}}).node, "");
}

TEST(placement, a_lost_nodes_actors_go_to_a_spare_node_first) {
  // "c" is a spare node: the plan placed nothing there.
  placement nodes{{"b", "c"}, {"a"}, {{"b", 2}}, {}};
  auto choice = node_for("a", nodes);
  EXPECT_EQ(choice.node, "c");
  EXPECT_TRUE(choice.moves);
}

TEST(placement, without_a_spare_the_node_with_fewest_actors_takes_them) {
  placement nodes{{"b", "c", "d"}, {"a"}, {{"b", 3}, {"c", 1}, {"d", 2}}, {}};
  EXPECT_EQ(node_for("a", nodes).node, "c");
  // A tie goes to the first live node.
  placement tie{{"b", "c"}, {"a"}, {{"b", 1}, {"c", 1}}, {}};
  EXPECT_EQ(node_for("a", tie).node, "b");
}

TEST(placement, a_lost_nodes_other_actors_follow_the_first) {
  placement nodes{{"b", "c"}, {"a"}, {{"b", 1}, {"c", 5}}, {{"a", "c"}}};
  auto choice = node_for("a", nodes);
  EXPECT_EQ(choice.node, "c");
  EXPECT_FALSE(choice.moves) << "the move is already recorded";
}

TEST(placement, a_node_that_took_a_lost_nodes_actors_counts_it_as_load) {
  // "c" has no actor yet but took lost "a"'s: 0 + 1 ties "b"'s 1, the first wins.
  placement nodes{{"b", "c"}, {"a", "x"}, {{"b", 1}}, {{"a", "c"}}};
  EXPECT_EQ(node_for("x", nodes).node, "b");
  nodes.actors_on["b"] = 2;
  EXPECT_EQ(node_for("x", nodes).node, "c");
}

TEST(placement, never_a_lost_node) {
  // The node its actors moved to was lost in turn: they move again.
  placement nodes{{"c"}, {"a", "b"}, {{"c", 4}}, {{"a", "b"}}};
  auto choice = node_for("a", nodes);
  EXPECT_EQ(choice.node, "c");
  EXPECT_TRUE(choice.moves);
  // A lost node wrongly listed live is still not chosen.
  placement stale{{"a", "b"}, {"a"}, {{"b", 9}}, {}};
  EXPECT_EQ(node_for("a", stale).node, "b");
  // No node survives: none.
  auto none = node_for("a", placement{{}, {"a", "b"}, {}, {}});
  EXPECT_EQ(none.node, "");
  EXPECT_FALSE(none.moves);
}

TEST(placement, a_node_asked_for_more_threads_than_it_has_cores_is_oversubscribed) {
  using baton::actors::job_plan;
  using baton::actors::oversubscribed_nodes;
  using baton::actors::planned_actor;
  auto actor = [](std::string node, int32_t threads) {
    planned_actor a;
    a.node = std::move(node);
    a.threads = threads;
    return a;
  };
  job_plan plan;
  plan.actors = {actor("a", 2), actor("b", 3), actor("a", 3), actor("", 9), actor("c", 8)};
  // "a": 5 threads on 4 cores; "b": 3 on 4; "c" did not report its cores;
  // "" (embedded) reported 0: not judged.
  auto over = oversubscribed_nodes(plan, {{"a", 4}, {"b", 4}, {"", 0}});
  ASSERT_EQ(over.size(), 1u);
  EXPECT_EQ(over[0].node, "a");
  EXPECT_EQ(over[0].threads, 5);
  EXPECT_EQ(over[0].cores, 4);
  // Exactly as many threads as cores is not oversubscribed; the embedded
  // process is judged as any node.
  over = oversubscribed_nodes(plan, {{"a", 5}, {"", 8}});
  ASSERT_EQ(over.size(), 1u);
  EXPECT_EQ(over[0].node, "");
  EXPECT_EQ(over[0].threads, 9);
}
