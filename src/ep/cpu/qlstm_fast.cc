// com.microsoft DynamicQuantizeLSTM on the integer GEMM (igemm.h, quant_matmul.h).
//
// As the reference (ops/rnn.cc, RunQuantizedLstm), the left operand of each
// gate product is quantized to uint8 (all steps' X at once, then the whole
// batch's h at each step), the products are summed in integers and scaled
// back in float. The products are integers, so the GEMM gives the
// reference's sums exactly, and quantization uses DynamicQuantizeLinear's
// pieces (quant_fast.cc), which compute the reference's range, scale, zero
// point and levels bit for bit. The cell then runs in float on eight lanes
// (lstm_cell.h, as the float LSTM's), where the reference works in double
// with the C library's exp and tanh: on ddddocr's 512-wide bidirectional
// LSTM that double cell was about half of the node's time. So h differs from
// the reference's by float rounding, and where such a difference moves h
// across a rounding boundary of the next step's quantization, that level
// differs by one (tests/unit/ep/quant_fast_test.cc bounds both). Results do
// not depend on the thread count. The weights are packed once per session
// when constant.
//
// Taken here: float X, the default activations (Sigmoid, Tanh, Tanh), any
// clip, input_forget, peepholes, sequence lengths and initial states, on
// CPUs with AVX2 and FMA. Other cases, and every malformed input, go to the
// reference kernel.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <memory>
#include <string>

#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/igemm.h"
#include "ep/cpu/lstm_cell.h"
#include "ep/cpu/parallel_tasks.h"
#include "ep/cpu/qgemm_gemv.h"
#include "ep/cpu/quant_matmul.h"
#include "ep/cpu/simd_x86.h"
#include "ops/op_util.h"

namespace nee::cpu {

namespace {

using quant_matmul::PackQuantWeights;
using quant_matmul::QuantProduct;
using quant_matmul::QuantWeights;

// The reference's int64 sums fit int32 (so the int32 GEMM is exact, not only
// modulo 2^32) while k * 255 * 255 < 2^31.
constexpr int64_t kMaxExactDepth = 33000;

struct QLstmShape {
  int64_t seq = 0, batch = 0, input = 0, hidden = 0, dirs = 1;
  bool reverse_only = false, input_forget = false;
  double clip = -1;  // < 0: none
};

// The quantized weights' scale and zero point of direction d, one per column.
struct ColumnParams {
  std::vector<float> scale;
  std::vector<int32_t> zero;
};

// W and R of every direction as the GEMM's B (quant_matmul.h: int8 bytes for
// the u8 x s8 kernel where it runs, so the step's product h R reads half the
// bytes of the widened layout). On AVX2 without VNNI, a step of at most
// kQGemvMaxRows rows (a batch of one) takes R through QGemv instead
// (qgemm_gemv.h): 8-bit B widened in registers, exact for any bytes, where
// igemm's one-row tile read the widened layout (R of 320 x 1280: 820 KB, over
// the 512 KB L2) at half QGemv's rate; `r` is then empty.
struct QLstmWeights {
  std::vector<std::shared_ptr<const QuantWeights>> w, r;
  std::vector<QGemvPackedB> r_gemv;
};


bool IsDefaultActivations(const Node& node, int64_t dirs) {
  auto names = node.GetStrings("activations", {});
  if (!names.ok()) return false;
  if (names.value().empty()) return true;
  static const char* kDefault[] = {"sigmoid", "tanh", "tanh"};
  const auto& v = names.value();
  if (v.size() != 3 && static_cast<int64_t>(v.size()) != 3 * dirs) return false;
  for (size_t i = 0; i < v.size(); ++i) {
    std::string lower;
    for (char c : v[i]) lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    if (lower != kDefault[i % 3]) return false;
  }
  return true;
}

bool FloatTensorOfDims(const KernelContext& ctx, size_t i, const std::vector<int64_t>& dims) {
  const Value* v = ctx.input(i);
  return v && v->is_tensor() && v->tensor().dtype() == DataType::kFloat && v->tensor().dims() == dims;
}

// Scale and zero point inputs (si, si + 1) of weights `q`: [dirs] or [dirs, cols].
bool ReadColumnParams(const KernelContext& ctx, size_t si, const Tensor& q, int64_t dirs, int64_t cols,
                      std::vector<ColumnParams>& out) {
  const Value* sv = ctx.input(si);
  const Value* zv = ctx.input(si + 1);
  if (!sv || !zv || !sv->is_tensor() || !zv->is_tensor()) return false;
  const Tensor& scale = sv->tensor();
  const Tensor& zp = zv->tensor();
  const bool per_column = scale.rank() == 2;
  const std::vector<int64_t> dims = per_column ? std::vector<int64_t>{dirs, cols} : std::vector<int64_t>{dirs};
  if (scale.dtype() != DataType::kFloat || scale.dims() != dims || zp.dtype() != q.dtype() || zp.dims() != dims)
    return false;
  out.assign(static_cast<size_t>(dirs), {});
  for (int64_t d = 0; d < dirs; ++d) {
    ColumnParams& p = out[static_cast<size_t>(d)];
    p.scale.resize(static_cast<size_t>(cols));
    p.zero.resize(static_cast<size_t>(cols));
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t at = per_column ? d * cols + c : d;
      p.scale[static_cast<size_t>(c)] = scale.data<float>()[at];
      p.zero[static_cast<size_t>(c)] = static_cast<int32_t>(ReadAsDouble(zp, at));
    }
  }
  return true;
}

// out[j] (+)= float(acc[j]) * multiplier[j], eight at a time: a multiply, then an add (no FMA in this target, so
// each rounds as the scalar tail's).
__attribute__((target("avx2"))) void DequantizeRowAvx2(const int32_t* acc, const float* multiplier, int64_t n,
                                                       bool accumulate, float* out) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc + j))),
                                   _mm256_loadu_ps(multiplier + j));
    _mm256_storeu_ps(out + j, accumulate ? _mm256_add_ps(_mm256_loadu_ps(out + j), v) : v);
  }
  for (; j < n; ++j) {
    const float v = static_cast<float>(acc[j]) * multiplier[j];
    out[j] = accumulate ? out[j] + v : v;
  }
}

// c[m, :] (+)= dequantized(quantized(a) x w), as the reference's QuantizedGemm:
// a's m rows quantized together with their own range.
// Exactly one of w and gemv is given: the integer product's weights.
void QuantizedProduct(const KernelContext* gemm_ctx, const float* a, int64_t m, int64_t k, const QuantWeights* w,
                      const QGemvPackedB* gemv, int64_t n, const ColumnParams& p, bool accumulate, float* c) {
  const int64_t count = m * k;
  float lo = 0.0f, hi = 0.0f;
  QuantizeRange(a, count, lo, hi);
  const float scale = hi == lo ? 1.0f : (hi - lo) / 255.0f;
  const float initial = 0.0f - lo / scale;
  const float zero_point = std::nearbyint(std::isnan(initial) ? 0.0f : std::clamp(initial, 0.0f, 255.0f));
  thread_local std::vector<uint8_t> t_levels;
  thread_local std::vector<int32_t> t_acc;
  thread_local std::vector<float> t_multiplier;
  // Grown, never shrunk (the steps' products are smaller than X's).
  if (t_levels.size() < static_cast<size_t>(count)) t_levels.resize(static_cast<size_t>(count));
  if (t_acc.size() < static_cast<size_t>(m * n)) t_acc.resize(static_cast<size_t>(m * n));
  QuantizeToUint8(a, count, scale, zero_point, t_levels.data());
  const int32_t za = static_cast<int32_t>(zero_point);
  if (gemv) QGemv(gemm_ctx, t_levels.data(), false, m, za, *gemv, p.zero.data(), 1, t_acc.data(), n);
  else QuantProduct(gemm_ctx, t_levels.data(), false, m, k, *w, &za, 0, p.zero.data(), 1, t_acc.data(), n, nullptr);
  if (t_multiplier.size() < static_cast<size_t>(n)) t_multiplier.resize(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) t_multiplier[static_cast<size_t>(j)] = scale * p.scale[static_cast<size_t>(j)];
  for (int64_t i = 0; i < m; ++i)
    DequantizeRowAvx2(t_acc.data() + i * n, t_multiplier.data(), n, accumulate, c + i * n);
}

struct QLstmIo {
  const float* x = nullptr;
  const float *bias = nullptr, *peep = nullptr, *h0 = nullptr, *c0 = nullptr;
  std::vector<int64_t> lens;
  float *y = nullptr, *yh = nullptr, *yc = nullptr;  // zero-filled outputs (null when not wanted)
  bool y_wanted = false;
};

// One direction over the whole batch, step by step (the reference's RunQuantizedLstm).
void RunDirection(const KernelContext* gemm_ctx, const QLstmShape& s, const QLstmIo& io, int64_t d,
                  const QuantWeights& w, const ColumnParams& wp, const QuantWeights* r, const QGemvPackedB* r_gemv,
                  const ColumnParams& rp) {
  const int64_t B = s.batch, H = s.hidden, I = s.input, N = 4 * H, dirs = s.dirs;
  const bool reverse = s.reverse_only || d == 1;
  const int64_t max_len = B ? *std::max_element(io.lens.begin(), io.lens.end()) : 0;
  auto time_of = [&](int64_t step, int64_t b) {
    const int64_t len = io.lens[static_cast<size_t>(b)];
    return reverse && step < len ? len - 1 - step : step;
  };
  // X of every step run, in the direction's order, as one quantized product.
  std::vector<float> xs(static_cast<size_t>(max_len * B * I));
  for (int64_t step = 0; step < max_len; ++step)
    for (int64_t b = 0; b < B; ++b)
      std::copy_n(io.x + (time_of(step, b) * B + b) * I, I, xs.data() + (step * B + b) * I);
  std::vector<float> gates(static_cast<size_t>(max_len * B * N));
  if (max_len * B > 0) QuantizedProduct(gemm_ctx, xs.data(), max_len * B, I, &w, nullptr, N, wp, false, gates.data());

  auto state_at = [&](int64_t b, int64_t j) { return (d * B + b) * H + j; };
  std::vector<float> h_prev(static_cast<size_t>(B * H), 0.0f), c(static_cast<size_t>(B * H), 0.0f);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t j = 0; j < H; ++j) {
      if (io.h0) h_prev[static_cast<size_t>(b * H + j)] = io.h0[state_at(b, j)];
      if (io.c0) c[static_cast<size_t>(b * H + j)] = io.c0[state_at(b, j)];
    }
  // Wb + Rb, added to every step's products before the cell.
  const float* wb = io.bias ? io.bias + d * 2 * N : nullptr;
  std::vector<float> bias(static_cast<size_t>(N), 0.0f);
  if (wb)
    for (int64_t i = 0; i < N; ++i) bias[static_cast<size_t>(i)] = wb[i] + wb[N + i];
  const float* peep = io.peep ? io.peep + d * 3 * H : nullptr;
  const LstmCellOptions cell{s.clip > 0, static_cast<float>(s.clip), s.input_forget};
  for (int64_t step = 0; step < max_len; ++step) {
    float* g = gates.data() + step * B * N;
    if (B > 0) QuantizedProduct(gemm_ctx, h_prev.data(), B, H, r, r_gemv, N, rp, true, g);  // + h R
    for (int64_t b = 0; b < B; ++b) {
      float* h_row = h_prev.data() + b * H;
      if (step >= io.lens[static_cast<size_t>(b)]) {
        if (io.y_wanted) std::fill(h_row, h_row + H, 0.0f);
        continue;
      }
      float* gb = g + b * N;
      for (int64_t i = 0; i < N; ++i) gb[i] += bias[static_cast<size_t>(i)];
      float* c_row = c.data() + b * H;
      LstmCellRow(gb, peep, H, H, c_row, h_row, cell);
      const int64_t t = time_of(step, b);
      if (io.y) std::copy_n(h_row, H, io.y + ((t * dirs + d) * B + b) * H);
      if (io.yh) std::copy_n(h_row, H, io.yh + state_at(b, 0));
      if (io.yc) std::copy_n(c_row, H, io.yc + state_at(b, 0));
    }
  }
}

}  // namespace

Status DynamicQuantizeLstmFast(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Value* xv = ctx.input(0);
  const Value* wv = ctx.input(1);
  const Value* rv = ctx.input(2);
  if (!xv || !wv || !rv || !xv->is_tensor() || !wv->is_tensor() || !rv->is_tensor() || !CpuHasAvx2Fma())
    return RunReference(ctx);
  const Tensor& x = xv->tensor();
  const Tensor& w = wv->tensor();
  const Tensor& r = rv->tensor();
  QLstmShape s;
  auto direction = node.GetString("direction", "forward");
  auto hidden_size = node.GetInt("hidden_size", -1);
  auto input_forget = node.GetInt("input_forget", 0);
  if (!direction.ok() || !hidden_size.ok() || !input_forget.ok()) return RunReference(ctx);
  if (direction.value() == "bidirectional") s.dirs = 2;
  else if (direction.value() == "reverse") s.reverse_only = true;
  else if (direction.value() != "forward") return RunReference(ctx);
  s.input_forget = input_forget.value() != 0;
  if (node.HasAttr("clip")) {
    auto clip = node.GetFloat("clip");
    if (!clip.ok() || !(clip.value() > 0)) return RunReference(ctx);
    s.clip = clip.value();
  }
  // layout exists from opset 14; this com.microsoft op has only version 1 (layout 0).
  if (ctx.opset() >= 14 || !IsDefaultActivations(node, s.dirs)) return RunReference(ctx);
  if (x.dtype() != DataType::kFloat || x.rank() != 3 || r.rank() != 3) return RunReference(ctx);
  s.seq = x.dim(0);
  s.batch = x.dim(1);
  s.input = x.dim(2);
  s.hidden = r.dim(1);
  const int64_t H = s.hidden, N = 4 * H;
  if ((hidden_size.value() > 0 && hidden_size.value() != H) || H <= 0) return RunReference(ctx);
  if (!Is8Bit(w.dtype()) || !Is8Bit(r.dtype()) || w.dims() != std::vector<int64_t>{s.dirs, s.input, N} ||
      r.dims() != std::vector<int64_t>{s.dirs, H, N} || s.input > kMaxExactDepth || H > kMaxExactDepth)
    return RunReference(ctx);
  std::vector<ColumnParams> wp, rp;
  if (!ReadColumnParams(ctx, 8, w, s.dirs, N, wp) || !ReadColumnParams(ctx, 10, r, s.dirs, N, rp))
    return RunReference(ctx);
  QLstmIo io;
  io.x = x.data<float>();
  const std::vector<int64_t> state_dims{s.dirs, s.batch, H};
  if (ctx.has_input(3)) {
    if (!FloatTensorOfDims(ctx, 3, {s.dirs, 2 * N})) return RunReference(ctx);
    io.bias = ctx.input(3)->tensor().data<float>();
  }
  io.lens.assign(static_cast<size_t>(s.batch), s.seq);
  if (ctx.has_input(4)) {
    const Value* lv = ctx.input(4);
    if (!lv->is_tensor()) return RunReference(ctx);
    const Tensor& lens = lv->tensor();
    if ((lens.dtype() != DataType::kInt32 && lens.dtype() != DataType::kInt64) ||
        lens.dims() != std::vector<int64_t>{s.batch})
      return RunReference(ctx);
    auto values = lens.ToInt64Vector();
    if (!values.ok()) return RunReference(ctx);
    for (int64_t len : values.value())
      if (len < 0 || len > s.seq) return RunReference(ctx);
    io.lens = values.value();
  }
  if (ctx.has_input(5)) {
    if (!FloatTensorOfDims(ctx, 5, state_dims)) return RunReference(ctx);
    io.h0 = ctx.input(5)->tensor().data<float>();
  }
  if (ctx.has_input(6)) {
    if (!FloatTensorOfDims(ctx, 6, state_dims)) return RunReference(ctx);
    io.c0 = ctx.input(6)->tensor().data<float>();
  }
  if (ctx.has_input(7)) {
    if (!FloatTensorOfDims(ctx, 7, {s.dirs, 3 * H})) return RunReference(ctx);
    io.peep = ctx.input(7)->tensor().data<float>();
  }

  // The weights as the GEMM's B, per direction: packed once per session when constant.
  const bool gemv = s.batch <= kQGemvMaxRows && QGemvPreferred();
  auto pack = [&]() {
    auto p = std::make_shared<QLstmWeights>();
    const auto* wb = static_cast<const uint8_t*>(w.raw_data());
    const auto* rb = static_cast<const uint8_t*>(r.raw_data());
    for (int64_t d = 0; d < s.dirs; ++d) {
      p->w.push_back(PackQuantWeights(wb + d * s.input * N, s.input, N, w.dtype() == DataType::kInt8, true));
      if (gemv) {
        p->r_gemv.emplace_back();
        QGemvPackB(rb + d * H * N, H, N, r.dtype() == DataType::kInt8, false, &p->r_gemv.back());
      } else {
        p->r.push_back(PackQuantWeights(rb + d * H * N, H, N, r.dtype() == DataType::kInt8, true));
      }
    }
    return p;
  };
  std::shared_ptr<const QLstmWeights> weights;
  if (ctx.prepared() && ctx.input_is_constant(1) && ctx.input_is_constant(2)) {
    auto built = ctx.prepared()->GetOrBuild<QLstmWeights>(
        {s.dirs, s.input, H, w.dtype() == DataType::kInt8, r.dtype() == DataType::kInt8, gemv},
        [&]() -> Result<std::shared_ptr<const QLstmWeights>> {
          std::shared_ptr<const QLstmWeights> p = pack();
          // Released, not dropped: a later run whose other inputs this kernel
          // does not take goes to the reference, which reads W and R before it
          // checks B, the states and the peepholes.
          ctx.ReleaseConstantInput(1);
          ctx.ReleaseConstantInput(2);
          return p;
        });
    if (built.ok()) weights = built.value();
  }
  if (!weights) weights = pack();

  io.y_wanted = ctx.wants_output(0);
  if (io.y_wanted) {
    NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, DataType::kFloat, {s.seq, s.dirs, s.batch, H}));
    io.y = y.data<float>();
  }
  if (ctx.wants_output(1)) {
    NEE_ASSIGN_OR_RETURN(Tensor yh, ctx.AllocateOutput(1, DataType::kFloat, state_dims));
    io.yh = yh.data<float>();
  }
  if (ctx.wants_output(2)) {
    NEE_ASSIGN_OR_RETURN(Tensor yc, ctx.AllocateOutput(2, DataType::kFloat, state_dims));
    io.yc = yc.data<float>();
  }
  // Directions are independent: one per thread when there are threads for
  // both, each then running its GEMMs alone; otherwise one after the other
  // with the GEMMs shared out. Either way each value is computed the same way.
  auto run = [&](int64_t d, const KernelContext* gemm_ctx) {
    const size_t i = static_cast<size_t>(d);
    RunDirection(gemm_ctx, s, io, d, *weights->w[i], wp[i], gemv ? nullptr : weights->r[i].get(),
                 gemv ? &weights->r_gemv[i] : nullptr, rp[i]);
  };
  if (s.dirs > 1 && NumThreads(ctx) > 1) {
    ParallelTasks(ctx, s.dirs, [&](int64_t d) { run(d, nullptr); });
  } else {
    for (int64_t d = 0; d < s.dirs; ++d) run(d, &ctx);
  }
  return Status::Ok();
}

}  // namespace nee::cpu
