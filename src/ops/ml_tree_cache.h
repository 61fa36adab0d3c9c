// Compiling a large ensemble (10^5 nodes) costs far more than scoring a few
// rows. In a session the compiled forest lives in the node's prepared state;
// kernels run outside one (constant folding, a kernel run alone) use this
// small process-wide cache instead. The key is the node's address, the input
// width and a hash of every attribute's content: a node freed and replaced by
// a different one at the same address does not match. Hashing is one linear
// pass over the attributes, much cheaper than compiling.
#pragma once
#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "ir/graph.h"
#include "ops/ml_tree.h"

namespace nee::ml_tree {

// A hash of the node's op type and every attribute's name, type and content.
uint64_t HashAttributes(const Node& node);

// The 16 most recently used compiled forests.
class ForestCache {
 public:
  std::shared_ptr<const Forest> Find(const Node* node, int64_t width, uint64_t hash) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t i = 0; i < entries_.size(); ++i) {
      if (entries_[i].node == node && entries_[i].width == width && entries_[i].hash == hash) {
        std::rotate(entries_.begin(), entries_.begin() + static_cast<std::ptrdiff_t>(i),
                    entries_.begin() + static_cast<std::ptrdiff_t>(i) + 1);  // most recent first
        return entries_[0].forest;
      }
    }
    return nullptr;
  }
  void Insert(const Node* node, int64_t width, uint64_t hash, std::shared_ptr<const Forest> forest) {
    std::lock_guard<std::mutex> lock(mutex_);
    entries_.insert(entries_.begin(), Entry{node, width, hash, std::move(forest)});
    if (entries_.size() > kCapacity) entries_.pop_back();
  }

 private:
  static constexpr size_t kCapacity = 16;
  struct Entry {
    const Node* node;
    int64_t width;
    uint64_t hash;
    std::shared_ptr<const Forest> forest;
  };
  std::mutex mutex_;
  std::vector<Entry> entries_;
};


}  // namespace nee::ml_tree
