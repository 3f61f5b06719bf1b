#include <gtest/gtest.h>

#include <thread>

#include "unit/thread_world.h"

namespace kolo {
namespace {

TEST(Loopback, SendRecvRing) {
  testing::RunOnThreadWorld(5, [](Communicator& comm) {
    const int n = comm.Size(), r = comm.Rank();
    int64_t mine = 1000 + r, got = -1;
    ASSERT_TRUE(comm.SendRecv(&mine, 8, (r + 1) % n, &got, 8, (r + n - 1) % n, 7).ok());
    EXPECT_EQ(got, 1000 + (r + n - 1) % n);
  });
}

TEST(Loopback, AllgathervBroadcastAndBytes) {
  testing::RunOnThreadWorld(3, [](Communicator& comm) {
    const int r = comm.Rank();
    std::string mine(r, static_cast<char>('a' + r));  // rank 0 contributes nothing
    std::vector<size_t> sizes = {0, 1, 2};
    std::string all(3, '?');
    ASSERT_TRUE(comm.Allgatherv(mine.data(), mine.size(), all.data(), sizes).ok());
    EXPECT_EQ(all, "bcc");

    int value = r == 2 ? 42 : 0;
    ASSERT_TRUE(comm.Broadcast(&value, sizeof(value), 2).ok());
    EXPECT_EQ(value, 42);

    std::vector<std::string> gathered;
    ASSERT_TRUE(comm.GatherBytes("r" + std::to_string(r), &gathered, 0).ok());
    if (r == 0) {
      EXPECT_EQ(gathered, (std::vector<std::string>{"r0", "r1", "r2"}));
    }
    std::string msg = r == 0 ? "from root" : "";
    ASSERT_TRUE(comm.BroadcastBytes(&msg, 0).ok());
    EXPECT_EQ(msg, "from root");
  });
}

TEST(Loopback, MissingRankIsADeadlineErrorNotAHang) {
  auto world = std::make_shared<LoopbackWorld>(2, std::chrono::milliseconds(100));
  LoopbackCommunicator comm(world, 0);
  Status s = comm.Barrier();
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(s.message().find("rank 0/2 still blocked in Barrier"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace kolo
