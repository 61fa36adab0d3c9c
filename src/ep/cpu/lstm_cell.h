// The LSTM cell on eight float lanes (AVX2 + FMA), shared by the float LSTM
// (rnn_fast.cc) and com.microsoft DynamicQuantizeLSTM (qlstm_fast.cc): from
// one step's gate pre-activations, the new cell state and hidden state.
//
//   i = sigmoid(gi + Pi c),  f = sigmoid(gf + Pf c)  (or 1 - i: input_forget),
//   c' = f c + i tanh(gc),   h = sigmoid(go + Po c') tanh(c')
//
// each pre-activation clipped to [-clip, clip] first when the node has a
// clip. Sigmoid8 and Tanh8 (simd_math.h) are within 3 ulp and 2e-7 relative.
#pragma once
#include <cstdint>

#include "ep/cpu/simd_math.h"

namespace nee::cpu {

struct LstmCellOptions {
  bool clipped = false;
  float clip = 0.f;
  bool input_forget = false;
};

// A recurrent gate's pre-activation clamped to [-clip, clip] when the node has
// a clip (min/max would turn NaN into a bound); shared by the LSTM, GRU and
// RNN cells.
NEE_AVX2_INLINE __m256 ClipGate8(__m256 x, bool clipped, float clip) {
  return clipped ? _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-clip)), _mm256_set1_ps(clip)) : x;
}

// Lanes [j, j + 8) of one step. The gates lie `stride` floats apart in the
// order i, o, f, c from `g`; the peepholes (or null) Pi, Po, Pf likewise from
// `peep`; c is read and updated, h written.
NEE_AVX2_INLINE void LstmCell8(const float* g, const float* peep, int64_t stride, int64_t j, float* c, float* h,
                               const LstmCellOptions& o) {
  const __m256 c_prev = _mm256_loadu_ps(c + j);
  __m256 gi = _mm256_loadu_ps(g + j), go = _mm256_loadu_ps(g + stride + j);
  __m256 gf = _mm256_loadu_ps(g + 2 * stride + j);
  if (peep) {
    gi = _mm256_fmadd_ps(_mm256_loadu_ps(peep + j), c_prev, gi);
    gf = _mm256_fmadd_ps(_mm256_loadu_ps(peep + 2 * stride + j), c_prev, gf);
  }
  const __m256 in = Sigmoid8(ClipGate8(gi, o.clipped, o.clip));
  const __m256 forget = o.input_forget ? _mm256_sub_ps(_mm256_set1_ps(1.f), in) : Sigmoid8(ClipGate8(gf, o.clipped, o.clip));
  const __m256 cell = Tanh8(ClipGate8(_mm256_loadu_ps(g + 3 * stride + j), o.clipped, o.clip));
  const __m256 c_new = _mm256_fmadd_ps(forget, c_prev, _mm256_mul_ps(in, cell));
  if (peep) go = _mm256_fmadd_ps(_mm256_loadu_ps(peep + stride + j), c_new, go);
  const __m256 out = Sigmoid8(ClipGate8(go, o.clipped, o.clip));
  _mm256_storeu_ps(c + j, c_new);
  _mm256_storeu_ps(h + j, _mm256_mul_ps(out, Tanh8(c_new)));
}

// All n lanes of a step (the gates and peepholes `stride` apart, stride >= n);
// a last partial vector goes through an eight-lane copy, so every lane takes
// the same vector path.
__attribute__((target("avx2,fma"))) inline void LstmCellRow(const float* g, const float* peep, int64_t stride,
                                                            int64_t n, float* c, float* h, const LstmCellOptions& o) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) LstmCell8(g, peep, stride, j, c, h, o);
  if (j == n) return;
  const int64_t left = n - j;
  alignas(32) float tg[4 * 8] = {}, tp[3 * 8] = {}, tc[8] = {}, th[8];
  for (int64_t t = 0; t < left; ++t) {
    for (int q = 0; q < 4; ++q) tg[q * 8 + t] = g[q * stride + j + t];
    if (peep)
      for (int q = 0; q < 3; ++q) tp[q * 8 + t] = peep[q * stride + j + t];
    tc[t] = c[j + t];
  }
  LstmCell8(tg, peep ? tp : nullptr, 8, 0, tc, th, o);
  for (int64_t t = 0; t < left; ++t) c[j + t] = tc[t], h[j + t] = th[t];
}

}  // namespace nee::cpu
