#include "device/step_layout.h"

#include "core/error.h"

#include <algorithm>
#include <cmath>

namespace weft::device {

void check_step(const Step& step, const LoadOptions& opt, const std::vector<int32_t>& n_cached, const char* where) {
  const int64_t n_tokens = static_cast<int64_t>(step.tokens.size());
  if (n_tokens < 1 || n_tokens > opt.max_tokens)
    fail(where, "a step of {} tokens is outside 1..{}", n_tokens, opt.max_tokens);
  if (step.seqs.empty()) fail(where, "a step without sequences");
  int64_t total = 0;
  std::vector<bool> seen(opt.n_seq, false);
  for (const StepSeq& q : step.seqs) {
    if (q.seq < 0 || q.seq >= opt.n_seq) fail(where, "sequence slot {} outside 0..{}", q.seq, opt.n_seq - 1);
    if (seen[q.seq]) fail(where, "sequence slot {} twice in one step", q.seq);
    seen[q.seq] = true;
    if (q.n_tokens < 1) fail(where, "sequence slot {} with {} tokens", q.seq, q.n_tokens);
    if (q.pos0 < 0 || q.pos0 > n_cached[q.seq])
      fail(where, "slot {}: step at position {} but the cache holds {} positions", q.seq, q.pos0, n_cached[q.seq]);
    if (int64_t{q.pos0} + q.n_tokens > opt.n_ctx)
      fail(where, "slot {}: context full: {} + {} tokens exceed -c {}", q.seq, q.pos0, q.n_tokens, opt.n_ctx);
    if (q.n_logprobs < -1 || q.n_logprobs > model::kMaxTopLogprobs)
      fail(where, "slot {}: {} top log-probabilities outside -1..{}", q.seq, q.n_logprobs, model::kMaxTopLogprobs);
    if (q.score_from < 0 || q.score_from + static_cast<int64_t>(q.score_next.size()) > q.n_tokens)
      fail(where, "slot {}: scoring rows {}..+{} outside its {} tokens", q.seq, q.score_from, q.score_next.size(),
           q.n_tokens);
    total += q.n_tokens;
  }
  if (total != n_tokens) fail(where, "the sequences hold {} tokens, the step {}", total, n_tokens);
}

void check_recurrent_step(const Step& step, const std::vector<int32_t>& n_cached, const char* where) {
  for (const StepSeq& q : step.seqs)
    if (q.pos0 != 0 && q.pos0 != n_cached[q.seq])
      fail(where,
           "slot {}: a step at position {}, but its recurrent state is at {}: it can continue there or start over at 0",
           q.seq, q.pos0, n_cached[q.seq]);
}

void move_states(const Step& step, const LoadOptions& opt, bool recurrent, std::vector<int32_t>& n_cached,
                 const char* where) {
  if (step.state_copies.empty()) return;
  if (!recurrent) fail(where, "state copies for a graph without recurrent state");
  for (const StateCopy& c : step.state_copies)
    if (c.from < 0 || c.to < 0 || c.from >= opt.state_slots() || c.to >= opt.state_slots() || c.from == c.to)
      fail(where, "a state copy from slot {} to {} (state slots 0..{})", c.from, c.to, opt.state_slots() - 1);
  for (const StateCopy& c : step.state_copies) n_cached[c.to] = n_cached[c.from];
}

StepLayout layout_step(const Step& step, int32_t n_ctx) {
  StepLayout l;
  l.n_tokens = static_cast<int64_t>(step.tokens.size());
  l.score_at.assign(step.seqs.size(), -1);
  l.last_at.assign(step.seqs.size(), -1);
  l.pos.reserve(l.n_tokens);
  l.kv_row.reserve(l.n_tokens);
  l.seq_first.reserve(step.seqs.size());
  for (size_t k = 0; k < step.seqs.size(); ++k) {
    const StepSeq& q = step.seqs[k];
    const int64_t first = static_cast<int64_t>(l.pos.size());
    l.seq_first.push_back(first);
    for (int32_t t = 0; t < q.n_tokens; ++t) {
      l.pos.push_back(q.pos0 + t);
      l.kv_row.push_back(int64_t{q.seq} * n_ctx + q.pos0 + t);
    }
    if (!q.score_next.empty()) {
      l.score_at[k] = static_cast<int64_t>(l.out_rows.size());
      for (size_t j = 0; j < q.score_next.size(); ++j) l.out_rows.push_back(first + q.score_from + int64_t(j));
    }
    if (q.want_candidates || q.want_logits) {
      const int64_t last = first + q.n_tokens - 1;
      if (!l.out_rows.empty() && l.out_rows.back() == last) {
        l.last_at[k] = static_cast<int64_t>(l.out_rows.size()) - 1;  // scored already: computed once
      } else {
        l.last_at[k] = static_cast<int64_t>(l.out_rows.size());
        l.out_rows.push_back(last);
      }
    }
  }
  return l;
}

namespace {
// What a sequence asked of its last row: candidates, log-probabilities, the slice itself.
void fill_from_row(SeqResult& r, const StepSeq& q, const float* row, Token first_id, int32_t nv) {
  if (q.want_candidates)
    r.candidates = q.candidate_ids.empty() ? model::local_candidates(row, first_id, nv, q.sampling, q.recent)
                                           : model::LocalCandidates{model::listed_candidates(
                                                 row, first_id, nv, q.sampling, q.recent, q.candidate_ids)};
  if (q.n_logprobs >= 0)  // a pass over the slice only when asked
    r.logprobs = model::slice_logprobs(row, first_id, nv, q.n_logprobs, q.sampling, q.recent);
  if (q.want_logits) r.logits.assign(row, row + nv);
}
}  // namespace

StepResult assemble_result(const parallel::DeviceGraph& graph, const Step& step, const StepLayout& l, float* o) {
  StepResult r;
  if (graph.has_logits) {
    const int64_t nv = graph.vocab.size();
    // Gemma's final soft-cap, on this device's share of the vocabulary (elementwise: any split).
    if (const float cap = graph.dims.logit_softcap; cap > 0)
      for (int64_t i = 0, n = static_cast<int64_t>(l.out_rows.size()) * nv; i < n; ++i)
        o[i] = cap * std::tanh(o[i] / cap);
    const auto first_id = static_cast<Token>(graph.vocab.begin);
    r.seqs.resize(step.seqs.size());
    for (size_t k = 0; k < step.seqs.size(); ++k) {
      const StepSeq& q = step.seqs[k];
      for (size_t j = 0; j < q.score_next.size(); ++j)
        r.seqs[k].scores.push_back(model::slice_score(o + (l.score_at[k] + int64_t(j)) * nv, first_id,
                                                      static_cast<int32_t>(nv), q.score_next[j]));
      if (l.last_at[k] >= 0) fill_from_row(r.seqs[k], q, o + l.last_at[k] * nv, first_id, static_cast<int32_t>(nv));
    }
  } else if (graph.passes_residual) {  // layer split: the residual stream goes on to the next device
    WEFT_ASSERT(graph.nodes[graph.output].width == graph.dims.n_embd);
    r.output.assign(o, o + l.n_tokens * graph.dims.n_embd);
  }  // else a tensor-split device with no vocabulary share: nothing to return
  return r;
}

void KeptLogits::keep(const parallel::DeviceGraph& graph, const Step& step, const StepLayout& l, const float* o) {
  slot_.clear();
  logits_.clear();
  if (!graph.has_logits) return;
  const int64_t nv = graph.vocab.size();
  for (size_t k = 0; k < step.seqs.size(); ++k)
    if (step.seqs[k].keep_logits && l.last_at[k] >= 0) {
      slot_.push_back(step.seqs[k].seq);
      logits_.emplace_back(o + l.last_at[k] * nv, o + (l.last_at[k] + 1) * nv);
    }
}

StepResult KeptLogits::reread(const parallel::DeviceGraph& graph, const Step& step, const char* where) const {
  if (!step.tokens.empty() || !step.input.empty()) fail(where, "a reread step carries {} tokens", step.tokens.size());
  StepResult r;
  if (!graph.has_logits) return r;  // nothing was kept: a device without a vocabulary share
  r.seqs.resize(step.seqs.size());
  for (size_t k = 0; k < step.seqs.size(); ++k) {
    const StepSeq& q = step.seqs[k];
    const auto at = std::find(slot_.begin(), slot_.end(), q.seq);
    if (at == slot_.end() || q.n_tokens != 0)
      fail(where, "slot {}: a reread of logits its last step did not keep", q.seq);
    if (q.n_logprobs < -1 || q.n_logprobs > model::kMaxTopLogprobs)
      fail(where, "slot {}: {} top log-probabilities outside -1..{}", q.seq, q.n_logprobs, model::kMaxTopLogprobs);
    fill_from_row(r.seqs[k], q, logits_[at - slot_.begin()].data(), static_cast<Token>(graph.vocab.begin),
                  static_cast<int32_t>(graph.vocab.size()));
  }
  return r;
}

}  // namespace weft::device
