#include "runtime/wire/wire.h"

#include "runtime/wire/messages_generated.h"

namespace kolo {
namespace {

namespace fb = ::flatbuffers;
// File identifiers keep a RequestList from being read as a ResponseList.
constexpr char kRequestId[] = "KRQ1";
constexpr char kResponseId[] = "KRS1";

// `kind` is an OpType or a ResponseType value.
Status CheckEnums(int kind, int max_kind, int dtype, int reduce_op, const char* what) {
  if (kind < 0 || kind > max_kind || !IsValidDataType(dtype) || !IsValidReduceOp(reduce_op)) {
    return DataLossError(std::string("malformed ") + what + ": enum value out of range");
  }
  return Status::OK();
}

std::vector<int64_t> Longs(const fb::Vector<int64_t>* v) {
  return v ? std::vector<int64_t>(v->begin(), v->end()) : std::vector<int64_t>();
}

// The FlatBuffers verifier checks that a vector's length is aligned, not that its elements are
// (google/flatbuffers#8397), and reading a misaligned int64_t is undefined behaviour. The builder
// aligns every non-empty vector (an empty one may not be, and nothing is read from it), so a
// misaligned non-empty vector makes the message malformed. Found by fuzz/wire_fuzz.cc.
bool Aligned(const fb::Vector<int64_t>* v) {
  return v == nullptr || v->size() == 0 ||
         reinterpret_cast<uintptr_t>(v->Data()) % alignof(int64_t) == 0;
}

}  // namespace

std::string EncodeRequestList(const RequestList& list) {
  fb::FlatBufferBuilder b(256 + 128 * list.requests.size());
  std::vector<fb::Offset<wire::Request>> reqs;
  reqs.reserve(list.requests.size());
  for (const Request& r : list.requests) {
    auto name = b.CreateString(r.name);
    auto shape = b.CreateVector(r.shape);
    auto refused = r.refused.empty() ? 0 : b.CreateString(r.refused);
    auto splits = r.splits.empty() ? 0 : b.CreateVector(r.splits);
    auto group = r.group.empty() ? 0 : b.CreateString(r.group);
    reqs.push_back(wire::CreateRequest(b, r.rank, static_cast<uint8_t>(r.op), name,
                                       static_cast<uint8_t>(r.dtype), shape,
                                       static_cast<uint8_t>(r.reduce_op), r.root, r.prescale,
                                       r.postscale, r.device, refused, splits, group,
                                       r.group_size));
  }
  auto vec = b.CreateVector(reqs);
  auto waiting = list.waiting.empty() ? 0 : b.CreateVectorOfStrings(list.waiting);
  b.Finish(wire::CreateRequestList(b, vec, list.shutdown, list.blocked, waiting), kRequestId);
  return std::string(reinterpret_cast<const char*>(b.GetBufferPointer()), b.GetSize());
}

StatusOr<RequestList> DecodeRequestList(const std::string& bytes) {
  auto data = reinterpret_cast<const uint8_t*>(bytes.data());
  fb::Verifier verifier(data, bytes.size());
  if (bytes.size() < 8 || !fb::BufferHasIdentifier(data, kRequestId) ||
      !verifier.VerifyBuffer<wire::RequestList>(kRequestId)) {
    return DataLossError("malformed RequestList (" + std::to_string(bytes.size()) + " bytes)");
  }
  auto root = fb::GetRoot<wire::RequestList>(data);
  RequestList out;
  out.shutdown = root->shutdown();
  out.blocked = root->blocked();
  if (root->waiting()) {
    for (const fb::String* s : *root->waiting()) out.waiting.push_back(s->str());
  }
  if (root->requests()) {
    for (const wire::Request* r : *root->requests()) {
      KOLO_RETURN_IF_ERROR(CheckEnums(r->op(), kMaxOpType, r->dtype(), r->reduce_op(), "Request"));
      if (!Aligned(r->shape()) || !Aligned(r->splits())) {
        return DataLossError("malformed Request: misaligned vector");
      }
      Request q;
      q.rank = r->rank();
      q.op = static_cast<OpType>(r->op());
      q.name = r->name() ? r->name()->str() : std::string();
      q.dtype = static_cast<DataType>(r->dtype());
      q.shape = Longs(r->shape());
      q.reduce_op = static_cast<ReduceOp>(r->reduce_op());
      q.root = r->root();
      q.prescale = r->prescale();
      q.postscale = r->postscale();
      q.device = r->device();
      q.refused = r->refused() ? r->refused()->str() : std::string();
      q.splits = Longs(r->splits());
      q.group = r->group() ? r->group()->str() : std::string();
      q.group_size = r->group_size();
      out.requests.push_back(std::move(q));
    }
  }
  return out;
}

std::string EncodeResponseList(const ResponseList& list) {
  fb::FlatBufferBuilder b(256 + 128 * list.responses.size());
  std::vector<fb::Offset<wire::Response>> resps;
  resps.reserve(list.responses.size());
  for (const Response& r : list.responses) {
    auto names = b.CreateVectorOfStrings(r.names);
    auto error = b.CreateString(r.error);
    auto counts = b.CreateVector(r.counts);
    auto dims = b.CreateVector(r.first_dims);
    auto splits = r.splits.empty() ? 0 : b.CreateVector(r.splits);
    resps.push_back(wire::CreateResponse(
        b, static_cast<uint8_t>(r.type), names, static_cast<int>(r.error_code), error,
        static_cast<uint8_t>(r.dtype), static_cast<uint8_t>(r.reduce_op), r.root, r.prescale,
        r.postscale, r.device, counts, dims, splits));
  }
  auto vec = b.CreateVector(resps);
  auto fatal = b.CreateString(list.fatal_error);
  b.Finish(wire::CreateResponseList(b, vec, list.shutdown, list.shutdown_rank, fatal,
                                    list.tuned_fusion_threshold_bytes, list.tuned_cycle_time_ms),
           kResponseId);
  return std::string(reinterpret_cast<const char*>(b.GetBufferPointer()), b.GetSize());
}

StatusOr<ResponseList> DecodeResponseList(const std::string& bytes) {
  auto data = reinterpret_cast<const uint8_t*>(bytes.data());
  fb::Verifier verifier(data, bytes.size());
  if (bytes.size() < 8 || !fb::BufferHasIdentifier(data, kResponseId) ||
      !verifier.VerifyBuffer<wire::ResponseList>(kResponseId)) {
    return DataLossError("malformed ResponseList (" + std::to_string(bytes.size()) + " bytes)");
  }
  auto root = fb::GetRoot<wire::ResponseList>(data);
  ResponseList out;
  out.shutdown = root->shutdown();
  out.shutdown_rank = root->shutdown_rank();
  out.fatal_error = root->fatal_error() ? root->fatal_error()->str() : std::string();
  out.tuned_fusion_threshold_bytes = root->tuned_fusion_threshold();
  out.tuned_cycle_time_ms = root->tuned_cycle_time_ms();
  if (root->responses()) {
    for (const wire::Response* r : *root->responses()) {
      KOLO_RETURN_IF_ERROR(CheckEnums(r->type(), kMaxResponseType, r->dtype(), r->reduce_op(), "Response"));
      if (r->error_code() < 0 || r->error_code() > 16) {
        return DataLossError("malformed Response: error code out of range");
      }
      if (!Aligned(r->counts()) || !Aligned(r->first_dims()) || !Aligned(r->splits())) {
        return DataLossError("malformed Response: misaligned vector");
      }
      Response p;
      p.type = static_cast<ResponseType>(r->type());
      if (r->names()) {
        for (const fb::String* n : *r->names()) p.names.push_back(n->str());
      }
      p.error_code = static_cast<StatusCode>(r->error_code());
      p.error = r->error() ? r->error()->str() : std::string();
      p.dtype = static_cast<DataType>(r->dtype());
      p.reduce_op = static_cast<ReduceOp>(r->reduce_op());
      p.root = r->root();
      p.prescale = r->prescale();
      p.postscale = r->postscale();
      p.device = r->device();
      p.counts = Longs(r->counts());
      p.first_dims = Longs(r->first_dims());
      p.splits = Longs(r->splits());
      out.responses.push_back(std::move(p));
    }
  }
  return out;
}

}  // namespace kolo
