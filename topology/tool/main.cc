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
#include <cstdio>
#include <cstdlib>
#include <string>

#include "collectives/mpi/mpi_node.h"
#include "collectives/mpi/mpi_topology.h"
#include "collectives/topology_cost.h"
#include "topology/hwloc_topology.h"
#include "topology/tool/report.h"

namespace kolo::topo_tool {
namespace {

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

int Fail(const Status& s) {
  std::fprintf(stderr, "kolo-topo: %s\n", s.message().c_str());
  return 2;
}

// The job from MPI: every node's topology, exchanged as kolo_init does.
StatusOr<JobLayout> MpiJob(const Flags& f, int* rank) {
  MPI_Init(nullptr, nullptr);
  MPI_Comm_rank(MPI_COMM_WORLD, rank);
  const char* grouping = std::getenv("KOLO_NODE_GROUPING");
  auto node = MakeMpiNodeContext(MPI_COMM_WORLD, grouping ? grouping : "", size_t{1} << 20);
  if (!node.ok()) return node.status();
  auto job = ExchangeTopologies(MPI_COMM_WORLD, (*node)->map, f.xml, grouping != nullptr);
  if (!job.ok()) return job.status();
  if (!job->available) return InternalError("no topology: " + job->why);
  return job->layout;
}

int Main(int argc, char** argv) {
  Flags f;
  CLI::App app{"kolo-topo: the topology kolo detects and the all-reduce algorithm it would "
               "choose per message size"};
  app.add_option("--xml", f.xml, "read an hwloc XML export (lstopo --of xml) instead of this machine");
  app.add_option("--nodes", f.nodes, "job shape for the decision table: nodes (default 1, or the "
                 "running job's)")->check(CLI::Range(1, 1 << 20));
  app.add_option("--ranks-per-node", f.ranks_per_node,
                 "ranks per node (default: GPUs per node, else cores; or the running job's)")
      ->check(CLI::Range(1, 1 << 20));
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
  int rank = 0;
  const bool mpi = UnderMpirun();
  if (mpi) {
    auto job = MpiJob(f, &rank);
    if (!job.ok()) {
      const int rc = rank == 0 ? Fail(job.status()) : 2;
      MPI_Finalize();
      return rc;
    }
    r.job = *job;
    r.nodes = static_cast<int>(r.job.nodes.size());
    r.ranks_per_node = 0;
    for (int l : r.job.local_rank_of) r.ranks_per_node = std::max(r.ranks_per_node, l + 1);
  } else {
    auto topo = LoadTopology(f.xml);
    if (!topo.ok()) return Fail(topo.status());
    r.nodes = 1;
    r.ranks_per_node = topo->gpus.empty() ? std::max(1, topo->cores)
                                          : static_cast<int>(topo->gpus.size());
    r.job = JobLayout::Uniform(*topo, 1, r.ranks_per_node);
  }
  if (f.nodes > 0 || f.ranks_per_node > 0) {
    // A given shape: that many copies of (the first) node.
    r.shape_given = true;
    r.nodes = f.nodes > 0 ? f.nodes : r.nodes;
    r.ranks_per_node = f.ranks_per_node > 0 ? f.ranks_per_node : r.ranks_per_node;
    r.job = JobLayout::Uniform(r.job.nodes.front(), r.nodes, r.ranks_per_node);
  }
  auto links = BuildLinkModel(r.job);
  if (!links.ok()) return Fail(links.status());
  r.links = *links;
  r.cost = CostModelFromLinks(r.links);
  if (const char* tuning = std::getenv("KOLO_TUNING_FILE")) {
    auto loaded = CostModel::Load(tuning, r.cost);
    if (!loaded.ok()) return Fail(Status(loaded.status()).AddContext("KOLO_TUNING_FILE"));
    r.cost = *loaded;
  }
  const auto sizes = DecisionSizes();
  r.host = MakeDecisionTable(r.cost, r.nodes, r.ranks_per_node, MemoryKind::kHost, sizes);
  if (r.links.gpus) {
    r.device = MakeDecisionTable(r.cost, r.nodes, r.ranks_per_node, MemoryKind::kCuda, sizes);
  }
  if (rank == 0) {
    const std::string text = f.json ? JsonReport(r) : TextReport(r);
    std::fwrite(text.data(), 1, text.size(), stdout);
    if (f.json) std::fputc('\n', stdout);
  }
  if (mpi) MPI_Finalize();
  return 0;
}

}  // namespace
}  // namespace kolo::topo_tool

int main(int argc, char** argv) { return kolo::topo_tool::Main(argc, argv); }
