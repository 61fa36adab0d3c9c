// Operator family: losses and the ai.onnx.preview.training optimizers.
//
//   NegativeLogLikelihoodLoss (12, 13, 22): loss = -input[n, c, d...] * weight[c]
//   SoftmaxCrossEntropyLoss (12, 13): NLL loss of LogSoftmax(scores) along dim 1
//   Adagrad, Adam, Momentum (ai.onnx.preview.training 1): one optimizer step
//
// Both losses share one core: for every sample (n, d...) pick the class c =
// labels[n, d...], skip it when it equals ignore_index, and reduce with
// 'none', 'sum' or 'mean' ('mean' divides by the summed weights, i.e. by the
// number of non-ignored samples when there are no class weights). Labels are
// validated: any value outside [0, C) that is not ignore_index is an error.
// Everything is computed in double and rounded once to the output type.
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "ops/nn_util.h"
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace nee {
namespace {

// ---- Shared loss core --------------------------------------------------------

enum class Reduction { kNone, kSum, kMean };

Result<Reduction> ReadReduction(const Node& node) {
  NEE_ASSIGN_OR_RETURN(std::string r, node.GetString("reduction", "mean"));
  if (r == "none") return Reduction::kNone;
  if (r == "sum") return Reduction::kSum;
  if (r == "mean") return Reduction::kMean;
  return InvalidModel(node.Describe() + ": reduction must be 'none', 'sum' or 'mean', got '" + r + "'");
}

// The loss output: the labels' shape for 'none', a scalar otherwise.
Status InferLossCommon(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ctx, 0));
  NEE_ASSIGN_OR_RETURN(Reduction reduction, ReadReduction(ctx.node));
  if (x->shape && x->shape->size() < 2)
    return ctx.InputError(0, "must have rank >= 2 [N, C, d1, ...], got " + ShapeToString(*x->shape));
  std::optional<Shape> loss_shape;
  if (reduction != Reduction::kNone) {
    loss_shape = Shape{};
  } else if (x->shape) {
    Shape s = *x->shape;
    s.erase(s.begin() + 1);
    // Known label dims refine unknown ones of the scores.
    const Shape* labels = nn::KnownShape(ctx, 1);
    if (labels && labels->size() == s.size())
      for (size_t i = 0; i < s.size(); ++i) s[i] = nn::MergeDims(s[i], (*labels)[i]);
    loss_shape = s;
  } else if (const Shape* labels = nn::KnownShape(ctx, 1)) {
    loss_shape = *labels;
  }
  ctx.output_types[0] = TypeInfo::Tensor(x->elem_type, loss_shape);
  // SoftmaxCrossEntropyLoss's optional log_prob has the scores' type and shape.
  for (size_t i = 1; i < ctx.num_outputs(); ++i) ctx.output_types[i] = *x;
  return Status::Ok();
}

// Computes the loss from log-probabilities `log_prob` laid out [N, C, D]
// (D = product of the trailing dims) and writes output 0.
Status ComputeLoss(KernelContext& ctx, const Tensor& scores, const double* log_prob) {
  const Node& node = ctx.node();
  NEE_ASSIGN_OR_RETURN(const Tensor* labels, ctx.InputTensor(1));
  NEE_ASSIGN_OR_RETURN(Reduction reduction, ReadReduction(node));
  std::optional<int64_t> ignore_index;
  if (node.HasAttr("ignore_index")) {
    NEE_ASSIGN_OR_RETURN(ignore_index, node.GetInt("ignore_index"));
  }

  const std::vector<int64_t>& dims = scores.dims();
  std::vector<int64_t> label_dims = dims;
  label_dims.erase(label_dims.begin() + 1);
  if (labels->dims() != label_dims)
    return ctx.InputError(1, "must have shape " + DimsToString(label_dims) + " (the scores' shape without dim 1), got " +
                                 DimsToString(labels->dims()));
  if (labels->dtype() != DataType::kInt32 && labels->dtype() != DataType::kInt64)
    return ctx.InputError(1, std::string("must be int32 or int64, got ") + DataTypeName(labels->dtype()));
  const int64_t batch = dims[0], classes = dims[1], inner = ProductOf(dims, 2);

  std::vector<double> weights;
  if (ctx.has_input(2)) {
    NEE_ASSIGN_OR_RETURN(const Tensor* w, ctx.InputTensor(2));
    if (w->rank() != 1 || w->dim(0) != classes)
      return ctx.InputError(2, "must have shape [" + std::to_string(classes) + "] (one weight per class), got " +
                                   DimsToString(w->dims()));
    weights.resize(static_cast<size_t>(classes));
    nn::ConvertToCompute(*w, weights.data());
  }

  const int64_t samples = batch * inner;
  std::vector<double> loss(static_cast<size_t>(samples), 0.0);
  double weight_sum = 0;
  for (int64_t s = 0; s < samples; ++s) {
    const int64_t label = labels->dtype() == DataType::kInt32 ? labels->data<int32_t>()[s] : labels->data<int64_t>()[s];
    if (ignore_index && label == *ignore_index) continue;
    if (label < 0 || label >= classes)
      return ctx.InputError(1, "value " + std::to_string(label) + " at flat index " + std::to_string(s) +
                                   " is not a class index in [0, " + std::to_string(classes) + ")" +
                                   (ignore_index ? " nor ignore_index " + std::to_string(*ignore_index) : ""));
    const int64_t n = s / inner, d = s % inner;
    const double w = weights.empty() ? 1.0 : weights[static_cast<size_t>(label)];
    loss[static_cast<size_t>(s)] = -log_prob[(n * classes + label) * inner + d] * w;
    weight_sum += w;
  }

  if (reduction == Reduction::kNone) {
    NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutput(0, scores.dtype(), label_dims));
    nn::ConvertFromCompute(loss.data(), out);
    return Status::Ok();
  }
  double total = 0;
  for (double v : loss) total += v;
  // 'mean' without weights or ignored samples is the plain mean over all samples.
  if (reduction == Reduction::kMean) total = weights.empty() && !ignore_index ? total / static_cast<double>(samples)
                                                                             : total / weight_sum;
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutput(0, scores.dtype(), {}));
  nn::ConvertFromCompute(&total, out);
  return Status::Ok();
}

Status CheckLossInput(KernelContext& ctx, const Tensor& x) {
  if (!nn::IsRealFloat(x.dtype()))
    return NotImplemented(ctx.node().Describe() + ": " + nn::TypeError(ctx.node().op_type.c_str(), x.dtype()));
  if (x.rank() < 2) return ctx.InputError(0, "must have rank >= 2 [N, C, d1, ...], got " + DimsToString(x.dims()));
  return Status::Ok();
}

Status NegativeLogLikelihoodLossKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_RETURN_IF_ERROR(CheckLossInput(ctx, *x));
  nn::ComputeInput<double> log_prob(*x);
  return ComputeLoss(ctx, *x, log_prob.data());
}

Status SoftmaxCrossEntropyLossKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_RETURN_IF_ERROR(CheckLossInput(ctx, *x));
  nn::ComputeInput<double> scores(*x);
  const int64_t batch = x->dim(0), classes = x->dim(1), inner = ProductOf(x->dims(), 2);
  // LogSoftmax over the class dim, shifted by the maximum so exp stays finite.
  std::vector<double> log_prob(static_cast<size_t>(x->num_elements()));
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t d = 0; d < inner; ++d) {
      const int64_t base = n * classes * inner + d;
      double max = -INFINITY;
      for (int64_t c = 0; c < classes; ++c) max = std::max(max, scores[base + c * inner]);
      double sum = 0;
      for (int64_t c = 0; c < classes; ++c) sum += std::exp(scores[base + c * inner] - max);
      const double log_sum = std::log(sum);
      for (int64_t c = 0; c < classes; ++c)
        log_prob[static_cast<size_t>(base + c * inner)] = scores[base + c * inner] - max - log_sum;
    }
  NEE_RETURN_IF_ERROR(ComputeLoss(ctx, *x, log_prob.data()));
  if (ctx.wants_output(1)) {
    NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutput(1, x->dtype(), x->dims()));
    nn::ConvertFromCompute(log_prob.data(), out);
  }
  return Status::Ok();
}

// ---- ai.onnx.preview.training optimizers -----------------------------------------
// Inputs: R (scalar learning rate), T (scalar int64 step count), then `groups`
// runs of n tensors each (X..., G..., and the optimizer's state tensors).
// Outputs: the new X..., then the new state tensors, n of each.

struct OptimizerInputs {
  double rate = 0;
  int64_t step = 0;
  int64_t count = 0;  // n: tensors optimized
};

Result<OptimizerInputs> ReadOptimizerInputs(KernelContext& ctx, int groups) {
  OptimizerInputs in;
  NEE_ASSIGN_OR_RETURN(const Tensor* r, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(const Tensor* t, ctx.InputTensor(1));
  if (r->num_elements() != 1 || !nn::IsRealFloat(r->dtype()))
    return ctx.InputError(0, "must be a float or double scalar (the learning rate), got " + r->Describe());
  if (t->num_elements() != 1 || t->dtype() != DataType::kInt64)
    return ctx.InputError(1, "must be an int64 scalar (the update count), got " + t->Describe());
  in.rate = ReadAsDouble(*r, 0);
  in.step = t->data<int64_t>()[0];
  const int64_t rest = static_cast<int64_t>(ctx.num_inputs()) - 2;
  if (rest <= 0 || rest % groups != 0)
    return ctx.Error("expects R, T and " + std::to_string(groups) + " groups of equally many tensors; got " +
                     std::to_string(ctx.num_inputs()) + " inputs");
  in.count = rest / groups;
  const int64_t outputs = static_cast<int64_t>(ctx.num_outputs());
  if (outputs > (groups - 1) * in.count)
    return ctx.Error("has " + std::to_string(outputs) + " outputs, at most " + std::to_string((groups - 1) * in.count) +
                     " expected");
  // Every tensor of tensor i's group must match X_i's shape.
  for (int64_t i = 0; i < in.count; ++i) {
    NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(static_cast<size_t>(2 + i)));
    if (!nn::IsRealFloat(x->dtype()))
      return NotImplemented(ctx.node().Describe() + ": " + nn::TypeError(ctx.node().op_type.c_str(), x->dtype()));
    for (int g = 1; g < groups; ++g) {
      const size_t index = static_cast<size_t>(2 + g * in.count + i);
      NEE_ASSIGN_OR_RETURN(const Tensor* other, ctx.InputTensor(index));
      if (other->dims() != x->dims() || other->dtype() != x->dtype())
        return ctx.InputError(index, "must match the optimized tensor " + x->Describe() + ", got " + other->Describe());
    }
  }
  return in;
}

// Reads group g's tensor i as doubles.
std::vector<double> GroupTensor(const KernelContext& ctx, const OptimizerInputs& in, int g, int64_t i) {
  const Tensor& t = ctx.input(static_cast<size_t>(2 + g * in.count + i))->tensor();
  std::vector<double> v(static_cast<size_t>(t.num_elements()));
  nn::ConvertToCompute(t, v.data());
  return v;
}

// Writes `values` as output (k * n + i) when the node asks for it.
Status WriteGroupOutput(KernelContext& ctx, const OptimizerInputs& in, int k, int64_t i, const std::vector<double>& values) {
  const size_t index = static_cast<size_t>(k * in.count + i);
  if (!ctx.wants_output(index)) return Status::Ok();
  const Tensor& x = ctx.input(static_cast<size_t>(2 + i))->tensor();
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutput(index, x.dtype(), x.dims()));
  nn::ConvertFromCompute(values.data(), out);
  return Status::Ok();
}

Status AdagradKernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  NEE_ASSIGN_OR_RETURN(OptimizerInputs in, ReadOptimizerInputs(ctx, 3));
  NEE_ASSIGN_OR_RETURN(float norm_coefficient, node.GetFloat("norm_coefficient", 0.0f));
  NEE_ASSIGN_OR_RETURN(float decay_factor, node.GetFloat("decay_factor", 0.0f));
  NEE_ASSIGN_OR_RETURN(float epsilon, node.GetFloat("epsilon", 1e-6f));
  const double rate = in.rate / (1 + static_cast<double>(in.step) * decay_factor);
  for (int64_t i = 0; i < in.count; ++i) {
    std::vector<double> x = GroupTensor(ctx, in, 0, i), g = GroupTensor(ctx, in, 1, i), h = GroupTensor(ctx, in, 2, i);
    for (size_t k = 0; k < x.size(); ++k) {
      const double g_reg = norm_coefficient * x[k] + g[k];
      h[k] += g_reg * g_reg;
      x[k] -= rate * g_reg / (std::sqrt(h[k]) + epsilon);
    }
    NEE_RETURN_IF_ERROR(WriteGroupOutput(ctx, in, 0, i, x));
    NEE_RETURN_IF_ERROR(WriteGroupOutput(ctx, in, 1, i, h));
  }
  return Status::Ok();
}

Status AdamKernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  NEE_ASSIGN_OR_RETURN(OptimizerInputs in, ReadOptimizerInputs(ctx, 4));
  NEE_ASSIGN_OR_RETURN(float norm_coefficient, node.GetFloat("norm_coefficient", 0.0f));
  NEE_ASSIGN_OR_RETURN(float norm_coefficient_post, node.GetFloat("norm_coefficient_post", 0.0f));
  NEE_ASSIGN_OR_RETURN(float alpha, node.GetFloat("alpha", 0.9f));
  NEE_ASSIGN_OR_RETURN(float beta, node.GetFloat("beta", 0.999f));
  NEE_ASSIGN_OR_RETURN(float epsilon, node.GetFloat("epsilon", 1e-6f));
  // Bias correction of both moving averages, from the second step on.
  double rate = in.rate;
  if (in.step > 0) {
    const double t = static_cast<double>(in.step);
    rate = in.rate * std::sqrt(1 - std::pow(double{beta}, t)) / (1 - std::pow(double{alpha}, t));
  }
  for (int64_t i = 0; i < in.count; ++i) {
    std::vector<double> x = GroupTensor(ctx, in, 0, i), g = GroupTensor(ctx, in, 1, i);
    std::vector<double> v = GroupTensor(ctx, in, 2, i), h = GroupTensor(ctx, in, 3, i);
    for (size_t k = 0; k < x.size(); ++k) {
      const double g_reg = norm_coefficient * x[k] + g[k];
      v[k] = alpha * v[k] + (1 - double{alpha}) * g_reg;
      h[k] = beta * h[k] + (1 - double{beta}) * g_reg * g_reg;
      x[k] = (1 - double{norm_coefficient_post}) * (x[k] - rate * v[k] / (std::sqrt(h[k]) + epsilon));
    }
    NEE_RETURN_IF_ERROR(WriteGroupOutput(ctx, in, 0, i, x));
    NEE_RETURN_IF_ERROR(WriteGroupOutput(ctx, in, 1, i, v));
    NEE_RETURN_IF_ERROR(WriteGroupOutput(ctx, in, 2, i, h));
  }
  return Status::Ok();
}

Status MomentumKernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  NEE_ASSIGN_OR_RETURN(OptimizerInputs in, ReadOptimizerInputs(ctx, 3));
  NEE_ASSIGN_OR_RETURN(float norm_coefficient, node.GetFloat("norm_coefficient"));
  NEE_ASSIGN_OR_RETURN(float alpha, node.GetFloat("alpha"));
  NEE_ASSIGN_OR_RETURN(float beta, node.GetFloat("beta"));
  // (Read in place, not moved out of the Result: GCC 12 reports a moved
  // short string as maybe-uninitialized.)
  const auto mode_attribute = node.GetString("mode");
  if (!mode_attribute.ok()) return mode_attribute.status();
  const std::string& mode = mode_attribute.value();
  if (mode != "standard" && mode != "nesterov")
    return InvalidModel(node.Describe() + ": mode must be 'standard' or 'nesterov', got '" + mode + "'");
  // The first step takes the whole gradient.
  const double beta_adjusted = in.step > 0 ? beta : 1.0;
  for (int64_t i = 0; i < in.count; ++i) {
    std::vector<double> x = GroupTensor(ctx, in, 0, i), g = GroupTensor(ctx, in, 1, i), v = GroupTensor(ctx, in, 2, i);
    for (size_t k = 0; k < x.size(); ++k) {
      const double g_reg = norm_coefficient * x[k] + g[k];
      v[k] = alpha * v[k] + beta_adjusted * g_reg;
      x[k] -= mode == "standard" ? in.rate * v[k] : in.rate * (g_reg + alpha * v[k]);
    }
    NEE_RETURN_IF_ERROR(WriteGroupOutput(ctx, in, 0, i, x));
    NEE_RETURN_IF_ERROR(WriteGroupOutput(ctx, in, 1, i, v));
  }
  return Status::Ok();
}

// Output k*n + i has the type of X_i (input 2 + i).
Status InferOptimizer(InferenceContext& ctx) {
  const int64_t rest = static_cast<int64_t>(ctx.num_inputs()) - 2;
  const int64_t outputs = static_cast<int64_t>(ctx.num_outputs());
  // The number of tensors optimized is implied by the input count and the
  // output count: (outputs / n) + 1 groups of inputs, n of each.
  for (int64_t n = 1; n <= rest; ++n) {
    if (rest % n != 0 || outputs % n != 0 || rest / n != outputs / n + 1) continue;
    for (int64_t o = 0; o < outputs; ++o)
      if (ctx.has_input(static_cast<size_t>(2 + o % n))) ctx.output_types[static_cast<size_t>(o)] = ctx.input_type(static_cast<size_t>(2 + o % n));
    return Status::Ok();
  }
  return Status::Ok();  // unusual arity: leave the outputs unknown; the kernel reports it
}

}  // namespace

void RegisterLossOps(OpRegistry& registry) {
  registry.RegisterVersions("", "NegativeLogLikelihoodLoss", {12, 13, 22}, InferLossCommon,
                            NegativeLogLikelihoodLossKernel);
  registry.RegisterVersions("", "SoftmaxCrossEntropyLoss", {12, 13}, InferLossCommon, SoftmaxCrossEntropyLossKernel);
  const char* kTraining = "ai.onnx.preview.training";
  registry.RegisterVersions(kTraining, "Adagrad", {1}, InferOptimizer, AdagradKernel);
  registry.RegisterVersions(kTraining, "Adam", {1}, InferOptimizer, AdamKernel);
  registry.RegisterVersions(kTraining, "Momentum", {1}, InferOptimizer, MomentumKernel);
}

}  // namespace nee
