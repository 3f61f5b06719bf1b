// The UCX communicator (collectives/ucx/) under mpirun: its control-plane calls, point-to-point
// ordering, empty and rendezvous-sized messages, sub-communicators, and a rank SIGKILLed
// (--fault) or SIGSTOPped (--frozen) mid-collective. MPI exchanges the worker addresses and nothing
// else: each test's failure flags go over the communicator under test (AndBits), so any rank's
// failure fails the test on every rank. Every expected value is computed from the inputs every rank
// knows (Value(rank, i) below), never from what another rank sent.
#include <gtest/gtest.h>
#include <mpi.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "collectives/host/ring_allreduce.h"
#include "collectives/ucx/ucx_communicator.h"
#include "mpi/gtest_mpi.h"
#include "mpi/mpi_bytes_allgather.h"

namespace kolo::testing {
namespace {

UcxCommunicator* g_comm = nullptr;

// Rank-unique bytes: no two ranks' (or positions') values agree for long.
char Value(int rank, size_t i) { return static_cast<char>((i * 131 + rank * 17 + i / 251) & 0xff); }
std::string Bytes(int rank, size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = Value(rank, i);
  return s;
}

// Reports this rank's failures; fails the test on every rank if any rank failed.
void FailEverywhereIfAnyFailed(Communicator& comm, const std::vector<std::string>& failures) {
  const int rank = comm.Rank();
  for (const std::string& f : failures) {
    if (rank != 0) std::fprintf(stderr, "[rank %d] %s\n", rank, f.c_str());
    ADD_FAILURE() << "rank " << rank << ": " << f;
  }
  std::vector<uint64_t> ok((comm.Size() + 63) / 64, ~uint64_t{0});
  if (!failures.empty()) ok[rank / 64] &= ~(uint64_t{1} << (rank % 64));
  Status s = comm.AndBits(ok.data(), ok.size());
  ASSERT_TRUE(s.ok()) << "failure flags: " << s.ToString();
  std::string ranks;
  for (int r = 0; r < comm.Size(); ++r) {
    if (!(ok[r / 64] >> (r % 64) & 1)) ranks += (ranks.empty() ? "" : ",") + std::to_string(r);
  }
  if (!ranks.empty() && failures.empty()) ADD_FAILURE() << "failed on rank(s) " << ranks;
}

#define RECORD_IF_ERROR(failures, expr)                             \
  do {                                                              \
    Status _s = (expr);                                             \
    if (!_s.ok()) (failures).push_back(#expr ": " + _s.ToString()); \
  } while (0)

// Rank r contributes r * 1000 + r bytes (rank 0: none), gathered at every root in turn.
TEST(UcxControlTest, GatherBytesDifferentSizesFromEveryRoot) {
  UcxCommunicator& comm = *g_comm;
  std::vector<std::string> failures;
  const int n = comm.Size();
  for (int root = 0; root < n; ++root) {
    std::vector<std::string> all;
    RECORD_IF_ERROR(failures, comm.GatherBytes(Bytes(comm.Rank(), comm.Rank() * 1001), &all, root));
    if (comm.Rank() != root) continue;
    if (all.size() != static_cast<size_t>(n)) {
      failures.push_back("root " + std::to_string(root) + " got " + std::to_string(all.size()));
      continue;
    }
    for (int r = 0; r < n; ++r) {
      if (all[r] != Bytes(r, r * 1001)) {
        failures.push_back("root " + std::to_string(root) + ": rank " + std::to_string(r) +
                           "'s bytes differ (" + std::to_string(all[r].size()) + " bytes)");
      }
    }
  }
  FailEverywhereIfAnyFailed(comm, failures);
}

// Each root's string (empty, small, 1 MiB) replaces everybody else's.
TEST(UcxControlTest, BroadcastBytesFromEveryRoot) {
  UcxCommunicator& comm = *g_comm;
  std::vector<std::string> failures;
  for (size_t length : {size_t{0}, size_t{37}, size_t{1} << 20}) {
    for (int root = 0; root < comm.Size(); ++root) {
      std::string bytes = comm.Rank() == root ? Bytes(root, length) : "stale";
      RECORD_IF_ERROR(failures, comm.BroadcastBytes(&bytes, root));
      if (bytes != Bytes(root, length)) {
        failures.push_back("root " + std::to_string(root) + ", " + std::to_string(length) +
                           " bytes: got " + std::to_string(bytes.size()) + " bytes, not root's");
      }
    }
  }
  FailEverywhereIfAnyFailed(comm, failures);
}

TEST(UcxControlTest, BroadcastFromEveryRoot) {
  UcxCommunicator& comm = *g_comm;
  std::vector<std::string> failures;
  for (size_t length : {size_t{0}, size_t{1}, size_t{4097}, size_t{4} << 20}) {
    for (int root = 0; root < comm.Size(); ++root) {
      std::string buf = comm.Rank() == root ? Bytes(root, length) : std::string(length, 'x');
      RECORD_IF_ERROR(failures, comm.Broadcast(buf.data(), length, root));
      if (buf != Bytes(root, length)) {
        failures.push_back("Broadcast from " + std::to_string(root) + " of " +
                           std::to_string(length) + " bytes differs");
      }
    }
  }
  FailEverywhereIfAnyFailed(comm, failures);
}

// Word w of rank r clears bit (r + w) % 64 and bit 63 - r; the AND is known everywhere.
TEST(UcxControlTest, AndBitsMatchesReference) {
  UcxCommunicator& comm = *g_comm;
  std::vector<std::string> failures;
  for (size_t count : {size_t{1}, size_t{3}, size_t{512}}) {
    auto word = [](int r, size_t w) {
      return ~(uint64_t{1} << ((r + w) % 64)) & ~(uint64_t{1} << (63 - r % 64));
    };
    std::vector<uint64_t> words(count), want(count, ~uint64_t{0});
    for (size_t w = 0; w < count; ++w) {
      words[w] = word(comm.Rank(), w);
      for (int r = 0; r < comm.Size(); ++r) want[w] &= word(r, w);
    }
    RECORD_IF_ERROR(failures, comm.AndBits(words.data(), count));
    if (words != want) failures.push_back("AndBits of " + std::to_string(count) + " words");
  }
  FailEverywhereIfAnyFailed(comm, failures);
}

TEST(UcxControlTest, GatherWordsFromEveryRoot) {
  UcxCommunicator& comm = *g_comm;
  std::vector<std::string> failures;
  const size_t count = 5;
  for (int root = 0; root < comm.Size(); ++root) {
    std::vector<uint64_t> mine(count), all(count * comm.Size());
    for (size_t i = 0; i < count; ++i) mine[i] = comm.Rank() * 1000 + i + root;
    RECORD_IF_ERROR(failures, comm.GatherWords(mine.data(), count, all.data(), root));
    if (comm.Rank() != root) continue;
    for (int r = 0; r < comm.Size(); ++r) {
      for (size_t i = 0; i < count; ++i) {
        if (all[r * count + i] != r * 1000 + i + root) {
          failures.push_back("GatherWords at " + std::to_string(root) + ": rank " +
                             std::to_string(r) + " word " + std::to_string(i));
        }
      }
    }
  }
  FailEverywhereIfAnyFailed(comm, failures);
}

// The last rank arrives 300 ms late; nobody may leave before it arrived (one host, so the
// monotonic clocks compare).
TEST(UcxControlTest, BarrierWaitsForTheLastRank) {
  UcxCommunicator& comm = *g_comm;
  std::vector<std::string> failures;
  using Clock = std::chrono::steady_clock;
  const int late = comm.Size() - 1;
  RECORD_IF_ERROR(failures, comm.Barrier());
  if (comm.Rank() == late) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const int64_t arrived = Clock::now().time_since_epoch().count();
  RECORD_IF_ERROR(failures, comm.Barrier());
  const int64_t left = Clock::now().time_since_epoch().count();
  std::string late_arrival = std::to_string(arrived);
  RECORD_IF_ERROR(failures, comm.BroadcastBytes(&late_arrival, late));
  if (left < std::stoll(late_arrival)) {
    failures.push_back("left the barrier " + std::to_string(std::stoll(late_arrival) - left) +
                       " ns before rank " + std::to_string(late) + " arrived");
  }
  FailEverywhereIfAnyFailed(comm, failures);
}

// 40 messages of one tag to the next rank, in three batches, sizes 0..64 KiB (rendezvous
// included) with empty ones between: each must land in the receive posted in the same
// position, and an unrelated tag in between must not disturb them.
TEST(UcxP2PTest, OneTagArrivesInOrderEmptyMessagesIncluded) {
  UcxCommunicator& comm = *g_comm;
  std::vector<std::string> failures;
  const int n = comm.Size(), next = (comm.Rank() + 1) % n, prev = (comm.Rank() + n - 1) % n;
  auto size_of = [](int k) -> size_t { return k % 5 == 0 ? 0 : size_t{1} << (k % 17); };
  std::vector<std::string> out(40), in(40);
  for (int k = 0; k < 40; ++k) {
    out[k] = Bytes(comm.Rank() * 100 + k, size_of(k));
    in[k] = std::string(size_of(k), 'x');
  }
  std::string other_out = Bytes(comm.Rank() + 7, 1000), other_in(1000, 'x');
  for (int b = 0; b < 3; ++b) {
    std::vector<P2POp> ops;
    for (int k = b * 40 / 3; k < (b + 1) * 40 / 3; ++k) {
      ops.push_back(P2POp::Send(out[k].data(), out[k].size(), next, 5));
      ops.push_back(P2POp::Recv(in[k].data(), in[k].size(), prev, 5));
      if (k == 20) {
        ops.push_back(P2POp::Send(other_out.data(), other_out.size(), next, 6));
        ops.push_back(P2POp::Recv(other_in.data(), other_in.size(), prev, 6));
      }
    }
    auto batch = comm.Start(ops);
    if (!batch.ok()) {
      failures.push_back("Start: " + batch.status().ToString());
      break;
    }
    RECORD_IF_ERROR(failures, (*batch)->Wait());
  }
  for (int k = 0; k < 40; ++k) {
    if (in[k] != Bytes(prev * 100 + k, size_of(k))) {
      failures.push_back("message " + std::to_string(k) + " (" + std::to_string(size_of(k)) +
                         " bytes) is not the one sent in that position");
    }
  }
  if (other_in != Bytes(prev + 7, 1000)) failures.push_back("tag 6's message differs");
  FailEverywhereIfAnyFailed(comm, failures);
}

// 64 MiB around the ring in one message each way (rendezvous), both directions at once.
TEST(UcxP2PTest, LargeMessagesBothWays) {
  UcxCommunicator& comm = *g_comm;
  std::vector<std::string> failures;
  const int n = comm.Size(), next = (comm.Rank() + 1) % n, prev = (comm.Rank() + n - 1) % n;
  const size_t bytes = size_t{64} << 20;
  std::string out = Bytes(comm.Rank(), bytes), in(bytes, 'x');
  RECORD_IF_ERROR(failures, comm.SendRecv(out.data(), bytes, next, in.data(), bytes, prev, 9));
  const std::string want = Bytes(prev, bytes);
  if (in != want) {
    size_t i = 0;
    while (i < bytes && in[i] == want[i]) ++i;
    failures.push_back("64 MiB from rank " + std::to_string(prev) + " first differs at " +
                       std::to_string(i));
  }
  FailEverywhereIfAnyFailed(comm, failures);
}

// A receive posted for fewer bytes than sent is an error naming the peer, not silent data loss.
TEST(UcxP2PTest, SizeMismatchIsAnErrorNamingThePeer) {
  // Runs on a sub-communicator of its own, which a broken wait may leave with stale requests.
  UcxCommunicator& comm = *g_comm;
  std::vector<int> everyone(comm.Size());
  for (int r = 0; r < comm.Size(); ++r) everyone[r] = r;
  auto sub = comm.CreateSub(everyone);
  ASSERT_TRUE(sub.ok()) << sub.status().ToString();
  std::vector<std::string> failures;
  const int n = comm.Size(), next = (comm.Rank() + 1) % n, prev = (comm.Rank() + n - 1) % n;
  std::string out(100, 'a'), in(10, 'x');
  Status s = (*sub)->SendRecv(out.data(), out.size(), next, in.data(), in.size(), prev, 3);
  const std::string peer = "rank " + std::to_string(prev);
  if (s.ok() || s.message().find(peer) == std::string::npos) {
    failures.push_back("expected an error naming " + peer + ", got " + s.ToString());
  }
  FailEverywhereIfAnyFailed(comm, failures);
}

// Sub-communicators on the same worker: the even ranks and the odd ranks each run a ring
// all-reduce while the world exchanges messages with the same user tag; nothing crosses.
TEST(UcxSubTest, SubCommunicatorsDoNotSeeEachOthersMessages) {
  UcxCommunicator& comm = *g_comm;
  std::vector<std::string> failures;
  std::vector<int> even, odd;
  for (int r = 0; r < comm.Size(); ++r) (r % 2 ? odd : even).push_back(r);
  auto even_comm = comm.CreateSub(even);
  auto odd_comm = comm.CreateSub(odd);
  ASSERT_TRUE(even_comm.ok() && odd_comm.ok());
  UcxCommunicator* mine = comm.Rank() % 2 ? odd_comm->get() : even_comm->get();
  ASSERT_NE(mine, nullptr);
  ASSERT_EQ((comm.Rank() % 2 ? even_comm : odd_comm)->get(), nullptr);  // not a member
  const std::vector<int>& group = comm.Rank() % 2 ? odd : even;
  // The world's message with the ring's tag is sent first and received last.
  const int n = comm.Size(), next = (comm.Rank() + 1) % n, prev = (comm.Rank() + n - 1) % n;
  std::string world_out = Bytes(comm.Rank() + 50, 4096), world_in(4096, 'x');
  auto world_batch = comm.Start({P2POp::Send(world_out.data(), 4096, next, 0x5249),
                                 P2POp::Recv(world_in.data(), 4096, prev, 0x5249)});
  ASSERT_TRUE(world_batch.ok());
  const size_t count = 100000;
  std::vector<int32_t> data(count), want(count, 0);
  for (size_t i = 0; i < count; ++i) {
    data[i] = static_cast<int32_t>(comm.Rank() * 7 + i);
    for (int r : group) want[i] += static_cast<int32_t>(r * 7 + i);
  }
  AllreduceArgs args;
  args.send = args.recv = data.data();
  args.count = count;
  args.dtype = DataType::kInt32;
  args.op = ReduceOp::kSum;
  RECORD_IF_ERROR(failures, RingAllreduce().Run(*mine, args));
  if (data != want) failures.push_back("sub-communicator ring all-reduce differs");
  RECORD_IF_ERROR(failures, (*world_batch)->Wait());
  if (world_in != Bytes(prev + 50, 4096)) failures.push_back("world message differs");
  FailEverywhereIfAnyFailed(comm, failures);
}

// --fault: the last rank SIGKILLs itself in the middle of a ring all-reduce; every survivor's
// wait must end with an error naming it within a few seconds (the liveness check looks at the
// peers' pids, as kolo's peer watch does). Rank 0 collects the survivors' verdicts and prints one
// line for the test's pass expression.
// --frozen: the last rank SIGSTOPs itself instead: alive to the liveness check, it answers
// nothing, so the progress check (2 s here; the runtime's stall shutdown time in kolo) must end
// every survivor's wait, and rank 0's, which receives from it, must name it. Rank 0 then kills
// it so the job ends.
// The verdicts travel in files, not over UCX: after the SIGKILL, a survivor's message to rank 0
// over UCX's shared memory sometimes never arrived, even with the sender's endpoint flushed
// (ucp_ep_flush_nbx) before it exited: measured, 1 run in 25 to 40 lost the survivors'
// agreement. One likely cause, not confirmed: the victim killed halfway through writing into
// rank 0's receive FIFO, whose elements rank 0 reads in order.
bool ProcessGone(int pid) {
  if (kill(pid, 0) != 0) return errno == ESRCH;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const size_t paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] == 'Z';
}

// Where survivor `rank` of the job whose rank 0 has pid `pid0` leaves its verdict.
std::string VerdictPath(int pid0, int rank) {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/kolo_ucx_fault." + std::to_string(pid0) +
         "." + std::to_string(rank);
}

int RunFault(UcxCommunicator& comm, const std::vector<int>& pids, bool frozen) {
  const int victim = comm.Size() - 1;
  comm.set_progress_check(
      [](std::chrono::steady_clock::time_point since, const std::string& waiting_for) -> Status {
        if (std::chrono::steady_clock::now() - since < std::chrono::seconds(2)) return Status::OK();
        return DeadlineExceededError("no progress for 2 s waiting for " + waiting_for);
      });
  comm.set_liveness_check([&pids]() -> Status {
    for (size_t r = 0; r < pids.size(); ++r) {
      if (ProcessGone(pids[r])) {
        return UnavailableError("rank " + std::to_string(r) + " (pid " + std::to_string(pids[r]) +
                                ") is gone");
      }
    }
    return Status::OK();
  });
  if (Status s = comm.Barrier(); !s.ok()) return 1;
  std::vector<float> data(size_t{16} << 20, 1.0f);
  if (comm.Rank() == victim) {
    std::thread([frozen] {
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      raise(frozen ? SIGSTOP : SIGKILL);
    }).detach();
  }
  AllreduceArgs args;
  args.send = args.recv = data.data();
  args.count = data.size();
  args.dtype = DataType::kFloat32;
  args.op = ReduceOp::kSum;
  const auto start = std::chrono::steady_clock::now();
  RingAllreduce ring;
  ring.set_segment_bytes_for_testing(64 << 10);
  Status s = ring.Run(comm, args);
  for (int i = 0; i < 3 && s.ok(); ++i) s = ring.Run(comm, args);  // the victim dies during these
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string named = "rank " + std::to_string(victim);
  const bool named_it = s.message().find(named) != std::string::npos;
  const bool ok =
      !s.ok() && seconds < 10 &&
      (frozen ? s.code() == StatusCode::kDeadlineExceeded && (comm.Rank() != 0 || named_it)
              : named_it);
  std::fprintf(stderr, "[rank %d] after %.2f s: %s\n", comm.Rank(), seconds, s.ToString().c_str());
  if (comm.Rank() != 0) {
    // Written aside, then renamed: rank 0 never reads half a verdict.
    const std::string path = VerdictPath(pids[0], comm.Rank());
    std::ofstream(path + ".part") << (ok ? "ok" : "failed");
    std::rename((path + ".part").c_str(), path.c_str());
    // Alive until rank 0 has its verdict: a survivor gone earlier would fail rank 0's wait.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
    while (!ProcessGone(pids[0]) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    _exit(ok ? 0 : 1);
  }
  // Rank 0: every other survivor's verdict, within 10 s.
  std::string failed = ok ? "" : "rank 0";
  for (int r = 1; r < victim; ++r) {
    const std::string path = VerdictPath(pids[0], r);
    std::string verdict;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!(std::ifstream(path) >> verdict) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    std::remove(path.c_str());
    if (verdict != "ok") {
      failed += (failed.empty() ? "rank " : ", rank ") + std::to_string(r) +
                (verdict.empty() ? " (no verdict)" : "");
    }
  }
  if (frozen) kill(pids[victim], SIGKILL);
  if (failed.empty()) {
    std::printf(frozen ? "UCX frozen-peer test passed: every survivor's wait ended, rank 0's "
                         "naming %s, within 10 s\n"
                       : "UCX fault test passed: every survivor's wait named %s within 10 s\n",
                named.c_str());
  } else {
    std::printf("UCX fault test FAILED on %s\n", failed.c_str());
  }
  std::fflush(stdout);
  // MPI cannot finalise with a dead rank; the survivors leave without it.
  _exit(failed.empty() ? 0 : 1);
}

}  // namespace
}  // namespace kolo::testing

int main(int argc, char** argv) {
  int rank = 0, size = 1;
  kolo::testing::StartGtestUnderMpi(&argc, &argv, &rank, &size);
  bool fault = false, frozen = false;
  for (int i = 1; i < argc; ++i) {
    fault = fault || std::string(argv[i]) == "--fault";
    frozen = frozen || std::string(argv[i]) == "--frozen";
  }
  std::vector<int> pids(size);
  const int pid = getpid();
  MPI_Allgather(&pid, 1, MPI_INT, pids.data(), 1, MPI_INT, MPI_COMM_WORLD);
  int failed = 0;
  {
    auto comm = kolo::UcxCommunicator::Create(rank, size, kolo::testing::MpiAllgatherBytes);
    if (!comm.ok()) {
      std::fprintf(stderr, "UCX communicator: %s\n", comm.status().ToString().c_str());
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (fault || frozen) return kolo::testing::RunFault(**comm, pids, frozen);
    kolo::testing::g_comm = comm->get();
    failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
    kolo::testing::g_comm = nullptr;
  }
  return kolo::testing::EndGtestUnderMpi(failed);
}
