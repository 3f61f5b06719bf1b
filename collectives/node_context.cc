#include "collectives/node_context.h"

#include <algorithm>
#include <cctype>
#include <map>

namespace kolo {
namespace {

Status BadSpec(std::string_view spec, const std::string& why) {
  return InvalidArgumentError("KOLO_NODE_GROUPING='" + std::string(spec) + "': " + why);
}

// Non-negative decimal integers separated by `sep`; false on anything else.
bool ParseList(std::string_view s, char sep, std::vector<int>* out) {
  out->clear();
  size_t i = 0;
  while (i <= s.size()) {
    size_t j = s.find(sep, i);
    if (j == std::string_view::npos) j = s.size();
    std::string_view item = s.substr(i, j - i);
    if (item.empty() || item.size() > 6) return false;
    int v = 0;
    for (char c : item) {
      if (!std::isdigit(static_cast<unsigned char>(c))) return false;
      v = v * 10 + (c - '0');
    }
    out->push_back(v);
    i = j + 1;
  }
  return true;
}

NodeMap FromSizes(const std::vector<int>& sizes) {
  std::vector<int> ids;
  for (size_t n = 0; n < sizes.size(); ++n) ids.insert(ids.end(), sizes[n], static_cast<int>(n));
  return NodeMap::FromNodeIds(ids);
}

}  // namespace

int NodeMap::max_local_size() const {
  return node_sizes.empty() ? 0 : *std::max_element(node_sizes.begin(), node_sizes.end());
}

int NodeMap::min_local_size() const {
  return node_sizes.empty() ? 0 : *std::min_element(node_sizes.begin(), node_sizes.end());
}

std::string NodeMap::Describe() const {
  std::string out = std::to_string(nodes()) + (nodes() == 1 ? " node:" : " nodes:");
  for (int n = 0; n < nodes(); ++n) {
    out += n ? " |" : "";
    for (int r = 0; r < ranks(); ++r) {
      if (node_of_rank[r] == n) out += " " + std::to_string(r);
    }
  }
  return out;
}

NodeMap NodeMap::OneNode(int size) { return FromNodeIds(std::vector<int>(size, 0)); }

NodeMap NodeMap::FromNodeIds(const std::vector<int>& ids) {
  NodeMap m;
  std::map<int, int> index;  // id -> node index, by first appearance
  for (int id : ids) {
    auto [it, fresh] = index.emplace(id, static_cast<int>(index.size()));
    if (fresh) m.node_sizes.push_back(0);
    m.node_of_rank.push_back(it->second);
    m.local_rank_of.push_back(m.node_sizes[it->second]++);
  }
  return m;
}

StatusOr<NodeMap> NodeMap::Parse(std::string_view spec, int size) {
  std::vector<int> v;
  const size_t x = spec.find('x');
  if (x != std::string_view::npos) {
    std::vector<int> a, b;
    if (!ParseList(spec.substr(0, x), '\0', &a) || !ParseList(spec.substr(x + 1), '\0', &b) ||
        a[0] == 0 || b[0] == 0) {
      return BadSpec(spec, "expected NODESxRANKS with positive integers, e.g. 2x2");
    }
    if (a[0] * b[0] != size) {
      return BadSpec(spec, "covers " + std::to_string(a[0] * b[0]) + " ranks, the job has " +
                               std::to_string(size));
    }
    return FromSizes(std::vector<int>(a[0], b[0]));
  }
  if (spec.find('+') != std::string_view::npos || spec.find(',') == std::string_view::npos) {
    if (!ParseList(spec, '+', &v) || std::count(v.begin(), v.end(), 0) > 0) {
      return BadSpec(spec, "expected node sizes like 3+2, a NODESxRANKS like 2x2, or a node id "
                           "per rank like 0,0,1,1");
    }
    int total = 0;
    for (int n : v) total += n;
    if (total != size) {
      return BadSpec(spec, "covers " + std::to_string(total) + " ranks, the job has " +
                               std::to_string(size));
    }
    return FromSizes(v);
  }
  if (!ParseList(spec, ',', &v)) {
    return BadSpec(spec, "expected a non-negative node id per rank, comma-separated");
  }
  if (static_cast<int>(v.size()) != size) {
    return BadSpec(spec, "names " + std::to_string(v.size()) + " ranks, the job has " +
                             std::to_string(size));
  }
  return FromNodeIds(v);
}

}  // namespace kolo
