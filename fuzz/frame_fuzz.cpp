// libFuzzer target: the frame header parser and every session message decoder a worker (or, for
// DeviceInfo, a coordinator) runs on bytes from the network. Any input must give a value or
// weft::Error, never a crash or huge allocation.
#include "core/error.h"
#include "device/remote/remote_messages.h"
#include "device/remote/weight_slices.h"
#include "net/frame.h"
#include "net/wire.h"

#include <cstddef>
#include <cstdint>
#include <span>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace weft;
  if (size < net::kFrameHeaderBytes) return 0;
  try {
    net::MsgType t;
    net::parse_frame_header(std::span<const uint8_t, net::kFrameHeaderBytes>(data, net::kFrameHeaderBytes), t);
  } catch (const Error&) {
  }
  // The first byte picks a decoder so one corpus covers them all.
  const std::span<const uint8_t> body(data + 1, size - 1);
  net::ByteReader r(body);
  try {
    switch (data[0] % 8) {
      case 0:
        device::remote::read_graph(r);
        device::remote::read_load_options(r);
        break;
      case 1: device::remote::read_step(r); break;
      case 2: {
        device::DeviceStats st;
        device::remote::read_step_result(r, st);
        break;
      }
      case 3: device::remote::read_tensor_headers(r); break;  // the Tensor frame: every header
      case 4: device::remote::read_group_setup(r); break;
      case 5:
        device::remote::read_model_id(r);
        device::remote::read_slices(r);
        break;
      case 6: device::remote::read_served_device(r); break;  // the DeviceInfo frame
      default:
        r.str("text", 4096);
        r.f32s("floats", 1 << 20);
        r.finish("misc");
        break;
    }
  } catch (const Error&) {
  }
  return 0;
}
