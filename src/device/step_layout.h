// What every device kind derives from a Step before running its graph, and what it returns after:
// the step's checks, each token's position and KV row, the rows whose logits are wanted, and the
// result assembly (candidates, logits slices, scores) from those rows' logits. Kind-neutral: a
// device computes the graph its own way between layout() and assemble().
#pragma once

#include "device/device.h"

#include <cstdint>
#include <vector>

namespace weft::device {

struct StepLayout {
  int64_t n_tokens = 0;
  std::vector<int32_t> pos;        // position of each token in its sequence
  std::vector<int64_t> kv_row;     // its row in the KV caches: slot * n_ctx + position
  std::vector<int64_t> out_rows;   // tokens whose logits are wanted: scored rows, each wanting sequence's last
  std::vector<int64_t> seq_first;  // each sequence's first token in the step
  // Per sequence: where in out_rows its scored rows start and where its last row is (-1: none).
  std::vector<int64_t> score_at, last_at;
};

// Throws weft::Error(where, ...) unless the step names distinct slots below opt.n_seq, positions
// each slot can continue from (n_cached[slot]), scored rows inside its tokens, and all its tokens.
void check_step(const Step& step, const LoadOptions& opt, const std::vector<int32_t>& n_cached, const char* where);
// A graph with recurrent state (Gated DeltaNet) holds each slot's state at its last position only:
// a step continues there or starts over at 0; throws weft::Error(where, ...) otherwise.
void check_recurrent_step(const Step& step, const std::vector<int32_t>& n_cached, const char* where);
// A step's state copies, checked to name distinct state slots below opt.state_slots() of a graph
// with recurrent state, applied to each slot's position (n_cached, one per state slot): the
// caller copies the states themselves, in the same order.
void move_states(const Step& step, const LoadOptions& opt, bool recurrent, std::vector<int32_t>& n_cached,
                 const char* where);

StepLayout layout_step(const Step& step, int32_t n_ctx);

// The step's result from the output node's values: logits of out_rows, one row of graph.vocab.size()
// each (tensor split, last device of a layer split), or the residual stream handed on (layer split).
// The logits are soft-capped in place where the model asks for it.
StepResult assemble_result(const parallel::DeviceGraph& graph, const Step& step, const StepLayout& layout,
                           float* output);

// The logits rows a step's sequences asked the device to keep (StepSeq::keep_logits), and the
// Step::reread that samples them again: a constrained sequence whose candidates the grammar refused
// all gets its whole vocabulary slice without a second forward pass.
class KeptLogits {
 public:
  // After a step (its logits soft-capped by assemble_result): what it asked to keep replaces
  // everything kept before, so a reread only ever sees the step just run.
  void keep(const parallel::DeviceGraph& graph, const Step& step, const StepLayout& layout, const float* output);
  // Throws weft::Error(where, ...) for a sequence with nothing kept, or a reread that carries tokens.
  StepResult reread(const parallel::DeviceGraph& graph, const Step& step, const char* where) const;

 private:
  std::vector<int32_t> slot_;               // the sequence slot of each kept row
  std::vector<std::vector<float>> logits_;  // its vocabulary slice
};

}  // namespace weft::device
