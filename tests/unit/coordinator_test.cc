#include <gtest/gtest.h>

#include "runtime/negotiation/coordinator.h"
#include "tests/harness/requests.h"

namespace kolo {
namespace {

using testing::RequestListOf;

Request Req(int rank, const std::string& name, std::vector<int64_t> shape,
            OpType op = OpType::kAllreduce) {
  Request r;
  r.rank = rank;
  r.name = name;
  r.shape = std::move(shape);
  r.op = op;
  return r;
}

TEST(Coordinator, ReadyOnlyWhenEveryRankSubmitted) {
  Coordinator c(3);
  c.Add(RequestListOf({Req(0, "a", {2}), Req(0, "b", {2})}), 0);
  c.Add(RequestListOf({Req(1, "b", {2}), Req(1, "a", {2})}), 1);
  EXPECT_TRUE(c.TakeReady().empty());
  c.Add(RequestListOf({Req(2, "b", {2})}), 2);
  auto ready = c.TakeReady();
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].names, std::vector<std::string>{"b"});
  EXPECT_EQ(ready[0].type, ResponseType::kAllreduce);
  EXPECT_EQ(ready[0].counts, std::vector<int64_t>{2});
  EXPECT_EQ(c.pending(), 1u);
  c.Add(RequestListOf({Req(2, "a", {2})}), 2);
  ready = c.TakeReady();
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].names[0], "a");
  EXPECT_EQ(c.pending(), 0u);
}

TEST(Coordinator, MismatchMessagesNameTensorRanksAndValues) {
  auto build = [](std::vector<Request> by_rank) { return BuildResponse(by_rank); };
  Response r = build({Req(0, "grad/fc1", {3, 4}), Req(1, "grad/fc1", {4, 3})});
  EXPECT_EQ(r.type, ResponseType::kError);
  EXPECT_EQ(r.error_code, StatusCode::kInvalidArgument);
  EXPECT_EQ(r.error, "allreduce 'grad/fc1': shape mismatch: rank 0 has [3,4], rank 1 has [4,3]");

  Request a = Req(0, "x", {2}), b = Req(1, "x", {2}), c = Req(2, "x", {2});
  c.reduce_op = ReduceOp::kMax;
  EXPECT_EQ(build({a, b, c}).error,
            "allreduce 'x': reduce op mismatch: ranks 0,1 have sum, rank 2 has max");
  c = Req(2, "x", {2});
  c.postscale = 0.5;
  EXPECT_EQ(build({a, b, c}).error,
            "allreduce 'x': postscale factor mismatch: ranks 0,1 have 1, rank 2 has 0.5");

  Request g0 = Req(0, "g", {5, 3}, OpType::kAllgather),
          g1 = Req(1, "g", {2, 4}, OpType::kAllgather);
  EXPECT_EQ(build({g0, g1}).error,
            "allgather 'g': shape (all but the first dimension) mismatch: rank 0 has [5,3], "
            "rank 1 has [2,4]");
  g1.shape = {7, 3};
  Response ok = build({g0, g1});
  EXPECT_EQ(ok.type, ResponseType::kAllgather);
  EXPECT_EQ(ok.first_dims, (std::vector<int64_t>{5, 7}));

  Request b0 = Req(0, "b", {1}, OpType::kBroadcast), b1 = Req(1, "b", {1}, OpType::kBroadcast);
  b1.root = 1;
  EXPECT_EQ(build({b0, b1}).error, "broadcast 'b': root rank mismatch: rank 0 has 0, rank 1 has 1");
}

TEST(Coordinator, RanksThatAgreeAreGrouped) {
  std::vector<Request> reqs;
  for (int r = 0; r < 7; ++r)
    reqs.push_back(
        Req(r, "w", r == 0 || r == 5 ? std::vector<int64_t>{4, 1} : std::vector<int64_t>{2, 2}));
  EXPECT_EQ(BuildResponse(reqs).error,
            "allreduce 'w': shape mismatch: ranks 0,5 have [4,1], ranks 1-4,6 have [2,2]");
  reqs[6].shape = {8};
  EXPECT_EQ(BuildResponse(reqs).error,
            "allreduce 'w': shape mismatch: ranks 0,5 have [4,1], ranks 1-4 have [2,2], "
            "rank 6 has [8]");
  // An allgather's first dimension may differ; ndim may not.
  Request g0 = Req(0, "g", {5, 3}, OpType::kAllgather),
          g1 = Req(1, "g", {5, 3, 1}, OpType::kAllgather);
  EXPECT_EQ(BuildResponse({g0, g1}).type, ResponseType::kError);
}

TEST(Coordinator, DuplicateFromOneRankBecomesAnError) {
  Coordinator c(2);
  c.Add(RequestListOf({Req(0, "d", {1}), Req(0, "d", {1})}), 0);
  c.Add(RequestListOf({Req(1, "d", {1})}), 1);
  auto ready = c.TakeReady();
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].type, ResponseType::kError);
  EXPECT_NE(ready[0].error.find("submitted twice by rank 0"), std::string::npos);
}

TEST(Coordinator, ShutdownRemembersFirstRank) {
  Coordinator c(3);
  RequestList l;
  l.shutdown = true;
  c.Add(RequestList{}, 0);
  c.Add(l, 2);
  c.Add(l, 1);
  EXPECT_TRUE(c.shutdown_requested());
  EXPECT_EQ(c.shutdown_rank(), 2);
}

}  // namespace
}  // namespace kolo
