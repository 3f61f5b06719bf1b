// The gradient layouts kolo-bench replays: counts and shapes against the published models.
#include "bench/models.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

namespace kolo::bench {
namespace {

const TensorSpec* Find(const ModelLayout& m, const std::string& name) {
  for (const TensorSpec& t : m.tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

void ExpectUniqueNames(const ModelLayout& m) {
  std::set<std::string> names;
  for (const TensorSpec& t : m.tensors) EXPECT_TRUE(names.insert(t.name).second) << t.name;
}

TEST(ModelsTest, ResNet50MatchesTorchvision) {
  const ModelLayout m = ResNet50();
  EXPECT_EQ(m.tensors.size(), 161u);  // len(list(torchvision.models.resnet50().parameters()))
  EXPECT_EQ(m.NumElements(), 25557032);
  ExpectUniqueNames(m);
  ASSERT_NE(Find(m, "conv1.weight"), nullptr);
  EXPECT_EQ(Find(m, "conv1.weight")->shape, (std::vector<int64_t>{64, 3, 7, 7}));
  ASSERT_NE(Find(m, "layer4.0.downsample.0.weight"), nullptr);
  EXPECT_EQ(Find(m, "layer4.0.downsample.0.weight")->shape,
            (std::vector<int64_t>{2048, 1024, 1, 1}));
  ASSERT_NE(Find(m, "layer3.5.conv2.weight"), nullptr);
  EXPECT_EQ(Find(m, "layer3.5.conv2.weight")->shape, (std::vector<int64_t>{256, 256, 3, 3}));
  EXPECT_EQ(Find(m, "layer1.1.downsample.0.weight"), nullptr);  // only the first block projects
  EXPECT_EQ(m.tensors.front().name, "conv1.weight");
  EXPECT_EQ(m.tensors[m.tensors.size() - 2].name, "fc.weight");
  EXPECT_EQ(m.tensors.back().shape, (std::vector<int64_t>{1000}));
  EXPECT_EQ(m.MaxTensorElements(), 512 * 512 * 3 * 3);  // layer4.*.conv2.weight
}

TEST(ModelsTest, ResNet101MatchesTorchvision) {
  const ModelLayout m = ResNet101();
  // torchvision's ResNet101_Weights.IMAGENET1K_V1.meta["num_params"]; 3 + 33 blocks x 9 +
  // 4 projections x 3 + 2 tensors.
  EXPECT_EQ(m.NumElements(), 44549160);
  EXPECT_EQ(m.tensors.size(), 314u);
  ExpectUniqueNames(m);
  ASSERT_NE(Find(m, "layer3.22.conv3.weight"), nullptr);  // stage 3 has 23 blocks
  EXPECT_EQ(Find(m, "layer3.23.conv1.weight"), nullptr);
  EXPECT_EQ(Find(m, "layer3.22.conv3.weight")->shape, (std::vector<int64_t>{1024, 256, 1, 1}));
  ModelLayout by_name;
  ASSERT_TRUE(ModelByName("resnet101", &by_name));
  EXPECT_EQ(by_name.NumElements(), m.NumElements());
}

TEST(ModelsTest, BertBaseMatchesTransformers) {
  const ModelLayout m = BertBase();
  EXPECT_EQ(m.tensors.size(), 199u);      // 5 embedding + 12 x 16 encoder + 2 pooler
  EXPECT_EQ(m.NumElements(), 109482240);  // BertModel.from_pretrained("bert-base-uncased")
  EXPECT_NEAR(static_cast<double>(m.NumElements()), 110e6, 1e6);
  ExpectUniqueNames(m);
  ASSERT_NE(Find(m, "embeddings.word_embeddings.weight"), nullptr);
  EXPECT_EQ(Find(m, "embeddings.word_embeddings.weight")->shape,
            (std::vector<int64_t>{30522, 768}));
  ASSERT_NE(Find(m, "encoder.layer.11.intermediate.dense.weight"), nullptr);
  EXPECT_EQ(Find(m, "encoder.layer.11.intermediate.dense.weight")->shape,
            (std::vector<int64_t>{3072, 768}));
  ASSERT_NE(Find(m, "encoder.layer.0.output.dense.weight"), nullptr);
  EXPECT_EQ(Find(m, "encoder.layer.0.output.dense.weight")->shape,
            (std::vector<int64_t>{768, 3072}));
  EXPECT_EQ(m.tensors.back().name, "pooler.dense.bias");
}

TEST(ModelsTest, Tiny1000IsOneKibPerTensor) {
  const ModelLayout m = Tiny1000();
  ASSERT_EQ(m.tensors.size(), 1000u);
  for (const TensorSpec& t : m.tensors) EXPECT_EQ(t.NumElements() * 4, 1024);
  ExpectUniqueNames(m);
}

TEST(ModelsTest, ByNameAndBackwardOrder) {
  for (const std::string& name : ModelNames()) {
    ModelLayout m;
    ASSERT_TRUE(ModelByName(name, &m)) << name;
    EXPECT_EQ(m.name, name);
    const std::vector<int> order = BackwardOrder(m);
    ASSERT_EQ(order.size(), m.tensors.size());
    EXPECT_EQ(order.front(), static_cast<int>(m.tensors.size()) - 1);
    EXPECT_EQ(order.back(), 0);
  }
  ModelLayout m;
  EXPECT_FALSE(ModelByName("resnet-51", &m));
}

}  // namespace
}  // namespace kolo::bench
