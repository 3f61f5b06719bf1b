#include "collectives/agree.h"

#include <cstdint>

namespace kolo {
namespace {

uint64_t Fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace

Status AgreeOnString(const GatherAll& gather_all, const char* what, const std::string& value) {
  std::vector<std::string> hashes;
  KOLO_RETURN_IF_ERROR(gather_all(std::to_string(Fnv1a(value)), &hashes));
  bool same = true;
  for (const std::string& h : hashes) same = same && h == hashes[0];
  if (same) return Status::OK();
  std::vector<std::string> all;
  KOLO_RETURN_IF_ERROR(gather_all(value, &all));
  for (size_t r = 1; r < all.size(); ++r) {
    if (all[r] != all[0]) {
      return InvalidArgumentError(std::string(what) +
                                  " must be the same on every rank: rank 0 has '" + all[0] +
                                  "', rank " + std::to_string(r) + " has '" + all[r] + "'");
    }
  }
  return Status::OK();
}

}  // namespace kolo
