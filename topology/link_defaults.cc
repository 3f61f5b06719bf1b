#include "topology/link_defaults.h"

namespace kolo {

namespace {
constexpr uint16_t kMellanox = 0x15b3;
constexpr uint16_t kAmazon = 0x1d0f;
constexpr uint16_t kIntel = 0x8086;

bool Contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}
}  // namespace

int NvlinkGeneration(uint16_t vendor_id, uint16_t device_id) {
  if (vendor_id != kPciVendorNvidia) return 0;
  switch (device_id >> 8) {
    case 0x15: return 1;
    case 0x1d: return 2;
    case 0x20: return 3;
    case 0x23: return 4;
    case 0x29: return 5;
    default: return 0;
  }
}

bool IsSxmGpu(uint16_t vendor_id, uint16_t device_id) {
  if (vendor_id != kPciVendorNvidia) return false;
  switch (device_id) {
    case 0x15f9: case 0x1db1: case 0x1db5: case 0x1db8: case 0x20b0: case 0x20b2:
    case 0x2330: case 0x2335: case 0x2901:
      return true;
    default:
      return false;
  }
}

double NvlinkRawGbpsPerLink(int generation) {
  switch (generation) {
    case 1: return 20.0;
    case 5: return 50.0;
    default: return 25.0;
  }
}

double NvlinkAchievableGbpsPerLink(int generation) {
  switch (generation) {
    case 1: return 18.0;
    case 4: return 20.6;
    case 5: return 40.0;
    default: return 20.0;
  }
}

double InterconnectGbps(std::string_view cpu_vendor, std::string_view cpu_model) {
  if (Contains(cpu_vendor, "Intel") || Contains(cpu_model, "Intel")) return 10.0;
  if (Contains(cpu_vendor, "AMD") || Contains(cpu_model, "AMD")) return 16.0;
  if (Contains(cpu_vendor, "IBM") || Contains(cpu_model, "POWER")) return 32.0;
  return 6.0;
}

double NicSpeedFromPciIds(uint16_t vendor_id, uint16_t device_id) {
  if (vendor_id == kMellanox) {
    switch (device_id) {
      case 0x1013: return 100;
      case 0x1015: return 25;
      case 0x1017: return 100;
      case 0x1019: return 100;
      case 0x101b: return 200;
      case 0x101d: return 100;
      case 0x101f: return 25;
      case 0x1021: return 400;
      case 0xa2d6: return 100;
      default: return 0;
    }
  }
  if (vendor_id == kAmazon) {
    switch (device_id) {
      case 0xefa0: case 0xefa1: return 100;
      case 0xec20: return 25;
      default: return 0;
    }
  }
  if (vendor_id == kIntel) {
    switch (device_id) {
      case 0x1592: case 0x1593: return 100;
      case 0x1572: return 10;
      case 0x158b: return 25;
      case 0x1521: return 1;
      default: return 0;
    }
  }
  return 0;
}

double NicAlphaUs(NicKind kind) {
  switch (kind) {
    case NicKind::kInfiniBand:
    case NicKind::kRoCE: return 2.0;
    case NicKind::kEfa: return 15.0;
    default: return 20.0;
  }
}

}  // namespace kolo
