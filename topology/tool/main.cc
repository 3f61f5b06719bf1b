// kolo-topo: what kolo sees of the machine and what it would choose on it.
//
//   kolo-topo [--xml FILE] [--nodes N --ranks-per-node R] [--json]
//   mpirun -np P kolo-topo [--json]        (every node's topology, the running job's shape)
//
// Alone it describes this machine (or FILE, an hwloc XML export) and assumes a job of N
// identical nodes (default 1) with R ranks each (default: one per GPU, or one per core on a
// node without GPUs). Under mpirun the ranks exchange their nodes' topologies exactly as
// kolo_init does, and rank 0 prints. KOLO_TUNING_FILE and KOLO_NODE_GROUPING are honoured as
// the runtime honours them. Exit status 2 on bad flags or an unreadable topology.
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "collectives/mpi/mpi_node.h"
#include "collectives/mpi/mpi_topology.h"
#include "collectives/select/topology_cost.h"
#include "topology/hwloc_topology.h"
#include "topology/tool/report.h"

namespace kolo::topo_tool {
namespace {

// The link model holds a matrix per node of ranks x ranks: 256 per node (two 128-core
// packages) keeps it small; nodes cost nothing beyond two (see Describe).
constexpr int kMaxNodes = 65536;
constexpr int kMaxRanksPerNode = 256;

struct Flags {
  std::string xml;
  int nodes = 0;
  int ranks_per_node = 0;
  bool json = false;
};

bool UnderMpirun() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "SLURM_STEP_NUM_TASKS"}) {
    if (std::getenv(v) != nullptr) return true;
  }
  return false;
}

// Prints on rank 0 only (every rank fails alike) and returns exit status 2.
int Fail(const Status& s, int rank = 0) {
  if (rank == 0) std::fprintf(stderr, "kolo-topo: %s\n", s.message().c_str());
  return 2;
}

// The job from MPI: every node's topology, exchanged as kolo_init does.
StatusOr<JobLayout> MpiJob(const Flags& f) {
  const char* grouping = std::getenv("KOLO_NODE_GROUPING");
  auto node = MakeMpiNodeContext(MPI_COMM_WORLD, grouping ? grouping : "", size_t{1} << 20);
  if (!node.ok()) return node.status();
  auto job = ExchangeTopologies(MPI_COMM_WORLD, (*node)->map, f.xml, grouping != nullptr);
  if (!job.ok()) return job.status();
  if (!job->available) return InternalError("no topology: " + job->why);
  return job->layout;
}

JobShape ShapeOf(const JobLayout& job) {
  std::vector<int> per_node(job.nodes.size(), 0);
  for (int n : job.node_of_rank) ++per_node[n];
  JobShape s;
  s.nodes = static_cast<int>(job.nodes.size());
  s.ranks = job.ranks();
  s.max_local = *std::max_element(per_node.begin(), per_node.end());
  s.min_local = *std::min_element(per_node.begin(), per_node.end());
  return s;
}

// Everything after the job is known; `rank` only decides who prints.
int Describe(const Flags& f, Report& r, int rank) {
  if (f.nodes > 0 || f.ranks_per_node > 0) {
    // A given shape: that many copies of (the first) node. Two copies describe the links of any
    // number of identical nodes, so the link model is built on at most two.
    r.shape_given = true;
    const int nodes = f.nodes > 0 ? f.nodes : r.shape.nodes;
    const int per_node = f.ranks_per_node > 0 ? f.ranks_per_node : r.shape.max_local;
    r.shape = JobShape::Uniform(nodes, per_node);
    r.job = JobLayout::Uniform(r.job.nodes.front(), std::min(nodes, 2), per_node);
  }
  auto links = BuildLinkModel(r.job);
  if (!links.ok()) return Fail(links.status(), rank);
  r.links = *links;
  r.cost = CostModelFromLinks(r.links);
  if (const char* tuning = std::getenv("KOLO_TUNING_FILE")) {
    auto loaded = CostModel::Load(tuning, r.cost);
    if (!loaded.ok()) return Fail(Status(loaded.status()).AddContext("KOLO_TUNING_FILE"), rank);
    r.cost = *loaded;
  }
  const auto sizes = DecisionSizes();
  r.host = MakeDecisionTable(r.cost, r.shape, MemoryKind::kHost, sizes);
  if (r.links.gpus) r.device = MakeDecisionTable(r.cost, r.shape, MemoryKind::kCuda, sizes);
  if (rank == 0) {
    const std::string text = f.json ? JsonReport(r) : TextReport(r);
    std::fwrite(text.data(), 1, text.size(), stdout);
    if (f.json) std::fputc('\n', stdout);
  }
  return 0;
}

int Main(int argc, char** argv) {
  Flags f;
  CLI::App app{"kolo-topo: the topology kolo detects and the all-reduce algorithm it would "
               "choose per message size"};
  app.add_option("--xml", f.xml, "read an hwloc XML export (lstopo --of xml) instead of this machine");
  app.add_option("--nodes", f.nodes, "job shape for the decision table: nodes, 1 to 65536 "
                 "(default 1, or the running job's)")->check(CLI::Range(1, kMaxNodes));
  app.add_option("--ranks-per-node", f.ranks_per_node,
                 "ranks per node, 1 to 256 (default: GPUs per node, else cores; or the running "
                 "job's)")->check(CLI::Range(1, kMaxRanksPerNode));
  app.add_flag("--json", f.json, "print JSON for machines instead of text");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (f.xml.empty()) {
    if (const char* xml = std::getenv("KOLO_TOPOLOGY_XML")) f.xml = xml;
  }

  Report r;
  if (UnderMpirun()) {
    MPI_Init(nullptr, nullptr);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    auto job = MpiJob(f);
    int rc = 2;
    if (!job.ok()) {
      rc = Fail(job.status(), rank);
    } else {
      r.job = *job;
      r.shape = ShapeOf(r.job);
      rc = Describe(f, r, rank);
    }
    MPI_Finalize();
    return rc;
  }
  auto topo = LoadTopology(f.xml);
  if (!topo.ok()) return Fail(topo.status());
  const int per_node = topo->gpus.empty() ? std::max(1, std::min(topo->cores, kMaxRanksPerNode))
                                          : static_cast<int>(topo->gpus.size());
  r.shape = JobShape::Uniform(1, per_node);
  r.job = JobLayout::Uniform(*topo, 1, per_node);
  return Describe(f, r, 0);
}

}  // namespace
}  // namespace kolo::topo_tool

int main(int argc, char** argv) { return kolo::topo_tool::Main(argc, argv); }
