// oneDNN reference timings for the matmul and convolution shapes that nee's own
// kernels are measured on (docs/DEPENDENCIES.md, "oneDNN: measured, not used").
// A standalone program: it is NOT part of nee's build and nothing in nee needs
// oneDNN. Build it by hand against Debian's package (apt-get install libdnnl-dev,
// oneDNN 2.6.3, built with the OpenMP CPU runtime, libgomp):
//
//   g++ -std=c++17 -O2 -march=native bench/onednn_bench.cc -ldnnl -fopenmp -o /tmp/onednn_bench
//
//   OMP_NUM_THREADS=1 /tmp/onednn_bench [--seconds 1.0] [--only SUBSTRING] [--chain]
//   OMP_NUM_THREADS=2 /tmp/onednn_bench ...
//
// Threads: oneDNN's CPU engine runs its primitives in OpenMP parallel regions of
// omp_get_max_threads() threads, so OMP_NUM_THREADS is the thread count (the
// program prints it). Run it once per thread count.
//
// What is timed, per call, on fixed inputs (median over the calls made in
// about --seconds after a warm-up; GFLOP/s from the median):
//  - matmul M x N x K: src M x K plain (ab), weights K x N constant, created in
//    format_tag::any and reordered once into the layout the primitive asks for
//    (as a runtime prepacks constant weights: that one-time reorder is not in
//    the per-call time), dst M x N plain.
//  - convolution forward (inference, f32, with bias), weights constant and
//    prepacked once the same way, in two variants:
//      plain:   src and dst in NCHW (what an ONNX graph hands over);
//      blocked: src and dst in format_tag::any, i.e. the channel-blocked layout
//               oneDNN picks (nChw8c on AVX2); "conv" is the primitive alone,
//               "in" the reorder NCHW -> blocked of the source, "out" the
//               reorder blocked -> NCHW of the result, each timed separately.
//  - with --chain: a MobileNetV2-style chain 1x1 24->144, depthwise 3x3 144,
//    1x1 144->24 at 56x56 (no activations), blocked between the convs, with one
//    reorder in and one out, timed as one call (and each part).
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "oneapi/dnnl/dnnl.hpp"

using namespace dnnl;
using tag = memory::format_tag;
using dt = memory::data_type;

namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double g_seconds = 1.0;

// Median seconds per call of fn(): a warm-up of 3 calls (at least 0.1 s), then
// as many calls as fit in g_seconds (at least 5).
double TimeMedian(const std::function<void()>& fn) {
  double t0 = Now();
  for (int i = 0; i < 3 || Now() - t0 < 0.1; ++i) fn();
  std::vector<double> t;
  double start = Now();
  while (t.size() < 5 || Now() - start < g_seconds) {
    double a = Now();
    fn();
    t.push_back(Now() - a);
  }
  std::nth_element(t.begin(), t.begin() + t.size() / 2, t.end());
  return t[t.size() / 2];
}

void Fill(memory& m) {
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  float* p = static_cast<float*>(m.get_data_handle());
  size_t n = m.get_desc().get_size() / sizeof(float);
  for (size_t i = 0; i < n; ++i) p[i] = d(rng);
}

// Returns mem reordered into desc (or mem itself when the layouts agree).
memory Prepack(engine& eng, stream& s, memory& mem, const memory::desc& desc) {
  if (mem.get_desc() == desc) return mem;
  memory out(desc, eng);
  reorder(mem, out).execute(s, mem, out);
  s.wait();
  return out;
}

void Matmul(engine& eng, stream& s, int64_t M, int64_t N, int64_t K, int threads) {
  memory::desc a_plain({M, K}, dt::f32, tag::ab);
  memory::desc b_plain({K, N}, dt::f32, tag::ab);
  memory::desc b_any({K, N}, dt::f32, tag::any);
  memory::desc c_plain({M, N}, dt::f32, tag::ab);
  matmul::primitive_desc pd(matmul::desc(a_plain, b_any, c_plain), eng);
  memory a(a_plain, eng), b(b_plain, eng), c(c_plain, eng);
  Fill(a);
  Fill(b);
  double p0 = Now();
  memory bw = Prepack(eng, s, b, pd.weights_desc());
  double prepack = Now() - p0;
  matmul prim(pd);
  double sec = TimeMedian([&] {
    prim.execute(s, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, bw}, {DNNL_ARG_DST, c}});
    s.wait();
  });
  double flops = 2.0 * M * N * K;
  std::printf("matmul %ldx%ldx%ld threads=%d ms=%.4f GFLOPs=%.1f impl=%s prepack_ms=%.2f\n", (long)M, (long)N,
              (long)K, threads, sec * 1e3, flops / sec * 1e-9, pd.impl_info_str(), prepack * 1e3);
  std::fflush(stdout);
}

struct ConvShape {
  const char* name;
  int64_t cin, cout, h, w, k, stride, pad, group;
};

convolution_forward::primitive_desc ConvPd(engine& eng, const ConvShape& c, tag src_tag, tag dst_tag,
                                           memory::dims* dst_dims) {
  int64_t ho = (c.h + 2 * c.pad - c.k) / c.stride + 1, wo = (c.w + 2 * c.pad - c.k) / c.stride + 1;
  memory::dims src_d{1, c.cin, c.h, c.w}, dst_d{1, c.cout, ho, wo}, bias_d{c.cout};
  memory::dims w_d = c.group == 1 ? memory::dims{c.cout, c.cin, c.k, c.k}
                                  : memory::dims{c.group, c.cout / c.group, c.cin / c.group, c.k, c.k};
  *dst_dims = dst_d;
  convolution_forward::desc d(prop_kind::forward_inference, algorithm::convolution_direct,
                              memory::desc(src_d, dt::f32, src_tag), memory::desc(w_d, dt::f32, tag::any),
                              memory::desc(bias_d, dt::f32, tag::x), memory::desc(dst_d, dt::f32, dst_tag),
                              {c.stride, c.stride}, {c.pad, c.pad}, {c.pad, c.pad});
  return convolution_forward::primitive_desc(d, eng);
}

memory PlainWeights(engine& eng, const ConvShape& c) {
  memory::dims w_d = c.group == 1 ? memory::dims{c.cout, c.cin, c.k, c.k}
                                  : memory::dims{c.group, c.cout / c.group, c.cin / c.group, c.k, c.k};
  memory w(memory::desc(w_d, dt::f32, c.group == 1 ? tag::oihw : tag::goihw), eng);
  Fill(w);
  return w;
}

double ConvFlops(const ConvShape& c) {
  int64_t ho = (c.h + 2 * c.pad - c.k) / c.stride + 1, wo = (c.w + 2 * c.pad - c.k) / c.stride + 1;
  return 2.0 * c.cout * ho * wo * (c.cin / c.group) * c.k * c.k;
}

void Conv(engine& eng, stream& s, const ConvShape& c, int threads) {
  double flops = ConvFlops(c);
  memory::desc src_plain({1, c.cin, c.h, c.w}, dt::f32, tag::nchw);
  memory src(src_plain, eng);
  Fill(src);
  memory bias(memory::desc({c.cout}, dt::f32, tag::x), eng);
  Fill(bias);
  memory w = PlainWeights(eng, c);

  // plain NCHW in and out
  {
    memory::dims dst_d;
    auto pd = ConvPd(eng, c, tag::nchw, tag::nchw, &dst_d);
    memory ww = Prepack(eng, s, w, pd.weights_desc());
    memory dst(pd.dst_desc(), eng);
    convolution_forward prim(pd);
    double sec = TimeMedian([&] {
      prim.execute(s, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, ww}, {DNNL_ARG_BIAS, bias}, {DNNL_ARG_DST, dst}});
      s.wait();
    });
    std::printf("conv %s plain threads=%d ms=%.4f GFLOPs=%.1f impl=%s\n", c.name, threads, sec * 1e3,
                flops / sec * 1e-9, pd.impl_info_str());
  }
  // blocked (format_tag::any), reorders timed apart
  {
    memory::dims dst_d;
    auto pd = ConvPd(eng, c, tag::any, tag::any, &dst_d);
    memory ww = Prepack(eng, s, w, pd.weights_desc());
    memory src_b(pd.src_desc(), eng), dst_b(pd.dst_desc(), eng);
    memory dst_plain(memory::desc(dst_d, dt::f32, tag::nchw), eng);
    reorder rin(src, src_b), rout(dst_b, dst_plain);
    convolution_forward prim(pd);
    double tin = TimeMedian([&] {
      rin.execute(s, src, src_b);
      s.wait();
    });
    double tconv = TimeMedian([&] {
      prim.execute(s, {{DNNL_ARG_SRC, src_b}, {DNNL_ARG_WEIGHTS, ww}, {DNNL_ARG_BIAS, bias}, {DNNL_ARG_DST, dst_b}});
      s.wait();
    });
    double tout = TimeMedian([&] {
      rout.execute(s, dst_b, dst_plain);
      s.wait();
    });
    std::printf("conv %s blocked threads=%d ms=%.4f GFLOPs=%.1f in_ms=%.4f out_ms=%.4f total_ms=%.4f impl=%s\n",
                c.name, threads, tconv * 1e3, flops / tconv * 1e-9, tin * 1e3, tout * 1e3,
                (tin + tconv + tout) * 1e3, pd.impl_info_str());
  }
  std::fflush(stdout);
}

// MobileNetV2-style 1x1 -> dw3x3 -> 1x1, blocked throughout, NCHW at the ends.
void Chain(engine& eng, stream& s, int threads) {
  const ConvShape a{"pw 24->144", 24, 144, 56, 56, 1, 1, 0, 1};
  const ConvShape b{"dw 144", 144, 144, 56, 56, 3, 1, 1, 144};
  const ConvShape c{"pw 144->24", 144, 24, 56, 56, 1, 1, 0, 1};
  double flops = ConvFlops(a) + ConvFlops(b) + ConvFlops(c);
  memory::dims d;
  auto pa = ConvPd(eng, a, tag::any, tag::any, &d);
  auto pb = ConvPd(eng, b, tag::any, tag::any, &d);
  auto pc = ConvPd(eng, c, tag::any, tag::any, &d);
  memory wa0 = PlainWeights(eng, a), wb0 = PlainWeights(eng, b), wc0 = PlainWeights(eng, c);
  memory wa = Prepack(eng, s, wa0, pa.weights_desc()), wb = Prepack(eng, s, wb0, pb.weights_desc()),
         wc = Prepack(eng, s, wc0, pc.weights_desc());
  memory ba(memory::desc({144}, dt::f32, tag::x), eng), bb(memory::desc({144}, dt::f32, tag::x), eng),
      bc(memory::desc({24}, dt::f32, tag::x), eng);
  Fill(ba);
  Fill(bb);
  Fill(bc);
  memory src(memory::desc({1, 24, 56, 56}, dt::f32, tag::nchw), eng);
  Fill(src);
  memory dst(memory::desc({1, 24, 56, 56}, dt::f32, tag::nchw), eng);
  memory s0(pa.src_desc(), eng), s1(pa.dst_desc(), eng), s2(pb.dst_desc(), eng), s3(pc.dst_desc(), eng);
  // The layouts chosen for consecutive convs agree on AVX2 (nChw8c); check.
  if (!(pa.dst_desc() == pb.src_desc()) || !(pb.dst_desc() == pc.src_desc())) {
    std::printf("chain: layouts differ between convs, skipped\n");
    return;
  }
  reorder rin(src, s0), rout(s3, dst);
  convolution_forward ca(pa), cb(pb), cc(pc);
  double sec = TimeMedian([&] {
    rin.execute(s, src, s0);
    ca.execute(s, {{DNNL_ARG_SRC, s0}, {DNNL_ARG_WEIGHTS, wa}, {DNNL_ARG_BIAS, ba}, {DNNL_ARG_DST, s1}});
    cb.execute(s, {{DNNL_ARG_SRC, s1}, {DNNL_ARG_WEIGHTS, wb}, {DNNL_ARG_BIAS, bb}, {DNNL_ARG_DST, s2}});
    cc.execute(s, {{DNNL_ARG_SRC, s2}, {DNNL_ARG_WEIGHTS, wc}, {DNNL_ARG_BIAS, bc}, {DNNL_ARG_DST, s3}});
    rout.execute(s, s3, dst);
    s.wait();
  });
  std::printf("chain pw24-144/dw144/pw144-24@56 blocked threads=%d ms=%.4f GFLOPs=%.1f\n", threads, sec * 1e3,
              flops / sec * 1e-9);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  std::string only;
  bool chain = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--seconds" && i + 1 < argc) g_seconds = std::atof(argv[++i]);
    else if (arg == "--only" && i + 1 < argc) only = argv[++i];
    else if (arg == "--chain") chain = true;
    else {
      std::fprintf(stderr, "usage: OMP_NUM_THREADS=N %s [--seconds S] [--only SUBSTRING] [--chain]\n", argv[0]);
      return 2;
    }
  }
  const int threads = omp_get_max_threads();
  const dnnl_version_t* v = dnnl_version();
  std::printf("# oneDNN %d.%d.%d (%s), cpu runtime %s, threads %d\n", v->major, v->minor, v->patch, v->hash,
              DNNL_CPU_RUNTIME == DNNL_RUNTIME_OMP ? "OpenMP" : "other", threads);
  engine eng(engine::kind::cpu, 0);
  stream s(eng);
  auto want = [&](const std::string& name) { return only.empty() || name.find(only) != std::string::npos; };

  const int64_t mm[][3] = {{197, 3072, 768}, {197, 768, 3072}, {197, 2304, 768}, {128, 768, 3072},
                           {128, 3072, 768}, {1024, 1024, 1024}, {128, 50257, 768}};
  for (auto& m : mm) {
    std::string name = "matmul " + std::to_string(m[0]) + "x" + std::to_string(m[1]) + "x" + std::to_string(m[2]);
    if (want(name)) Matmul(eng, s, m[0], m[1], m[2], threads);
  }
  const ConvShape convs[] = {
      {"1x1_256-64@56", 256, 64, 56, 56, 1, 1, 0, 1},     {"1x1_64-256@56", 64, 256, 56, 56, 1, 1, 0, 1},
      {"3x3_64-64@56", 64, 64, 56, 56, 3, 1, 1, 1},       {"3x3_256-256@14", 256, 256, 14, 14, 3, 1, 1, 1},
      {"3x3s2_128-128@56", 128, 128, 56, 56, 3, 2, 1, 1}, {"7x7s2_3-64@224", 3, 64, 224, 224, 7, 2, 3, 1},
      {"dw3x3_144@56", 144, 144, 56, 56, 3, 1, 1, 144},   {"dw3x3s2_96@112", 96, 96, 112, 112, 3, 2, 1, 96},
      {"1x1_32-64@160", 32, 64, 160, 160, 1, 1, 0, 1},
  };
  for (auto& c : convs)
    if (want(std::string("conv ") + c.name)) Conv(eng, s, c, threads);
  if (chain) Chain(eng, s, threads);
  return 0;
}
