// StreamCopy: memcpy whose stores bypass the cache (x86 non-temporal stores), for data that
// another core reads next. The shared-memory all-reduce writes its slots and results with it
// while the cores hand cache lines over slowly (handover_watch.h).
//
// Why: a plain store into a line that another core's cache holds must first take the line from
// it. When the two cores sit behind one last-level cache that costs little, but on a host that
// places them behind separate ones (docs/machine-notes.md 11, the slow state) every such line is
// a round trip between the caches, and so is every line the reader then pulls out of the
// writer's cache. Measured on the 2-vCPU machine, one thread writing 1 MiB and the other
// reading it, in lock-step (kolo-core-probe's handoff_plain_gbs, handoff_streamed_gbs): 7-8
// GB/s with plain stores in the fast state and 2 GB/s in the slow state; 7-11 GB/s with
// streaming stores in either. Streamed lines go to memory, where the reader finds them at DRAM
// speed whatever the placement. The hand-off alone does not show what streaming costs in the
// fast state: the whole shm all-reduce, both ranks writing and reading at once, ran 1.4-2.5x
// slower streamed there (handover_watch.h), so it streams only in the slow state.
//
// Ends with a store fence: streaming stores are weakly ordered, and the caller's next release
// store (a barrier flag) must not become visible before the data. Below kStreamCopyMinBytes it
// is a plain memcpy: a few lines are cheaper to hand over than to send through memory.
#ifndef KOLO_COLLECTIVES_HOST_STREAM_COPY_H_
#define KOLO_COLLECTIVES_HOST_STREAM_COPY_H_

#include <cstddef>

namespace kolo {

constexpr size_t kStreamCopyMinBytes = size_t{4} << 10;

// Whether StreamCopy streams on this CPU (x86-64) or is a memcpy.
#if defined(__x86_64__)
constexpr bool kStreamCopyStreams = true;
#else
constexpr bool kStreamCopyStreams = false;
#endif

// Copies n bytes from src to dst (which do not overlap), dst's lines left out of this core's
// cache where the CPU allows (x86-64); elsewhere a memcpy.
void StreamCopy(void* dst, const void* src, size_t n);

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_HOST_STREAM_COPY_H_
