#include "unit/thread_world.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <thread>

namespace kolo::testing {

void RunOnThreadWorld(int ranks, const std::function<void(Communicator&)>& fn,
                      std::chrono::milliseconds deadline) {
  auto world = std::make_shared<LoopbackWorld>(ranks, deadline);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      LoopbackCommunicator comm(world, r);
      fn(comm);
    });
  }
  for (auto& t : threads) t.join();
}

void RunOnThreadWorld(int ranks, std::string_view grouping,
                      const std::function<void(Communicator&)>& fn,
                      std::chrono::milliseconds deadline) {
  auto map = grouping == "1" ? NodeMap::OneNode(ranks) : NodeMap::Parse(grouping, ranks);
  ASSERT_TRUE(map.ok()) << map.status().ToString();
  auto world = std::make_shared<LoopbackWorld>(ranks, deadline);
  LoopbackNodeWorlds nodes(*map, deadline);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      LoopbackCommunicator comm(world, r);
      comm.set_node(nodes.ContextFor(r));
      fn(comm);
    });
  }
  for (auto& t : threads) t.join();
}

std::vector<std::unique_ptr<Runtime>> StartRuntimes(int ranks, const Config& config,
                                                    std::string_view grouping,
                                                    std::shared_ptr<LoopbackWorld>* data_world) {
  auto control = std::make_shared<LoopbackWorld>(ranks, std::chrono::seconds(30));
  auto data = std::make_shared<LoopbackWorld>(ranks, std::chrono::seconds(30));
  if (data_world) *data_world = data;
  std::optional<LoopbackNodeWorlds> nodes;
  if (!grouping.empty()) {
    auto map = grouping == "1" ? NodeMap::OneNode(ranks) : NodeMap::Parse(grouping, ranks);
    EXPECT_TRUE(map.ok()) << map.status().ToString();
    if (!map.ok()) return {};
    nodes.emplace(*map, std::chrono::seconds(30));
  }
  std::vector<std::unique_ptr<Runtime>> runtimes;
  for (int r = 0; r < ranks; ++r) {
    RankLayout layout;
    layout.rank = r;
    layout.size = ranks;
    layout.local_rank = r;
    layout.local_size = ranks;
    auto data_comm = std::make_unique<LoopbackCommunicator>(data, r);
    if (nodes) data_comm->set_node(nodes->ContextFor(r));
    runtimes.push_back(std::make_unique<Runtime>(
        config, layout, std::make_unique<LoopbackCommunicator>(control, r), std::move(data_comm)));
    Status s = runtimes.back()->Start();
    EXPECT_TRUE(s.ok()) << s.ToString();
    if (!s.ok()) return {};
  }
  return runtimes;
}

void RunRuntimes(int ranks, const Config& config, const std::function<void(Runtime&)>& fn,
                 std::string_view grouping) {
  std::vector<std::unique_ptr<Runtime>> runtimes = StartRuntimes(ranks, config, grouping);
  ASSERT_EQ(runtimes.size(), static_cast<size_t>(ranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) threads.emplace_back([&, r] { fn(*runtimes[r]); });
  for (auto& t : threads) t.join();
  for (auto& rt : runtimes) rt->Shutdown();
}

Status WaitFor(Handle& handle, std::chrono::milliseconds deadline) {
  if (const char* floor = std::getenv("KOLO_TEST_WAIT_S")) {
    deadline = std::max(deadline,
                        std::chrono::milliseconds(static_cast<int64_t>(std::atof(floor) * 1000.0)));
  }
  const auto until = std::chrono::steady_clock::now() + deadline;
  while (!handle.Poll()) {
    if (std::chrono::steady_clock::now() > until) {
      return DeadlineExceededError("handle not completed after " +
                                   std::to_string(deadline.count()) + " ms");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return handle.status();
}

}  // namespace kolo::testing
