#include "parallel/plan.h"

#include "core/error.h"

namespace weft::parallel {

std::string_view split_mode_name(SplitMode m) {
  switch (m) {
    case SplitMode::None: return "none";
    case SplitMode::Layer: return "layer";
    case SplitMode::Tensor: return "tensor";
  }
  return "?";
}

std::string_view moe_split_name(MoeSplit m) {
  switch (m) {
    case MoeSplit::Auto: return "auto";
    case MoeSplit::Tensor: return "tensor";
    case MoeSplit::Expert: return "expert";
  }
  return "?";
}

std::string_view state_name(State s) {
  switch (s) {
    case State::Replicated: return "replicated";
    case State::Split: return "split";
    case State::Partial: return "partial";
  }
  return "?";
}

// LocalOp starts with graph::OpKind, number for number, and the split's own ops follow it.
constexpr bool local_ops_mirror_graph_ops() {
  for (int k = 0; k < static_cast<int>(graph::OpKind::Count); ++k)
    if (static_cast<int>(local_op(static_cast<graph::OpKind>(k))) != k) return false;
  return true;
}
static_assert(local_ops_mirror_graph_ops(), "LocalOp's first enumerators must be graph::OpKind's, in order");
static_assert(static_cast<int>(LocalOp::Input) == static_cast<int>(graph::OpKind::Count),
              "a graph::OpKind was added without its LocalOp (before LocalOp::Input)");

std::string_view local_op_name(LocalOp op) {
  switch (op) {
    case LocalOp::Input: return "input";
    case LocalOp::AllReduce: return "all_reduce";
    case LocalOp::AllGather: return "all_gather";
    case LocalOp::Count: return "?";
    default: return graph::op_name(static_cast<graph::OpKind>(op));  // the mirrored ops (asserted above)
  }
}

const Partition* Plan::partition(graph::Axis a) const {
  for (const auto& p : partitions)
    if (p.axis == a) return &p;
  return nullptr;
}

int Plan::collectives_in_layer(int layer) const {
  int n = 0;
  for (const auto& c : collectives) n += c.layer == layer;
  return n;
}

uint64_t slice_bytes(const graph::WeightInfo& w, const WeightSlice& s) {
  const auto mats = static_cast<uint64_t>(s.experts.empty() ? w.mats : s.experts.size());
  switch (s.kind) {
    case WeightSlice::Kind::None: return 0;
    case WeightSlice::Kind::Whole: return row_bytes(w.type, w.cols) * static_cast<uint64_t>(w.rows) * mats;
    case WeightSlice::Kind::Rows:
      if (w.rows == 1 && mats == 1) return row_bytes(w.type, s.taken());  // a vector's elements
      return row_bytes(w.type, w.cols) * static_cast<uint64_t>(s.taken()) * mats;
    case WeightSlice::Kind::Cols: return row_bytes(w.type, s.taken()) * static_cast<uint64_t>(w.rows) * mats;
  }
  return 0;
}

}  // namespace weft::parallel
