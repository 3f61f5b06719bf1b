#include <map>

#include <gtest/gtest.h>

#include "runtime/tensor_queue.h"

namespace kolo {
namespace {

TensorEntry Entry(const std::string& name) {
  TensorEntry e;
  e.request.name = name;
  e.handle = std::make_shared<Handle>();
  return e;
}

// Copies of the Requests TakeNewRequests points at.
std::vector<Request> TakeNew(TensorQueue& q) {
  std::vector<const Request*> taken;
  q.TakeNewRequests(&taken);
  std::vector<Request> out;
  for (const Request* r : taken) out.push_back(*r);
  return out;
}

TEST(TensorQueue, NameStaysReservedWhileItsOperationRuns) {
  TensorQueue q;
  ASSERT_TRUE(q.Add(Entry("y")).ok());
  EXPECT_EQ(q.Add(Entry("y")).code(), StatusCode::kInvalidArgument);
  ASSERT_EQ(TakeNew(q).size(), 1u);
  TensorEntry running = q.Take("y");
  ASSERT_TRUE(running.handle);
  // Executing, not yet completed: still in flight.
  Status again = q.Add(Entry("y"));
  EXPECT_EQ(again.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(again.message().find("already in flight"), std::string::npos);
  q.Release("y");
  EXPECT_TRUE(q.Add(Entry("y")).ok());
}

TEST(TensorQueue, CloseReturnsPendingEntriesOnlyAndRefusesLaterOnes) {
  TensorQueue q;
  ASSERT_TRUE(q.Add(Entry("a")).ok());
  ASSERT_TRUE(q.Add(Entry("b")).ok());
  TensorEntry running = q.Take("a");
  auto pending = q.Close("stopped");
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_EQ(pending[0].request.name, "b");
  Status later = q.Add(Entry("c"));
  EXPECT_EQ(later.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(later.message(), "stopped");
}

TEST(TensorQueue, IdsAreStableAcrossSubmissionsAndTakeByIdTakesOnlyWhatIsInFlight) {
  TensorQueue q;
  ASSERT_TRUE(q.Add(Entry("a")).ok());
  ASSERT_TRUE(q.Add(Entry("b")).ok());
  std::vector<Request> added = TakeNew(q);
  ASSERT_EQ(added.size(), 2u);
  const int32_t a = added[0].id, b = added[1].id;
  EXPECT_GE(a, 0);
  EXPECT_NE(a, b);
  EXPECT_NE(added[0].id_serial, added[1].id_serial);
  EXPECT_FALSE(q.Take(-1).handle);
  EXPECT_FALSE(q.Take(1000).handle);
  TensorEntry ea = q.Take(a);
  ASSERT_TRUE(ea.handle);
  EXPECT_EQ(ea.request.name, "a");
  EXPECT_EQ(ea.request.id, a);
  EXPECT_FALSE(q.Take(a).handle);  // taken: reserved, not taken twice
  EXPECT_EQ(q.Add(Entry("a")).code(), StatusCode::kInvalidArgument);
  q.Release(ea.request);
  EXPECT_FALSE(q.Take(a).handle);  // released: nothing in flight under the id
  ASSERT_TRUE(q.Add(Entry("a")).ok());
  const Request again = TakeNew(q).at(0);
  EXPECT_EQ(again.id, a);  // the same name keeps its id and its serial
  EXPECT_EQ(again.id_serial, added[0].id_serial);
}

// The response cache trusts (id, id_serial) without comparing names: an id the queue reuses
// for another name after a sweep comes with a serial never given before.
TEST(TensorQueue, AReusedIdComesWithANewSerial) {
  TensorQueue q;
  std::map<std::pair<int32_t, uint32_t>, std::string> seen;
  const size_t n = 3 * TensorQueue::kMaxIdleNames;
  for (size_t i = 0; i < n; ++i) {
    const std::string name = "once." + std::to_string(i % (n / 2));
    ASSERT_TRUE(q.Add(Entry(name)).ok());
    const Request r = TakeNew(q).at(0);
    auto [it, added] = seen.emplace(std::make_pair(r.id, r.id_serial), name);
    EXPECT_EQ(it->second, name) << "id " << r.id << " serial " << r.id_serial;
    TensorEntry e = q.Take(r.id);
    ASSERT_TRUE(e.handle);
    q.Release(e.request);
  }
  EXPECT_LT(q.interned(), n / 2);  // ids were dropped and reused on the way
}

TEST(TensorQueue, IdleNamesAreDroppedOnceTheyOutnumberThoseInFlight) {
  TensorQueue q;
  ASSERT_TRUE(q.Add(Entry("kept")).ok());
  const size_t n = TensorQueue::kMaxIdleNames + 10;
  for (size_t i = 0; i < n; ++i) {
    const std::string name = "once." + std::to_string(i);
    ASSERT_TRUE(q.Add(Entry(name)).ok());
    TensorEntry e = q.Take(name);
    q.Release(e.request);
  }
  EXPECT_LE(q.interned(), TensorQueue::kMaxIdleNames + 1);
  std::vector<Request> added = TakeNew(q);
  EXPECT_TRUE(q.Take(added[0].id).handle);  // a name in flight survives a sweep
  EXPECT_EQ(q.Add(Entry("kept")).code(), StatusCode::kInvalidArgument);
}

TEST(TensorQueue, NewRequestsKeepTheirOrderAndOutliveAnEarlyTake) {
  TensorQueue q;
  ASSERT_TRUE(q.Add(Entry("a")).ok());
  Request refused;
  refused.name = "r";
  refused.refused = "no";
  q.AddRefused(refused);
  ASSERT_TRUE(q.Add(Entry("b")).ok());
  // An error Response may complete a submission before the background thread has taken its
  // Request: the Request still goes out, unchanged but for its id (the entry is gone, and the
  // id may go to another name: a copy by id could take that name's entry).
  TensorEntry b = q.Take("b");
  ASSERT_TRUE(b.handle);
  q.Release(b.request);
  std::vector<const Request*> taken;
  std::vector<RequestKey> keys;
  q.TakeNewRequests(&taken, &keys);
  ASSERT_EQ(taken.size(), 3u);
  ASSERT_EQ(keys.size(), 3u);
  EXPECT_EQ(taken[0]->name, "a");
  EXPECT_GE(keys[0].id, 0);
  EXPECT_EQ(keys[0].id, taken[0]->id);
  EXPECT_EQ(taken[1]->name, "r");
  EXPECT_EQ(taken[1]->refused, "no");
  EXPECT_FALSE(keys[1].cacheable);
  EXPECT_EQ(taken[2]->name, "b");
  EXPECT_GE(b.request.id, 0);
  EXPECT_EQ(taken[2]->id, -1);
  EXPECT_EQ(keys[2].id, -1);
  EXPECT_FALSE(q.HasNewRequests());
  ASSERT_TRUE(q.Add(Entry("c")).ok());
  q.TakeNewRequests(&taken);
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_EQ(taken[0]->name, "c");
}

Request Refusal(const std::string& name) {
  Request r;
  r.name = name;
  r.refused = "no";
  return r;
}

// The caller that refused "w" submits it again once its peers have seen the refusal's error,
// which can be before this rank's background thread executes that error: the error answers
// the refusal, not the new submission, whose Request has not gone out.
TEST(TensorQueue, ARefusalsErrorLeavesALaterSubmissionOfItsNameAlone) {
  TensorQueue q;
  q.AddRefused(Refusal("w"));
  ASSERT_EQ(TakeNew(q).size(), 1u);
  ASSERT_TRUE(q.Add(Entry("w")).ok());  // a refusal reserves no name
  EXPECT_FALSE(q.Take("w", /*error=*/true).handle);  // the refusal's error
  std::vector<Request> sent = TakeNew(q);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].name, "w");
  EXPECT_GE(sent[0].id, 0);                     // the entry's own Request, not a detached copy
  TensorEntry w = q.Take("w", /*error=*/true);  // an error now is the new submission's
  ASSERT_TRUE(w.handle);
  q.Release(w.request);
  EXPECT_TRUE(q.Add(Entry("w")).ok());
}

// Two refusals of a name out at once meet in one entry of the coordinator's table, which
// answers both with one error.
TEST(TensorQueue, RefusalsOfOneNameOutTogetherTakeOneError) {
  TensorQueue q;
  q.AddRefused(Refusal("w"));
  q.AddRefused(Refusal("w"));
  ASSERT_EQ(TakeNew(q).size(), 2u);
  ASSERT_TRUE(q.Add(Entry("w")).ok());
  EXPECT_FALSE(q.Take("w", /*error=*/true).handle);  // the refusals' one error
  ASSERT_EQ(TakeNew(q).size(), 1u);
  EXPECT_TRUE(q.Take("w", /*error=*/true).handle);
}

// A submission that went out while the refusal was still unanswered met it in the
// coordinator's table, which fails the name as submitted twice: that error is the
// submission's as well.
TEST(TensorQueue, ASubmissionSentBesideARefusalSharesItsError) {
  TensorQueue q;
  q.AddRefused(Refusal("w"));
  ASSERT_TRUE(q.Add(Entry("w")).ok());
  ASSERT_EQ(TakeNew(q).size(), 2u);
  EXPECT_TRUE(q.Take("w", /*error=*/true).handle);
}

}  // namespace
}  // namespace kolo
