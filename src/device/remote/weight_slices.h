// The weight slices one worker holds, described by name rather than by bytes: which model tensor,
// whole or a row/column range. The coordinator derives them from the worker's device graph; a
// worker with the same model file (same size and SHA-256) reads them from its own mapping, as a
// local device would (unplan_slices), one with a cached copy reads that, and only otherwise are
// the bytes streamed.
#pragma once

#include "core/huge_buffer.h"
#include "device/remote/remote_messages.h"
#include "gguf/gguf_reader.h"
#include "parallel/plan.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace weft::device::remote {

// A model file as named on the wire. sha256 empty: unknown (a model parsed from memory), so the
// worker cannot use a copy of its own and the bytes are streamed.
struct ModelId {
  uint64_t size = 0;
  std::string sha256;     // lower-case hex of the whole file
  std::string file_name;  // for messages only; matching is by size and hash
  bool known() const { return !sha256.empty(); }
};

struct SliceSpec {
  std::string name;    // "s<i>": the tensor's name in the worker's graph
  std::string source;  // the model tensor it is cut from
  parallel::WeightSlice::Kind kind = parallel::WeightSlice::Kind::Whole;
  parallel::Range range;  // rows (Rows) or columns (Cols) of source; unused for Whole
  // This device holds none of a split matrix, yet its graph still names a tensor of the right
  // other dimension: one zero row ({cols, 1}) or one zero block per row ({block, rows}).
  bool empty = false;
  parallel::Range experts;          // a stacked source (experts): the matrices cut alike; empty: all
  int64_t stride = 0, repeats = 1;  // range taken again stride further on, repeats times (WeightSlice's runs)
};

// Rewrites g's weight references to the "s<i>" tensors and returns them: 2-D slices and the
// experts' parts of stacked 3-D ones are cut (so only their bytes exist on the worker) and become
// Whole; 1-D ones (norms, biases) are small and travel whole, keeping their element range in the graph.
std::vector<SliceSpec> plan_slices(parallel::DeviceGraph& g, const gguf::File& weights);

// The inverse, for a worker with its own copy of the model: g's "s<i>" references name the model's
// tensors again, with the slices' ranges, so the device reads whole and row slices straight from
// the model's mapping instead of a cut copy. Every spec is checked against the model; a reference
// no spec provides is an error.
void unplan_slices(parallel::DeviceGraph& g, const std::vector<SliceSpec>& specs, const gguf::File& model);

// Validates a spec from the network against the local source tensor: kind, range inside the
// shape, whole blocks for column ranges. Throws weft::Error("net", ...) naming the tensor.
void check_slice(const SliceSpec& s, const gguf::TensorInfo& src);
// The tensor the slice becomes (name, type, shape, byte count).
TensorHeader slice_header(const SliceSpec& s, const gguf::TensorInfo& src);
// The slice's bytes, in its own tensor's layout, emitted in order as pieces of the source mapping.
void for_each_piece(const SliceSpec& s, const gguf::TensorInfo& src,
                    const std::function<void(const uint8_t* p, size_t n)>& out);
// One worker's slices as an in-memory GGUF, laid out from their headers before any byte arrives,
// so streamed or cut bytes are written once, straight to their place. Anonymous memory: the
// padding is zero without a pass over it, and pages are backed only as they are written.
class SliceImage {
 public:
  explicit SliceImage(const std::vector<TensorHeader>& headers);
  // Where tensor i's n_bytes go.
  uint8_t* tensor_data(size_t i) { return image_.data() + offsets_[i]; }
  std::span<const uint8_t> bytes() const { return {image_.data(), image_.size()}; }

 private:
  HugeBuffer image_;
  std::vector<uint64_t> offsets_;
};

// Content key of a worker's weights: SHA-256 over the model hash and the slice list.
std::string slices_key(const ModelId& model, const std::vector<SliceSpec>& specs);

void write_model_id(net::ByteWriter& w, const ModelId& m);
ModelId read_model_id(net::ByteReader& r);
void write_slices(net::ByteWriter& w, const std::vector<SliceSpec>& specs);
std::vector<SliceSpec> read_slices(net::ByteReader& r);

}  // namespace weft::device::remote
