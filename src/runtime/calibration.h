// -ts auto: what the engine measures of each device at load, and the ratios it chooses from that.
//
// The engine loads with the starting ratios (threads, or -ts), runs a few decode steps (one token,
// candidates returned, as generation runs them) and reads each device's own compute time from its
// stats (a worker reports its own with every step, so the link does not count as compute). Ratios
// proportional to the speeds (balance.h) then become the split: re-planned and reloaded through the
// device-loss machinery when they differ enough from the starting ones.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace weft::runtime {

struct DeviceMeasure {
  std::string name;
  int threads = 0;
  double share = 0;           // of the split measured (normalised ratio)
  uint64_t decode_bytes = 0;  // weight bytes one decoded token reads on it, in that split
  double compute_ms = 0;      // median per step, collectives excluded
  // Median per step of the coordinator's wall time for the step beyond the device's own step time:
  // for a worker, the link's round trip (and the step's encoding); for a local device, a hand-off.
  double link_ms = 0;
  double speed = 0;  // bytes per second (decode_bytes / compute), see balance.h
};

struct Calibration {
  int steps = 0;  // timed steps; 0: no calibration ran
  std::vector<DeviceMeasure> devices;
  std::vector<double> ratios;  // chosen, one per device
  bool replanned = false;      // the split changed to them (false: close enough to the one measured)
};

// "0.667,0.333": ratios as -ts takes them.
std::string ratios_flag(const std::vector<double>& ratios);

}  // namespace weft::runtime
