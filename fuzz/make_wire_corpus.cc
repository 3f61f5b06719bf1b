// Writes the seed corpus of kolo-wire-fuzz: valid RequestLists and ResponseLists, encoded by
// runtime/wire, one file each, covering every op, response type and optional field (a field
// added to messages.fbs belongs in a seed here too). The files in fuzz/corpus/wire/ were made
// by it:
//   kolo-wire-corpus fuzz/corpus/wire          write the seeds
//   kolo-wire-corpus --check fuzz/corpus/wire  fail unless every seed decodes (the script runs
//                                              this, so a change of the wire format that makes the
//                                              committed seeds stale is noticed)
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "runtime/wire/wire.h"

namespace kolo {
namespace {

Request MakeRequest(int rank, OpType op, std::string name, DataType dtype,
                    std::vector<int64_t> shape) {
  Request r;
  r.rank = rank;
  r.op = op;
  r.name = std::move(name);
  r.dtype = dtype;
  r.shape = std::move(shape);
  return r;
}

std::vector<std::pair<std::string, std::string>> Seeds() {
  std::vector<std::pair<std::string, std::string>> seeds;

  seeds.emplace_back("request_empty", EncodeRequestList(RequestList{}));
  RequestList shutdown;
  shutdown.shutdown = true;
  seeds.emplace_back("request_shutdown", EncodeRequestList(shutdown));

  RequestList allreduce;
  Request a = MakeRequest(1, OpType::kAllreduce, "grad/fc1.weight", DataType::kFloat32, {128, 64});
  a.reduce_op = ReduceOp::kAverage;
  a.prescale = 0.5;
  a.postscale = 2.0;
  Request b = MakeRequest(1, OpType::kAllreduce, "grad/fc1.bias", DataType::kFloat16, {64});
  b.device = 0;
  allreduce.requests = {a, b};
  seeds.emplace_back("request_allreduce", EncodeRequestList(allreduce));

  RequestList grouped = allreduce;  // kolo_grouped_allreduce: both members carry the group
  for (Request& member : grouped.requests) {
    member.group = "grad/fc1.weight";
    member.group_size = 2;
  }
  seeds.emplace_back("request_grouped", EncodeRequestList(grouped));

  RequestList every_op;
  every_op.requests.push_back(MakeRequest(2, OpType::kAllgather, "ag", DataType::kInt64, {3, 5}));
  Request bcast = MakeRequest(2, OpType::kBroadcast, "params/w", DataType::kBFloat16, {7});
  bcast.root = 1;
  every_op.requests.push_back(bcast);
  Request rs = MakeRequest(2, OpType::kReducescatter, "rs", DataType::kFloat64, {8, 2});
  rs.reduce_op = ReduceOp::kMax;
  every_op.requests.push_back(rs);
  Request a2a = MakeRequest(2, OpType::kAlltoall, "a2a", DataType::kUInt8, {6, 4});
  a2a.splits = {1, 2, 3};
  every_op.requests.push_back(a2a);
  every_op.requests.push_back(
      MakeRequest(2, OpType::kBarrier, "barrier.0", DataType::kFloat32, {}));
  every_op.requests.push_back(MakeRequest(2, OpType::kJoin, "join.0", DataType::kFloat32, {}));
  seeds.emplace_back("request_every_op", EncodeRequestList(every_op));

  RequestList refused;
  Request r = MakeRequest(0, OpType::kAllreduce, "late", DataType::kBool, {0});
  r.refused = kRefusedJoined;
  refused.requests = {r};
  seeds.emplace_back("request_refused", EncodeRequestList(refused));

  seeds.emplace_back("response_empty", EncodeResponseList(ResponseList{}));
  ResponseList fused;
  Response f;
  f.type = ResponseType::kAllreduce;
  f.names = {"grad/a", "grad/b", "grad/c"};
  f.counts = {8192, 64, 1};
  f.reduce_op = ReduceOp::kAverage;
  f.prescale = 0.25;
  f.device = 0;
  fused.responses = {f};
  seeds.emplace_back("response_allreduce_fused", EncodeResponseList(fused));

  ResponseList tuned = fused;  // autotune: every rank switches settings in this cycle
  tuned.tuned_fusion_threshold_bytes = 64 << 20;
  tuned.tuned_cycle_time_ms = 2.5;
  seeds.emplace_back("response_autotuned", EncodeResponseList(tuned));

  ResponseList mixed;
  Response ag;
  ag.type = ResponseType::kAllgather;
  ag.names = {"ag"};
  ag.dtype = DataType::kInt32;
  ag.first_dims = {3, 0, 5};
  Response bc;
  bc.type = ResponseType::kBroadcast;
  bc.names = {"params/w"};
  bc.root = 2;
  Response rsr;
  rsr.type = ResponseType::kReducescatter;
  rsr.names = {"rs"};
  rsr.counts = {16};
  rsr.reduce_op = ReduceOp::kMin;
  Response at;
  at.type = ResponseType::kAlltoall;
  at.names = {"a2a"};
  at.splits = {1, 2, 3, 4};
  Response barrier;
  barrier.type = ResponseType::kBarrier;
  barrier.names = {"barrier.0"};
  Response join;
  join.type = ResponseType::kJoin;
  join.root = 1;
  mixed.responses = {ag, bc, rsr, at, barrier, join};
  seeds.emplace_back("response_every_type", EncodeResponseList(mixed));

  ResponseList error;
  Response e;
  e.type = ResponseType::kError;
  e.names = {"grad/fc1"};
  e.error_code = StatusCode::kInvalidArgument;
  e.error = "allreduce 'grad/fc1': shape mismatch: rank 0 [4], rank 1 [5]";
  error.responses = {e};
  seeds.emplace_back("response_error", EncodeResponseList(error));

  ResponseList stop;
  stop.shutdown = true;
  stop.shutdown_rank = 1;
  stop.fatal_error = "coordinator: rank 1 sent a malformed RequestList";
  seeds.emplace_back("response_shutdown", EncodeResponseList(stop));
  return seeds;
}

int Write(const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  for (const auto& [name, bytes] : Seeds()) {
    std::ofstream out(dir / name, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) {
      std::fprintf(stderr, "cannot write %s\n", (dir / name).c_str());
      return 1;
    }
  }
  std::printf("wrote %zu seeds to %s\n", Seeds().size(), dir.c_str());
  return 0;
}

int Check(const std::filesystem::path& dir) {
  int files = 0, bad = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(entry.path(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ++files;
    if (!DecodeRequestList(bytes).ok() && !DecodeResponseList(bytes).ok()) {
      std::fprintf(stderr, "seed %s decodes as neither a RequestList nor a ResponseList\n",
                   entry.path().c_str());
      ++bad;
    }
  }
  if (files == 0) std::fprintf(stderr, "no seeds in %s\n", dir.c_str());
  std::printf("%d seeds checked in %s, %d stale\n", files, dir.c_str(), bad);
  return (files == 0 || bad != 0) ? 1 : 0;
}

}  // namespace
}  // namespace kolo

int main(int argc, char** argv) {
  if (argc == 2) return kolo::Write(argv[1]);
  if (argc == 3 && std::string(argv[1]) == "--check") return kolo::Check(argv[2]);
  std::fprintf(stderr, "usage: %s DIR | --check DIR\n", argv[0]);
  return 2;
}
