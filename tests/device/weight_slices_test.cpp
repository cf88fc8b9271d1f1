// Expert slices as a worker receives them: plan_slices cuts the experts a device holds (expert
// split) or the rows/columns of every expert (tensor split) out of the stacked tensors, their
// headers and bytes are those of the source's parts, and unplan_slices names the source again.
#include "device/remote/weight_slices.h"

#include "gguf/gguf_reader.h"
#include "model/llama_graph.h"
#include "model/model_config.h"
#include "parallel/planner.h"
#include "support/expect_error.h"
#include "tools/gen_model.h"

#include <gtest/gtest.h>

#include <cstring>

namespace weft::device::remote {
namespace {

using Kind = parallel::WeightSlice::Kind;

struct MoeModel {
  std::vector<uint8_t> bytes;
  std::unique_ptr<gguf::File> file;
  MoeModel() {
    tools::GenModelOptions o;
    o.preset = "tiny-moe";
    o.arch = "qwen3moe";
    o.type = "q8_0";
    bytes = tools::generate_model_bytes(o);
    file = gguf::File::parse(bytes.data(), bytes.size(), "tiny-moe");
  }
  parallel::DeviceGraph device(parallel::MoeSplit m, int d) const {
    const auto g = model::build_llama_graph(model::read_config(*file));
    return parallel::plan_tensor(g, model::weight_table(*file), {1, 1}, m).devices[d];
  }
};

// The bytes of a slice, concatenated.
std::vector<uint8_t> pieces(const SliceSpec& s, const gguf::TensorInfo& t) {
  std::vector<uint8_t> out;
  for_each_piece(s, t, [&](const uint8_t* p, size_t n) { out.insert(out.end(), p, p + n); });
  return out;
}

const SliceSpec& spec_of(const std::vector<SliceSpec>& specs, const std::string& source) {
  for (const auto& s : specs)
    if (s.source == source) return s;
  throw std::runtime_error("no slice of " + source);
}

TEST(WeightSlices, ExpertSplitCutsTheHeldExperts) {
  const MoeModel m;
  parallel::DeviceGraph g = m.device(parallel::MoeSplit::Expert, 1);  // experts 4..7
  const parallel::DeviceGraph before = g;
  const auto specs = plan_slices(g, *m.file);
  const auto& t = m.file->tensor("blk.0.ffn_down_exps.weight");  // [96, 64, 8]
  const SliceSpec& s = spec_of(specs, t.name);
  EXPECT_EQ(s.kind, Kind::Whole);
  EXPECT_EQ(s.experts, (parallel::Range{4, 8}));
  const TensorHeader h = slice_header(s, t);
  EXPECT_EQ(h.shape, (std::vector<int64_t>{96, 64, 4}));
  EXPECT_EQ(h.n_bytes, t.n_bytes / 2);
  const auto bytes = pieces(s, t);
  ASSERT_EQ(bytes.size(), h.n_bytes);
  EXPECT_EQ(std::memcmp(bytes.data(), t.data + t.n_bytes / 2, bytes.size()), 0) << "the second half of the stack";
  for (const auto& n : g.nodes)  // the worker's graph reads whole cut tensors, its experts still named
    if (n.op == parallel::LocalOp::ExpertMatMulSum) {
      EXPECT_TRUE(n.weight.experts.empty());
      EXPECT_EQ(n.experts, (parallel::Range{4, 8}));
    }
  unplan_slices(g, specs, *m.file);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    EXPECT_EQ(g.nodes[i].weight.tensor, before.nodes[i].weight.tensor);
    EXPECT_EQ(g.nodes[i].weight.experts, before.nodes[i].weight.experts) << g.nodes[i].label;
  }
}

TEST(WeightSlices, TensorSplitCutsEveryExpert) {
  const MoeModel m;
  parallel::DeviceGraph g = m.device(parallel::MoeSplit::Tensor, 0);
  const parallel::DeviceGraph before = g;
  const auto specs = plan_slices(g, *m.file);
  const auto& up = m.file->tensor("blk.1.ffn_up_exps.weight");  // [64, 96, 8]
  const SliceSpec& r = spec_of(specs, up.name);
  ASSERT_EQ(r.kind, Kind::Rows);
  const int64_t rows = r.range.size();
  ASSERT_GT(rows, 0);
  ASSERT_LT(rows, 96);
  EXPECT_EQ(slice_header(r, up).shape, (std::vector<int64_t>{64, rows, 8}));
  const size_t row = row_bytes(up.type, 64);
  const auto bytes = pieces(r, up);
  ASSERT_EQ(bytes.size(), row * rows * 8);
  for (int64_t e = 0; e < 8; ++e)  // rows [begin, end) of each expert, one expert after another
    EXPECT_EQ(std::memcmp(bytes.data() + e * rows * row, up.data + (e * 96 + r.range.begin) * row, rows * row), 0) << e;
  const auto& down = m.file->tensor("blk.1.ffn_down_exps.weight");  // [96, 64, 8]
  const SliceSpec& c = spec_of(specs, down.name);
  ASSERT_EQ(c.kind, Kind::Cols);
  EXPECT_EQ(slice_header(c, down).shape, (std::vector<int64_t>{c.range.size(), 64, 8}));
  EXPECT_EQ(pieces(c, down).size(), row_bytes(down.type, c.range.size()) * 64 * 8);
  unplan_slices(g, specs, *m.file);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    EXPECT_EQ(g.nodes[i].weight.kind, before.nodes[i].weight.kind) << g.nodes[i].label;
    EXPECT_EQ(g.nodes[i].weight.range, before.nodes[i].weight.range) << g.nodes[i].label;
  }
}

TEST(WeightSlices, ExpertRangeOutsideTheStackIsRejected) {
  const MoeModel m;
  const auto& t = m.file->tensor("blk.0.ffn_gate_exps.weight");
  EXPECT_ERROR(check_slice({"s0", t.name, Kind::Whole, {}, false, {6, 9}}, t),
               "slice s0 of 'blk.0.ffn_gate_exps.weight': experts [6, 9) outside 0..8");
  EXPECT_NO_THROW(check_slice({"s0", t.name, Kind::Whole, {}, false, {6, 8}}, t));
}

}  // namespace
}  // namespace weft::device::remote
