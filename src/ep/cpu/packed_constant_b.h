// The constant B of a matrix product packed once per session (MatMul, Gemm,
// FusedMatMul share it).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "ep/cpu/sgemm.h"
#include "ops/op_schema.h"

namespace nee::cpu {

// B (k x n, viewed as `view`) packed once per session when input `index` is
// a constant (an initializer no caller can override): later runs skip packing
// it. Null when B may change between runs or the kernel runs outside a session.
// The key is what the packing depends on besides B's bytes: its shape and layout.
// `drop`: the caller never reads B in place again once it is packed, whatever
// A's shape (KernelContext::DropConstantInput); the packing may then write
// over B's own bytes when nothing else holds them. Otherwise only B's file
// pages are let go.
std::shared_ptr<const SgemmPackedB> PackedConstantB(KernelContext& ctx, size_t index, int64_t k, int64_t n,
                                                    MatrixView view, bool transposed, bool drop);

}  // namespace nee::cpu
