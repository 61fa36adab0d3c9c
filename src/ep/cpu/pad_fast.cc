// Pad (opset 11+) as row copies, for every element type whose storage is
// whole bytes. The reference kernel (ops/pad_tile.cc) maps every output
// element through per-dim coordinate tables and copies it alone through a
// type dispatch: a 1x64x56x56 float constant pad took 1.1 ms there against
// ONNX Runtime's 0.08 ms, and a 512-sample reflect pad (silero-vad's STFT)
// 5.4 us against 1.1 us.
//
// Here the output is seen as rows of its last dim. A row whose outer
// coordinates all land inside the input (after the mode's mapping) is its
// source row's bytes with the row's left and right padding around them: the
// middle one memcpy, the pads element by element (constant: from a row of
// fill values made once). A row whose outer coordinates land in constant
// padding is a copy of that fill row. Rows are cut into equal pieces over the
// threads; copies only move bits, so any split gives the same output.
//
// Handled: constant, reflect, edge and wrap modes, non-negative pads, no axes
// input, a non-empty input. Everything else (negative pads crop, axes,
// opsets before 11, strings, sub-byte types, malformed inputs) goes to the
// reference, which also reports the errors.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/parallel_tasks.h"
#include "ops/op_util.h"
#include "ops/tensor_util.h"

namespace nee::cpu {
namespace {

constexpr int64_t kPieceBytes = 64 << 10;  // output bytes per task
constexpr int64_t kMaxPieces = 256;
constexpr int64_t kMaxPad = int64_t{1} << 50;  // as the reference: sums stay far from overflow

enum class Mode { kConstant, kReflect, kEdge, kWrap };

struct PadPlan {
  Mode mode = Mode::kConstant;
  size_t esize = 0;
  std::vector<int64_t> begin, end, out_dims;
  std::vector<uint8_t> fill;  // one element's bytes (zeros unless a value is given)
};

// Byte size of one element, or 0 for storage this file does not handle.
size_t ElementBytes(DataType t) {
  if (t == DataType::kString || !IsValidDataType(static_cast<int32_t>(t))) return 0;
  const int bits = ElementBits(t);
  return bits % 8 == 0 ? static_cast<size_t>(bits / 8) : 0;
}

bool ReadMode(const KernelContext& ctx, Mode* mode) {
  auto name = ctx.node().GetString("mode", "constant");
  if (!name.ok()) return false;
  if (*name == "constant") *mode = Mode::kConstant;
  else if (*name == "reflect") *mode = Mode::kReflect;
  else if (*name == "edge") *mode = Mode::kEdge;
  else if (*name == "wrap") *mode = Mode::kWrap;
  else return false;
  return true;
}

// The fill element: the constant_value input's first element, zeros when absent or empty.
bool ReadFill(const KernelContext& ctx, const Tensor& x, PadPlan* plan) {
  plan->fill.assign(plan->esize, 0);
  if (!ctx.has_input(2)) return true;
  const Value* v = ctx.input(2);
  if (!v->is_tensor() || v->tensor().dtype() != x.dtype()) return false;
  if (v->tensor().num_elements() >= 1) std::memcpy(plan->fill.data(), v->tensor().raw_data(), plan->esize);
  return true;
}

// False when the reference should run (unsupported or malformed: it words the error).
bool ReadPlan(KernelContext& ctx, PadPlan* plan) {
  if (ctx.opset() < 11 || ctx.num_inputs() < 2 || ctx.num_inputs() > 4 || ctx.has_input(3)) return false;
  if (!ctx.has_input(0) || !ctx.has_input(1) || !ctx.input(0)->is_tensor() || !ctx.input(1)->is_tensor())
    return false;
  const Tensor& x = ctx.input(0)->tensor();
  plan->esize = ElementBytes(x.dtype());
  if (plan->esize == 0 || x.rank() == 0 || x.num_elements() == 0 || !ReadMode(ctx, &plan->mode)) return false;
  auto pads = tensor_util::IntInput(ctx, 1);
  const auto rank = static_cast<size_t>(x.rank());
  if (!pads.ok() || pads->size() != 2 * rank) return false;
  for (int64_t p : *pads)
    if (p < 0 || p > kMaxPad) return false;
  plan->begin.assign(pads->begin(), pads->begin() + static_cast<std::ptrdiff_t>(rank));
  plan->end.assign(pads->begin() + static_cast<std::ptrdiff_t>(rank), pads->end());
  for (size_t d = 0; d < rank; ++d) plan->out_dims.push_back(x.dims()[d] + plan->begin[d] + plan->end[d]);
  return ReadFill(ctx, x, plan);
}

// Source coordinate of output coordinate `o` along a dim of size n >= 1; -1
// for constant padding. The reference's rules (ops/pad_tile.cc PadSource).
int64_t SourceOf(int64_t o, int64_t begin, int64_t n, Mode mode) {
  int64_t c = o - begin;
  if (c >= 0 && c < n) return c;
  switch (mode) {
    case Mode::kConstant: return -1;
    case Mode::kEdge: return c < 0 ? 0 : n - 1;
    case Mode::kWrap: return ((c % n) + n) % n;
    case Mode::kReflect: break;
  }
  if (n == 1) return 0;  // mirror without repeating the edge
  if (c < 0 && -c < n) return -c;  // within one reflection: no division
  if (c >= n && c < 2 * n - 1) return 2 * (n - 1) - c;
  const int64_t period = 2 * (n - 1);
  c = ((c % period) + period) % period;
  return c < n ? c : period - c;
}

// Copies one element of E bytes (E a constant where it matters, so a move).
template <size_t E>
inline void CopyElement(uint8_t* dst, const uint8_t* src, size_t esize) {
  std::memcpy(dst, src, E ? E : esize);
}

struct Geometry {
  const uint8_t* x;
  uint8_t* y;
  int64_t rows;                           // output rows (product of the outer dims)
  int64_t in_row, out_row;                // elements per input / output row
  int64_t left, right;                    // the last dim's pads
  std::vector<int64_t> outer_dims;        // output dims but the last
  std::vector<std::vector<int64_t>> src;  // per outer dim: source coordinate per output coordinate (-1: fill)
  std::vector<int64_t> in_strides;        // per outer dim, in input rows
  std::vector<int64_t> pad_src;           // the last dim's left then right pad: source column (-1: fill)
  std::vector<uint8_t> fill_row;          // out_row fill elements
};

// Output rows [r0, r1): each one its source row with its pads, or the fill row.
template <size_t E>
void CopyRows(const Geometry& g, size_t esize, int64_t r0, int64_t r1) {
  const size_t rank = g.outer_dims.size();
  std::vector<int64_t> index(rank, 0);
  for (int64_t r = r0, d = static_cast<int64_t>(rank) - 1; d >= 0; --d) {
    index[static_cast<size_t>(d)] = r % g.outer_dims[static_cast<size_t>(d)];
    r /= g.outer_dims[static_cast<size_t>(d)];
  }
  const size_t row_bytes = static_cast<size_t>(g.out_row) * esize;
  for (int64_t r = r0; r < r1; ++r) {
    uint8_t* dst = g.y + static_cast<size_t>(r) * row_bytes;
    int64_t src_row = 0;
    bool inside = true;
    for (size_t d = 0; d < rank && inside; ++d) {
      const int64_t c = g.src[d][static_cast<size_t>(index[d])];
      inside = c >= 0;
      src_row += c * g.in_strides[d];
    }
    if (!inside) {
      std::memcpy(dst, g.fill_row.data(), row_bytes);
    } else {
      const uint8_t* src = g.x + static_cast<size_t>(src_row * g.in_row) * esize;
      for (int64_t j = 0; j < g.left + g.right; ++j) {
        const int64_t col = j < g.left ? j : g.left + g.in_row + (j - g.left);
        const int64_t s = g.pad_src[static_cast<size_t>(j)];
        CopyElement<E>(dst + static_cast<size_t>(col) * esize,
                       s < 0 ? g.fill_row.data() : src + static_cast<size_t>(s) * esize, esize);
      }
      std::memcpy(dst + static_cast<size_t>(g.left) * esize, src, static_cast<size_t>(g.in_row) * esize);
    }
    for (int64_t d = static_cast<int64_t>(rank) - 1; d >= 0; --d) {  // next row's outer coordinates
      if (++index[static_cast<size_t>(d)] < g.outer_dims[static_cast<size_t>(d)]) break;
      index[static_cast<size_t>(d)] = 0;
    }
  }
}

void CopyRowsAnySize(const Geometry& g, size_t esize, int64_t r0, int64_t r1) {
  switch (esize) {
    case 1: CopyRows<1>(g, esize, r0, r1); break;
    case 2: CopyRows<2>(g, esize, r0, r1); break;
    case 4: CopyRows<4>(g, esize, r0, r1); break;
    case 8: CopyRows<8>(g, esize, r0, r1); break;
    default: CopyRows<0>(g, esize, r0, r1); break;
  }
}

Geometry MakeGeometry(const PadPlan& p, const Tensor& x, Tensor& y) {
  const size_t last = p.out_dims.size() - 1;
  Geometry g;
  g.x = static_cast<const uint8_t*>(x.raw_data());
  g.y = static_cast<uint8_t*>(y.raw_data());
  g.in_row = x.dims()[last];
  g.out_row = p.out_dims[last];
  g.left = p.begin[last];
  g.right = p.end[last];
  g.outer_dims.assign(p.out_dims.begin(), p.out_dims.begin() + static_cast<std::ptrdiff_t>(last));
  g.rows = 1;
  int64_t stride = 1;
  g.in_strides.assign(last, 0);
  g.src.resize(last);
  for (size_t d = last; d-- > 0;) {
    g.rows *= p.out_dims[d];
    g.in_strides[d] = stride;
    stride *= x.dims()[d];
    g.src[d].resize(static_cast<size_t>(p.out_dims[d]));
    for (int64_t o = 0; o < p.out_dims[d]; ++o)
      g.src[d][static_cast<size_t>(o)] = SourceOf(o, p.begin[d], x.dims()[d], p.mode);
  }
  for (int64_t j = 0; j < g.left; ++j) g.pad_src.push_back(SourceOf(j, g.left, g.in_row, p.mode));
  for (int64_t j = 0; j < g.right; ++j)
    g.pad_src.push_back(SourceOf(g.left + g.in_row + j, g.left, g.in_row, p.mode));
  // Only constant padding reads fill values; the row is built by doubling
  // (a 576-float row element by element took longer than the pad itself).
  const bool fills = p.mode == Mode::kConstant &&
                     (g.left + g.right > 0 || std::any_of(g.src.begin(), g.src.end(), [](const auto& m) {
                        return std::find(m.begin(), m.end(), -1) != m.end();
                      }));
  if (fills) {
    const size_t bytes = static_cast<size_t>(g.out_row) * p.esize;
    g.fill_row.resize(bytes);
    std::memcpy(g.fill_row.data(), p.fill.data(), p.esize);
    for (size_t done = p.esize; done < bytes; done *= 2)
      std::memcpy(g.fill_row.data() + done, g.fill_row.data(), std::min(done, bytes - done));
  }
  return g;
}

}  // namespace

Status PadFast(KernelContext& ctx) {
  PadPlan plan;
  if (!ReadPlan(ctx, &plan)) return RunReference(ctx);
  const Tensor& x = ctx.input(0)->tensor();
  // Allocating first makes absurd sizes fail before any table is built.
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, x.dtype(), plan.out_dims));
  if (y.num_elements() == 0) return Status::Ok();
  const Geometry g = MakeGeometry(plan, x, y);
  const int64_t row_bytes = g.out_row * static_cast<int64_t>(plan.esize);
  const int64_t pieces = std::clamp<int64_t>(g.rows * row_bytes / kPieceBytes, 1, std::min(kMaxPieces, g.rows));
  const int64_t step = (g.rows + pieces - 1) / pieces;
  ParallelTasks(ctx, (g.rows + step - 1) / step, [&](int64_t t) {
    CopyRowsAnySize(g, plan.esize, t * step, std::min(g.rows, (t + 1) * step));
  });
  return Status::Ok();
}

}  // namespace nee::cpu
