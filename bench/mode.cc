#include "bench/mode.h"

#include <algorithm>

namespace kolo::bench {

std::vector<std::string> SplitCommas(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(',', start), text.size());
    if (end > start) out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::vector<std::string> KnownPaths(bool replay, bool on_device) {
  if (replay) {
    return on_device ? std::vector<std::string>{"kolo", "nccl-per-tensor", "nccl-fused"}
                     : std::vector<std::string>{"kolo", "mpi-per-tensor", "mpi-fused", "memcpy"};
  }
  return on_device ? std::vector<std::string>{"nccl", "kolo"}
                   : std::vector<std::string>{"mpi", "kolo"};
}

std::string ChooseMode(const ModeFlags& flags, Mode* mode) {
  *mode = Mode();
  mode->on_device = flags.device == "cuda";
  mode->replay = !flags.model.empty();
  if (mode->replay && !ModelByName(flags.model, &mode->model)) {
    return "unknown --model '" + flags.model + "'; one of " + ModelNamesText();
  }
  if (mode->on_device && flags.negotiation) {
    return "--negotiation measures the host-side negotiation only (not with --device cuda)";
  }
  if (mode->on_device && !mode->replay && !flags.paths.empty()) {
    return "--device cuda runs both sweep paths (nccl,kolo); --paths is for --model there";
  }
  const std::vector<std::string> known = KnownPaths(mode->replay, mode->on_device);
  mode->paths = flags.paths.empty() ? known : SplitCommas(flags.paths);
  if (mode->paths.empty()) return "--paths is empty";
  for (const std::string& p : mode->paths) {
    if (std::find(known.begin(), known.end(), p) == known.end() ||
        std::count(mode->paths.begin(), mode->paths.end(), p) != 1) {
      std::string list;
      for (const std::string& k : known) list += (list.empty() ? "" : ",") + k;
      return "bad --paths entry '" + p + "' (unknown or repeated; this mode's paths: " + list +
             ")";
    }
  }
  return "";
}

}  // namespace kolo::bench
