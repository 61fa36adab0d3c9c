// Buffers written whole as soon as they are made (a weight's aligned copy, its
// packed layout), with their pages mapped in one system call.
#pragma once
#include <cstddef>
#include <memory>

namespace nee {

// At least `bytes` bytes, 64-byte aligned, uninitialized (zero from 1 MiB up);
// null when memory is exhausted. From 1 MiB up on Linux a mapping of its own,
// populated when made (MAP_POPULATE) and unmapped when the last owner drops
// it: touched page by page, a buffer's first write faulted once per 4 KiB,
// and on this VM those faults were most of the time it took to load and
// prepare a big model (BERT-base: the loader's copies and the packed weights,
// 680 MB of fresh pages, ~30% cheaper populated in one call).
std::shared_ptr<void> AllocatePopulated(size_t bytes);

}  // namespace nee
