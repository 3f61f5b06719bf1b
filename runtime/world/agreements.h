// The agreements kolo_init makes before any rank starts: kolo_init is collective, so it succeeds
// or fails on every rank together. They run over the bootstrap's all-gather of bytes, so they
// hold whatever launched the job.
#ifndef KOLO_RUNTIME_WORLD_AGREEMENTS_H_
#define KOLO_RUNTIME_WORLD_AGREEMENTS_H_

#include <string>

#include "base/status.h"
#include "runtime/config.h"
#include "runtime/world/bootstrap.h"

namespace kolo {

// A rank whose own start failed (`local`, e.g. a malformed KOLO_* variable) fails with that
// error, every other rank with one naming it. Settings that shape the collectives themselves
// (KOLO_FUSION_CHUNK_BYTES: the size of each library call; KOLO_FUSION_THRESHOLD and
// KOLO_FUSION_DIRECT_BYTES: which tensors each rank fuses into one call; KOLO_CACHE_CAPACITY)
// must agree, or every rank fails naming the ranks and values; a mismatch would otherwise
// corrupt results or hang.
Status AgreeOnStart(Bootstrap& bootstrap, const Status& local, const Config& config);

}  // namespace kolo

#endif  // KOLO_RUNTIME_WORLD_AGREEMENTS_H_
