// Test helpers for topology/: paths of the hwloc fixtures (tests/fixtures/topologies, shipped)
// and of real machines' exports (KOLO_TOPOLOGY_EXPORTS_DIR, not shipped), each loaded once per
// test binary, and a GPU x GPU LinkClass table checker.
#ifndef KOLO_TESTS_UNIT_TOPOLOGY_FIXTURES_H_
#define KOLO_TESTS_UNIT_TOPOLOGY_FIXTURES_H_

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "topology/hwloc_topology.h"
#include "topology/topology.h"

namespace kolo {
namespace testing_topology {

inline std::string FixturePath(const std::string& name) {
  return std::string(KOLO_FIXTURE_DIR) + "/" + name;
}

inline std::string SharedPath(const std::string& name) {
  return std::string(KOLO_TOPOLOGY_EXPORTS_DIR) + "/" + name;
}

// The synthetic and captured fixtures the project ships (tests/fixtures/topologies/README.md).
inline const std::vector<std::string>& ShippedFixtures() {
  static const std::vector<std::string> names = {"h100-nvswitch-8gpu.xml",  "pcie-gen4-2s-4gpu.xml",
                                                 "nvlink-pairs-8gpu.xml",   "cpu-2s.xml",
                                                 "missing-link-speeds.xml", "this-machine.xml"};
  return names;
}

// LoadTopologyXml(path), parsed once: hwloc's XML import is the slow part of these tests.
inline const StatusOr<Topology>& LoadCached(const std::string& path) {
  static auto* cache = new std::map<std::string, std::unique_ptr<StatusOr<Topology>>>();
  auto it = cache->find(path);
  if (it == cache->end()) {
    it = cache->emplace(path, std::make_unique<StatusOr<Topology>>(LoadTopologyXml(path))).first;
  }
  return *it->second;
}

inline const StatusOr<Topology>& Fixture(const std::string& name) {
  return LoadCached(FixturePath(name));
}

// `rows[i]` lists LinkClassName(GpuLink(i, j)) for every j, separated by blanks.
inline void ExpectGpuLinkTable(const Topology& t, const std::vector<std::string>& rows) {
  ASSERT_EQ(t.gpus.size(), rows.size());
  const int n = static_cast<int>(rows.size());
  for (int i = 0; i < n; ++i) {
    std::istringstream in(rows[i]);
    std::vector<std::string> cells;
    for (std::string c; in >> c;) cells.push_back(c);
    ASSERT_EQ(static_cast<int>(cells.size()), n) << "row " << i << ": " << rows[i];
    for (int j = 0; j < n; ++j) {
      EXPECT_EQ(LinkClassName(t.GpuLink(i, j)), cells[j]) << "GPU " << i << " -> GPU " << j;
      EXPECT_EQ(t.GpuLink(i, j), t.GpuLink(j, i)) << "asymmetric: GPU " << i << ", GPU " << j;
    }
  }
}

// pci_link_speed values the fixtures use (README), GB/s.
inline constexpr double kGen3x8 = 7.876923;
inline constexpr double kGen4x16 = 31.507692;
inline constexpr double kGen5x16 = 63.015385;

// The GPUs' PCI bus ids, in the topology's order.
inline std::vector<std::string> GpuBusIds(const Topology& t) {
  std::vector<std::string> out;
  for (const Gpu& g : t.gpus) out.push_back(g.pci.bus_id);
  return out;
}

}  // namespace testing_topology
}  // namespace kolo

#endif  // KOLO_TESTS_UNIT_TOPOLOGY_FIXTURES_H_
