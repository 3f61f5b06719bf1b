// KOLO_CHECK: a broken invariant aborts with the condition, the place and the values compared.
#include "base/check.h"

#include <gtest/gtest.h>

#include <string>

namespace kolo {
namespace {

TEST(CheckDeathTest, PassingChecksEvaluateEachOperandOnce) {
  int calls = 0;
  auto next = [&] { return ++calls; };
  KOLO_CHECK(next() == 1);
  KOLO_CHECK_EQ(next(), 2);
  KOLO_CHECK_LT(next(), 4);
  EXPECT_EQ(calls, 3);
}

TEST(CheckDeathTest, AFailedCheckNamesTheConditionAndTheContext) {
  const std::string name = "grad/fc1";
  EXPECT_DEATH(KOLO_CHECK(name.empty()) << " for '" << name << "'",
               "check_test.cc:[0-9]+: check failed: name.empty\\(\\) for 'grad/fc1'");
}

TEST(CheckDeathTest, AFailedComparisonPrintsBothValues) {
  const size_t entries = 3, tensors = 4;
  EXPECT_DEATH(KOLO_CHECK_EQ(entries, tensors) << "; coordinator and rank disagree",
               "check failed: entries == tensors \\(3 vs 4\\); coordinator and rank disagree");
}

}  // namespace
}  // namespace kolo
