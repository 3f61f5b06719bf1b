// libFuzzer target for the wire-format decoders (runtime/wire/wire.h).
//
// Every input is fed to both DecodeRequestList and DecodeResponseList. What must hold:
//   - no crash, no sanitizer report (the target is built with ASan + UBSan), whatever the bytes;
//   - a rejection is kDataLoss, never another code;
//   - an accepted message survives a round trip: re-encoding it and decoding those bytes
//     succeeds and encodes to the same bytes again, so decoding loses nothing the encoder writes.
// A failed property aborts, which libFuzzer reports as a crash with the input saved.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "runtime/wire/wire.h"

namespace {

void Fail(const char* what, const kolo::Status& status) {
  std::fprintf(stderr, "kolo-wire-fuzz: %s: %s\n", what, status.ToString().c_str());
  std::abort();
}

template <typename List>
void Check(const kolo::StatusOr<List>& decoded, std::string (*encode)(const List&),
           kolo::StatusOr<List> (*decode)(const std::string&), const char* what) {
  if (!decoded.ok()) {
    if (decoded.status().code() != kolo::StatusCode::kDataLoss) {
      Fail(what, decoded.status());
    }
    return;
  }
  const std::string once = encode(*decoded);
  const kolo::StatusOr<List> again = decode(once);
  if (!again.ok()) Fail("re-encoded message does not decode", again.status());
  if (encode(*again) != once) {
    std::fprintf(stderr, "kolo-wire-fuzz: %s: round trip changed the message\n", what);
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  Check(kolo::DecodeRequestList(bytes), &kolo::EncodeRequestList, &kolo::DecodeRequestList,
        "RequestList");
  Check(kolo::DecodeResponseList(bytes), &kolo::EncodeResponseList, &kolo::DecodeResponseList,
        "ResponseList");
  return 0;
}
