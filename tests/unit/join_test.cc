// join (Horovod's) through the coordinator and the whole runtime on N Runtimes in one process:
// ranks join at different points while the others keep allreducing; every result is checked
// against a reference over the still-active ranks' known inputs plus the identities.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <string>
#include <thread>

#include "runtime/negotiation/coordinator.h"
#include "runtime/operations.h"
#include "runtime/wire/wire.h"
#include "tests/harness/requests.h"
#include "unit/thread_world.h"
#include "unit/typed_data.h"

namespace kolo {
namespace {

using testing::RequestListOf;

using testing::Load;
using testing::RunRuntimes;
using testing::Store;
using testing::Tolerance;
using testing::Value;
using testing::WaitFor;

using testing::FastConfig;

Request Req(OpType op, const std::string& name, std::vector<int64_t> shape = {4}) {
  Request r;
  r.op = op;
  r.name = name;
  r.shape = std::move(shape);
  return r;
}

TEST(JoinCoordinator, JoinedRanksCountAsReadyAndTheLastJoinerIsReported) {
  Coordinator c(3);
  c.Add(RequestListOf({Req(OpType::kJoin, "__kolo_join.0")}), 1);
  EXPECT_TRUE(c.TakeReady().empty());
  c.Add(RequestListOf({Req(OpType::kAllreduce, "a"), Req(OpType::kAllgather, "g")}), 0);
  EXPECT_TRUE(c.TakeReady().empty());  // rank 2 has neither submitted nor joined
  c.Add(RequestListOf({Req(OpType::kAllreduce, "a"), Req(OpType::kAllgather, "g")}), 2);
  auto ready = c.TakeReady();
  ASSERT_EQ(ready.size(), 2u);
  EXPECT_EQ(ready[0].type, ResponseType::kAllreduce);
  EXPECT_EQ(ready[0].names, std::vector<std::string>{"a"});
  EXPECT_EQ(ready[0].counts, std::vector<int64_t>{4});
  EXPECT_EQ(ready[1].type, ResponseType::kError);
  EXPECT_EQ(ready[1].error, "allgather 'g': rank 1 has joined and cannot take part in allgather");

  // Pending names become ready when the rank they wait for joins, in submission order.
  c.Add(RequestListOf({Req(OpType::kAllreduce, "b"), Req(OpType::kBroadcast, "c")}), 0);
  c.Add(RequestListOf({Req(OpType::kJoin, "__kolo_join.0")}), 2);
  ready = c.TakeReady();
  ASSERT_EQ(ready.size(), 2u);
  EXPECT_EQ(ready[0].names, std::vector<std::string>{"b"});
  EXPECT_EQ(ready[0].type, ResponseType::kAllreduce);
  EXPECT_EQ(ready[1].error,
            "broadcast 'c': ranks 1,2 have joined and cannot take part in broadcast");
  EXPECT_EQ(c.joined(), (std::vector<int>{1, 2}));

  // Mismatches among the submitters are still reported.
  Request f = Req(OpType::kAllreduce, "m", {5});
  c.Add(RequestListOf({f}), 0);
  ready = c.TakeReady();
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].type, ResponseType::kAllreduce);

  c.Add(RequestListOf({Req(OpType::kAllreduce, "d")}), 0);
  c.Add(RequestListOf({Req(OpType::kJoin, "__kolo_join.0")}), 0);
  ready = c.TakeReady();
  ASSERT_EQ(ready.size(), 2u);
  EXPECT_EQ(ready[0].names, std::vector<std::string>{"d"});
  EXPECT_EQ(ready[1].type, ResponseType::kJoin);
  EXPECT_EQ(ready[1].root, 0);
  EXPECT_TRUE(c.joined().empty());
  EXPECT_EQ(c.pending(), 0u);

  // Back to normal: a name needs every rank again.
  c.Add(RequestListOf({Req(OpType::kAllreduce, "e")}), 0);
  c.Add(RequestListOf({Req(OpType::kAllreduce, "e")}), 1);
  EXPECT_TRUE(c.TakeReady().empty());
  // A refusal made while joined that arrives after the join completed is dropped.
  Request late = Req(OpType::kAllreduce, "late");
  late.refused = kRefusedJoined;
  c.Add(RequestListOf({late}), 2);
  EXPECT_EQ(c.pending(), 1u);
  c.Add(RequestListOf({Req(OpType::kAllreduce, "e")}), 2);
  ready = c.TakeReady();
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].type, ResponseType::kAllreduce);
}

TEST(JoinCoordinator, JoinCrossesTheWire) {
  RequestList reqs = RequestListOf({Req(OpType::kJoin, "__kolo_join.3", {0})});
  auto back = DecodeRequestList(EncodeRequestList(reqs));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->requests[0].op, OpType::kJoin);
  ResponseList resps;
  Response r;
  r.type = ResponseType::kJoin;
  r.root = 2;
  resps.responses = {r};
  auto rback = DecodeResponseList(EncodeResponseList(resps));
  ASSERT_TRUE(rback.ok()) << rback.status().ToString();
  EXPECT_EQ(rback->responses[0].type, ResponseType::kJoin);
  EXPECT_EQ(rback->responses[0].root, 2);
}

TEST(JoinCoordinator, IdentityOfEveryDtypeAndOp) {
  for (DataType t : {DataType::kUInt8, DataType::kInt8, DataType::kUInt16, DataType::kInt16,
                     DataType::kInt32, DataType::kInt64, DataType::kFloat16, DataType::kFloat32,
                     DataType::kFloat64, DataType::kBool, DataType::kBFloat16}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax,
                        ReduceOp::kProduct}) {
      std::vector<char> buf = testing::Buffer(t, 3);
      FillIdentity(buf.data(), 3, t, op);
      const double v = Load(t, buf.data(), 2);
      double want = 0;
      const bool is_float = IsFloatingPoint(t);
      if (op == ReduceOp::kProduct) want = 1;
      if (t == DataType::kBool) {
        want = op == ReduceOp::kMin || op == ReduceOp::kProduct;
      } else if (op == ReduceOp::kMin) {
        want = is_float ? INFINITY : Load(t, buf.data(), 0);  // checked against limits below
      } else if (op == ReduceOp::kMax) {
        want = is_float ? -INFINITY : Load(t, buf.data(), 0);
      }
      EXPECT_EQ(v, want) << DataTypeName(t) << " " << ReduceOpName(op);
      if (!is_float && t != DataType::kBool && (op == ReduceOp::kMin || op == ReduceOp::kMax)) {
        // The largest / lowest value: one more (less) is out of the dtype's range.
        const int bits = static_cast<int>(DataTypeSize(t)) * 8;
        const bool is_signed = t == DataType::kInt8 || t == DataType::kInt16 ||
                               t == DataType::kInt32 || t == DataType::kInt64;
        const double hi = std::ldexp(1.0, is_signed ? bits - 1 : bits) - 1;
        const double lo = is_signed ? -std::ldexp(1.0, bits - 1) : 0;
        EXPECT_EQ(v, op == ReduceOp::kMin ? hi : lo) << DataTypeName(t) << " " << ReduceOpName(op);
      }
    }
  }
}

// The reference of element i of a tensor over the ranks in `active` (the others have joined
// and contribute the identity); Average divides by the full size, as Horovod does.
double JoinReference(DataType t, ReduceOp op, const std::vector<bool>& active, size_t i,
                     size_t offset, double pre, double post) {
  const int size = static_cast<int>(active.size());
  const bool b = t == DataType::kBool;
  double acc = op == ReduceOp::kProduct ? 1
               : op == ReduceOp::kMin   ? (b ? 1 : INFINITY)
               : op == ReduceOp::kMax   ? (b ? 0 : -INFINITY)
                                        : 0;
  for (int r = 0; r < size; ++r) {
    if (!active[r]) continue;
    double v = Value(t, op, r, i + offset);
    if (!b) v *= pre;
    if (IsInteger(t)) v = std::trunc(v);
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAverage: acc = b ? (acc || v) : acc + v; break;
      case ReduceOp::kMin: acc = b ? (acc && v) : std::min(acc, v); break;
      case ReduceOp::kMax: acc = b ? (acc || v) : std::max(acc, v); break;
      case ReduceOp::kProduct: acc = b ? (acc && v) : acc * v; break;
      default: break;
    }
  }
  if (op == ReduceOp::kAverage) acc = IsInteger(t) ? std::trunc(acc / size) : acc / size;
  if (!b) acc *= post;
  if (IsInteger(t)) acc = std::trunc(acc);
  return acc;
}

struct Spec {
  DataType dtype;
  ReduceOp op;
  size_t count;
  double pre = 1, post = 1;
};

// Small tensors (fused), one above the direct threshold (its own call), 16-bit types (widened),
// scale factors that do not preserve Min's identity.
const std::vector<Spec>& Specs() {
  static const std::vector<Spec> specs = {
      {DataType::kFloat32, ReduceOp::kSum, 13},
      {DataType::kFloat32, ReduceOp::kAverage, 13},
      {DataType::kFloat16, ReduceOp::kSum, 9},
      {DataType::kFloat16, ReduceOp::kAverage, 9},
      {DataType::kInt32, ReduceOp::kAverage, 11},
      {DataType::kInt32, ReduceOp::kMin, 7},
      {DataType::kInt32, ReduceOp::kSum, 7, 2, 3},
      {DataType::kFloat32, ReduceOp::kMax, 5},
      {DataType::kFloat32, ReduceOp::kMin, 10, -2, 0.5},
      {DataType::kInt16, ReduceOp::kMax, 10, 3, 1},
      {DataType::kFloat64, ReduceOp::kProduct, 6},
      {DataType::kInt16, ReduceOp::kProduct, 5, 2, 1},  // |product| <= 4^4
      {DataType::kInt8, ReduceOp::kProduct, 5},
      {DataType::kUInt8, ReduceOp::kMin, 4},
      {DataType::kBFloat16, ReduceOp::kMax, 6},
      {DataType::kBool, ReduceOp::kSum, 8},
      {DataType::kBool, ReduceOp::kMin, 8},
      {DataType::kBool, ReduceOp::kProduct, 8},
      {DataType::kFloat32, ReduceOp::kAverage, 40000},  // > the 64 KiB direct threshold
      {DataType::kFloat16, ReduceOp::kMin, 40000},
  };
  return specs;
}

Submission Allreduce(const std::string& name, const void* in, void* out, const Spec& s) {
  Submission sub;
  sub.op = OpType::kAllreduce;
  sub.name = name;
  sub.input = in;
  sub.output = out;
  sub.dtype = s.dtype;
  sub.shape = {static_cast<int64_t>(s.count)};
  sub.reduce_op = s.op;
  sub.prescale = s.pre;
  sub.postscale = s.post;
  return sub;
}

// Submits every spec as one burst (step `step`: values shifted so steps differ), waits and
// checks the results against the reference over `active`.
void StepAndCheck(Runtime& rt, int step, const std::vector<bool>& active) {
  const int rank = rt.layout().rank;
  const auto& specs = Specs();
  std::vector<std::vector<char>> in(specs.size()), out(specs.size());
  std::vector<std::shared_ptr<Handle>> handles;
  const size_t offset = static_cast<size_t>(step) * 3;
  for (size_t k = 0; k < specs.size(); ++k) {
    const Spec& s = specs[k];
    in[k] = testing::Buffer(s.dtype, s.count);
    out[k] = testing::Buffer(s.dtype, s.count);
    for (size_t i = 0; i < s.count; ++i)
      Store(s.dtype, in[k].data(), i, Value(s.dtype, s.op, rank, i + offset));
    auto h = rt.Enqueue(Allreduce("t" + std::to_string(k), in[k].data(), out[k].data(), s));
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    handles.push_back(*h);
  }
  for (size_t k = 0; k < specs.size(); ++k) {
    const Spec& s = specs[k];
    Status st = WaitFor(*handles[k]);
    ASSERT_TRUE(st.ok()) << "rank " << rank << " step " << step << " t" << k << ": "
                         << st.ToString();
    int wrong = 0;
    for (size_t i = 0; i < s.count && wrong < 3; ++i) {
      const double want = JoinReference(s.dtype, s.op, active, i, offset, s.pre, s.post);
      const double got = Load(s.dtype, out[k].data(), i);
      if (!(std::fabs(got - want) <= Tolerance(s.dtype, want))) {
        ++wrong;
        ADD_FAILURE() << "rank " << rank << " step " << step << " " << DataTypeName(s.dtype)
                      << " " << ReduceOpName(s.op) << " t" << k << "[" << i << "]: expected "
                      << want << ", got " << got;
      }
    }
  }
}

class JoinThreadWorld : public ::testing::TestWithParam<int> {};

TEST_P(JoinThreadWorld, UnevenStepsThenJoinTwice) {
  const int size = GetParam();
  const int kSteps = 2;
  std::vector<std::array<int, 2>> last(size, {-1, -1});
  RunRuntimes(size, FastConfig(), [&](Runtime& rt) {
    const int rank = rt.layout().rank;
    for (int round = 0; round < 2; ++round) {
      // Round 0: rank r steps (r+1)*k times; round 1: the reverse, so rank 0 joins last.
      auto steps_of = [&](int r) { return (round == 0 ? r + 1 : size - r) * kSteps; };
      for (int step = 0; step < steps_of(rank); ++step) {
        std::vector<bool> active(size);
        for (int q = 0; q < size; ++q) active[q] = step < steps_of(q);
        StepAndCheck(rt, step, active);
        if (::testing::Test::HasFatalFailure()) return;
      }
      auto j = rt.Join();
      ASSERT_TRUE(j.ok()) << j.status().ToString();
      last[rank][round] = *j;
    }
    // Back to normal: every rank takes part with its data.
    StepAndCheck(rt, 0, std::vector<bool>(size, true));
  });
  for (int r = 0; r < size; ++r) {
    EXPECT_EQ(last[r][0], size - 1) << "rank " << r;
    EXPECT_EQ(last[r][1], 0) << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, JoinThreadWorld, ::testing::Values(2, 3, 4),
                         [](const auto& info) { return std::to_string(info.param) + "ranks"; });

TEST(JoinRuntime, OtherOpsFailOnTheSubmittersAndBarriersIncludeJoinedRanks) {
  const int size = 3;
  std::atomic<int> joined{0};
  std::vector<int> last(size, -1);
  RunRuntimes(size, FastConfig(), [&](Runtime& rt) {
    const int rank = rt.layout().rank;
    if (rank == 2) {
      auto j = rt.Join();
      ASSERT_TRUE(j.ok()) << j.status().ToString();
      last[rank] = *j;
      // After the join every rank's barrier counter agrees.
      Status b = rt.Barrier();
      EXPECT_TRUE(b.ok()) << b.ToString();
      return;
    }
    std::vector<float> in(6, 1.0f + rank), out(6);
    auto expect_error = [&](Submission s, const std::string& op) {
      auto h = rt.Enqueue(s);
      ASSERT_TRUE(h.ok()) << h.status().ToString();
      Status st = WaitFor(**h);
      EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
      EXPECT_EQ(st.message(),
                op + " '" + s.name + "': rank 2 has joined and cannot take part in " + op);
    };
    Submission g;
    g.op = OpType::kAllgather;
    g.name = "g";
    g.input = in.data();
    g.shape = {2, 3};
    // Submitted before rank 2 joined or after: either way it fails once rank 2 has joined.
    expect_error(g, "allgather");
    Submission b = g;
    b.op = OpType::kBroadcast;
    b.name = "b";
    b.output = out.data();
    b.root = 0;
    expect_error(b, "broadcast");
    Submission rs = g;
    rs.op = OpType::kReducescatter;
    rs.name = "rs";
    expect_error(rs, "reducescatter");
    Submission a2a = g;
    a2a.op = OpType::kAlltoall;
    a2a.name = "a2a";
    a2a.shape = {3, 2};
    expect_error(a2a, "alltoall");
    // A barrier takes the joined rank along.
    Status bs = rt.Barrier();
    EXPECT_TRUE(bs.ok()) << bs.ToString();
    // Allreduce goes on: Sum over ranks 0 and 1 only.
    Submission ar = g;
    ar.op = OpType::kAllreduce;
    ar.name = "ar";
    ar.output = out.data();
    ar.shape = {6};
    auto h = rt.Enqueue(ar);
    ASSERT_TRUE(h.ok());
    ASSERT_TRUE(WaitFor(**h).ok());
    EXPECT_EQ(out[5], 1.0f + 2.0f);
    ++joined;
    if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    auto j = rt.Join();
    ASSERT_TRUE(j.ok()) << j.status().ToString();
    last[rank] = *j;
    Status b2 = rt.Barrier();
    EXPECT_TRUE(b2.ok()) << b2.ToString();
  });
  // Rank 1 usually joins last (it sleeps first), but either of ranks 0 and 1 may; all agree.
  EXPECT_EQ(last, std::vector<int>(size, last[0]));
  EXPECT_TRUE(last[0] == 0 || last[0] == 1) << last[0];
}

TEST(JoinRuntime, SubmissionsWhileJoinedAreRefusedAndAnnounced) {
  const int size = 2;
  std::atomic<bool> refused{false};
  RunRuntimes(size, FastConfig(), [&](Runtime& rt) {
    const int rank = rt.layout().rank;
    std::vector<float> in(4, 1.0f), out(4);
    Submission s;
    s.op = OpType::kAllreduce;
    s.name = "x";
    s.input = in.data();
    s.output = out.data();
    s.shape = {4};
    if (rank == 1) {
      std::thread joiner([&] {
        auto j = rt.Join();
        EXPECT_TRUE(j.ok()) << j.status().ToString();
        if (j.ok()) {
          EXPECT_EQ(*j, 0);
        }
      });
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      auto h = rt.Enqueue(s);
      EXPECT_EQ(h.status().code(), StatusCode::kFailedPrecondition);
      EXPECT_EQ(h.status().message(),
                "allreduce 'x': rank 1 has joined; no operation can be submitted until every "
                "rank has joined");
      auto j2 = rt.Join();
      EXPECT_EQ(j2.status().code(), StatusCode::kFailedPrecondition) << j2.status().ToString();
      refused = true;
      joiner.join();
      return;
    }
    while (!refused) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::this_thread::sleep_for(std::chrono::milliseconds(30));  // the refusal is negotiated
    auto h = rt.Enqueue(s);
    ASSERT_TRUE(h.ok());
    Status st = WaitFor(**h);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(st.message(), std::string("allreduce 'x': rank 1 refused it: ") + kRefusedJoined);
    auto j = rt.Join();
    ASSERT_TRUE(j.ok()) << j.status().ToString();
    EXPECT_EQ(*j, 0);
  });
}

// A joined rank's own submission (made before it joined) fused with tensors it never
// submitted: the real entry is used where present, the identity elsewhere; prescale with Min.
TEST(JoinRuntime, MixedFusedResponseOnTheJoinedRank) {
  const int size = 2;
  const Spec spec{DataType::kFloat32, ReduceOp::kMin, 12, 2, 1};
  RunRuntimes(size, FastConfig(), [&](Runtime& rt) {
    const int rank = rt.layout().rank;
    std::vector<std::vector<char>> in(3), out(3);
    for (int k = 0; k < 3; ++k) {
      in[k] = testing::Buffer(spec.dtype, spec.count);
      out[k] = testing::Buffer(spec.dtype, spec.count);
      for (size_t i = 0; i < spec.count; ++i) {
        Store(spec.dtype, in[k].data(), i, Value(spec.dtype, spec.op, rank, i + k));
      }
    }
    std::vector<std::shared_ptr<Handle>> handles(3);
    if (rank == 1) {
      auto h = rt.Enqueue(Allreduce("m0", in[0].data(), out[0].data(), spec));
      ASSERT_TRUE(h.ok());
      handles[0] = *h;
      auto j = rt.Join();
      ASSERT_TRUE(j.ok()) << j.status().ToString();
      EXPECT_EQ(*j, 0);
      ASSERT_TRUE(handles[0]->Poll());
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(30));  // rank 1 has joined
      for (int k = 0; k < 3; ++k) {
        auto h = rt.Enqueue(Allreduce("m" + std::to_string(k), in[k].data(), out[k].data(), spec));
        ASSERT_TRUE(h.ok());
        handles[k] = *h;
      }
      for (int k = 0; k < 3; ++k) ASSERT_TRUE(WaitFor(*handles[k]).ok());
      auto j = rt.Join();
      ASSERT_TRUE(j.ok()) << j.status().ToString();
      EXPECT_EQ(*j, 0);
    }
    for (int k = 0; k < 3; ++k) {
      if (!handles[k]) continue;
      ASSERT_TRUE(handles[k]->status().ok()) << handles[k]->status().ToString();
      // m0: both ranks; m1, m2: rank 0 only.
      const std::vector<bool> active = {true, k == 0};
      for (size_t i = 0; i < spec.count; ++i) {
        EXPECT_EQ(Load(spec.dtype, out[k].data(), i),
                  JoinReference(spec.dtype, spec.op, active, i, k, spec.pre, spec.post))
            << "rank " << rank << " m" << k << "[" << i << "]";
      }
    }
  });
}

}  // namespace
}  // namespace kolo
