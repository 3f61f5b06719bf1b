// The collectives' descriptor tables (collectives/select/collective_table.h) and the choice
// over them: which entries each table has, which one an input gets under a forced name or
// none, why an entry refuses an input, and that the host entry a name picks is the one that
// runs (its result against a reference computed from every rank's input).
#include "collectives/select/collective_table.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "collectives/select/collective_choice.h"
#include "kolo/config.h"
#include "unit/thread_world.h"

namespace kolo {
namespace {

template <typename Entry>
std::vector<std::string> Names(const std::vector<Entry>& table, MemoryKind memory) {
  std::vector<std::string> out;
  for (const Entry& e : table) {
    if (e.memory == memory) out.emplace_back(e.name);
  }
  return out;
}

using Strings = std::vector<std::string>;

TEST(CollectiveTable, EachCollectiveHasTheLibraryKolosOwnAndNccl) {
  EXPECT_EQ(Names(AllgatherEntries(), MemoryKind::kHost), (Strings{"mpi", "ring", "rd"}));
  EXPECT_EQ(Names(BroadcastEntries(), MemoryKind::kHost),
            (Strings{"mpi", "binomial", "scatter_allgather"}));
  EXPECT_EQ(Names(ReduceScatterEntries(), MemoryKind::kHost), (Strings{"mpi", "ring"}));
  EXPECT_EQ(Names(AlltoallEntries(), MemoryKind::kHost), (Strings{"mpi", "pairwise"}));
  for (const Strings& device :
       {Names(AllgatherEntries(), MemoryKind::kCuda), Names(BroadcastEntries(), MemoryKind::kCuda),
        Names(ReduceScatterEntries(), MemoryKind::kCuda),
        Names(AlltoallEntries(), MemoryKind::kCuda)}) {
    EXPECT_EQ(device, Strings{"nccl"});
  }
  // kolo's own say what they cost; the libraries' calls are not modelled by kolo.
  for (const AllgatherEntry& e : AllgatherEntries()) {
    EXPECT_EQ(e.library, e.estimate_us == nullptr) << e.name;
    EXPECT_EQ(e.library, e.cost.empty()) << e.name;
    EXPECT_EQ(e.memory == MemoryKind::kHost, e.run != nullptr) << e.name;
  }
}

TEST(CollectiveTable, ForcedNamesBindTheirOwnMemoryKind) {
  CollectiveInput host, cuda;
  cuda.memory = MemoryKind::kCuda;
  const auto& table = AllgatherEntries();
  // The picked entry's name, or the refusal.
  const auto picked = [&](const char* forced, const CollectiveInput& in) {
    auto e = PickEntry(table, "all-gather", forced, in);
    return e.ok() ? std::string((*e)->name) : e.status().ToString();
  };
  EXPECT_EQ(picked("", host), "mpi");
  EXPECT_EQ(picked("auto", host), "mpi");
  EXPECT_EQ(picked("rd", host), "rd");
  // A host name leaves device buffers to the device default, and the other way round.
  EXPECT_EQ(picked("nccl", host), "mpi");
  auto device = PickEntry(table, "all-gather", "rd", cuda);
  if (KOLO_WITH_NCCL) {
    ASSERT_TRUE(device.ok()) << device.status().ToString();
    EXPECT_EQ((*device)->name, "nccl");
  } else {
    ASSERT_FALSE(device.ok());
    EXPECT_NE(device.status().message().find("nccl: kolo was built without NCCL"),
              std::string::npos)
        << device.status().message();
  }
}

// NCCL has no int16: the device reduce-scatter says so, naming the entry, and the host one
// takes it.
TEST(CollectiveTable, AnEntrySaysWhyNot) {
  CollectiveInput in;
  in.memory = MemoryKind::kCuda;
  in.dtype = DataType::kInt16;
  auto refused = PickEntry(ReduceScatterEntries(), "reduce-scatter", "", in);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnimplemented);
  const std::string why = KOLO_WITH_NCCL ? "nccl: NCCL has no int16"
                                         : "nccl: kolo was built without NCCL (KOLO_WITH_NCCL=OFF)";
  EXPECT_EQ(refused.status().message(),
            "no reduce-scatter for cuda buffers of int16 (" + why + ")");
  in.memory = MemoryKind::kHost;
  EXPECT_TRUE(PickEntry(ReduceScatterEntries(), "reduce-scatter", "", in).ok());
  EXPECT_EQ(WhyNot(ReduceScatterEntries().back(), in), "runs on cuda buffers");
}

TEST(CollectiveChoice, UnknownNamesListEveryEntry) {
  CollectiveNames names;
  names.alltoall = "bruck";
  auto c = CollectiveChoice::Make(names);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c.status().message(),
            "KOLO_ALLTOALL_ALGO=bruck: no such algorithm (auto, mpi, pairwise, nccl)");
  names = CollectiveNames();
  names.alltoall = "nccl";  // a device entry is a valid name
  EXPECT_TRUE(CollectiveChoice::Make(names).ok());
}

// The choice runs the host entry its name picks: kolo's ring all-gather of unequal parts at 2
// and 3 ranks against the concatenation of every rank's bytes; a forced device name leaves
// host buffers to the library's call, which gives the same bytes.
TEST(CollectiveChoice, RunsTheNamedHostEntry) {
  for (const char* name : {"ring", "rd", "nccl", "auto"}) {
    CollectiveNames names;
    names.allgather = name;
    auto choice = CollectiveChoice::Make(names);
    ASSERT_TRUE(choice.ok()) << choice.status().ToString();
    for (int p : {2, 3}) {
      testing::RunOnThreadWorld(p, [&](Communicator& comm) {
        const int r = comm.Rank();
        std::vector<size_t> sizes;
        std::vector<char> want;
        for (int q = 0; q < p; ++q) {
          sizes.push_back(static_cast<size_t>(3 + 5 * q));
          for (size_t i = 0; i < sizes.back(); ++i) want.push_back(static_cast<char>(q * 40 + i));
        }
        std::vector<char> mine(sizes[r]);
        for (size_t i = 0; i < mine.size(); ++i) mine[i] = static_cast<char>(r * 40 + i);
        std::vector<char> out(want.size());
        Status s = choice->Allgatherv(comm, mine.data(), mine.size(), out.data(), sizes);
        ASSERT_TRUE(s.ok()) << name << ": " << s.ToString();
        EXPECT_EQ(out, want) << name << " p=" << p << " rank " << r;
        // Which entry ran shows in an error: kolo's own name themselves, the library's call
        // speaks for itself. Every rank gets the short list, so every rank refuses it alike.
        sizes.pop_back();
        s = choice->Allgatherv(comm, mine.data(), mine.size(), out.data(), sizes);
        ASSERT_FALSE(s.ok()) << name;
        const bool own = std::string(name) == "ring" || std::string(name) == "rd";
        EXPECT_EQ(s.message().find("all-gather (" + std::string(name) + ")") != std::string::npos,
                  own)
            << name << ": " << s.message();
      });
    }
  }
}

}  // namespace
}  // namespace kolo
