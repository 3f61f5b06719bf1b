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

TEST(TensorQueue, NameStaysReservedWhileItsOperationRuns) {
  TensorQueue q;
  ASSERT_TRUE(q.Add(Entry("y")).ok());
  EXPECT_EQ(q.Add(Entry("y")).code(), StatusCode::kInvalidArgument);
  ASSERT_EQ(q.TakeNewRequests().size(), 1u);
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

}  // namespace
}  // namespace kolo
