// Helpers shared by the control-flow (If/Loop/Scan) and sequence/optional op
// families: element copies that work for every element type (strings and
// packed sub-byte types included), slicing and stacking along an axis, and
// the type unions the shape rules of subgraph ops need.
//
// Runtime invariant kept by these families: the tensors held inside a
// sequence Value are heap-owned and never modified after construction, so
// sequences may share them; a tensor taken from a kernel input (which may
// live in a planned arena) is always copied before it is kept.
#pragma once
#include <cstdint>
#include <vector>

#include "ops/op_schema.h"

namespace nee::cf {

// Copies `count` elements of `src` starting at element `src_offset` into
// `dst` starting at element `dst_offset`. Both must have the same element
// type and the ranges must be in bounds (callers check shapes first).
void CopyElements(const Tensor& src, int64_t src_offset, Tensor& dst, int64_t dst_offset, int64_t count);

// The sub-tensor at `index` along `axis` with that axis removed (a fresh heap
// tensor). `axis` must be in [0, rank) and `index` in [0, dims[axis]).
Result<Tensor> SliceAlongAxis(const Tensor& t, int64_t axis, int64_t index);

// Writes `parts` (all of the same element type and dims D) into `out`, whose
// dims are D with parts.size() inserted at `axis`: part p lands at position
// p along that axis. `out` must already have that shape.
void StackAlongAxis(const std::vector<Tensor>& parts, int64_t axis, Tensor& out);

// Allocates output i like `t` and copies `t` into it.
Status CopyTensorToOutput(KernelContext& ctx, size_t i, const Tensor& t);
// Stores `v` as output i: tensors are copied into a fresh output, sequences
// and empty optionals are shared (their contents are immutable).
Status SetValueOutput(KernelContext& ctx, size_t i, const Value& v);
// `v` with any top-level tensor deep-copied to the heap, so that it stays
// valid whatever happens to the buffers of whoever produced it.
Result<Value> OwnedCopy(const Value& v);

// The static type of a runtime value (tensor dims become known dims).
TypeInfo TypeOfValue(const Value& v);

// The most precise type covering both `a` and `b`: dims kept where equal,
// unknown where they differ, no shape when ranks differ; an unknown type when
// kinds or element types disagree. Never fails.
TypeInfo UnionTypes(const TypeInfo& a, const TypeInfo& b);
bool TypesEqual(const TypeInfo& a, const TypeInfo& b);
// `t` with every tensor shape inside it (sequence elements included) dropped.
TypeInfo WithoutShapes(const TypeInfo& t);

// The declared types of a graph's outputs (what its ValueInfos say).
std::vector<TypeInfo> DeclaredOutputTypes(const Graph& g);

// Body output types from the inference callback when one is provided,
// otherwise from the body's declared outputs.
Result<std::vector<TypeInfo>> InferBody(const InferenceContext& ictx, const Graph& body,
                                        const std::vector<TypeInfo>& input_types);

}  // namespace nee::cf
