// Tier 2 of every all-reduce algorithm in the registry: the cases of the thread-world suite
// (tests/unit/algorithm_check.h: every dtype x op x count, 2^20 included, in and out of place,
// plus random float32 sums that must be bitwise equal on every rank) run over an
// MpiCommunicator under mpirun. It links the core libraries directly (no runtime, no C API): the
// algorithms alone over real MPI point-to-point.
//
// Its own main: MPI_Init_thread(MPI_THREAD_MULTIPLE); rank 0 prints gtest's output, other ranks
// print their failures on stderr; at the end of each test a failure flag is all-reduced, so a
// failure on any rank fails the test on every rank, and the exit status is the same everywhere.
// There is no node context under MPI here, so node-aware algorithms decline (and are skipped).
//
// With --transport=ucx the same suite runs over a UcxCommunicator (collectives/ucx/): MPI then
// only exchanges the UCX worker addresses (and the exit status); the cases, their failure flags
// and the teardown go over UCX. No node context there: the node-aware algorithms decline. What
// the transport sees is bytes, so over UCX the cases take one dtype of each element size (1, 2,
// 4 and 8 bytes) with Sum, every count and both placements: the dtype x op matrix is the
// reduction kernels', which the MPI run covers, and the whole matrix took 29 s over UCX.
// KOLO_ALGO_TEST_CASES=bytes selects the same cases over MPI: the sanitizer stage runs them so
// (scripts/sanitize.sh), where the kernels' matrix runs in the unit tests' thread worlds and the
// whole one took 46 s under ASan.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "collectives/host/ring_allreduce.h"
#include "collectives/host/shm_allreduce.h"
#include "collectives/mpi/mpi_communicator.h"
#include "collectives/mpi/mpi_node.h"
#include "collectives/select/registry.h"
#include "kolo/config.h"
#include "unit/algorithm_check.h"
#include "unit/list_check.h"
#if KOLO_WITH_UCX
#include "collectives/ucx/ucx_communicator.h"
#include "mpi/gtest_mpi.h"
#include "mpi/mpi_bytes_allgather.h"
#endif

namespace kolo::testing {
namespace {

Communicator* g_comm = nullptr;
bool g_transport_cases = false;  // --transport=ucx: the cases that differ in bytes (see above)

std::vector<DataType> CaseDtypes() {
  if (g_transport_cases) {
    return {DataType::kInt8, DataType::kFloat16, DataType::kFloat32, DataType::kFloat64};
  }
  return AllAlgorithmDtypes();
}

std::vector<ReduceOp> CaseOps() {
  if (g_transport_cases) return {ReduceOp::kSum};
  return KernelOps();
}

// Reports this rank's failures and fails the test on every rank if any rank failed.
void FailEverywhereIfAnyFailed(const std::vector<std::string>& failures) {
  const int rank = g_comm->Rank();
  for (const std::string& f : failures) {
    if (rank != 0) std::fprintf(stderr, "[rank %d] %s\n", rank, f.c_str());
    ADD_FAILURE() << "rank " << rank << ": " << f;
  }
  // Over the communicator under test: every rank clears its own bit if it failed, and the AND
  // over all ranks names the failed ones.
  const bool mine = !failures.empty();
  std::vector<uint64_t> ok((g_comm->Size() + 63) / 64, ~uint64_t{0});
  if (mine) ok[rank / 64] &= ~(uint64_t{1} << (rank % 64));
  Status s = g_comm->AndBits(ok.data(), ok.size());
  if (!s.ok()) ADD_FAILURE() << "rank " << rank << ": failure flags: " << s.ToString();
  std::string ranks;
  for (int r = 0; r < g_comm->Size(); ++r) {
    if (!(ok[r / 64] >> (r % 64) & 1)) ranks += (ranks.empty() ? "" : ",") + std::to_string(r);
  }
  if (!ranks.empty() && !mine) ADD_FAILURE() << "failed on rank(s) " << ranks << " (their stderr)";
}

std::vector<std::string> AlgorithmNames() {
  std::vector<std::string> names;
  for (const auto& a : MakeAllreduceAlgorithms()) names.emplace_back(a->Name());
  return names;
}

class AlgorithmMpiTest : public ::testing::TestWithParam<std::string> {};

TEST_P(AlgorithmMpiTest, EveryDtypeOpCountMatchesReference) {
  auto table = MakeAllreduceAlgorithms();
  AllreduceAlgorithm* algo = nullptr;
  for (auto& a : table) {
    if (a->Name() == GetParam()) algo = a.get();
  }
  ASSERT_NE(algo, nullptr);
  Communicator& comm = *g_comm;
  std::vector<std::string> failures;
  size_t ran = 0;
  std::string declined_why;
  int index = 0;
  for (DataType t : CaseDtypes()) {
    for (ReduceOp op : CaseOps()) {
      for (size_t count : AlgorithmCounts(comm.Size(), /*with_large=*/true)) {
        CaseResult r = CheckAllreduceCase(comm, *algo, t, op, count, (index++ % 2) == 0);
        if (r.ran) ++ran;
        if (!r.ran) declined_why = r.declined_why;
        if (!r.failure.empty() && failures.size() < 20) failures.push_back(r.failure);
      }
    }
  }
  for (size_t count : {size_t{1}, size_t{1000}, size_t{65537}, size_t{1} << 20}) {
    std::string f = CheckRandomFloat32Sum(comm, *algo, count);
    if (!f.empty()) failures.push_back(f);
  }
  if (ran == 0) {
    // Declined everywhere (Supports() is deterministic from shared facts, e.g. hierarchical on
    // one host): it must say why, and auto selection must still find another algorithm.
    SelectionInput in = DescribeCommunicator(comm);
    in.count = 1024;
    in.bytes = 4096;
    if (declined_why.empty()) failures.push_back(GetParam() + " declined without a reason");
    if (comm.Rank() == 0) std::printf("%s declines here: %s\n", GetParam().c_str(), declined_why.c_str());
    auto picked = AllreduceSelector().Select(in);
    if (!picked.ok()) failures.push_back("auto selection failed: " + picked.status().ToString());
  }
  FailEverywhereIfAnyFailed(failures);
}

INSTANTIATE_TEST_SUITE_P(All, AlgorithmMpiTest, ::testing::ValuesIn(AlgorithmNames()),
                         [](const auto& info) { return info.param; });

// The ring's segment pipeline (Communicator::Start overlapping the next segment's transfer
// with this one's reduction) on many small segments, over real MPI requests.
TEST(RingSegmentsMpiTest, ManySegmentsMatchReference) {
  Communicator& comm = *g_comm;
  std::vector<std::string> failures;
  for (size_t segment_bytes : {size_t{1}, size_t{24}, size_t{4096}}) {
    RingAllreduce ring;
    ring.set_segment_bytes_for_testing(segment_bytes);
    int index = 0;
    for (DataType t : {DataType::kInt8, DataType::kFloat16, DataType::kFloat64}) {
      for (size_t count : AlgorithmCounts(comm.Size(), /*with_large=*/segment_bytes >= 4096)) {
        if (segment_bytes < 8 && count > 1023) continue;
        CaseResult r = CheckAllreduceCase(comm, ring, t, ReduceOp::kSum, count, index++ % 2 == 0);
        if (!r.failure.empty()) failures.push_back(r.failure);
      }
    }
    std::string f = CheckRandomFloat32Sum(comm, ring, 4097);
    if (!f.empty()) failures.push_back(f + " segment_bytes=" + std::to_string(segment_bytes));
  }
  FailEverywhereIfAnyFailed(failures);
}

// shm's two kinds of stores, each forced, between processes: the table's run above gets
// whichever the handover watch picks in the machine's state of the moment (handover_watch.h),
// so either could go untested there. Plain, streamed, and every other rank streaming (each rank
// decides alone in auto). Pieces of 20008 bytes so that most counts span several, and the
// one-barrier path only up to 64 bytes, so that small counts take the pieced path too.
TEST(ShmStoresMpiTest, PlainStreamedAndMixedMatchReference) {
  Communicator& comm = *g_comm;
  std::vector<std::string> failures;
  size_t ran = 0;
  std::string declined_why;
  const char* names[] = {"plain", "streamed", "mixed"};
  for (int variant = 0; variant < 3; ++variant) {
    const bool streams = variant == 1 || (variant == 2 && comm.Rank() % 2 == 1);
    ShmAllreduce shm;
    shm.reducer().set_piece_bytes(20008);
    shm.reducer().set_small_bytes(64);
    shm.reducer().set_stream_mode(streams ? HandoverWatch::Mode::kStreamed
                                          : HandoverWatch::Mode::kPlain);
    int index = 0;
    for (DataType t :
         {DataType::kFloat32, DataType::kFloat64, DataType::kInt32, DataType::kFloat16}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMax}) {
        for (size_t count : AlgorithmCounts(comm.Size(), /*with_large=*/t == DataType::kFloat32)) {
          CaseResult r = CheckAllreduceCase(comm, shm, t, op, count, index++ % 2 == 0);
          if (r.ran) ++ran;
          if (!r.ran) declined_why = r.declined_why;
          if (!r.failure.empty())
            failures.push_back(std::string(names[variant]) + ": " + r.failure);
        }
      }
    }
    std::string f = CheckRandomFloat32Sum(comm, shm, 70001);
    if (!f.empty()) failures.push_back(std::string(names[variant]) + ": " + f);
  }
  // Declined only where the ranks are not one node (KOLO_NODE_GROUPING), and then with a reason.
  if (ran == 0 && declined_why.empty()) failures.push_back("shm declined without a reason");
  FailEverywhereIfAnyFailed(failures);
}

// shm's list all-reduce between processes (RunList: a fused response's tensors reduced in
// their own buffers as one concatenation): layouts whose tensors start and end anywhere
// against the pieces and slices, plain and streamed stores, in place and out of place, with and
// without Average's scale, each element against the reference from every rank's inputs and the
// gaps between the tensors untouched.
TEST(ShmListMpiTest, TensorsInTheirOwnBuffersMatchReference) {
  Communicator& comm = *g_comm;
  std::vector<std::string> failures;
  ShmAllreduce probe;
  const Status supported = probe.Supports(DescribeCommunicator(comm));
  if (!supported.ok()) {
    // Only where the ranks are not one node (KOLO_NODE_GROUPING), and then with a reason; the
    // same answer on every rank (one communicator description). A list handed to shm there
    // anyway is refused on every rank before anything is exchanged, and its buffer left alone.
    if (supported.message().empty()) failures.push_back("shm declined without a reason");
    std::vector<float> t(8, 1.0f);
    const Status s = probe.RunList(comm, {AllreducePart{t.data(), t.data(), t.size()}},
                                   DataType::kFloat32, ReduceOp::kSum, 1.0);
    if (s.code() != StatusCode::kFailedPrecondition) {
      failures.push_back("shm's list across nodes: " + s.ToString());
    }
    if (t != std::vector<float>(8, 1.0f)) failures.push_back("shm's refused list wrote");
    FailEverywhereIfAnyFailed(failures);
    return;
  }
  const std::vector<std::vector<size_t>> layouts = {
      {5}, {0, 3, 0, 7}, {4099, 0, 2, 9000, 1}, {1, 12000, 12000, 3}, {70001, 64, 0, 300000}};
  for (bool streams : {false, true}) {
    ShmAllreduce shm;
    shm.reducer().set_piece_bytes(20008);
    shm.reducer().set_small_bytes(64);
    shm.reducer().set_stream_mode(streams ? HandoverWatch::Mode::kStreamed
                                          : HandoverWatch::Mode::kPlain);
    for (const std::vector<size_t>& counts : layouts) {
      for (bool in_place : {false, true}) {
        // Every check on every rank, whatever failed before: each is one collective call.
        for (const std::string& f :
             {CheckList<float>(comm, shm, counts, ReduceOp::kSum, 1.0 / comm.Size(), in_place),
              CheckList<double>(comm, shm, counts, ReduceOp::kMax, 1.0, in_place),
              CheckList<int32_t>(comm, shm, counts, ReduceOp::kSum, 1.0, in_place)}) {
          if (!f.empty()) failures.push_back((streams ? "streamed: " : "plain: ") + f);
        }
      }
    }
  }
  FailEverywhereIfAnyFailed(failures);
}

}  // namespace
}  // namespace kolo::testing

int main(int argc, char** argv) {
  int rank = 0, size = 1;
  kolo::testing::StartGtestUnderMpi(&argc, &argv, &rank, &size);
  bool ucx = false;
  for (int i = 1; i < argc; ++i) ucx = ucx || std::string(argv[i]) == "--transport=ucx";
  const char* cases = std::getenv("KOLO_ALGO_TEST_CASES");
  kolo::testing::g_transport_cases = cases != nullptr && std::string(cases) == "bytes";
  int failed = 0;
  if (ucx) {
#if KOLO_WITH_UCX
    auto comm = kolo::UcxCommunicator::Create(rank, size, kolo::testing::MpiAllgatherBytes);
    if (!comm.ok()) {
      std::fprintf(stderr, "UCX communicator: %s\n", comm.status().ToString().c_str());
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    kolo::testing::g_comm = comm->get();
    kolo::testing::g_transport_cases = true;
    failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
    kolo::testing::g_comm = nullptr;
#else
    if (rank == 0) std::fprintf(stderr, "--transport=ucx: built without UCX\n");
    failed = 1;
#endif
  } else {
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    auto comm = std::make_unique<kolo::MpiCommunicator>(dup, size_t{16} << 20);
    // Nodes as kolo_init makes them (hosts, or KOLO_NODE_GROUPING), so the shared-memory and
    // hierarchical algorithms run here too.
    const char* grouping = std::getenv("KOLO_NODE_GROUPING");
    auto node = kolo::MakeMpiNodeContext(dup, grouping ? grouping : "", size_t{16} << 20);
    if (!node.ok()) {
      std::fprintf(stderr, "node context: %s\n", node.status().ToString().c_str());
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    comm->set_node(*node);
    kolo::testing::g_comm = comm.get();
    failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
    kolo::testing::g_comm = nullptr;
  }
  return kolo::testing::EndGtestUnderMpi(failed);
}
