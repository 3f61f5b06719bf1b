#include "bench/models.h"

#include <algorithm>
#include <string>
#include <utility>

namespace kolo::bench {
namespace {

class LayoutBuilder {
 public:
  void Add(std::string name, std::vector<int64_t> shape) {
    tensors_.push_back(TensorSpec{std::move(name), std::move(shape)});
  }
  // nn.Conv2d(in, out, k, bias=False): weight [out, in, k, k].
  void Conv(const std::string& prefix, int64_t in, int64_t out, int64_t k) {
    Add(prefix + ".weight", {out, in, k, k});
  }
  // nn.BatchNorm2d(c) / nn.LayerNorm(c): weight and bias of [c] (running stats are buffers).
  void Norm(const std::string& prefix, int64_t c) {
    Add(prefix + ".weight", {c});
    Add(prefix + ".bias", {c});
  }
  // nn.Linear(in, out): weight [out, in], bias [out].
  void Linear(const std::string& prefix, int64_t in, int64_t out) {
    Add(prefix + ".weight", {out, in});
    Add(prefix + ".bias", {out});
  }
  std::vector<TensorSpec> Take() { return std::move(tensors_); }

 private:
  std::vector<TensorSpec> tensors_;
};

}  // namespace

int64_t TensorSpec::NumElements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t ModelLayout::NumElements() const {
  int64_t n = 0;
  for (const TensorSpec& t : tensors) n += t.NumElements();
  return n;
}

int64_t ModelLayout::MaxTensorElements() const {
  int64_t n = 0;
  for (const TensorSpec& t : tensors) n = std::max(n, t.NumElements());
  return n;
}

namespace {

// torchvision/models/resnet.py, ResNet(Bottleneck, blocks): a 7x7 stem, four stages of
// bottleneck blocks (1x1 reduce, 3x3, 1x1 expand by 4, each followed by batch-norm; the first
// block of a stage has a 1x1 projection "downsample" with its own batch-norm), then fc 2048->1000.
// Convolutions have no bias. Registration order inside a block: conv1 bn1 conv2 bn2 conv3 bn3
// downsample.
std::vector<TensorSpec> BottleneckResNet(const int (&blocks)[4]) {
  LayoutBuilder b;
  b.Conv("conv1", 3, 64, 7);
  b.Norm("bn1", 64);
  const int64_t kPlanes[4] = {64, 128, 256, 512};
  constexpr int64_t kExpansion = 4;
  int64_t in = 64;
  for (int stage = 0; stage < 4; ++stage) {
    const int64_t width = kPlanes[stage];
    const int64_t out = width * kExpansion;
    for (int block = 0; block < blocks[stage]; ++block) {
      const std::string p = "layer" + std::to_string(stage + 1) + "." + std::to_string(block);
      b.Conv(p + ".conv1", in, width, 1);
      b.Norm(p + ".bn1", width);
      b.Conv(p + ".conv2", width, width, 3);
      b.Norm(p + ".bn2", width);
      b.Conv(p + ".conv3", width, out, 1);
      b.Norm(p + ".bn3", out);
      if (block == 0) {  // in != out (and stride 2 from stage 2 on): projection shortcut
        b.Conv(p + ".downsample.0", in, out, 1);
        b.Norm(p + ".downsample.1", out);
      }
      in = out;
    }
  }
  b.Linear("fc", 2048, 1000);
  return b.Take();
}

}  // namespace

ModelLayout ResNet50() {
  return ModelLayout{"resnet50", "ResNet-50 (torchvision)", BottleneckResNet({3, 4, 6, 3})};
}

ModelLayout ResNet101() {
  return ModelLayout{"resnet101", "ResNet-101 (torchvision)", BottleneckResNet({3, 4, 23, 3})};
}

// transformers BertModel, bert-base-uncased config: vocab 30522, hidden 768, 12 layers,
// intermediate 3072, max positions 512, 2 token types. Linear weights are [out, in].
ModelLayout BertBase() {
  constexpr int64_t kVocab = 30522, kHidden = 768, kLayers = 12, kInter = 3072;
  constexpr int64_t kPositions = 512, kTokenTypes = 2;
  LayoutBuilder b;
  b.Add("embeddings.word_embeddings.weight", {kVocab, kHidden});
  b.Add("embeddings.position_embeddings.weight", {kPositions, kHidden});
  b.Add("embeddings.token_type_embeddings.weight", {kTokenTypes, kHidden});
  b.Norm("embeddings.LayerNorm", kHidden);
  for (int64_t l = 0; l < kLayers; ++l) {
    const std::string p = "encoder.layer." + std::to_string(l);
    b.Linear(p + ".attention.self.query", kHidden, kHidden);
    b.Linear(p + ".attention.self.key", kHidden, kHidden);
    b.Linear(p + ".attention.self.value", kHidden, kHidden);
    b.Linear(p + ".attention.output.dense", kHidden, kHidden);
    b.Norm(p + ".attention.output.LayerNorm", kHidden);
    b.Linear(p + ".intermediate.dense", kHidden, kInter);
    b.Linear(p + ".output.dense", kInter, kHidden);
    b.Norm(p + ".output.LayerNorm", kHidden);
  }
  b.Linear("pooler.dense", kHidden, kHidden);
  return ModelLayout{"bert-base", "BERT-base uncased (transformers BertModel)", b.Take()};
}

ModelLayout Tiny1000() {
  LayoutBuilder b;
  for (int i = 0; i < 1000; ++i) b.Add("tiny." + std::to_string(i), {256});
  return ModelLayout{"tiny-1000", "1 KiB gradients (256 float32 each)", b.Take()};
}

const std::vector<std::string>& ModelNames() {
  static const std::vector<std::string> kNames = {"resnet50", "resnet101", "bert-base",
                                                  "tiny-1000"};
  return kNames;
}

std::string ModelNamesText() {
  std::string text;
  for (const std::string& m : ModelNames()) text += (text.empty() ? "" : " ") + m;
  return text;
}

bool ModelByName(std::string_view name, ModelLayout* layout) {
  if (name == "resnet50") {
    *layout = ResNet50();
  } else if (name == "resnet101") {
    *layout = ResNet101();
  } else if (name == "bert-base") {
    *layout = BertBase();
  } else if (name == "tiny-1000") {
    *layout = Tiny1000();
  } else {
    return false;
  }
  return true;
}

std::vector<int> BackwardOrder(const ModelLayout& layout) {
  std::vector<int> order(layout.tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(order.size() - 1 - i);
  return order;
}

}  // namespace kolo::bench
