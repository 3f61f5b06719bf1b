#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "runtime/config.h"

namespace kolo {
namespace {

StatusOr<Config> FromMap(const std::map<std::string, std::string>& env) {
  return ConfigFromEnvironment([&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST(Config, DefaultsMatchHorovod) {
  auto c = FromMap({});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->cycle_time_ms, 1.0);
  EXPECT_EQ(c->fusion_threshold_bytes, 128 << 20);
  EXPECT_EQ(c->log_level, LogLevel::kWarning);
}

TEST(Config, HorovodAliasesAndKoloWins) {
  auto c = FromMap({{"HOROVOD_FUSION_THRESHOLD", "1024"}, {"HOROVOD_CYCLE_TIME", "3.5"}});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->fusion_threshold_bytes, 1024);
  EXPECT_EQ(c->cycle_time_ms, 3.5);
  c = FromMap({{"HOROVOD_FUSION_THRESHOLD", "1024"}, {"KOLO_FUSION_THRESHOLD", "64M"}});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->fusion_threshold_bytes, 64 << 20);
}

TEST(Config, StartTimeoutDefaultsToHorovodrunsAndTakesHorovodsName) {
  auto c = FromMap({});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->start_timeout_seconds, 30);
  c = FromMap({{"HOROVOD_START_TIMEOUT", "12.5"}});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->start_timeout_seconds, 12.5);
  c = FromMap({{"HOROVOD_START_TIMEOUT", "12"}, {"KOLO_START_TIMEOUT", "0"}});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->start_timeout_seconds, 0);
  c = FromMap({{"KOLO_START_TIMEOUT", "soon"}});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("KOLO_START_TIMEOUT='soon'"), std::string::npos);
}

TEST(Config, MalformedValuesNameTheVariable) {
  auto c = FromMap({{"KOLO_FUSION_THRESHOLD", "lots"}});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("KOLO_FUSION_THRESHOLD='lots'"), std::string::npos);
  EXPECT_FALSE(FromMap({{"KOLO_CYCLE_TIME", "-1"}}).ok());
  EXPECT_FALSE(FromMap({{"KOLO_LOG_LEVEL", "loud"}}).ok());
  EXPECT_FALSE(FromMap({{"KOLO_FUSION_CHUNK_BYTES", "8"}}).ok());
  EXPECT_FALSE(FromMap({{"HOROVOD_LOG_HIDE_TIME", "yes"}}).ok());
}

TEST(Config, ErrorsNameTheVariableActuallySet) {
  auto c = FromMap({{"HOROVOD_CYCLE_TIME", "abc"}});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("HOROVOD_CYCLE_TIME='abc'"), std::string::npos)
      << c.status().message();
  EXPECT_FALSE(FromMap({{"KOLO_FUSION_THRESHOLD", " 64"}}).ok());
  EXPECT_FALSE(FromMap({{"KOLO_FUSION_THRESHOLD", "+64"}}).ok());
}

TEST(Config, ParseBytes) {
  EXPECT_EQ(*ParseBytes("0"), 0);
  EXPECT_EQ(*ParseBytes("64K"), 65536);
  EXPECT_EQ(*ParseBytes("1g"), 1ll << 30);
  EXPECT_FALSE(ParseBytes("").ok());
  EXPECT_FALSE(ParseBytes("-5").ok());
  EXPECT_FALSE(ParseBytes("12Q").ok());
  EXPECT_FALSE(ParseBytes("99999999999999999999").ok());
}

TEST(Config, EveryKnobIsDocumented) {
  for (const Knob& k : Knobs()) {
    EXPECT_FALSE(k.description.empty()) << k.name;
    EXPECT_EQ(k.name.substr(0, 5), "KOLO_");
  }
}

TEST(Config, DefaultConstructedHoldsEveryRowsDefault) {
  const Config c;
  EXPECT_EQ(c.cycle_time_ms, 1.0);
  EXPECT_EQ(c.fusion_threshold_bytes, 128 << 20);
  EXPECT_EQ(c.fusion_chunk_bytes, 4 << 20);
  EXPECT_EQ(c.fusion_direct_bytes, kFusionDirectAuto);
  EXPECT_TRUE(c.wake_on_submit);
  EXPECT_EQ(c.log_level, LogLevel::kWarning);
  EXPECT_EQ(c.cache_capacity, 1024);
  EXPECT_EQ(c.stall_check_seconds, 60);
  EXPECT_EQ(c.stall_shutdown_seconds, 0);
  EXPECT_EQ(c.start_timeout_seconds, 30);
  EXPECT_EQ(c.autotune_warmup_samples, 3);
  EXPECT_EQ(c.autotune_steps_per_sample, 10);
  EXPECT_FALSE(c.autotune || c.stall_check_disable || c.log_hide_time ||
               c.timeline_mark_cycles || c.hierarchical_allreduce);
  EXPECT_EQ(c.allreduce_algo, "auto");
  EXPECT_EQ(c.alltoall_algo, "auto");
  EXPECT_EQ(c.timeline_path, "");
  // Each row's parser takes its own default and refuses a malformed value.
  for (const Knob& k : Knobs()) {
    Config scratch;
    EXPECT_TRUE(k.parse(k.default_value, scratch).ok()) << k.name;
  }
}

// README.md's table of environment variables: a row per knob (a row may name several), with
// the knob's Horovod alias and its default first in the default column.
TEST(Config, ReadmeTableMatchesTheKnobs) {
  std::ifstream readme(KOLO_README);
  ASSERT_TRUE(readme) << KOLO_README;
  struct Row {
    std::string alias, default_column;
  };
  std::map<std::string, Row> rows;
  std::string line;
  while (std::getline(readme, line)) {
    if (line.rfind("| `KOLO_", 0) != 0) continue;
    std::vector<std::string> cells;
    std::stringstream in(line.substr(1));
    for (std::string cell; std::getline(in, cell, '|');) {
      cells.push_back(cell.substr(1, cell.size() - 2));  // " x " -> "x"
    }
    ASSERT_GE(cells.size(), 5u) << line;
    std::stringstream names(cells[0]);
    for (std::string name; std::getline(names, name, ',');) {
      const size_t open = name.find('`'), close = name.rfind('`');
      ASSERT_LT(open, close) << line;
      rows[name.substr(open + 1, close - open - 1)] = {cells[1], cells[3]};
    }
  }
  std::set<std::string> knob_names;
  for (const Knob& k : Knobs()) {
    const std::string name(k.name);
    knob_names.insert(name);
    auto it = rows.find(name);
    if (it == rows.end()) {
      ADD_FAILURE() << name << " is missing from README.md's table";
      continue;
    }
    const std::string alias =
        k.horovod_name.empty() ? "—" : "`" + std::string(k.horovod_name) + "`";
    EXPECT_EQ(it->second.alias, alias) << name;
    const std::string& d = it->second.default_column;
    if (k.default_value.empty()) {
      EXPECT_TRUE(d.rfind("unset", 0) == 0 || d == "—") << name << ": " << d;
    } else {
      EXPECT_EQ(d.rfind("`" + std::string(k.default_value) + "`", 0), 0u) << name << ": " << d;
    }
  }
  for (const auto& [name, row] : rows) {
    EXPECT_TRUE(knob_names.count(name)) << "README.md lists " << name << ", which is no knob";
  }
}

// NCCL reads NCCL_ALGO only: kolo's knob takes its value, and may only repeat it.
TEST(Config, NcclAlgoFollowsNcclsOwnVariable) {
  EXPECT_EQ(FromMap({})->nccl_algo, "");
  EXPECT_EQ(FromMap({{"NCCL_ALGO", "Tree"}})->nccl_algo, "Tree");
  EXPECT_EQ(FromMap({{"NCCL_ALGO", "Ring"}, {"KOLO_NCCL_ALGO", "Ring"}})->nccl_algo, "Ring");
  EXPECT_TRUE(FromMap({{"NCCL_ALGO", "ring"}, {"KOLO_NCCL_ALGO", "Ring"}}).ok());  // as NCCL
  auto unset = FromMap({{"KOLO_NCCL_ALGO", "Tree"}});
  ASSERT_FALSE(unset.ok());
  EXPECT_EQ(unset.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(unset.status().message().find("KOLO_NCCL_ALGO='Tree' but NCCL_ALGO is unset"),
            std::string::npos)
      << unset.status().message();
  EXPECT_NE(unset.status().message().find("set NCCL_ALGO='Tree'"), std::string::npos);
  auto differ = FromMap({{"KOLO_NCCL_ALGO", "Tree"}, {"NCCL_ALGO", "Ring"}});
  ASSERT_FALSE(differ.ok());
  EXPECT_NE(differ.status().message().find("NCCL_ALGO is 'Ring'"), std::string::npos)
      << differ.status().message();
}

TEST(Config, HierarchicalAllreduceFromHorovodsVariable) {
  auto c = FromMap({{"HOROVOD_HIERARCHICAL_ALLREDUCE", "1"}});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->hierarchical_allreduce);
  EXPECT_FALSE(FromMap({})->hierarchical_allreduce);
  EXPECT_FALSE(FromMap({{"KOLO_HIERARCHICAL_ALLREDUCE", "yes"}}).ok());
}

TEST(Config, ShmStoresTakesItsThreeWordsOnly) {
  EXPECT_EQ(FromMap({})->shm_stores, "auto");
  for (const char* word : {"auto", "plain", "streamed"}) {
    auto c = FromMap({{"KOLO_SHM_STORES", word}});
    ASSERT_TRUE(c.ok()) << word << ": " << c.status().ToString();
    EXPECT_EQ(c->shm_stores, word);
  }
  auto bad = FromMap({{"KOLO_SHM_STORES", "stream"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("KOLO_SHM_STORES='stream'"), std::string::npos)
      << bad.status().message();
}

TEST(Config, UnknownVariablesAreNamedWithAHint) {
  const std::vector<std::string> unknown = UnknownVariables(
      {"HOME", "KOLO_FUSION_THRESHOLD", "KOLO_FUSION_THRESHOLDS", "HOROVOD_CYCLE_TIME",
       "HOROVOD_NUM_NCCL_STREAMS", "HOROVOD_RANK", "KOLO_ROOT", "KOLO_NCCL_ALGO",
       "HOROVOD_HIERARCHICAL_ALLREDUCE", "KOLO_STAL_CHECK_TIME_SECONDS", "KOLO_WHATEVER"});
  EXPECT_EQ(unknown, (std::vector<std::string>{
                         "KOLO_FUSION_THRESHOLDS (did you mean KOLO_FUSION_THRESHOLD?)",
                         "HOROVOD_NUM_NCCL_STREAMS (a Horovod setting kolo has no equivalent of)",
                         "KOLO_STAL_CHECK_TIME_SECONDS (did you mean "
                         "KOLO_STALL_CHECK_TIME_SECONDS?)",
                         "KOLO_WHATEVER"}));
}

}  // namespace
}  // namespace kolo
