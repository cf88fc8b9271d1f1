#include "device/buffer_plan.h"

#include <algorithm>
#include <map>

namespace weft::device {

using parallel::LocalOp;

bool runs_in_place(LocalOp op) {
  return op == LocalOp::RmsNorm || op == LocalOp::HeadNorm || op == LocalOp::Rope || op == LocalOp::SwiGlu ||
         op == LocalOp::GeGlu || op == LocalOp::SwiGluOai || op == LocalOp::Add || op == LocalOp::AllReduce ||
         op == LocalOp::SigmoidScale || op == LocalOp::Scale;
}

BufferPlan plan_buffers(const parallel::DeviceGraph& graph, int32_t max_tokens) {
  const int n = static_cast<int>(graph.nodes.size());
  std::vector<int> last_use(n, -1);
  for (int i = 0; i < n; ++i)
    for (int in : graph.nodes[i].inputs) last_use[in] = i;
  if (graph.output >= 0) last_use[graph.output] = n;  // read after the step
  BufferPlan p;
  p.node_buffer.assign(n, -1);
  std::multimap<size_t, int> free;  // capacity -> buffer
  for (int i = 0; i < n; ++i) {
    const auto& node = graph.nodes[i];
    const int in0 = node.inputs.empty() ? -1 : node.inputs[0];
    const bool in_place =
        in0 >= 0 && runs_in_place(node.op) && last_use[in0] == i && graph.nodes[in0].width == node.width;
    const size_t need = static_cast<size_t>(max_tokens) * std::max<int64_t>(node.width, 1);
    auto it = free.lower_bound(need);
    if (in_place) {
      p.node_buffer[i] = p.node_buffer[in0];
    } else if (it != free.end()) {
      p.node_buffer[i] = it->second;
      free.erase(it);
    } else {
      p.node_buffer[i] = static_cast<int>(p.buffer_floats.size());
      p.buffer_floats.push_back(need);
    }
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      const int in = node.inputs[k];
      const bool released = last_use[in] == i && !(in_place && in == in0) &&
                            std::find(node.inputs.begin(), node.inputs.begin() + k, in) == node.inputs.begin() + k;
      if (released) free.emplace(p.buffer_floats[p.node_buffer[in]], p.node_buffer[in]);
    }
    if (last_use[i] < 0) free.emplace(p.buffer_floats[p.node_buffer[i]], p.node_buffer[i]);
  }
  return p;
}

}  // namespace weft::device
