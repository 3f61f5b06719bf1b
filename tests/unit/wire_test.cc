#include <gtest/gtest.h>

#include <random>

#include "runtime/wire/messages_generated.h"
#include "runtime/wire/wire.h"

namespace kolo {
namespace {

TEST(Wire, RequestListRoundTrip) {
  RequestList in;
  in.shutdown = true;
  Request r;
  r.rank = 3;
  r.op = OpType::kBroadcast;
  r.name = "layer/weight";
  r.dtype = DataType::kBFloat16;
  r.shape = {3, 0, 1ll << 40};
  r.reduce_op = ReduceOp::kMax;
  r.root = 2;
  r.prescale = 0.25;
  r.postscale = 3.5;
  r.device = 1;
  in.requests = {r, Request{}};
  auto out = DecodeRequestList(EncodeRequestList(in));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->requests.size(), 2u);
  const Request& q = out->requests[0];
  EXPECT_TRUE(out->shutdown);
  EXPECT_EQ(q.rank, 3);
  EXPECT_EQ(q.op, OpType::kBroadcast);
  EXPECT_EQ(q.name, "layer/weight");
  EXPECT_EQ(q.dtype, DataType::kBFloat16);
  EXPECT_EQ(q.shape, r.shape);
  EXPECT_EQ(q.reduce_op, ReduceOp::kMax);
  EXPECT_EQ(q.root, 2);
  EXPECT_EQ(q.prescale, 0.25);
  EXPECT_EQ(q.postscale, 3.5);
  EXPECT_EQ(q.device, 1);
  EXPECT_EQ(out->requests[1].device, -1);
}

TEST(Wire, ResponseListRoundTrip) {
  ResponseList in;
  in.shutdown_rank = 1;
  in.fatal_error = "boom";
  Response a;
  a.type = ResponseType::kAllreduce;
  a.names = {"a", "b", "c"};
  a.counts = {1, 2, 3};
  a.dtype = DataType::kInt8;
  a.reduce_op = ReduceOp::kAverage;
  Response e;
  e.type = ResponseType::kError;
  e.names = {"x"};
  e.error_code = StatusCode::kInvalidArgument;
  e.error = "allreduce 'x': shape mismatch";
  Response g;
  g.type = ResponseType::kAllgather;
  g.first_dims = {0, 5, 2};
  in.responses = {a, e, g};
  auto out = DecodeResponseList(EncodeResponseList(in));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->responses.size(), 3u);
  EXPECT_EQ(out->shutdown_rank, 1);
  EXPECT_EQ(out->fatal_error, "boom");
  EXPECT_EQ(out->responses[0].names, a.names);
  EXPECT_EQ(out->responses[0].counts, a.counts);
  EXPECT_EQ(out->responses[0].reduce_op, ReduceOp::kAverage);
  EXPECT_EQ(out->responses[1].error_code, StatusCode::kInvalidArgument);
  EXPECT_EQ(out->responses[1].error, e.error);
  EXPECT_EQ(out->responses[2].first_dims, g.first_dims);
}

TEST(Wire, MalformedBytesAreDataLossNotACrash) {
  EXPECT_EQ(DecodeRequestList("").status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(DecodeResponseList("garbage!").status().code(), StatusCode::kDataLoss);
  // A RequestList is not a ResponseList.
  EXPECT_EQ(DecodeResponseList(EncodeRequestList(RequestList{})).status().code(),
            StatusCode::kDataLoss);
  // Random corruption of a valid message: every result is either a clean error or a value.
  RequestList in;
  Request r;
  r.name = "n";
  r.shape = {1, 2, 3};
  in.requests = {r, r};
  const std::string good = EncodeRequestList(in);
  std::mt19937 rng(7);
  int rejected = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    std::string bad = good;
    for (int k = 0; k < 3; ++k) bad[rng() % bad.size()] = static_cast<char>(rng());
    if (trial % 5 == 0) bad.resize(rng() % bad.size());
    auto out = DecodeRequestList(bad);
    if (!out.ok()) {
      EXPECT_EQ(out.status().code(), StatusCode::kDataLoss);
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 0);
}

TEST(Wire, OutOfRangeEnumIsRejected) {
  RequestList in;
  Request r;
  r.name = "n";
  r.dtype = static_cast<DataType>(42);
  in.requests = {r};
  EXPECT_EQ(DecodeRequestList(EncodeRequestList(in)).status().code(), StatusCode::kDataLoss);
}

// The FlatBuffers verifier passes a [long] whose elements are only 4-byte aligned
// (google/flatbuffers#8397); reading it would be a misaligned load. Found by kolo-wire-fuzz.
TEST(Wire, MisalignedVectorIsRejected) {
  namespace fb = ::flatbuffers;
  fb::FlatBufferBuilder b;
  auto name = b.CreateString("n");
  // One int64 written as two uint32 words, which the builder aligns to 4 bytes only; a pad word
  // first puts the elements 4 bytes past an 8-byte boundary (Finish pads the end to 8).
  if (b.GetSize() % 8 == 0) b.PushElement<uint32_t>(0);
  b.StartVector(2, sizeof(uint32_t));
  b.PushElement<uint32_t>(0);
  b.PushElement<uint32_t>(7);
  const fb::Offset<fb::Vector<int64_t>> shape(b.EndVector(1));
  auto request = wire::CreateRequest(b, /*rank=*/0, /*op=*/0, name, /*dtype=*/0, shape,
                                     /*reduce_op=*/0, /*root=*/0, /*prescale=*/0.5);
  b.Finish(wire::CreateRequestList(b, b.CreateVector(&request, 1)), "KRQ1");
  const std::string bytes(reinterpret_cast<const char*>(b.GetBufferPointer()), b.GetSize());
  auto out = DecodeRequestList(bytes);
  EXPECT_EQ(out.status().code(), StatusCode::kDataLoss) << out.status().ToString();
}

}  // namespace
}  // namespace kolo
