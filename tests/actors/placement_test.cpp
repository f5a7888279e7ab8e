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
