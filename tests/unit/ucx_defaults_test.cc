// The UCX settings kolo chooses where the user has not (collectives/ucx/ucx_defaults.h).
#include "collectives/ucx/ucx_defaults.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

namespace kolo {
namespace {

std::map<std::string, std::string> Chosen(bool one_host, const std::set<std::string>& user) {
  std::map<std::string, std::string> out;
  for (const UcxSetting& s :
       UcxDefaults(one_host, [&](const char* name) { return user.count(name) > 0; })) {
    EXPECT_TRUE(out.emplace(s.name, s.value).second) << "chosen twice: " << s.name;
  }
  return out;
}

TEST(UcxDefaults, OneHostUsesSharedMemoryAndUcxsOwnThreshold) {
  const auto chosen = Chosen(true, {});
  EXPECT_EQ(chosen.size(), 1u);
  EXPECT_EQ(chosen.at("TLS"), "posix,sysv,self");
  EXPECT_EQ(chosen.count("RNDV_THRESH"), 0u);
}

TEST(UcxDefaults, AcrossHostsEverythingButCmaAndEagerMessages) {
  const auto chosen = Chosen(false, {});
  EXPECT_EQ(chosen.size(), 2u);
  EXPECT_EQ(chosen.at("TLS"), "^cma");
  EXPECT_EQ(chosen.at("RNDV_THRESH"), "inf");
}

TEST(UcxDefaults, TheUsersSettingsAreLeftAlone) {
  const auto tls_only = Chosen(false, {"TLS"});
  EXPECT_EQ(tls_only.count("TLS"), 0u);
  EXPECT_EQ(tls_only.at("RNDV_THRESH"), "inf");
  const auto threshold = Chosen(false, {"RNDV_THRESH"});
  EXPECT_EQ(threshold.count("RNDV_THRESH"), 0u);
  EXPECT_EQ(threshold.at("TLS"), "^cma");
  EXPECT_TRUE(Chosen(false, {"TLS", "RNDV_THRESH"}).empty());
  EXPECT_TRUE(Chosen(true, {"TLS"}).empty());
}

}  // namespace
}  // namespace kolo
