// Gradient layouts of real models, for kolo-bench's --model replay: the list of parameter tensors
// (name and shape) in the order the framework registers them, which is the order of the forward
// pass. Gradients become ready in roughly the reverse order during the backward pass, so the
// replay submits them last tensor first (see BackwardOrder).
//
// The shapes are computed from each architecture in code, not copied from a dump, and follow
// PyTorch's conventions: a convolution weight is [out, in, kh, kw], a linear weight is
// [out, in], batch-norm and layer-norm contribute a weight (gamma) and a bias (beta) of [C].
// bench/MODELS.md lists the tensors and how the counts were checked.
//
// Pure data: no MPI, no kolo; unit-tested in tests/unit/models_test.cc.
#ifndef KOLO_BENCH_MODELS_H_
#define KOLO_BENCH_MODELS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kolo::bench {

struct TensorSpec {
  std::string name;            // PyTorch's parameter name, e.g. "layer1.0.conv1.weight"
  std::vector<int64_t> shape;  // extents in elements

  int64_t NumElements() const;
};

struct ModelLayout {
  std::string name;                 // "resnet50"
  std::string description;          // one line for the bench header
  std::vector<TensorSpec> tensors;  // registration (forward) order

  int64_t NumElements() const;  // parameters of the whole model
  int64_t MaxTensorElements() const;
};

// torchvision.models.resnet50(): 161 tensors, 25,557,032 parameters.
ModelLayout ResNet50();
// torchvision.models.resnet101(): 314 tensors, 44,549,160 parameters.
ModelLayout ResNet101();
// Hugging Face BertModel for bert-base-uncased (with pooler, no pre-training heads):
// 199 tensors, 109,482,240 parameters.
ModelLayout BertBase();
// 1000 tensors of 256 float32 (1 KiB each): the per-tensor overhead of the runtime, isolated.
ModelLayout Tiny1000();

// The names accepted by ModelByName, in the order --help lists them.
const std::vector<std::string>& ModelNames();
// The same names, space-separated, for help texts and refusals.
std::string ModelNamesText();
// Fills *layout and returns true for a known name ("resnet50", "resnet101", "bert-base",
// "tiny-1000").
bool ModelByName(std::string_view name, ModelLayout* layout);

// Indices into layout.tensors in the order gradients become ready: last registered first.
std::vector<int> BackwardOrder(const ModelLayout& layout);

}  // namespace kolo::bench

#endif  // KOLO_BENCH_MODELS_H_
