// A token id: an index into the model's vocabulary. Tokenizers produce them, the graph's Embed
// reads them, sampling draws them and every device step carries them, so the type sits below all
// of those layers.
#pragma once

#include <cstdint>

namespace weft {

using Token = int32_t;

}  // namespace weft
