// The TCP rendezvous (runtime/world/tcp_rendezvous.h) with ranks as threads on 127.0.0.1: every
// rank's bytes in every round, and each failure bounded and named (a rank that never comes,
// another job's rank on the port, no rank 0, an address that does not resolve, a port in use, a
// rank gone in the middle of a round).
#include "runtime/world/tcp_rendezvous.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace kolo {
namespace {

RendezvousOptions Options(int rank, int size, int port, const std::string& token = "job-a") {
  RendezvousOptions o;
  o.address = "127.0.0.1";
  o.port = port;
  o.rank = rank;
  o.size = size;
  o.token = token;
  o.start_timeout_s = 10;
  o.round_timeout_s = 10;
  return o;
}

// What rank r contributes in round k: distinct per rank and round, sizes 0 to 1 MiB.
std::string Part(int rank, int round) {
  if (rank == 1 && round == 0) return std::string();
  const size_t n = rank == 2 && round == 1 ? size_t{1} << 20 : 3 + static_cast<size_t>(rank);
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + (rank * 7 + round * 3 + i) % 26);
  return s;
}

TEST(TcpRendezvousTest, EveryRankGetsEveryRanksBytesInEveryRound) {
  for (int size : {1, 2, 3}) {
    auto server = TcpRendezvous::Serve(Options(0, size, 0));
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    const int port = (*server)->port();
    std::vector<std::vector<std::string>> got(static_cast<size_t>(size) * 2);
    std::vector<Status> status(static_cast<size_t>(size));
    auto rounds = [&](TcpRendezvous& r) {
      for (int k = 0; k < 2; ++k) {
        Status s = r.Allgather(Part(r.rank(), k), &got[static_cast<size_t>(r.rank() * 2 + k)]);
        if (!s.ok()) return s;
      }
      return Status::OK();
    };
    std::vector<std::thread> clients;
    for (int rank = 1; rank < size; ++rank) {
      clients.emplace_back([&, rank] {
        auto c = TcpRendezvous::Connect(Options(rank, size, port));
        status[static_cast<size_t>(rank)] = c.ok() ? rounds(**c) : c.status();
      });
    }
    Status s = (*server)->AwaitRanks();
    status[0] = s.ok() ? rounds(**server) : s;
    for (auto& t : clients) t.join();
    for (int rank = 0; rank < size; ++rank) {
      ASSERT_TRUE(status[static_cast<size_t>(rank)].ok())
          << "size " << size << " rank " << rank << ": " << status[rank].ToString();
      for (int k = 0; k < 2; ++k) {
        const auto& all = got[static_cast<size_t>(rank * 2 + k)];
        ASSERT_EQ(all.size(), static_cast<size_t>(size));
        for (int from = 0; from < size; ++from) {
          EXPECT_EQ(all[static_cast<size_t>(from)], Part(from, k))
              << "size " << size << " rank " << rank << " round " << k << " from " << from;
        }
      }
    }
  }
}

TEST(TcpRendezvousTest, ARankThatNeverComesFailsEveryWaitingRankNamingIt) {
  RendezvousOptions o = Options(0, 3, 0);
  o.start_timeout_s = 0.5;
  auto server = TcpRendezvous::Serve(o);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  Status client;
  std::thread rank1([&] {
    auto c = TcpRendezvous::Connect(Options(1, 3, (*server)->port()));
    client = c.status();
  });
  const auto start = std::chrono::steady_clock::now();
  Status s = (*server)->AwaitRanks();
  rank1.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s.ToString();
  EXPECT_NE(s.message().find("rank(s) [2] did not arrive"), std::string::npos) << s.ToString();
  // Told by rank 0, with rank 0's code: every rank fails the same way.
  EXPECT_EQ(client.code(), StatusCode::kDeadlineExceeded) << client.ToString();
  EXPECT_NE(client.message().find("rank 0: "), std::string::npos) << client.ToString();
  EXPECT_NE(client.message().find("[2] did not arrive"), std::string::npos) << client.ToString();
}

TEST(TcpRendezvousTest, AnotherJobsRankIsRefusedAndTheJobStillMeets) {
  auto server = TcpRendezvous::Serve(Options(0, 2, 0, "job-a"));
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const int port = (*server)->port();
  Status intruder, member;
  std::thread t([&] {
    intruder = TcpRendezvous::Connect(Options(1, 2, port, "job-b")).status();
    member = TcpRendezvous::Connect(Options(1, 2, port, "job-a")).status();
  });
  Status s = (*server)->AwaitRanks();
  t.join();
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(member.ok()) << member.ToString();
  EXPECT_EQ(intruder.code(), StatusCode::kInvalidArgument) << intruder.ToString();
  EXPECT_NE(intruder.message().find("serves another job (its token 'job-a', this rank's 'job-b')"),
            std::string::npos)
      << intruder.ToString();
}

TEST(TcpRendezvousTest, NoRankZeroFailsNamingTheAddressInBoundedTime) {
  // A port that was free a moment ago: nothing listens there.
  int port = 0;
  {
    auto probe = TcpRendezvous::Serve(Options(0, 2, 0));
    ASSERT_TRUE(probe.ok());
    port = (*probe)->port();
  }
  RendezvousOptions o = Options(1, 2, port);
  o.start_timeout_s = 0.3;
  const auto start = std::chrono::steady_clock::now();
  auto c = TcpRendezvous::Connect(o);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(c.status().message().find("found no rank 0 at 127.0.0.1:" + std::to_string(port)),
            std::string::npos)
      << c.status().ToString();
}

TEST(TcpRendezvousTest, AnAddressThatDoesNotResolveIsNamed) {
  RendezvousOptions o = Options(1, 2, 29500);
  o.address = "no-such-host.invalid";
  auto c = TcpRendezvous::Connect(o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("MASTER_ADDR 'no-such-host.invalid'"), std::string::npos)
      << c.status().ToString();
}

TEST(TcpRendezvousTest, APortInUseFailsRankZeroNamingIt) {
  auto first = TcpRendezvous::Serve(Options(0, 2, 0));
  ASSERT_TRUE(first.ok());
  auto second = TcpRendezvous::Serve(Options(0, 2, (*first)->port()));
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find("cannot serve on 127.0.0.1:" +
                                           std::to_string((*first)->port())),
            std::string::npos)
      << second.status().ToString();
}

TEST(TcpRendezvousTest, ARankGoneInARoundFailsTheOthersNamingIt) {
  auto server = TcpRendezvous::Serve(Options(0, 3, 0));
  ASSERT_TRUE(server.ok());
  const int port = (*server)->port();
  Status survivor;
  std::thread rank1([&] {
    // Meets the others, then goes without taking part in the round.
    auto c = TcpRendezvous::Connect(Options(1, 3, port));
    EXPECT_TRUE(c.ok()) << c.status().ToString();
  });
  std::thread rank2([&] {
    auto c = TcpRendezvous::Connect(Options(2, 3, port));
    std::vector<std::string> all;
    survivor = c.ok() ? (*c)->Allgather("x", &all) : c.status();
  });
  Status s = (*server)->AwaitRanks();
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::vector<std::string> all;
  s = (*server)->Allgather("y", &all);
  rank1.join();
  rank2.join();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("rank 1 closed its connection"), std::string::npos) << s.ToString();
  EXPECT_NE(survivor.message().find("rank 0: rendezvous: rank 1 closed its connection"),
            std::string::npos)
      << survivor.ToString();
}

}  // namespace
}  // namespace kolo
