// Inputs that used to load silently wrong or read out of range (found by review): XML comments
// in the tree, directories, NCCL-format files, damaged NVLinkBandwidth entries, SXM GPUs in an
// export without NVLink, inconsistent JSON from a peer; and the placement of unbound GPU ranks.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "collectives/select/topology_cost.h"
#include "tests/unit/has_text.h"
#include "tests/unit/topology_fixtures.h"
#include "topology/hwloc_topology.h"
#include "topology/link_model.h"
#include "topology/topology_json.h"

namespace kolo {
namespace {

using testing_topology::Fixture;
using testing_topology::FixturePath;

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class Scratch {
 public:
  Scratch(const std::string& name, const std::string& body)
      : path_(::testing::TempDir() + "kolo_bad_" + std::to_string(getpid()) + "_" + name) {
    std::ofstream(path_, std::ios::binary) << body;
  }
  ~Scratch() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

using kolo::testing::Has;

bool AnyNote(const Topology& t, const std::string& part) {
  for (const std::string& n : t.notes) {
    if (Has(n, part)) return true;
  }
  return false;
}

// hwloc 2.9 drops every object after a comment in the tree and reports success: one GPU of the
// H100 fixture would vanish. Refused, naming the file.
TEST(TopologyBadInput, CommentsInsideTheTreeAreRefused) {
  std::string body = ReadText(FixturePath("h100-nvswitch-8gpu.xml"));
  const size_t at = body.find("<object type=\"PCIDev\"");
  ASSERT_NE(at, std::string::npos);
  body.insert(at, "<!-- a note -->\n");
  Scratch f("comment.xml", body);
  auto t = LoadTopologyXml(f.path());
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Has(t.status().message(), f.path())) << t.status().message();
  EXPECT_TRUE(Has(t.status().message(), "comment")) << t.status().message();
}

TEST(TopologyBadInput, DirectoryAndNcclFormatSayWhatTheyAre) {
  auto dir = LoadTopologyXml(::testing::TempDir());
  ASSERT_FALSE(dir.ok());
  EXPECT_TRUE(Has(dir.status().message(), "is a directory")) << dir.status().message();
  Scratch nccl("nccl.xml", "<system version=\"1\">\n  <cpu numaid=\"0\"/>\n</system>\n");
  auto t = LoadTopologyXml(nccl.path());
  ASSERT_FALSE(t.ok());
  EXPECT_TRUE(Has(t.status().message(), "NCCL topology file")) << t.status().message();
  EXPECT_TRUE(Has(t.status().message(), nccl.path())) << t.status().message();
}

// GPU0's link to NVSwitch 0 damaged to 1 MB/s (same text length, so hwloc still reads the
// matrix): below half a link, so ignored and said; GPU0 then reaches the fabric with 5+4+4 =
// 13 links (325 GB/s) and every pair with it gets min(325, 450) = 325 GB/s = 13 links.
TEST(TopologyBadInput, ImplausibleNvlinkEntriesAreIgnoredAndSaid) {
  std::string body = ReadText(FixturePath("h100-nvswitch-8gpu.xml"));
  const std::string row = "<u64values length=\"30\">0 0 0 0 0 0 0 0 125000 125000 </u64values>";
  const size_t at = body.find(row);
  ASSERT_NE(at, std::string::npos);
  body.replace(at, row.size(),
               "<u64values length=\"30\">0 0 0 0 0 0 0 0 000001 125000 </u64values>");
  Scratch f("nvbad.xml", body);
  auto t = LoadTopologyXml(f.path());
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_TRUE(AnyNote(*t, "NVLinkBandwidth entries ignored")) << t->notes.size();
  EXPECT_DOUBLE_EQ(t->NvlinkGbps(0, 1), 325.0);
  EXPECT_EQ(t->nvlink_links[0][1], 13);
  EXPECT_DOUBLE_EQ(t->NvlinkGbps(1, 2), 450.0);
}

// The H100 fixture without its NVLinkBandwidth block: SXM5 GPUs shown as PCIe peers, said.
TEST(TopologyBadInput, SxmGpusWithoutNvlinkAreNoted) {
  std::string body = ReadText(FixturePath("h100-nvswitch-8gpu.xml"));
  const size_t from = body.find("<distances2hetero");
  const size_t to = body.find("</distances2hetero>");
  ASSERT_NE(from, std::string::npos);
  body.erase(from, to + std::string("</distances2hetero>").size() - from);
  Scratch f("nonv.xml", body);
  auto t = LoadTopologyXml(f.path());
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_TRUE(t->nvlink_gbps.empty());
  EXPECT_TRUE(AnyNote(*t, "SXM GPUs")) << (t->notes.empty() ? "" : t->notes.front());
  // A PCIe card (the A100 PCIe fixture) gets no such note.
  EXPECT_FALSE(AnyNote(*Fixture("pcie-gen4-2s-4gpu.xml"), "SXM GPUs"));
}

// A peer's JSON whose matrices or indices do not fit its GPUs is refused, not indexed.
TEST(TopologyBadInput, InconsistentJsonIsRefused) {
  const Topology& h100 = *Fixture("h100-nvswitch-8gpu.xml");
  Topology t = h100;
  t.nvlink_gbps.pop_back();
  auto a = TopologyFromJson(TopologyToJson(t), "peer");
  ASSERT_FALSE(a.ok());
  EXPECT_TRUE(Has(a.status().message(), "NVLink matri")) << a.status().message();
  t = h100;
  t.switches[0].gpus.push_back(99);
  auto b = TopologyFromJson(TopologyToJson(t), "peer");
  ASSERT_FALSE(b.ok());
  EXPECT_TRUE(Has(b.status().message(), "lists GPU 99")) << b.status().message();
  t = h100;
  t.gpus[3].pci.package = 7;
  auto c = TopologyFromJson(TopologyToJson(t), "peer");
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(Has(c.status().message(), "package")) << c.status().message();
}

// Unbound GPU ranks run next to their GPU: on the NVLink-pairs node GPUs 0-3 are on package 0,
// so 3 ranks (GPUs 0, 1, 2) share a package (shared memory, not SYS), where block placement
// would have put rank 2 on package 1.
TEST(TopologyBadInput, UnboundGpuRanksSitOnTheirGpusPackage) {
  auto m = BuildLinkModel(JobLayout::Uniform(*Fixture("nvlink-pairs-8gpu.xml"), 1, 3));
  ASSERT_TRUE(m.ok());
  for (int r = 0; r < 3; ++r) EXPECT_EQ(m->ranks[r].package, 0) << "rank " << r;
  EXPECT_EQ(m->intra_host.cls, LinkClass::kShm);
}

// Simulated nodes (KOLO_NODE_GROUPING on one machine) keep both inter-node defaults, host and
// device: their "network" is the machine's own memory.
TEST(TopologyBadInput, SimulatedNodesKeepTheInterNodeDefaults) {
  JobLayout job = JobLayout::Uniform(*Fixture("h100-nvswitch-8gpu.xml"), 2, 2);
  job.simulated_nodes = true;
  auto m = BuildLinkModel(job);
  ASSERT_TRUE(m.ok());
  const CostModel defaults;
  const CostModel cost = CostModelFromLinks(*m);
  EXPECT_DOUBLE_EQ(cost.inter.beta_us, defaults.inter.beta_us);
  EXPECT_DOUBLE_EQ(cost.device_inter.beta_us, defaults.device_inter.beta_us);
  EXPECT_NE(cost.device_intra.beta_us, defaults.device_intra.beta_us);  // NVLink is real
}

}  // namespace
}  // namespace kolo
