#include "device/device.h"

namespace weft::device {

Step Step::single(std::vector<Token> tokens, int32_t pos0, bool want_candidates, bool want_logits) {
  Step s;
  StepSeq q;
  q.pos0 = pos0;
  q.n_tokens = static_cast<int32_t>(tokens.size());
  q.want_candidates = want_candidates;
  q.want_logits = want_logits;
  s.seqs.push_back(std::move(q));
  s.tokens = std::move(tokens);
  return s;
}

}  // namespace weft::device
