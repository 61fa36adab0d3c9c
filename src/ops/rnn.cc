// Operator family: Rnn. RNN, GRU and LSTM (opset 1, 7, 14 (layout), 22
// (bfloat16); GRU also 3), with directions forward / reverse /
// bidirectional, sequence_lens, initial states, LSTM peepholes and
// input_forget, GRU linear_before_reset, activations with their alpha/beta,
// clip, and layout 0/1. Every output is optional.
//
// The reference kernel runs each (direction, batch entry) pair on its own, in
// double precision, which also makes the result independent of threading.
// com.microsoft DynamicQuantizeLSTM runs each direction over the whole batch,
// quantizing X and h as ONNX Runtime does (see RunQuantizedLstm); its result
// depends on the thread count, as ONNX Runtime's does.
// Steps past a batch entry's sequence length leave zeros in Y; Y_h / Y_c hold
// the state after its last valid step.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace nee {
namespace {

enum class CellKind { kRnn, kGru, kLstm };

int GatesOf(CellKind kind) { return kind == CellKind::kRnn ? 1 : kind == CellKind::kGru ? 3 : 4; }
int ActivationsPerDirection(CellKind kind) { return kind == CellKind::kRnn ? 1 : kind == CellKind::kGru ? 2 : 3; }
const char* CellName(CellKind kind) { return kind == CellKind::kRnn ? "RNN" : kind == CellKind::kGru ? "GRU" : "LSTM"; }

// ---- Activations -----------------------------------------------------------

struct Activation {
  enum class Kind { kRelu, kTanh, kSigmoid, kAffine, kLeakyRelu, kThresholdedRelu, kScaledTanh, kHardSigmoid,
                    kElu, kSoftsign, kSoftplus };
  Kind kind = Kind::kTanh;
  double alpha = 0, beta = 0;

  double operator()(double x) const {
    switch (kind) {
      case Kind::kRelu: return std::max(0.0, x);
      case Kind::kTanh: return std::tanh(x);
      case Kind::kSigmoid: return 1.0 / (1.0 + std::exp(-x));
      case Kind::kAffine: return alpha * x + beta;
      case Kind::kLeakyRelu: return x >= 0 ? x : alpha * x;
      case Kind::kThresholdedRelu: return x > alpha ? x : 0.0;
      case Kind::kScaledTanh: return alpha * std::tanh(beta * x);
      case Kind::kHardSigmoid: return std::clamp(alpha * x + beta, 0.0, 1.0);
      case Kind::kElu: return x >= 0 ? x : alpha * (std::exp(x) - 1.0);
      case Kind::kSoftsign: return x / (1.0 + std::fabs(x));
      case Kind::kSoftplus: return std::log1p(std::exp(-std::fabs(x))) + std::max(x, 0.0);
    }
    return x;
  }
};

// Parses one activation name (case-insensitive); `uses_alpha`/`uses_beta` say
// whether it consumes entries of activation_alpha / activation_beta, and
// the defaults are those of the matching ONNX operators.
bool ParseActivation(const std::string& name, Activation* act, bool* uses_alpha, bool* uses_beta) {
  std::string n;
  for (char c : name) n.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  using K = Activation::Kind;
  struct Row {
    const char* name;
    K kind;
    bool alpha, beta;
    double da, db;
  };
  static const Row kRows[] = {
      {"relu", K::kRelu, false, false, 0, 0},        {"tanh", K::kTanh, false, false, 0, 0},
      {"sigmoid", K::kSigmoid, false, false, 0, 0},  {"affine", K::kAffine, true, true, 1.0, 0.0},
      {"leakyrelu", K::kLeakyRelu, true, false, 0.01, 0}, {"thresholdedrelu", K::kThresholdedRelu, true, false, 1.0, 0},
      {"scaledtanh", K::kScaledTanh, true, true, 1.0, 1.0}, {"hardsigmoid", K::kHardSigmoid, true, true, 0.2, 0.5},
      {"elu", K::kElu, true, false, 1.0, 0},         {"softsign", K::kSoftsign, false, false, 0, 0},
      {"softplus", K::kSoftplus, false, false, 0, 0},
  };
  for (const Row& r : kRows) {
    if (n == r.name) {
      *act = Activation{r.kind, r.da, r.db};
      *uses_alpha = r.alpha;
      *uses_beta = r.beta;
      return true;
    }
  }
  return false;
}

// ---- Attributes and dims ---------------------------------------------------

struct RnnConfig {
  CellKind kind = CellKind::kRnn;
  int64_t num_directions = 1;
  bool reverse_only = false;  // direction == "reverse"
  int64_t hidden_size = -1;   // -1 when the attribute is absent
  int64_t layout = 0;
  double clip = -1;           // < 0: no clip
  bool linear_before_reset = false;
  bool input_forget = false;
  // Per direction: f (and g, h) in order.
  std::vector<std::vector<Activation>> activations;
};

template <typename Ctx>
Result<RnnConfig> ReadConfig(const Ctx& ctx, const Node& node, CellKind kind, int64_t opset) {
  RnnConfig c;
  c.kind = kind;
  NEE_ASSIGN_OR_RETURN(std::string direction, node.GetString("direction", "forward"));
  // GRU-1's schema spells its default direction "foward"; GRU-3 corrected it to "forward".
  if (kind == CellKind::kGru && opset < 3 && direction == "foward") direction = "forward";
  if (direction == "bidirectional") c.num_directions = 2;
  else if (direction == "reverse") c.reverse_only = true;
  else if (direction != "forward") return ctx.Error("unknown direction '" + direction + "'");
  NEE_ASSIGN_OR_RETURN(c.hidden_size, node.GetInt("hidden_size", -1));
  if (c.hidden_size == 0 || c.hidden_size < -1) return ctx.Error("hidden_size must be positive");
  if (opset >= 14) {
    NEE_ASSIGN_OR_RETURN(c.layout, node.GetInt("layout", 0));
    if (c.layout != 0 && c.layout != 1) return ctx.Error("layout must be 0 or 1, got " + std::to_string(c.layout));
  }
  if (node.HasAttr("clip")) {
    NEE_ASSIGN_OR_RETURN(float clip, node.GetFloat("clip"));
    if (!(clip > 0)) return ctx.Error("clip must be positive");
    c.clip = clip;
  }
  if (kind == CellKind::kGru) {
    NEE_ASSIGN_OR_RETURN(int64_t lbr, node.GetInt("linear_before_reset", 0));
    c.linear_before_reset = lbr != 0;
  }
  if (kind == CellKind::kLstm) {
    NEE_ASSIGN_OR_RETURN(int64_t input_forget, node.GetInt("input_forget", 0));
    c.input_forget = input_forget != 0;
  }
  // Activations: defaults, or the attribute's list (one set per direction;
  // a single set is reused for both directions).
  const int per_dir = ActivationsPerDirection(kind);
  std::vector<std::string> defaults = kind == CellKind::kRnn   ? std::vector<std::string>{"Tanh"}
                                      : kind == CellKind::kGru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                                               : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"};
  // RNN declares ["Tanh", "Tanh"] as its default whatever the direction; one
  // direction uses the first of two (as ONNX Runtime and onnx.reference do,
  // also for two given explicitly). GRU and LSTM declare none.
  NEE_ASSIGN_OR_RETURN(std::vector<std::string> names,
                       node.GetStrings("activations", kind == CellKind::kRnn ? std::vector<std::string>{"Tanh", "Tanh"}
                                                                             : std::vector<std::string>{}));
  if (kind == CellKind::kRnn && c.num_directions == 1 && names.size() == 2) names.resize(1);
  NEE_ASSIGN_OR_RETURN(std::vector<float> alphas, node.GetFloats("activation_alpha", {}));
  NEE_ASSIGN_OR_RETURN(std::vector<float> betas, node.GetFloats("activation_beta", {}));
  if (names.empty()) {
    for (int64_t d = 0; d < c.num_directions; ++d) names.insert(names.end(), defaults.begin(), defaults.end());
  } else if (static_cast<int64_t>(names.size()) == per_dir && c.num_directions == 2) {
    std::vector<std::string> twice = names;
    names.insert(names.end(), twice.begin(), twice.end());
  }
  if (static_cast<int64_t>(names.size()) != per_dir * c.num_directions)
    return ctx.Error("activations has " + std::to_string(names.size()) + " entries; " + CellName(kind) +
                     " with " + std::to_string(c.num_directions) + " direction(s) needs " +
                     std::to_string(per_dir * c.num_directions));
  size_t next_alpha = 0, next_beta = 0;
  c.activations.assign(static_cast<size_t>(c.num_directions), {});
  for (size_t i = 0; i < names.size(); ++i) {
    Activation act;
    bool uses_alpha = false, uses_beta = false;
    if (!ParseActivation(names[i], &act, &uses_alpha, &uses_beta))
      return NotImplemented(node.Describe() + ": activation '" + names[i] + "' is not supported");
    if (uses_alpha && next_alpha < alphas.size()) act.alpha = alphas[next_alpha++];
    if (uses_beta && next_beta < betas.size()) act.beta = betas[next_beta++];
    c.activations[i / static_cast<size_t>(per_dir)].push_back(act);
  }
  return c;
}

// ---- Shape rule ------------------------------------------------------------

template <CellKind kKind>
Status InferRnn(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ctx, 0));
  NEE_ASSIGN_OR_RETURN(RnnConfig c, ReadConfig(ctx, ctx.node, kKind, ctx.opset));
  Dim seq = Dim::Unknown(), batch = Dim::Unknown(), hidden = Dim::Unknown();
  if (x->shape) {
    if (x->shape->size() != 3) return ctx.InputError(0, "(X) must have rank 3, got " + ShapeToString(*x->shape));
    seq = (*x->shape)[c.layout == 0 ? 0 : 1];
    batch = (*x->shape)[c.layout == 0 ? 1 : 0];
  }
  if (c.hidden_size > 0) {
    hidden = Dim::Known(c.hidden_size);
  } else if (ctx.has_input(2) && ctx.input_type(2).shape && ctx.input_type(2).shape->size() == 3) {
    hidden = (*ctx.input_type(2).shape)[2];
  }
  const Dim dirs = Dim::Known(c.num_directions);
  const DataType t = x->elem_type;
  if (ctx.num_outputs() > 0)
    ctx.output_types[0] = TypeInfo::Tensor(t, c.layout == 0 ? Shape{seq, dirs, batch, hidden}
                                                             : Shape{batch, seq, dirs, hidden});
  Shape state = c.layout == 0 ? Shape{dirs, batch, hidden} : Shape{batch, dirs, hidden};
  if (ctx.num_outputs() > 1) ctx.output_types[1] = TypeInfo::Tensor(t, state);
  if (ctx.num_outputs() > 2) ctx.output_types[2] = TypeInfo::Tensor(t, state);
  return Status::Ok();
}

// ---- Kernel ----------------------------------------------------------------

std::vector<double> ToDoubles(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.num_elements()));
  for (int64_t i = 0; i < t.num_elements(); ++i) v[static_cast<size_t>(i)] = ReadAsDouble(t, i);
  return v;
}

// Checks that input `index` is present with exactly `dims`.
Status ExpectDims(const KernelContext& ctx, size_t index, const char* name, const Tensor& t,
                  const std::vector<int64_t>& dims) {
  if (t.dims() != dims)
    return ctx.InputError(index, std::string("(") + name + ") must have shape " + DimsToString(dims) + ", got " +
                                     DimsToString(t.dims()));
  return Status::Ok();
}

struct RnnProblem {
  RnnConfig config;
  int64_t seq = 0, batch = 0, input = 0, hidden = 0, dirs = 1, gates = 1;
  std::vector<double> x, w, r, b, h0, c0, p;
  std::vector<int64_t> seq_lens;

  size_t XIndex(int64_t t, int64_t bi, int64_t i) const {
    return static_cast<size_t>(config.layout == 0 ? (t * batch + bi) * input + i : (bi * seq + t) * input + i);
  }
  size_t StateIndex(int64_t d, int64_t bi, int64_t j) const {
    return static_cast<size_t>(config.layout == 0 ? (d * batch + bi) * hidden + j : (bi * dirs + d) * hidden + j);
  }
  size_t YIndex(int64_t t, int64_t d, int64_t bi, int64_t j) const {
    return static_cast<size_t>(config.layout == 0 ? ((t * dirs + d) * batch + bi) * hidden + j
                                                  : ((bi * seq + t) * dirs + d) * hidden + j);
  }
};

// Outputs of one (direction, batch entry) run.
struct RunResult {
  std::vector<double> y;  // [seq][hidden]
  std::vector<double> h, c;
};

double Clip(const RnnConfig& c, double v) { return c.clip > 0 ? std::clamp(v, -c.clip, c.clip) : v; }

RunResult RunOneSequence(const RnnProblem& pb, int64_t d, int64_t bi) {
  const RnnConfig& cfg = pb.config;
  const int64_t H = pb.hidden, I = pb.input, G = pb.gates;
  const std::vector<Activation>& act = cfg.activations[static_cast<size_t>(d)];
  RunResult res;
  res.y.assign(static_cast<size_t>(pb.seq * H), 0.0);
  res.h.assign(static_cast<size_t>(H), 0.0);
  res.c.assign(static_cast<size_t>(H), 0.0);
  for (int64_t j = 0; j < H; ++j) {
    if (!pb.h0.empty()) res.h[static_cast<size_t>(j)] = pb.h0[pb.StateIndex(d, bi, j)];
    if (!pb.c0.empty()) res.c[static_cast<size_t>(j)] = pb.c0[pb.StateIndex(d, bi, j)];
  }
  const double* w = pb.w.data() + d * G * H * I;
  const double* r = pb.r.data() + d * G * H * H;
  const double* wb = pb.b.empty() ? nullptr : pb.b.data() + d * 2 * G * H;
  const double* rb = wb ? wb + G * H : nullptr;
  const double* peep = pb.p.empty() ? nullptr : pb.p.data() + d * 3 * H;
  const int64_t len = pb.seq_lens.empty() ? pb.seq : pb.seq_lens[static_cast<size_t>(bi)];
  const bool reverse = cfg.reverse_only || d == 1;

  std::vector<double> xw(static_cast<size_t>(G * H)), hr(static_cast<size_t>(G * H));
  std::vector<double> next_h(static_cast<size_t>(H));
  for (int64_t step = 0; step < len; ++step) {
    const int64_t t = reverse ? len - 1 - step : step;
    // xw = W x + Wb and hr = R h + Rb for every gate row.
    for (int64_t row = 0; row < G * H; ++row) {
      double sx = wb ? wb[row] : 0.0, sh = rb ? rb[row] : 0.0;
      for (int64_t i = 0; i < I; ++i) sx += w[row * I + i] * pb.x[pb.XIndex(t, bi, i)];
      for (int64_t k = 0; k < H; ++k) sh += r[row * H + k] * res.h[static_cast<size_t>(k)];
      xw[static_cast<size_t>(row)] = sx;
      hr[static_cast<size_t>(row)] = sh;
    }
    auto gate = [&](int64_t g, int64_t j) {
      size_t row = static_cast<size_t>(g * H + j);
      return xw[row] + hr[row];
    };
    switch (cfg.kind) {
      case CellKind::kRnn:
        for (int64_t j = 0; j < H; ++j) next_h[static_cast<size_t>(j)] = act[0](Clip(cfg, gate(0, j)));
        break;
      case CellKind::kGru: {
        // Gate order z, r, h.
        std::vector<double> reset(static_cast<size_t>(H));
        for (int64_t j = 0; j < H; ++j) reset[static_cast<size_t>(j)] = act[0](Clip(cfg, gate(1, j)));
        for (int64_t j = 0; j < H; ++j) {
          double z = act[0](Clip(cfg, gate(0, j)));
          double pre;
          if (cfg.linear_before_reset) {
            pre = xw[static_cast<size_t>(2 * H + j)] + reset[static_cast<size_t>(j)] * hr[static_cast<size_t>(2 * H + j)];
          } else {
            // (r . h) R_h^T + Rb_h: recompute with the reset-scaled state.
            double s = rb ? rb[2 * H + j] : 0.0;
            for (int64_t k = 0; k < H; ++k)
              s += r[(2 * H + j) * H + k] * reset[static_cast<size_t>(k)] * res.h[static_cast<size_t>(k)];
            pre = xw[static_cast<size_t>(2 * H + j)] + s;
          }
          double candidate = act[1](Clip(cfg, pre));
          next_h[static_cast<size_t>(j)] = (1 - z) * candidate + z * res.h[static_cast<size_t>(j)];
        }
        break;
      }
      case CellKind::kLstm: {
        // Gate order i, o, f, c; peepholes P = [Pi, Po, Pf].
        for (int64_t j = 0; j < H; ++j) {
          const size_t js = static_cast<size_t>(j);
          double c_prev = res.c[js];
          double pi = peep ? peep[j] : 0.0, po = peep ? peep[H + j] : 0.0, pf = peep ? peep[2 * H + j] : 0.0;
          double in_gate = act[0](Clip(cfg, gate(0, j) + pi * c_prev));
          double forget = cfg.input_forget ? 1.0 - in_gate : act[0](Clip(cfg, gate(2, j) + pf * c_prev));
          double cell = act[1](Clip(cfg, gate(3, j)));
          double c_new = forget * c_prev + in_gate * cell;
          double out_gate = act[0](Clip(cfg, gate(1, j) + po * c_new));
          res.c[js] = c_new;
          // Like ONNX Runtime, clip bounds the gate inputs only, not the cell state fed to h.
          next_h[js] = out_gate * act[2](c_new);
        }
        break;
      }
    }
    std::copy(next_h.begin(), next_h.end(), res.h.begin());
    std::copy(next_h.begin(), next_h.end(), res.y.begin() + t * H);
  }
  return res;
}

// ---- DynamicQuantizeLSTM (com.microsoft), as ONNX Runtime defines it -------
//
// ONNX Runtime multiplies the float activations by the 8-bit weights in
// integers: the left operand of each product — all rows of X for the steps
// run (in the direction's order), then at each step the previous hidden state
// of the whole batch — is quantized to uint8 with a scale and zero point of
// its own (its range, widened to include 0; ONNX Runtime's
// GetQuantizationParameter), the products are summed in int32 and scaled back
// by a_scale * w_scale[column] in float. This rounding of X and h is part of
// the op's result (it moves outputs by ~0.1 on real models), so nee does the
// same. ONNX Runtime quantizes the hidden state per group of batch rows, a
// group per thread when the batch is worth splitting; nee groups the rows the
// same way for its own thread count, so the results match ONNX Runtime's at
// the same intra-op thread count (and stay fixed for a given count).

// One direction's weights [K, N] as integers minus their zero point, and each
// column's scale (a per-tensor scale repeated).
struct QuantizedWeights {
  int64_t k = 0, n = 0;
  std::vector<int32_t> values;
  std::vector<float> scale;
};

// The weights `q_index` (int8 / uint8 [dirs, rows, cols]) with their scale and
// zero point (inputs scale_index and scale_index + 1: [dirs] or [dirs, cols]).
Result<std::vector<QuantizedWeights>> ReadQuantizedWeights(const KernelContext& ctx, size_t q_index,
                                                           size_t scale_index, int64_t dirs, int64_t rows,
                                                           int64_t cols) {
  NEE_ASSIGN_OR_RETURN(const Tensor* q, ctx.InputTensor(q_index));
  NEE_ASSIGN_OR_RETURN(const Tensor* scale, ctx.InputTensor(scale_index));
  NEE_ASSIGN_OR_RETURN(const Tensor* zp, ctx.InputTensor(scale_index + 1));
  if (q->dtype() != DataType::kInt8 && q->dtype() != DataType::kUint8)
    return ctx.InputError(q_index, "must be int8 or uint8, got " + q->Describe());
  NEE_RETURN_IF_ERROR(ExpectDims(ctx, q_index, q_index == 1 ? "W" : "R", *q, {dirs, rows, cols}));
  const bool per_column = scale->rank() == 2;
  const std::vector<int64_t> scale_dims = per_column ? std::vector<int64_t>{dirs, cols} : std::vector<int64_t>{dirs};
  if (scale->dtype() != DataType::kFloat) return ctx.InputError(scale_index, "(scale) must be float");
  NEE_RETURN_IF_ERROR(ExpectDims(ctx, scale_index, "scale", *scale, scale_dims));
  if (zp->dtype() != q->dtype()) return ctx.InputError(scale_index + 1, "(zero point) must have the weights' type");
  NEE_RETURN_IF_ERROR(ExpectDims(ctx, scale_index + 1, "zero point", *zp, scale_dims));
  std::vector<QuantizedWeights> out(static_cast<size_t>(dirs));
  for (int64_t d = 0; d < dirs; ++d) {
    QuantizedWeights& w = out[static_cast<size_t>(d)];
    w.k = rows;
    w.n = cols;
    w.values.resize(static_cast<size_t>(rows * cols));
    w.scale.resize(static_cast<size_t>(cols));
    for (int64_t col = 0; col < cols; ++col) {
      const int64_t param = per_column ? d * cols + col : d;
      w.scale[static_cast<size_t>(col)] = scale->data<float>()[param];
      const auto zero = static_cast<int32_t>(ReadAsDouble(*zp, param));
      for (int64_t row = 0; row < rows; ++row)
        w.values[static_cast<size_t>(row * cols + col)] =
            static_cast<int32_t>(ReadAsDouble(*q, (d * rows + row) * cols + col)) - zero;
    }
  }
  return out;
}

// c[m, :] (+)= quantized(a[m, :]) x w for the m rows of `a` (row-major, w.k
// columns), quantized together as ONNX Runtime quantizes a GEMM's left operand.
void QuantizedGemm(const float* a, int64_t m, const QuantizedWeights& w, bool accumulate, float* c) {
  const size_t count = static_cast<size_t>(m * w.k);
  float lo = 0.0f, hi = 0.0f;
  for (size_t i = 0; i < count; ++i) {
    lo = std::min(lo, a[i]);
    hi = std::max(hi, a[i]);
  }
  // A uint8 level; NaN (from NaN or infinite inputs) becomes `fallback`, never an undefined conversion.
  auto level = [](float v, float fallback) { return std::isnan(v) ? fallback : std::clamp(v, 0.0f, 255.0f); };
  const float scale = hi == lo ? 1.0f : (hi - lo) / 255.0f;
  const float zero_point = std::nearbyint(level(0.0f - lo / scale, 0.0f));
  std::vector<int32_t> qa(count);
  for (size_t i = 0; i < count; ++i)
    qa[i] = static_cast<int32_t>(level(std::nearbyint(a[i] / scale) + zero_point, zero_point) - zero_point);
  std::vector<float> multiplier(static_cast<size_t>(w.n));
  for (int64_t col = 0; col < w.n; ++col) multiplier[static_cast<size_t>(col)] = scale * w.scale[static_cast<size_t>(col)];
  std::vector<int64_t> acc(static_cast<size_t>(w.n));  // ONNX Runtime's int32 sums, without overflow
  for (int64_t row = 0; row < m; ++row) {
    std::fill(acc.begin(), acc.end(), 0);
    for (int64_t k = 0; k < w.k; ++k) {
      const int64_t x = qa[static_cast<size_t>(row * w.k + k)];
      const int32_t* wk = w.values.data() + k * w.n;
      for (int64_t col = 0; col < w.n; ++col) acc[static_cast<size_t>(col)] += x * wk[col];
    }
    float* out = c + row * w.n;
    for (int64_t col = 0; col < w.n; ++col) {
      const float v = static_cast<float>(acc[static_cast<size_t>(col)]) * multiplier[static_cast<size_t>(col)];
      out[col] = accumulate ? out[col] + v : v;
    }
  }
}

// One direction of a DynamicQuantizeLSTM over the whole batch, step by step.
// The hidden states of all batch rows are quantized together. ONNX Runtime's
// UniDirectionalLstm quantizes per group of rows, a group per thread, so its
// result depends on its thread count; nee keeps its results independent of
// the thread count (docs/ARCHITECTURE.md) and computes what ONNX Runtime
// computes on one thread. `y_wanted`: as in ONNX Runtime, a finished sequence
// then feeds zeros (its Y rows) into the next steps' quantization, else its
// last state.
std::vector<RunResult> RunQuantizedLstm(const RnnProblem& pb, int64_t d, const QuantizedWeights& w,
                                        const QuantizedWeights& r, bool y_wanted) {
  const RnnConfig& cfg = pb.config;
  const int64_t batch = pb.batch, H = pb.hidden, I = pb.input, N = 4 * H;
  const int64_t group = batch;
  const std::vector<Activation>& act = cfg.activations[static_cast<size_t>(d)];
  const bool reverse = cfg.reverse_only || d == 1;
  std::vector<int64_t> lens(static_cast<size_t>(batch), pb.seq);
  if (!pb.seq_lens.empty()) lens = pb.seq_lens;
  const int64_t max_len = batch ? *std::max_element(lens.begin(), lens.end()) : 0;
  auto time_of = [&](int64_t step, int64_t b) {
    const int64_t len = lens[static_cast<size_t>(b)];
    return reverse && step < len ? len - 1 - step : step;
  };
  // X (W) for every step run, as one quantized product.
  std::vector<float> xs(static_cast<size_t>(max_len * batch * I));
  for (int64_t step = 0; step < max_len; ++step)
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t i = 0; i < I; ++i)
        xs[static_cast<size_t>((step * batch + b) * I + i)] = static_cast<float>(pb.x[pb.XIndex(time_of(step, b), b, i)]);
  std::vector<float> gates(static_cast<size_t>(max_len * batch * N));
  QuantizedGemm(xs.data(), max_len * batch, w, false, gates.data());

  std::vector<RunResult> res(static_cast<size_t>(batch));
  std::vector<float> h_prev(static_cast<size_t>(batch * H), 0.0f);
  std::vector<double> c(static_cast<size_t>(batch * H), 0.0);
  for (int64_t b = 0; b < batch; ++b) {
    res[static_cast<size_t>(b)].y.assign(static_cast<size_t>(pb.seq * H), 0.0);
    res[static_cast<size_t>(b)].h.assign(static_cast<size_t>(H), 0.0);
    res[static_cast<size_t>(b)].c.assign(static_cast<size_t>(H), 0.0);
    for (int64_t j = 0; j < H; ++j) {
      const size_t at = static_cast<size_t>(b * H + j);
      if (!pb.h0.empty()) h_prev[at] = static_cast<float>(pb.h0[pb.StateIndex(d, b, j)]);
      if (!pb.c0.empty()) c[at] = pb.c0[pb.StateIndex(d, b, j)];
    }
  }
  const double* wb = pb.b.empty() ? nullptr : pb.b.data() + d * 2 * N;
  const double* peep = pb.p.empty() ? nullptr : pb.p.data() + d * 3 * H;
  for (int64_t step = 0; step < max_len; ++step) {
    float* g = gates.data() + step * batch * N;
    for (int64_t first = 0; first < batch; first += group)  // + h R
      QuantizedGemm(h_prev.data() + first * H, std::min(group, batch - first), r, true, g + first * N);
    for (int64_t b = 0; b < batch; ++b) {
      RunResult& out = res[static_cast<size_t>(b)];
      float* h_row = h_prev.data() + b * H;
      if (step >= lens[static_cast<size_t>(b)]) {
        if (y_wanted) std::fill(h_row, h_row + H, 0.0f);
        continue;
      }
      // Gate order i, o, f, c; bias Wb + Rb; peepholes P = [Pi, Po, Pf].
      auto pre = [&](int64_t gate, int64_t j) {
        const double bias = wb ? wb[gate * H + j] + wb[N + gate * H + j] : 0.0;
        return static_cast<double>(g[b * N + gate * H + j]) + bias;
      };
      for (int64_t j = 0; j < H; ++j) {
        const size_t at = static_cast<size_t>(b * H + j);
        const double c_prev = c[at];
        const double pi = peep ? peep[j] : 0.0, po = peep ? peep[H + j] : 0.0, pf = peep ? peep[2 * H + j] : 0.0;
        const double in_gate = act[0](Clip(cfg, pre(0, j) + pi * c_prev));
        const double forget = cfg.input_forget ? 1.0 - in_gate : act[0](Clip(cfg, pre(2, j) + pf * c_prev));
        const double cell = act[1](Clip(cfg, pre(3, j)));
        const double c_new = forget * c_prev + in_gate * cell;
        const double h_new = act[0](Clip(cfg, pre(1, j) + po * c_new)) * act[2](c_new);
        c[at] = c_new;
        h_row[j] = static_cast<float>(h_new);
        out.y[static_cast<size_t>(time_of(step, b) * H + j)] = h_new;
        out.h[static_cast<size_t>(j)] = h_new;
        out.c[static_cast<size_t>(j)] = c_new;
      }
    }
  }
  return res;
}

template <CellKind kKind, bool kQuantizedWeights = false>
Status RnnKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(const Tensor* w, ctx.InputTensor(1));
  NEE_ASSIGN_OR_RETURN(const Tensor* r, ctx.InputTensor(2));
  const DataType t = x->dtype();
  if (t != DataType::kFloat && t != DataType::kDouble && t != DataType::kFloat16 && t != DataType::kBFloat16)
    return NotImplemented(ctx.node().Describe() + ": " + CellName(kKind) + " does not support element type " +
                          DataTypeName(t));
  RnnProblem pb;
  NEE_ASSIGN_OR_RETURN(pb.config, ReadConfig(ctx, ctx.node(), kKind, ctx.opset()));
  const RnnConfig& cfg = pb.config;
  if (x->rank() != 3) return ctx.InputError(0, "(X) must have rank 3, got " + DimsToString(x->dims()));
  pb.seq = x->dim(cfg.layout == 0 ? 0 : 1);
  pb.batch = x->dim(cfg.layout == 0 ? 1 : 0);
  pb.input = x->dim(2);
  pb.dirs = cfg.num_directions;
  pb.gates = GatesOf(kKind);
  if (r->rank() != 3) return ctx.InputError(2, "(R) must have rank 3, got " + DimsToString(r->dims()));
  pb.hidden = kQuantizedWeights ? r->dim(1) : r->dim(2);
  if (cfg.hidden_size > 0 && cfg.hidden_size != pb.hidden)
    return ctx.InputError(2, "(R) has hidden size " + std::to_string(pb.hidden) + " but hidden_size is " +
                                 std::to_string(cfg.hidden_size));
  const int64_t gh = pb.gates * pb.hidden;
  if constexpr (!kQuantizedWeights) {
    NEE_RETURN_IF_ERROR(ExpectDims(ctx, 1, "W", *w, {pb.dirs, gh, pb.input}));
    NEE_RETURN_IF_ERROR(ExpectDims(ctx, 2, "R", *r, {pb.dirs, gh, pb.hidden}));
  }
  for (size_t i = 1; i < ctx.num_inputs(); ++i) {
    if (i == 4 || !ctx.has_input(i)) continue;
    if (kQuantizedWeights && (i == 1 || i == 2 || i >= 8)) continue;  // checked with the weights
    NEE_ASSIGN_OR_RETURN(const Tensor* in, ctx.InputTensor(i));
    if (in->dtype() != t)
      return ctx.InputError(i, std::string("must have X's type ") + DataTypeName(t) + ", got " +
                                   DataTypeName(in->dtype()));
  }
  pb.x = ToDoubles(*x);
  std::vector<QuantizedWeights> qw, qr;
  if constexpr (kQuantizedWeights) {
    NEE_ASSIGN_OR_RETURN(qw, ReadQuantizedWeights(ctx, 1, 8, pb.dirs, pb.input, gh));
    NEE_ASSIGN_OR_RETURN(qr, ReadQuantizedWeights(ctx, 2, 10, pb.dirs, pb.hidden, gh));
  } else {
    pb.w = ToDoubles(*w);
    pb.r = ToDoubles(*r);
  }
  const std::vector<int64_t> state_dims =
      cfg.layout == 0 ? std::vector<int64_t>{pb.dirs, pb.batch, pb.hidden}
                      : std::vector<int64_t>{pb.batch, pb.dirs, pb.hidden};
  if (ctx.has_input(3)) {
    NEE_ASSIGN_OR_RETURN(const Tensor* b, ctx.InputTensor(3));
    NEE_RETURN_IF_ERROR(ExpectDims(ctx, 3, "B", *b, {pb.dirs, 2 * gh}));
    pb.b = ToDoubles(*b);
  }
  if (ctx.has_input(4)) {
    NEE_ASSIGN_OR_RETURN(const Tensor* lens, ctx.InputTensor(4));
    if (lens->dtype() != DataType::kInt32 && lens->dtype() != DataType::kInt64)
      return ctx.InputError(4, "(sequence_lens) must be int32, got " + lens->Describe());
    NEE_RETURN_IF_ERROR(ExpectDims(ctx, 4, "sequence_lens", *lens, {pb.batch}));
    NEE_ASSIGN_OR_RETURN(pb.seq_lens, lens->ToInt64Vector());
    for (int64_t len : pb.seq_lens)
      if (len < 0 || len > pb.seq)
        return ctx.InputError(4, "(sequence_lens) entry " + std::to_string(len) + " is outside [0, " +
                                     std::to_string(pb.seq) + "]");
  }
  if (ctx.has_input(5)) {
    NEE_ASSIGN_OR_RETURN(const Tensor* h0, ctx.InputTensor(5));
    NEE_RETURN_IF_ERROR(ExpectDims(ctx, 5, "initial_h", *h0, state_dims));
    pb.h0 = ToDoubles(*h0);
  }
  if (kKind == CellKind::kLstm && ctx.has_input(6)) {
    NEE_ASSIGN_OR_RETURN(const Tensor* c0, ctx.InputTensor(6));
    NEE_RETURN_IF_ERROR(ExpectDims(ctx, 6, "initial_c", *c0, state_dims));
    pb.c0 = ToDoubles(*c0);
  }
  if (kKind == CellKind::kLstm && ctx.has_input(7)) {
    NEE_ASSIGN_OR_RETURN(const Tensor* p, ctx.InputTensor(7));
    NEE_RETURN_IF_ERROR(ExpectDims(ctx, 7, "P", *p, {pb.dirs, 3 * pb.hidden}));
    pb.p = ToDoubles(*p);
  }

  std::vector<RunResult> runs(static_cast<size_t>(pb.dirs * pb.batch));
  if constexpr (kQuantizedWeights) {
    for (int64_t d = 0; d < pb.dirs; ++d) {
      std::vector<RunResult> dir = RunQuantizedLstm(pb, d, qw[static_cast<size_t>(d)], qr[static_cast<size_t>(d)],
                                                    ctx.wants_output(0));
      std::move(dir.begin(), dir.end(), runs.begin() + d * pb.batch);
    }
  } else {
    ctx.ParallelFor(pb.dirs * pb.batch, 1, [&](int64_t begin, int64_t end) {
      for (int64_t k = begin; k < end; ++k)
        runs[static_cast<size_t>(k)] = RunOneSequence(pb, k / pb.batch, k % pb.batch);
    });
  }

  const std::vector<int64_t> y_dims = cfg.layout == 0 ? std::vector<int64_t>{pb.seq, pb.dirs, pb.batch, pb.hidden}
                                                      : std::vector<int64_t>{pb.batch, pb.seq, pb.dirs, pb.hidden};
  if (ctx.wants_output(0)) {
    NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, t, y_dims));
    for (int64_t d = 0; d < pb.dirs; ++d)
      for (int64_t bi = 0; bi < pb.batch; ++bi)
        for (int64_t s = 0; s < pb.seq; ++s)
          for (int64_t j = 0; j < pb.hidden; ++j)
            WriteFromDouble(y, static_cast<int64_t>(pb.YIndex(s, d, bi, j)),
                            runs[static_cast<size_t>(d * pb.batch + bi)].y[static_cast<size_t>(s * pb.hidden + j)]);
  }
  for (size_t out = 1; out <= (kKind == CellKind::kLstm ? 2u : 1u); ++out) {
    if (!ctx.wants_output(out)) continue;
    NEE_ASSIGN_OR_RETURN(Tensor state, ctx.AllocateOutput(out, t, state_dims));
    for (int64_t d = 0; d < pb.dirs; ++d)
      for (int64_t bi = 0; bi < pb.batch; ++bi) {
        const RunResult& run = runs[static_cast<size_t>(d * pb.batch + bi)];
        const std::vector<double>& src = out == 1 ? run.h : run.c;
        for (int64_t j = 0; j < pb.hidden; ++j)
          WriteFromDouble(state, static_cast<int64_t>(pb.StateIndex(d, bi, j)), src[static_cast<size_t>(j)]);
      }
  }
  return Status::Ok();
}

}  // namespace

void RegisterRnnOps(OpRegistry& registry) {
  // Version 1 (and GRU's 3) computes what 7 does; their output_sequence attribute only said whether Y was
  // wanted, which an absent output says from 7 on. GRU-1 has no linear_before_reset (it is 0).
  registry.RegisterVersions("", "RNN", {1, 7, 14, 22}, InferRnn<CellKind::kRnn>, RnnKernel<CellKind::kRnn>);
  registry.RegisterVersions("", "GRU", {1, 3, 7, 14, 22}, InferRnn<CellKind::kGru>, RnnKernel<CellKind::kGru>);
  registry.RegisterVersions("", "LSTM", {1, 7, 14, 22}, InferRnn<CellKind::kLstm>, RnnKernel<CellKind::kLstm>);
  // ONNX Runtime's contrib op written by onnxruntime.quantization.quantize_dynamic for LSTM nodes: LSTM with
  // int8 weights laid out [dirs, input, 4*hidden] / [dirs, hidden, 4*hidden]; their scales and zero points
  // (inputs 8 to 11) are required, which the kernel checks (the optional inputs 3 to 7 come before them).
  registry.RegisterVersions("com.microsoft", "DynamicQuantizeLSTM", {1}, InferRnn<CellKind::kLstm>,
                            RnnKernel<CellKind::kLstm, true>);
}

}  // namespace nee
