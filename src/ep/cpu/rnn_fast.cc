// LSTM, GRU and RNN on float32 with AVX2 / AVX-512. The reference kernel (ops/rnn.cc)
// works in double, one (direction, batch entry) pair at a time, with scalar
// loops; a speech LSTM ran 26x slower than ONNX Runtime through it.
//
// Here, per direction:
//   1. X . W^T (+ the biases that simply add) for every time step at once: one
//      SGEMM with W packed once per session when it is a constant.
//   2. Per step, h . R^T as a matrix-vector product over R^T stored in panels
//      of 128 columns (eight AVX-512 accumulators; R read once, in order), added to
//      step 1's row, then the gates' nonlinearities on 8 lanes.
// Gate columns are laid out gate by gate, each padded to a multiple of 8
// (hp), so the gate code never needs a tail.
//
// Batch entries of a direction step together in groups of up to four, so
// that a step reads R once for the group (AVX-512).
//
// Determinism: each (direction, group of entries) runs as an independent
// chain of links of a few steps (base/parallel_chains.h: a thread that
// finishes early takes a lagging thread's chain over between two links),
// computed the same way whichever thread runs a link and however the
// entries are grouped; the SGEMM does not depend
// on the thread count. The AVX2 and AVX-512 step products give the same bits.
// Results differ from the reference (double) by float rounding, within
// 1e-5 + 1e-5 * |reference| (why: tests/unit/ep/rnn_fast_test.cc).
//
// Handled: default activations (LSTM Sigmoid/Tanh/Tanh, GRU Sigmoid/Tanh, RNN
// Tanh), any direction, sequence_lens, initial states, LSTM peepholes and
// input_forget, GRU linear_before_reset, clip, layout 0/1, any subset of the
// outputs. Everything else (other activations or element types, malformed
// inputs, empty dims, CPUs without AVX2+FMA) goes to the reference kernel,
// which also reports the errors.
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "base/parallel_chains.h"
#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/parallel_tasks.h"
#include "ep/cpu/sgemm.h"
#include "ops/op_util.h"

#if defined(__x86_64__) || defined(__i386__)
#include "ep/cpu/lstm_cell.h"
#include "ep/cpu/simd_math.h"
#include "ep/cpu/simd_x86.h"
#define NEE_RNN_X86 1
#endif

namespace nee::cpu {

#ifdef NEE_RNN_X86
namespace {

enum class Cell { kRnn, kGru, kLstm };

// Columns per recurrent-weight panel: eight AVX-512 accumulators. AVX2 has
// registers for only 64 columns (eight ymm accumulators) and gets panels that
// wide: read as two halves of a 128-column panel, each pass walked rows 512
// bytes apart, reading half of each, and a 320-unit LSTM direction's step
// product ran 15% slower than over contiguous 64-column panels (speech model,
// 1 thread, Zen 3). Each column's sum is the same chain either way.
int64_t PanelWidth() { return SgemmActiveIsa() == SgemmIsa::kAvx512 ? 128 : 64; }

int64_t RoundUp8(int64_t n) { return (n + 7) / 8 * 8; }

// ---- The problem, when the fast path applies -------------------------------

struct Problem {
  Cell cell = Cell::kLstm;
  int64_t seq = 0, batch = 0, input = 0, hidden = 0, hp = 0, dirs = 1, gates = 4;
  bool reverse_only = false;
  int64_t layout = 0;
  float clip = -1.f;  // < 0: none
  bool input_forget = false, linear_before_reset = false, peepholes = false;
  std::vector<int64_t> seq_lens;  // empty: every entry runs `seq` steps

  int64_t cols() const { return gates * hp; }
  // Row of X (and of the projection) holding time t of batch entry b.
  int64_t XRow(int64_t t, int64_t b) const { return layout == 0 ? t * batch + b : b * seq + t; }
  int64_t YOffset(int64_t t, int64_t d, int64_t b) const {
    return (layout == 0 ? (t * dirs + d) * batch + b : (b * seq + t) * dirs + d) * hidden;
  }
  int64_t StateOffset(int64_t d, int64_t b) const { return (layout == 0 ? d * batch + b : b * dirs + d) * hidden; }
  int64_t Length(int64_t b) const { return seq_lens.empty() ? seq : seq_lens[static_cast<size_t>(b)]; }
};

bool EqualsIgnoringCase(const std::string& a, const char* b) {
  if (a.size() != std::strlen(b)) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

// Whether the activations attribute is absent or spells out the defaults
// (once, or once per direction).
bool DefaultActivations(const Node& node, Cell cell, int64_t dirs) {
  // RNN's declared default is ["Tanh", "Tanh"] (one direction uses the first).
  auto names = node.GetStrings("activations", cell == Cell::kRnn ? std::vector<std::string>{"Tanh", "Tanh"}
                                                                 : std::vector<std::string>{});
  if (!names.ok()) return false;
  if (names->empty()) return true;
  if (cell == Cell::kRnn && dirs == 1 && names->size() == 2) names->resize(1);
  static const char* kLstm[] = {"Sigmoid", "Tanh", "Tanh"};
  static const char* kGru[] = {"Sigmoid", "Tanh"};
  static const char* kRnn[] = {"Tanh"};
  const char** defaults = cell == Cell::kLstm ? kLstm : cell == Cell::kGru ? kGru : kRnn;
  const size_t per_dir = cell == Cell::kLstm ? 3 : cell == Cell::kGru ? 2 : 1;
  if (names->size() != per_dir && names->size() != per_dir * static_cast<size_t>(dirs)) return false;
  for (size_t i = 0; i < names->size(); ++i)
    if (!EqualsIgnoringCase((*names)[i], defaults[i % per_dir])) return false;
  return true;
}

bool IsFloat(const KernelContext& ctx, size_t i) {
  return ctx.input(i)->is_tensor() && ctx.input(i)->tensor().dtype() == DataType::kFloat;
}

bool HasDims(const KernelContext& ctx, size_t i, const std::vector<int64_t>& dims) {
  return !ctx.has_input(i) || (IsFloat(ctx, i) && ctx.input(i)->tensor().dims() == dims);
}

// Attributes the fast path reads; false for anything it leaves to the reference.
bool ReadAttributes(const KernelContext& ctx, Problem* p) {
  const Node& node = ctx.node();
  auto direction = node.GetString("direction", "forward");
  auto hidden_size = node.GetInt("hidden_size", -1);
  if (!direction.ok() || !hidden_size.ok()) return false;
  if (*direction == "bidirectional") p->dirs = 2;
  else if (*direction == "reverse") p->reverse_only = true;
  else if (*direction != "forward") return false;
  if (*hidden_size != -1 && *hidden_size != p->hidden) return false;
  if (ctx.opset() >= 14) {
    auto layout = node.GetInt("layout", 0);
    if (!layout.ok() || (*layout != 0 && *layout != 1)) return false;
    p->layout = *layout;
  }
  if (node.HasAttr("clip")) {
    auto clip = node.GetFloat("clip");
    if (!clip.ok() || !(*clip > 0)) return false;
    p->clip = *clip;
  }
  auto lbr = node.GetInt("linear_before_reset", 0);
  auto input_forget = node.GetInt("input_forget", 0);
  if (!lbr.ok() || !input_forget.ok()) return false;
  p->linear_before_reset = p->cell == Cell::kGru && *lbr != 0;
  p->input_forget = p->cell == Cell::kLstm && *input_forget != 0;
  return DefaultActivations(node, p->cell, p->dirs);
}

// Reads dims and attributes; false when the reference kernel should run
// (unsupported, empty, or malformed: the reference reports the error).
bool ReadProblem(const KernelContext& ctx, Cell cell, Problem* p) {
  if (!CpuHasAvx2Fma() || SgemmPortableForced()) return false;
  const size_t max_inputs = cell == Cell::kLstm ? 8 : 6;
  if (ctx.num_inputs() > max_inputs || !ctx.has_input(0) || !ctx.has_input(1) || !ctx.has_input(2)) return false;
  for (size_t i : {0, 1, 2})
    if (!IsFloat(ctx, i) || ctx.input(i)->tensor().rank() != 3) return false;
  p->cell = cell;
  p->gates = cell == Cell::kLstm ? 4 : cell == Cell::kGru ? 3 : 1;
  const Tensor& r = ctx.input(2)->tensor();
  p->hidden = r.dim(2);
  if (!ReadAttributes(ctx, p)) return false;
  const Tensor& x = ctx.input(0)->tensor();
  p->seq = x.dim(p->layout == 0 ? 0 : 1);
  p->batch = x.dim(p->layout == 0 ? 1 : 0);
  p->input = x.dim(2);
  p->hp = RoundUp8(p->hidden);
  if (p->seq == 0 || p->batch == 0 || p->input == 0 || p->hidden == 0) return false;
  const int64_t gh = p->gates * p->hidden;
  const std::vector<int64_t> state = p->layout == 0 ? std::vector<int64_t>{p->dirs, p->batch, p->hidden}
                                                    : std::vector<int64_t>{p->batch, p->dirs, p->hidden};
  if (!HasDims(ctx, 1, {p->dirs, gh, p->input}) || !HasDims(ctx, 2, {p->dirs, gh, p->hidden}) ||
      !HasDims(ctx, 3, {p->dirs, 2 * gh}) || !HasDims(ctx, 5, state))
    return false;
  if (cell == Cell::kLstm && (!HasDims(ctx, 6, state) || !HasDims(ctx, 7, {p->dirs, 3 * p->hidden}))) return false;
  p->peepholes = cell == Cell::kLstm && ctx.has_input(7);
  if (ctx.has_input(4)) {
    const Value* lens = ctx.input(4);
    if (!lens->is_tensor()) return false;
    const Tensor& t = lens->tensor();
    if ((t.dtype() != DataType::kInt32 && t.dtype() != DataType::kInt64) || t.dims() != std::vector<int64_t>{p->batch})
      return false;
    auto values = t.ToInt64Vector();
    if (!values.ok()) return false;
    for (int64_t len : *values)
      if (len < 0 || len > p->seq) return false;
    p->seq_lens = *values;
  }
  return true;
}

// ---- Weights, prepared once per session when constant -----------------------

// A k x n matrix (n a multiple of 8) stored as panels of `panel` columns (the
// last narrower), each k rows of its width: what the per-step product reads.
// Panels are streamed from L2 once per step. On 4 KB pages the hardware
// prefetchers restart at every page boundary (every 8 rows of a full panel);
// on a transparent huge page they run through: the step product of a
// 320-unit LSTM direction (320 x 1280) took 17 instead of 24 us on a 2 MB
// page (thread CPU time, best of 20). Large panel buffers are therefore
// 2 MB-aligned, rounded up to 2 MB and advised as huge; where the system
// declines, they are ordinary memory.
struct FreeDeleter {
  void operator()(float* p) const { std::free(p); }
};
using PanelBuffer = std::unique_ptr<float[], FreeDeleter>;

PanelBuffer AllocatePanels(int64_t floats) {
  constexpr size_t kHugePage = size_t{2} << 20;
  const size_t bytes = static_cast<size_t>(std::max<int64_t>(floats, 1)) * sizeof(float);
  const bool huge = bytes >= kHugePage / 2;  // smaller ones would waste most of the page
  const size_t align = huge ? kHugePage : 64;
  const size_t size = (bytes + align - 1) / align * align;
  float* p = static_cast<float*>(std::aligned_alloc(align, size));
  if (!p) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
  if (huge) madvise(p, size, MADV_HUGEPAGE);
#endif
  return PanelBuffer(p);
}

struct PanelMatrix {
  int64_t k = 0, n = 0;
  PanelBuffer data;
  int64_t panel = 0;  // columns per panel (PanelWidth() when made)

  int64_t panels() const { return (n + panel - 1) / panel; }
  // The first column of the q-th panel visited, first to last or backwards.
  int64_t PanelStart(int64_t q, bool backwards) const { return (backwards ? panels() - 1 - q : q) * panel; }
};

// Whether columns j..j+7 are equally spaced rows of one matrix (none a padding column).
bool EightEvenlySpaced(const std::vector<const float*>& cols, size_t j) {
  if (!cols[j] || !cols[j + 1]) return false;
  const std::ptrdiff_t step = cols[j + 1] - cols[j];
  for (size_t c = 2; c < 8; ++c)
    if (!cols[j + c] || cols[j + c] - cols[j + c - 1] != step) return false;
  return true;
}

// The panels of a k x n matrix whose column j is the k contiguous floats at
// column(j), or zeros where column(j) is null (a padding column). Eight
// columns that are evenly spaced rows of the source go through 8x8
// transposes in registers (each column read in runs, each panel row written
// eight floats at a time); other columns one float at a time.
template <typename Column>
PanelMatrix MakePanels(int64_t k, int64_t n, Column column) {
  PanelMatrix m{k, n, AllocatePanels(k * n), PanelWidth()};
  std::vector<const float*> cols(static_cast<size_t>(m.panel));
  for (int64_t j0 = 0; j0 < n; j0 += m.panel) {
    const int64_t width = std::min(m.panel, n - j0);
    for (int64_t j = 0; j < width; ++j) cols[static_cast<size_t>(j)] = column(j0 + j);
    float* panel = m.data.get() + j0 * k;
    auto one_column = [&](int64_t j) {
      const float* src = cols[static_cast<size_t>(j)];
      for (int64_t p = 0; p < k; ++p) panel[p * width + j] = src ? src[p] : 0.f;
    };
    int64_t j = 0;
    for (; j + 8 <= width; j += 8) {
      if (!EightEvenlySpaced(cols, static_cast<size_t>(j))) {
        for (int64_t c = 0; c < 8; ++c) one_column(j + c);
        continue;
      }
      const float* src = cols[static_cast<size_t>(j)];
      TransposeColumns8Avx2(src, cols[static_cast<size_t>(j) + 1] - src, k, panel + j, width);
    }
    for (; j < width; ++j) one_column(j);
  }
  return m;
}

struct DirectionWeights {
  std::unique_ptr<SgemmPackedB> w;  // input x gate columns (padded), for the projection
  std::vector<PanelMatrix> r;       // recurrent weights; GRU without linear_before_reset: [z r], [h]
  std::vector<float> bias;          // [cols]: the biases added to the projection
  std::vector<float> rb_h;          // GRU with linear_before_reset: Rb of the h gate [hp]
  std::vector<float> peep;          // LSTM: Pi, Po, Pf, each [hp]
};

struct Weights {
  std::vector<DirectionWeights> dirs;
};

// Gate column (padded layout) -> row of W / R / B.
int64_t GateRow(const Problem& p, int64_t col) {
  const int64_t g = col / p.hp, j = col % p.hp;
  return j < p.hidden ? g * p.hidden + j : -1;
}

DirectionWeights PrepareDirection(const KernelContext& ctx, const Problem& p, int64_t d) {
  const int64_t H = p.hidden, I = p.input, n = p.cols();
  const float* w = ctx.input(1)->tensor().data<float>() + d * p.gates * H * I;
  const float* r = ctx.input(2)->tensor().data<float>() + d * p.gates * H * H;
  const float* b = ctx.has_input(3) ? ctx.input(3)->tensor().data<float>() + d * 2 * p.gates * H : nullptr;
  DirectionWeights dw;
  // The projection multiplies by W^T, whose gate columns are W's rows in the
  // padded order: W itself when no gate is padded, else W's rows copied into
  // that order (zero rows for the padding). Packed through the transposed
  // view, which reads each row as a run instead of W column by column.
  std::vector<float> padded_rows;
  const float* rows = w;
  if (p.hp != H) {
    padded_rows.assign(static_cast<size_t>(n * I), 0.f);
    for (int64_t col = 0; col < n; ++col)
      if (const int64_t row = GateRow(p, col); row >= 0)
        std::memcpy(padded_rows.data() + col * I, w + row * I, sizeof(float) * static_cast<size_t>(I));
    rows = padded_rows.data();
  }
  dw.w = std::make_unique<SgemmPackedB>(I, n, MatrixView{rows, 1, I});
  // R^T in panels: column `col` of the recurrent matrix is R's row for that gate column.
  auto rt = [&](int64_t col_offset) {
    return [&, col_offset](int64_t col) -> const float* {
      const int64_t row = GateRow(p, col + col_offset);
      return row >= 0 ? r + row * H : nullptr;
    };
  };
  const bool split = p.cell == Cell::kGru && !p.linear_before_reset;
  if (split) {
    dw.r.push_back(MakePanels(H, 2 * p.hp, rt(0)));
    dw.r.push_back(MakePanels(H, p.hp, rt(2 * p.hp)));
  } else {
    dw.r.push_back(MakePanels(H, n, rt(0)));
  }
  dw.bias.assign(static_cast<size_t>(n), 0.f);
  if (p.linear_before_reset) dw.rb_h.assign(static_cast<size_t>(p.hp), 0.f);
  for (int64_t col = 0; b && col < n; ++col) {
    const int64_t row = GateRow(p, col);
    if (row < 0) continue;
    const bool rb_apart = p.linear_before_reset && col >= 2 * p.hp;  // inside r * (...)
    dw.bias[static_cast<size_t>(col)] = rb_apart ? b[row] : b[row] + b[p.gates * H + row];
    if (rb_apart) dw.rb_h[static_cast<size_t>(col - 2 * p.hp)] = b[p.gates * H + row];
  }
  if (p.peepholes) {
    const float* pp = ctx.input(7)->tensor().data<float>() + d * 3 * H;
    dw.peep.assign(static_cast<size_t>(3 * p.hp), 0.f);
    for (int64_t g = 0; g < 3; ++g)
      for (int64_t j = 0; j < H; ++j) dw.peep[static_cast<size_t>(g * p.hp + j)] = pp[g * H + j];
  }
  return dw;
}

std::shared_ptr<const Weights> PrepareWeights(const KernelContext& ctx, const Problem& p) {
  auto weights = std::make_shared<Weights>();
  for (int64_t d = 0; d < p.dirs; ++d) weights->dirs.push_back(PrepareDirection(ctx, p, d));
  return weights;
}

// Cached per session when every weight input is a constant; the key holds
// everything the preparation depends on besides the weights' bytes.
std::shared_ptr<const Weights> GetWeights(KernelContext& ctx, const Problem& p) {
  const bool constant = ctx.input_is_constant(1) && ctx.input_is_constant(2) &&
                        (!ctx.has_input(3) || ctx.input_is_constant(3)) && (!p.peepholes || ctx.input_is_constant(7));
  if (ctx.prepared() && constant) {
    auto cached = ctx.prepared()->GetOrBuild<Weights>(
        {static_cast<int64_t>(p.cell), p.dirs, p.input, p.hidden, p.linear_before_reset ? 1 : 0,
         ctx.has_input(3) ? 1 : 0, p.peepholes ? 1 : 0},
        [&]() -> Result<std::shared_ptr<const Weights>> {
          auto weights = PrepareWeights(ctx, p);
          ctx.ReleaseConstantInput(1);  // runs use the prepared copies of W and R
          ctx.ReleaseConstantInput(2);
          return weights;
        });
    if (cached.ok()) return cached.value();
  }
  return PrepareWeights(ctx, p);
}

// ---- Vector pieces -----------------------------------------------------------

// out[j] = init[j] + sum_k h[k] * m(k, j), k ascending, for kVectors * 8
// columns of a panel whose rows are `stride` floats. Each column is its own
// chain of FMAs, so the AVX2 and AVX-512 versions give the same bits.
// Unrolled explicitly: -O2 otherwise keeps acc[] on the stack.
template <int kVectors>
__attribute__((target("avx2,fma"), always_inline)) inline void PanelProduct(const float* panel, int64_t stride,
                                                                           int64_t k, const float* h,
                                                                           const float* init, float* out) {
  __m256 acc[kVectors];
#pragma GCC unroll 8
  for (int v = 0; v < kVectors; ++v) acc[v] = _mm256_loadu_ps(init + 8 * v);
  for (int64_t p = 0; p < k; ++p) {
    const __m256 hb = _mm256_broadcast_ss(h + p);
    const float* row = panel + p * stride;
#pragma GCC unroll 8
    for (int v = 0; v < kVectors; ++v) acc[v] = _mm256_fmadd_ps(hb, _mm256_loadu_ps(row + 8 * v), acc[v]);
  }
#pragma GCC unroll 8
  for (int v = 0; v < kVectors; ++v) _mm256_storeu_ps(out + 8 * v, acc[v]);
}

__attribute__((target("avx2,fma"))) void MatrixVectorAvx2(const PanelMatrix& m, const float* h, const float* init,
                                                          float* out, bool backwards) {
  for (int64_t q = 0; q < m.panels(); ++q) {
    const int64_t j0 = m.PanelStart(q, backwards);
    const int64_t width = std::min(m.panel, m.n - j0);
    for (int64_t c0 = 0; c0 < width; c0 += 64) {
      const float* panel = m.data.get() + j0 * m.k + c0;
      const float* in = init + j0 + c0;
      float* o = out + j0 + c0;
      switch (std::min<int64_t>(64, width - c0) / 8) {
        case 8: PanelProduct<8>(panel, width, m.k, h, in, o); break;
        case 7: PanelProduct<7>(panel, width, m.k, h, in, o); break;
        case 6: PanelProduct<6>(panel, width, m.k, h, in, o); break;
        case 5: PanelProduct<5>(panel, width, m.k, h, in, o); break;
        case 4: PanelProduct<4>(panel, width, m.k, h, in, o); break;
        case 3: PanelProduct<3>(panel, width, m.k, h, in, o); break;
        case 2: PanelProduct<2>(panel, width, m.k, h, in, o); break;
        default: PanelProduct<1>(panel, width, m.k, h, in, o); break;
      }
    }
  }
}

#define NEE_RNN_AVX512 __attribute__((target("avx512f,avx512dq,avx512vl,avx512bw,fma")))

// As PanelProduct with 16 lanes; `last` masks the columns of the last vector
// (a panel's width is a multiple of 8, not always of 16).
template <int kVectors>
NEE_RNN_AVX512 inline __attribute__((always_inline)) void PanelProduct512(const float* panel, int64_t stride,
                                                                         int64_t k, const float* h,
                                                                         const float* init, float* out,
                                                                         __mmask16 last) {
  __m512 acc[kVectors];
#pragma GCC unroll 8
  for (int v = 0; v < kVectors; ++v)
    acc[v] = _mm512_maskz_loadu_ps(v == kVectors - 1 ? last : __mmask16(0xFFFF), init + 16 * v);
  for (int64_t p = 0; p < k; ++p) {
    const __m512 hb = _mm512_set1_ps(h[p]);
    const float* row = panel + p * stride;
#pragma GCC unroll 8
    for (int v = 0; v < kVectors; ++v)
      acc[v] = _mm512_fmadd_ps(
          hb, _mm512_maskz_loadu_ps(v == kVectors - 1 ? last : __mmask16(0xFFFF), row + 16 * v), acc[v]);
  }
#pragma GCC unroll 8
  for (int v = 0; v < kVectors; ++v)
    _mm512_mask_storeu_ps(out + 16 * v, v == kVectors - 1 ? last : __mmask16(0xFFFF), acc[v]);
}

NEE_RNN_AVX512 void MatrixVectorAvx512(const PanelMatrix& m, const float* h, const float* init, float* out,
                                       bool backwards) {
  for (int64_t q = 0; q < m.panels(); ++q) {
    const int64_t j0 = m.PanelStart(q, backwards);
    const int64_t width = std::min(m.panel, m.n - j0);
    const float* panel = m.data.get() + j0 * m.k;
    const __mmask16 last = width % 16 ? __mmask16(0x00FF) : __mmask16(0xFFFF);
    switch ((width + 15) / 16) {
      case 8: PanelProduct512<8>(panel, width, m.k, h, init + j0, out + j0, last); break;
      case 7: PanelProduct512<7>(panel, width, m.k, h, init + j0, out + j0, last); break;
      case 6: PanelProduct512<6>(panel, width, m.k, h, init + j0, out + j0, last); break;
      case 5: PanelProduct512<5>(panel, width, m.k, h, init + j0, out + j0, last); break;
      case 4: PanelProduct512<4>(panel, width, m.k, h, init + j0, out + j0, last); break;
      case 3: PanelProduct512<3>(panel, width, m.k, h, init + j0, out + j0, last); break;
      case 2: PanelProduct512<2>(panel, width, m.k, h, init + j0, out + j0, last); break;
      default: PanelProduct512<1>(panel, width, m.k, h, init + j0, out + j0, last); break;
    }
  }
}

// out = init + h . m, per the SGEMM's ISA choice (tests may lower it to AVX2).
void MatrixVector(const PanelMatrix& m, const float* h, const float* init, float* out, bool backwards) {
  if (SgemmActiveIsa() == SgemmIsa::kAvx512) MatrixVectorAvx512(m, h, init, out, backwards);
  else MatrixVectorAvx2(m, h, init, out, backwards);
}

// Up to kGroup sequences of one direction step together, so that each step
// reads the recurrent weights once for all of them.
constexpr int kGroup = 4;

// The rows of one step's product: each sequence's state, the row its sums
// start from, and where they go.
struct Rows {
  int n = 0;
  bool backwards = false;  // panels last to first (PanelMatrix::PanelStart)
  const float* h[kGroup];
  const float* init[kGroup];
  float* out[kGroup];
};

// PanelProduct512 for kRows rows over `width` (<= 64) columns starting at
// `col`: each column's chain of FMAs is the one-row chain, so grouping never
// changes a bit.
template <int kRows>
NEE_RNN_AVX512 inline __attribute__((always_inline)) void PanelRows512(const float* panel, int64_t stride, int64_t k,
                                                                      const Rows& rows, int64_t col, int64_t width) {
  __mmask16 mask[4];
  for (int v = 0; v < 4; ++v)
    mask[v] = static_cast<__mmask16>((1u << std::clamp<int64_t>(width - 16 * v, 0, 16)) - 1);
  __m512 acc[kRows][4];
#pragma GCC unroll 4
  for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) acc[r][v] = _mm512_maskz_loadu_ps(mask[v], rows.init[r] + col + 16 * v);
  for (int64_t p = 0; p < k; ++p) {
    const float* row = panel + p * stride;
    __m512 hb[kRows];
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r) hb[r] = _mm512_set1_ps(rows.h[r][p]);
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) {
      const __m512 wv = _mm512_maskz_loadu_ps(mask[v], row + 16 * v);
#pragma GCC unroll 4
      for (int r = 0; r < kRows; ++r) acc[r][v] = _mm512_fmadd_ps(hb[r], wv, acc[r][v]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) _mm512_mask_storeu_ps(rows.out[r] + col + 16 * v, mask[v], acc[r][v]);
}

template <int kRows>
NEE_RNN_AVX512 void MatrixRowsAvx512(const PanelMatrix& m, const Rows& rows) {
  for (int64_t q = 0; q < m.panels(); ++q) {
    const int64_t j0 = m.PanelStart(q, rows.backwards);
    const int64_t width = std::min(m.panel, m.n - j0);
    const float* panel = m.data.get() + j0 * m.k;
    for (int64_t c0 = 0; c0 < width; c0 += 64)
      PanelRows512<kRows>(panel + c0, width, m.k, rows, j0 + c0, std::min<int64_t>(64, width - c0));
  }
}

// out[r] = init[r] + h[r] . m for every row; several rows share each read of m.
void MatrixRows(const PanelMatrix& m, const Rows& rows) {
  if (rows.n > 1 && SgemmActiveIsa() == SgemmIsa::kAvx512) {
    switch (rows.n) {
      case 2: MatrixRowsAvx512<2>(m, rows); return;
      case 3: MatrixRowsAvx512<3>(m, rows); return;
      default: MatrixRowsAvx512<4>(m, rows); return;
    }
  }
  for (int r = 0; r < rows.n; ++r) MatrixVector(m, rows.h[r], rows.init[r], rows.out[r], rows.backwards);
}


// ---- One step of each cell, for one batch entry ------------------------------
// `g`: the gate pre-activations [cols] (projection + h . R^T), h and c [hp].

struct StepArgs {
  const Problem* p;
  const DirectionWeights* w;
  bool clipped;
  float clip;
};

__attribute__((target("avx2,fma"), always_inline)) inline __m256 Clip8(__m256 x, const StepArgs& a) {
  return ClipGate8(x, a.clipped, a.clip);
}

void LstmGates(const StepArgs& a, const float* g, float* h, float* c) {
  const float* peep = a.w->peep.empty() ? nullptr : a.w->peep.data();
  LstmCellRow(g, peep, a.p->hp, a.p->hp, c, h, LstmCellOptions{a.clipped, a.clip, a.p->input_forget});
}

__attribute__((target("avx2,fma"))) void RnnGates(const StepArgs& a, const float* g, float* h) {
  for (int64_t j = 0; j < a.p->hp; j += 8) _mm256_storeu_ps(h + j, Tanh8(Clip8(_mm256_loadu_ps(g + j), a)));
}

// z and r from g[0, 2hp); the candidate from `pre_h` (linear_before_reset:
// xw_h + r * hr_h with hr_h = g[2hp, 3hp), which holds h . R_h^T + Rb_h).
__attribute__((target("avx2,fma"))) void GruUpdate(const StepArgs& a, const float* g, const float* xw_h,
                                                   const float* candidate_pre, float* h) {
  const int64_t hp = a.p->hp;
  const __m256 one = _mm256_set1_ps(1.f);
  for (int64_t j = 0; j < hp; j += 8) {
    const __m256 z = Sigmoid8(Clip8(_mm256_loadu_ps(g + j), a));
    __m256 pre;
    if (a.p->linear_before_reset) {
      const __m256 r = Sigmoid8(Clip8(_mm256_loadu_ps(g + hp + j), a));
      pre = _mm256_fmadd_ps(r, _mm256_loadu_ps(g + 2 * hp + j), _mm256_loadu_ps(xw_h + j));
    } else {
      pre = _mm256_loadu_ps(candidate_pre + j);
    }
    const __m256 candidate = Tanh8(Clip8(pre, a));
    const __m256 h_prev = _mm256_loadu_ps(h + j);
    // (1 - z) * candidate + z * h
    _mm256_storeu_ps(h + j, _mm256_fmadd_ps(z, h_prev, _mm256_mul_ps(_mm256_sub_ps(one, z), candidate)));
  }
}

// r * h into rh (GRU without linear_before_reset: the h gate's product input).
__attribute__((target("avx2,fma"))) void ResetHidden(const StepArgs& a, const float* g, const float* h, float* rh) {
  const int64_t hp = a.p->hp;
  for (int64_t j = 0; j < hp; j += 8) {
    const __m256 r = Sigmoid8(Clip8(_mm256_loadu_ps(g + hp + j), a));
    _mm256_storeu_ps(rh + j, _mm256_mul_ps(r, _mm256_loadu_ps(h + j)));
  }
}

// One sequence of a group: its state and per-step scratch.
struct Sequence {
  int64_t b = 0, len = 0;
  std::vector<float> h, c;  // [hp]
  std::vector<float> g, init, rh, pre;
};

// One time step of `n` sequences; xw[i] is sequence i's projection row [cols].
// Odd steps read R's panels last to first: the panels the previous step read
// last are still in L2 (R of a 320-wide LSTM is 1.6 MB, this core's L2 1 MB),
// where reading them in one order every step would find none there. Each
// panel's columns are summed alone, so the order changes no result.
void CellStep(const StepArgs& a, Sequence* const* seqs, const float* const* xw, int n, bool odd_step) {
  const Problem& p = *a.p;
  const DirectionWeights& w = *a.w;
  Rows rows;
  rows.n = n;
  rows.backwards = odd_step;
  auto set = [&rows](int i, const float* h, const float* init, float* out) {
    rows.h[i] = h;
    rows.init[i] = init;
    rows.out[i] = out;
  };
  switch (p.cell) {
    case Cell::kLstm:
      for (int i = 0; i < n; ++i) set(i, seqs[i]->h.data(), xw[i], seqs[i]->g.data());
      MatrixRows(w.r[0], rows);
      for (int i = 0; i < n; ++i) LstmGates(a, seqs[i]->g.data(), seqs[i]->h.data(), seqs[i]->c.data());
      break;
    case Cell::kRnn:
      for (int i = 0; i < n; ++i) set(i, seqs[i]->h.data(), xw[i], seqs[i]->g.data());
      MatrixRows(w.r[0], rows);
      for (int i = 0; i < n; ++i) RnnGates(a, seqs[i]->g.data(), seqs[i]->h.data());
      break;
    case Cell::kGru:
      if (p.linear_before_reset) {
        // z, r columns start from the projection, h columns from Rb_h alone.
        for (int i = 0; i < n; ++i) {
          Sequence& s = *seqs[i];
          std::copy(xw[i], xw[i] + 2 * p.hp, s.init.begin());
          std::copy(w.rb_h.begin(), w.rb_h.end(), s.init.begin() + 2 * p.hp);
          set(i, s.h.data(), s.init.data(), s.g.data());
        }
        MatrixRows(w.r[0], rows);
        for (int i = 0; i < n; ++i) GruUpdate(a, seqs[i]->g.data(), xw[i] + 2 * p.hp, nullptr, seqs[i]->h.data());
      } else {
        for (int i = 0; i < n; ++i) set(i, seqs[i]->h.data(), xw[i], seqs[i]->g.data());
        MatrixRows(w.r[0], rows);
        for (int i = 0; i < n; ++i) {
          Sequence& s = *seqs[i];
          ResetHidden(a, s.g.data(), s.h.data(), s.rh.data());
          set(i, s.rh.data(), xw[i] + 2 * p.hp, s.pre.data());
        }
        MatrixRows(w.r[1], rows);
        for (int i = 0; i < n; ++i) GruUpdate(a, seqs[i]->g.data(), nullptr, seqs[i]->pre.data(), seqs[i]->h.data());
      }
      break;
  }
}

// ---- The kernel ----------------------------------------------------------------

// Time steps a link of a recurrence's chain runs (ParallelChains): short
// enough that a thread that falls behind holds the others up by little (a
// step of a 320-wide LSTM direction takes ~35 us), long enough that handing
// a chain between threads stays rare.
constexpr int64_t kStepsPerLink = 8;

struct Outputs {
  float* y = nullptr;    // Y, zero-filled where entries are shorter than seq
  float* y_h = nullptr;  // may be null
  float* y_c = nullptr;
};

// Initial state of (direction d, batch entry b), zeros when the input is omitted, padded to hp.
std::vector<float> LoadState(const KernelContext& ctx, size_t index, const Problem& p, int64_t d, int64_t b) {
  std::vector<float> state(static_cast<size_t>(p.hp), 0.f);
  if (ctx.has_input(index)) {
    const float* src = ctx.input(index)->tensor().data<float>() + p.StateOffset(d, b);
    std::copy(src, src + p.hidden, state.begin());
  }
  return state;
}

// Batch entries [b0, b1) (at most kGroup) in direction d, stepped together;
// an entry whose sequence has ended drops out. The recurrence of each
// (direction, entry) pair is independent of the others. It runs a few steps
// at a time (a link of ParallelChains), so another thread can take it over
// between two runs of steps.
class GroupRecurrence {
 public:
  GroupRecurrence(const KernelContext& ctx, const Problem& p, const DirectionWeights& w, int64_t d, int64_t b0,
                  int64_t b1)
      : p_(p), args_{&p, &w, p.clip > 0, p.clip}, d_(d), reverse_(p.reverse_only || d == 1) {
    seqs_.resize(static_cast<size_t>(b1 - b0));
    for (int64_t b = b0; b < b1; ++b) {
      Sequence& s = seqs_[static_cast<size_t>(b - b0)];
      s.b = b;
      s.len = p.Length(b);
      s.h = LoadState(ctx, 5, p, d, b);
      s.c = LoadState(ctx, 6, p, d, b);
      s.g.resize(static_cast<size_t>(p.cols()));
      s.init.resize(static_cast<size_t>(p.cols()));
      s.rh.resize(static_cast<size_t>(p.hp));
      s.pre.resize(static_cast<size_t>(p.hp));
    }
  }

  // Steps [begin, end) (those past every entry's length do nothing).
  void RunSteps(int64_t begin, int64_t end, const float* xw, const Outputs& out) {
    for (int64_t step = begin; step < end; ++step) {
      Sequence* active[kGroup];
      const float* rows[kGroup];
      int64_t times[kGroup];
      int n = 0;
      for (Sequence& s : seqs_) {
        if (step >= s.len) continue;
        times[n] = reverse_ ? s.len - 1 - step : step;
        rows[n] = xw + p_.XRow(times[n], s.b) * p_.cols();
        active[n++] = &s;
      }
      if (n == 0) return;
      CellStep(args_, active, rows, n, step % 2 == 1);
      for (int i = 0; out.y && i < n; ++i)
        std::copy(active[i]->h.begin(), active[i]->h.begin() + p_.hidden,
                  out.y + p_.YOffset(times[i], d_, active[i]->b));
    }
  }

  void WriteFinalStates(const Outputs& out) const {
    for (const Sequence& s : seqs_) {
      if (out.y_h) std::copy(s.h.begin(), s.h.begin() + p_.hidden, out.y_h + p_.StateOffset(d_, s.b));
      if (out.y_c) std::copy(s.c.begin(), s.c.begin() + p_.hidden, out.y_c + p_.StateOffset(d_, s.b));
    }
  }

 private:
  const Problem& p_;
  const StepArgs args_;
  const int64_t d_;
  const bool reverse_;
  std::vector<Sequence> seqs_;
};

// The projection of every step of direction d, biases included: rows of X x
// [cols], into xw. The SGEMM's result does not depend on `pool`.
void Project(const KernelContext& ctx, const Problem& p, const DirectionWeights& w, float* xw, ThreadPool* pool) {
  const int64_t rows = p.seq * p.batch, n = p.cols();
  for (int64_t row = 0; row < rows; ++row) std::copy(w.bias.begin(), w.bias.end(), xw + row * n);
  Sgemm(rows, n, p.input, SgemmA({ctx.input(0)->tensor().data<float>(), p.input, 1}), SgemmB(*w.w), 1.f, xw, n,
        pool);
}

// The outputs the node asks for (their bytes live in the context's outputs).
Result<Outputs> AllocateOutputs(KernelContext& ctx, const Problem& p) {
  const std::vector<int64_t> y_dims = p.layout == 0 ? std::vector<int64_t>{p.seq, p.dirs, p.batch, p.hidden}
                                                    : std::vector<int64_t>{p.batch, p.seq, p.dirs, p.hidden};
  const std::vector<int64_t> state_dims = p.layout == 0 ? std::vector<int64_t>{p.dirs, p.batch, p.hidden}
                                                        : std::vector<int64_t>{p.batch, p.dirs, p.hidden};
  Outputs out;
  if (ctx.wants_output(0)) {
    // Steps past an entry's length stay zero.
    Tensor y;
    if (p.seq_lens.empty()) {
      NEE_ASSIGN_OR_RETURN(y, ctx.AllocateOutputForOverwrite(0, DataType::kFloat, y_dims));
    } else {
      NEE_ASSIGN_OR_RETURN(y, ctx.AllocateOutput(0, DataType::kFloat, y_dims));
    }
    out.y = y.data<float>();
  }
  if (ctx.wants_output(1)) {
    NEE_ASSIGN_OR_RETURN(Tensor y_h, ctx.AllocateOutputForOverwrite(1, DataType::kFloat, state_dims));
    out.y_h = y_h.data<float>();
  }
  if (p.cell == Cell::kLstm && ctx.wants_output(2)) {
    NEE_ASSIGN_OR_RETURN(Tensor y_c, ctx.AllocateOutputForOverwrite(2, DataType::kFloat, state_dims));
    out.y_c = y_c.data<float>();
  }
  return out;
}

Status RunFast(KernelContext& ctx, Cell cell) {
  Problem p;
  if (!ReadProblem(ctx, cell, &p)) return RunReference(ctx);
  const std::shared_ptr<const Weights> weights = GetWeights(ctx, p);
  NEE_ASSIGN_OR_RETURN(const Outputs out, AllocateOutputs(ctx, p));
  // One task per (direction, group of entries): at least enough groups to keep
  // the threads busy, at most kGroup entries each. Grouping never changes a
  // result (see PanelRows512), so neither does the thread count.
  const int64_t threads_per_dir = (NumThreads(ctx) + p.dirs - 1) / p.dirs;
  const int64_t groups = std::min(p.batch, std::max((p.batch + kGroup - 1) / kGroup, threads_per_dir));
  const int64_t group_size = (p.batch + groups - 1) / groups;
  const int64_t groups_used = (p.batch + group_size - 1) / group_size;
  const int64_t dir_floats = p.seq * p.batch * p.cols();
  // Not zero-filled: Project writes every element (bias, then the SGEMM adds).
  SgemmBuffer xw = SgemmAllocate(std::max<int64_t>(p.dirs * dir_floats, 1));
  // A task that runs a whole direction projects it itself, on its own thread
  // (its W and projection stay in that core's cache); otherwise the
  // projections come first, on all threads.
  const bool project_in_task = groups_used == 1 && p.dirs > 1;
  for (int64_t d = 0; !project_in_task && d < p.dirs; ++d)
    Project(ctx, p, weights->dirs[static_cast<size_t>(d)], xw.get() + d * dir_floats, ctx.pool());
  // Each (direction, group) is a chain of links (ParallelChains): its
  // projection when the task does it, then kStepsPerLink steps a link, the
  // last link also writing the final states. A thread that finishes its
  // chains early takes over the rest of a late thread's between two links.
  std::vector<std::unique_ptr<GroupRecurrence>> recurrences;
  for (int64_t task = 0; task < p.dirs * groups_used; ++task) {
    const int64_t d = task / groups_used, b0 = task % groups_used * group_size;
    recurrences.push_back(std::make_unique<GroupRecurrence>(ctx, p, weights->dirs[static_cast<size_t>(d)], d, b0,
                                                            std::min(p.batch, b0 + group_size)));
  }
  const int64_t first_step_link = project_in_task ? 1 : 0;
  const int64_t step_links = std::max<int64_t>(1, (p.seq + kStepsPerLink - 1) / kStepsPerLink);
  ParallelChains(ctx.pool(), p.dirs * groups_used, first_step_link + step_links, [&](int64_t task, int64_t link) {
    const int64_t d = task / groups_used;
    float* dir_xw = xw.get() + d * dir_floats;
    if (link < first_step_link) return Project(ctx, p, weights->dirs[static_cast<size_t>(d)], dir_xw, nullptr);
    GroupRecurrence& recurrence = *recurrences[static_cast<size_t>(task)];
    const int64_t first = (link - first_step_link) * kStepsPerLink;
    recurrence.RunSteps(first, std::min(p.seq, first + kStepsPerLink), dir_xw, out);
    if (link == first_step_link + step_links - 1) recurrence.WriteFinalStates(out);
  });
  return Status::Ok();
}

}  // namespace

Status LstmFloat(KernelContext& ctx) { return RunFast(ctx, Cell::kLstm); }
Status GruFloat(KernelContext& ctx) { return RunFast(ctx, Cell::kGru); }
Status RnnFloat(KernelContext& ctx) { return RunFast(ctx, Cell::kRnn); }

#else
Status LstmFloat(KernelContext& ctx) { return RunReference(ctx); }
Status GruFloat(KernelContext& ctx) { return RunReference(ctx); }
Status RnnFloat(KernelContext& ctx) { return RunReference(ctx); }
#endif

}  // namespace nee::cpu
