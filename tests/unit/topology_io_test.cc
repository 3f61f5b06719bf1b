// topology/: its errors (a missing, malformed or unsupported file is a clear error naming the
// path), the JSON round trip of every shipped fixture, and DiscoverTopology on this machine
// against its capture. What each fixture loads to is in topology_test.cc.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/unit/has_text.h"
#include "tests/unit/topology_fixtures.h"
#include "topology/hwloc_topology.h"
#include "topology/topology.h"
#include "topology/topology_json.h"

namespace kolo {
namespace {

using testing_topology::Fixture;
using testing_topology::FixturePath;
using testing_topology::GpuBusIds;
using testing_topology::ShippedFixtures;

// ---- Errors ---------------------------------------------------------------------------------

// A file under the test temp dir, removed when the test ends.
class TempFile {
 public:
  TempFile(const std::string& name, const std::string& body)
      : path_(::testing::TempDir() + "kolo_topology_" + std::to_string(getpid()) + "_" + name) {
    std::ofstream(path_, std::ios::binary) << body;
  }
  ~TempFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

using kolo::testing::Has;

TEST(TopologyErrors, MissingFileIsNotFoundNamingThePath) {
  const std::string path = ::testing::TempDir() + "kolo-no-such-dir/none.xml";
  auto t = LoadTopologyXml(path);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(Has(t.status().message(), path)) << t.status().message();
}

TEST(TopologyErrors, MalformedXmlIsInvalidArgumentNamingThePath) {
  // Cut off inside the tree: hwloc's parser must refuse it.
  TempFile cut("cut.xml",
               "<?xml version=\"1.0\"?>\n<topology version=\"2.0\">\n"
               "  <object type=\"Machine\" os_index=\"0\" cpuset=\"0x1\"");
  // Garbage without any element.
  TempFile junk("junk.xml", "\x01\x02 not xml at all \xff");
  for (const TempFile* f : {&cut, &junk}) {
    auto t = LoadTopologyXml(f->path());
    ASSERT_FALSE(t.ok()) << f->path();
    EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument) << t.status().message();
    EXPECT_TRUE(Has(t.status().message(), f->path())) << t.status().message();
  }
}

TEST(TopologyErrors, WellFormedXmlThatIsNoTopologyIsInvalidArgument) {
  TempFile other("catalog.xml", "<?xml version=\"1.0\"?>\n<catalog><book id=\"1\"/></catalog>\n");
  // A <topology> element without any object: XML-valid, but not an export of a machine.
  TempFile empty("empty.xml", "<?xml version=\"1.0\"?>\n<topology version=\"2.0\">\n</topology>\n");
  for (const TempFile* f : {&other, &empty}) {
    auto t = LoadTopologyXml(f->path());
    ASSERT_FALSE(t.ok()) << f->path() << " loaded: " << t->packages.size() << " packages";
    EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument) << t.status().message();
    EXPECT_TRUE(Has(t.status().message(), f->path())) << t.status().message();
  }
}

TEST(TopologyErrors, XmlVersion3IsRefusedNamingTheFile) {
  // What hwloc 3.x writes (`<topology version="3.0">`, which hwloc 2.9 cannot load): a small
  // fixture with only the version changed.
  std::string body = ReadFile(FixturePath("cpu-2s.xml"));
  const std::string v2 = "<topology version=\"2.0\">";
  const size_t at = body.find(v2);
  ASSERT_NE(at, std::string::npos);
  body.replace(at, v2.size(), "<topology version=\"3.0\">");
  TempFile v3("v3.xml", body);
  auto t = LoadTopologyXml(v3.path());
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
  const std::string& m = t.status().message();
  EXPECT_TRUE(Has(m, v3.path())) << m;
  EXPECT_TRUE(Has(m, "2.x")) << "should say which XML versions this hwloc reads: " << m;
}

// ---- JSON -----------------------------------------------------------------------------------

TEST(TopologyJson, RoundTripsEveryFixture) {
  for (const std::string& name : ShippedFixtures()) {
    SCOPED_TRACE(name);
    const auto& t = Fixture(name);
    ASSERT_TRUE(t.ok()) << t.status().message();
    const std::string json = TopologyToJson(*t);
    auto back = TopologyFromJson(json, name);
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_EQ(TopologyToJson(*back), json);
    // Pretty-printed JSON reads back to the same value.
    auto pretty = TopologyFromJson(TopologyToJson(*t, 2), name);
    ASSERT_TRUE(pretty.ok()) << pretty.status().message();
    EXPECT_EQ(TopologyToJson(*pretty), json);
    // Spot fields.
    EXPECT_EQ(back->source, FixturePath(name));
    EXPECT_EQ(back->packages.size(), t->packages.size());
    EXPECT_EQ(back->cores, t->cores);
    EXPECT_EQ(GpuBusIds(*back), GpuBusIds(*t));
    EXPECT_EQ(back->nvlink_gbps, t->nvlink_gbps);  // doubles bit for bit
    EXPECT_EQ(back->nvlink_links, t->nvlink_links);
    EXPECT_EQ(back->nvswitch, t->nvswitch);
    EXPECT_EQ(back->notes, t->notes);
    ASSERT_EQ(back->nics.size(), t->nics.size());
    for (size_t n = 0; n < t->nics.size(); ++n) {
      EXPECT_EQ(back->nics[n].kind, t->nics[n].kind);
      EXPECT_EQ(back->nics[n].names, t->nics[n].names);
      EXPECT_EQ(back->nics[n].pci.bridges, t->nics[n].pci.bridges);
    }
    ASSERT_EQ(back->switches.size(), t->switches.size());
    for (size_t s = 0; s < t->switches.size(); ++s) {
      EXPECT_EQ(back->switches[s].gpus, t->switches[s].gpus);
      EXPECT_EQ(back->switches[s].gp_index, t->switches[s].gp_index);
    }
    // The classes derived from the JSON copy are the loaded ones.
    for (int a = 0; a < static_cast<int>(t->gpus.size()); ++a) {
      for (int b = 0; b < static_cast<int>(t->gpus.size()); ++b) {
        EXPECT_EQ(back->GpuLink(a, b), t->GpuLink(a, b));
      }
    }
  }
}

TEST(TopologyJson, EveryNicKindRoundTrips) {
  Topology t;
  t.source = "hand-made";
  for (NicKind k :
       {NicKind::kInfiniBand, NicKind::kRoCE, NicKind::kEthernet, NicKind::kEfa, NicKind::kOther}) {
    Nic n;
    n.kind = k;
    n.pci.bus_id = "0000:0" + std::to_string(static_cast<int>(k)) + ":00.0";
    n.pci.bridges = {~0ull, 7};  // gp indices are 64-bit
    n.speed_gbit = 12.5;
    t.nics.push_back(n);
  }
  auto back = TopologyFromJson(TopologyToJson(t), "hand-made");
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_EQ(back->nics.size(), t.nics.size());
  for (size_t i = 0; i < t.nics.size(); ++i) {
    EXPECT_EQ(back->nics[i].kind, t.nics[i].kind) << NicKindName(t.nics[i].kind);
    EXPECT_EQ(back->nics[i].pci.bridges, t.nics[i].pci.bridges);
  }
}

TEST(TopologyJson, MalformedIsInvalidArgumentNamingTheSource) {
  const auto& t = Fixture("pcie-gen4-2s-4gpu.xml");
  ASSERT_TRUE(t.ok()) << t.status().message();
  const std::string good = TopologyToJson(*t);
  std::string no_gpus = good;
  const size_t at = no_gpus.find("\"gpus\":");
  ASSERT_NE(at, std::string::npos);
  no_gpus.replace(at, 7, "\"gpux\":");
  std::string bad_type = good;
  const size_t cores = bad_type.find("\"cores\":8");
  ASSERT_NE(cores, std::string::npos) << good.substr(0, 200);
  bad_type.replace(cores, 10, "\"cores\":\"8\"");
  const std::vector<std::string> inputs = {"",
                                           "{",
                                           "[1, 2]",
                                           "null",
                                           "{\"source\": 3}",
                                           no_gpus,
                                           bad_type,
                                           good.substr(0, good.size() / 2)};
  for (const std::string& in : inputs) {
    auto r = TopologyFromJson(in, "node 3's topology");
    ASSERT_FALSE(r.ok()) << in.substr(0, 80);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << in.substr(0, 80);
    EXPECT_TRUE(Has(r.status().message(), "node 3's topology")) << r.status().message();
  }
}

// ---- This machine ---------------------------------------------------------------------------

TEST(TopologyDiscover, ThisMachineLoadsAndMatchesItsCapture) {
  auto live = DiscoverTopology();
  ASSERT_TRUE(live.ok()) << live.status().message();
  EXPECT_TRUE(Has(live->source, "(this machine)")) << live->source;
  ASSERT_GE(live->packages.size(), 1u);
  int cores = 0, pus = 0;
  for (const Package& p : live->packages) {
    cores += p.cores;
    pus += p.pus;
  }
  EXPECT_EQ(cores, live->cores);
  EXPECT_EQ(pus, live->pus);
  EXPECT_GE(live->pus, live->cores);
  EXPECT_GE(live->cores, static_cast<int>(live->packages.size()));
  EXPECT_TRUE(std::is_sorted(live->gpus.begin(), live->gpus.end(), [](const Gpu& a, const Gpu& b) {
    return a.pci.bus_id < b.pci.bus_id;
  }));
  // The live topology goes through JSON like every rank's does.
  auto back = TopologyFromJson(TopologyToJson(*live), "this machine");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(TopologyToJson(*back), TopologyToJson(*live));

  // this-machine.xml is a capture of a build VM (hostname "vm"). On that VM the stable facts
  // must agree: packages, cores and GPUs. PUs are not compared (a VM may be given a different
  // vCPU count or SMT state between boots), nor NICs (sysfs speeds and virtual devices vary).
  // Another machine, including another VM under the same name on other hardware (told apart
  // by its CPU), is not the one captured: only the checks above.
  const auto& capture = Fixture("this-machine.xml");
  ASSERT_TRUE(capture.ok()) << capture.status().message();
  const std::string& live_cpu = live->packages[0].cpu_model;
  const std::string& captured_cpu = capture->packages[0].cpu_model;
  if (live->hostname != capture->hostname || live_cpu != captured_cpu) {
    std::printf(
        "[ note     ] this is '%s' (%s), the capture is of '%s' (%s): counts not "
        "compared\n",
        live->hostname.c_str(), live_cpu.c_str(), capture->hostname.c_str(), captured_cpu.c_str());
    return;
  }
  EXPECT_EQ(live->packages.size(), capture->packages.size());
  EXPECT_EQ(live->cores, capture->cores);
  EXPECT_EQ(live->gpus.size(), capture->gpus.size());
  EXPECT_EQ(live->packages[0].cpu_vendor, capture->packages[0].cpu_vendor);
}

}  // namespace
}  // namespace kolo
