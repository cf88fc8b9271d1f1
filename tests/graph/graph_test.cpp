#include "graph/graph.h"
#include "core/error.h"
#include "support/expect_error.h"

#include <gtest/gtest.h>

namespace weft::graph {
namespace {

TEST(Graph, NodesMustReadEarlierNodes) {
  Graph g;
  g.dims.n_embd = 8;
  const int a = g.add({OpKind::Embed, {}, Axis::Embd, 8, "token_embd.weight", "", -1, "embed"});
  EXPECT_EQ(g.add({OpKind::Add, {a, a}, Axis::Embd, 8, "", "", 0, "add"}), 1);
  EXPECT_ERROR(g.add({OpKind::Add, {a, 5}, Axis::Embd, 8, "", "", 0, "bad"}), "in < id failed");
}

TEST(Graph, AxisWidthsFollowDims) {
  Graph g;
  g.dims = {.n_embd = 64, .n_head = 8, .n_head_kv = 2, .head_dim = 16, .n_ff = 172, .n_vocab = 512, .n_layer = 1};
  EXPECT_EQ(g.width_of(Axis::QHeads), 128);
  EXPECT_EQ(g.width_of(Axis::KvHeads), 32);
  EXPECT_EQ(g.width_of(Axis::Ffn), 172);
  EXPECT_EQ(g.dims.group(), 4);
}

}  // namespace
}  // namespace weft::graph
