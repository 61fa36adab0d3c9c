#!/usr/bin/env python3
"""Second sweep of models nee had not seen: exports them to a scratch zoo with the frameworks' outputs.

Two halves, each run by the Python that has its framework:

    /usr/bin/python3 tests/models/export_zoo_2.py torch [OUT_DIR=/tmp/zoo2] [name-substring ...]
    /work/main/.venv/bin/python tests/models/export_zoo_2.py sklearn [OUT_DIR=/tmp/zoo2] [name-substring ...]
    /work/main/.venv/bin/python tests/models/export_zoo_2.py quant [OUT_DIR=/tmp/zoo2]   (after the torch half)
    PYTHONPATH=STUBS /work/main/.venv/bin/python tests/models/export_zoo_2.py ortopt [OUT_DIR]  (see ortopt_zoo())
    /work/main/.venv/bin/python tests/models/export_zoo_2.py upconvert [OUT_DIR]  (opset 17 -> 18, 21)

(the few models kept in the repository, see commit_sklearn() / commit_torch():
    /work/main/.venv/bin/python tests/models/export_zoo_2.py commit-sklearn
    /usr/bin/python3 tests/models/export_zoo_2.py commit-torch
    /work/main/.venv/bin/python tests/models/export_zoo_2.py commit-ortopt [OUT_DIR]   (after `ortopt`))
then compare with nee (and, for failures, ask onnxruntime for a second opinion):

    /work/main/.venv/bin/python tests/models/run_zoo.py --zoo /tmp/zoo2 --no-api
    /work/main/.venv/bin/python tests/models/export_zoo_2.py compare /tmp/zoo2/<failing folder>... [--nee NEE]

Folders follow tests/models/torch/export_zoo.py: OUT_DIR/<name>_op<opset>/{model.onnx,input_<i>.npy,
expected_<i>.npy} (plus <name>_op<opset>_b3 for dynamic batch axes, run at another batch size). The torch
half reuses export_zoo.py's export() and liven() (random, seeded weights; nothing is downloaded). Models
already in export_zoo.py / export_zoo_extra.py are not repeated here.

Results (422 cases: 123 PyTorch model x opset x batch/length cases of 47 models, 147 scikit-learn (79
models), 12 quantized, 20 ORT-optimized, 120 converted to opsets 18/21; 363 agree). nee bugs found and
fixed: SVMClassifier skipped the pairwise coupling for two classes (binary SVC probabilities off by up to
3e-3); GridSample cubic clipped outside positions before taking its 4x4 taps (border padding); the
com.microsoft Tokenizer of text vectorizers was missing; ONNX Runtime's optimizer ops were missing
(SkipLayerNormalization, SkipSimplifiedLayerNormalization, EmbedLayerNormalization, Gelu, BiasGelu,
FastGelu, QuickGelu, LayerNormalization below opset 17, SimplifiedLayerNormalization). The remaining
disagreements, each with onnxruntime's verdict:
  - nee agrees with onnxruntime, not the framework (exporter / converter): index_put accumulate with
    repeated indices; Conv2d padding_mode circular/reflect with groups/dilation; integer floor division
    (exported as truncation); calibrated isotonic probabilities; KNN with distance weights on training
    rows (zero distances); Perceptron binary scores ([-s, s] columns); SGD modified_huber labels; TF-IDF
    with separators that keep one-letter words and punctuation, and sublinear_tf; the optimizer's fusion
    of a post-norm encoder with a padding mask; detection models at random init (tied scores decide
    which boxes are kept); fp32 round-off on wide/deep random nets with outputs of 1e4 (fcn_resnet50,
    wide_resnet50_2: onnxruntime differs as much).
  - onnxruntime agrees with the framework, nee with onnx.reference and the ONNX node tests: Resize with
    align_corners and a non-integer scale (F.interpolate(scale_factor=0.75, align_corners=True)): ONNX
    Runtime divides by (output_size_int - 1), the reference by (scale * input_size - 1);
    TreeEnsembleRegressor with several target entries for one leaf (skl2onnx decision_leaf option):
    ONNX Runtime keeps the first weight for single-target ensembles, the reference sums them.
  - nee lacks: com.microsoft Attention (ORT-optimized BERT).
  - invalid models both runtimes reject: skl2onnx double-precision trees at ai.onnx.ml 1; the optimizer
    on a model with initializers as inputs.
"""
import os
import sys
import traceback
import warnings

warnings.filterwarnings("ignore")

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def save_case(folder, model_bytes, inputs, expected):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "model.onnx"), "wb") as f:
        f.write(model_bytes)
    for i, x in enumerate(inputs):
        np.save(os.path.join(folder, f"input_{i}.npy"), x)
    for i, y in enumerate(expected):
        np.save(os.path.join(folder, f"expected_{i}.npy"), y, allow_pickle=True)


# =============================================================================================== torch


def torch_zoo():
    import math
    from typing import List, Optional, Tuple

    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    import torchvision

    sys.path.insert(0, os.path.join(HERE, "torch"))
    import export_zoo  # noqa: E402  (export(), liven())

    def rand(*shape):
        return torch.randn(*shape)

    def tv(name, **kw):
        return lambda: getattr(torchvision.models, name)(weights=None, **kw)

    class SegOut(nn.Module):
        """Segmentation models return a dict; keep its 'out' (and 'aux' when present)."""

        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, x):
            d = self.m(x)
            return tuple(d[k] for k in sorted(d))

    def seg(name, **kw):
        return lambda: SegOut(getattr(torchvision.models.segmentation, name)(weights=None, weights_backbone=None, **kw))

    class Detector(nn.Module):
        """torchvision detectors take a list of images and return a list of dicts."""

        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, x):
            out = self.m([x[0]])[0]
            return tuple(out[k] for k in sorted(out))

    def det(name, **kw):
        def make():
            m = getattr(torchvision.models.detection, name)(weights=None, weights_backbone=None, **kw)
            return Detector(m)
        return make

    class BertLike(nn.Module):
        """BERT encoder: word + position + token-type embeddings, an additive mask built from attention_mask
        ((1 - m) * -10000), post-LayerNorm blocks with erf-GELU, a tanh pooler."""

        def __init__(self, vocab=100, dim=32, heads=4, layers=2, max_pos=32):
            super().__init__()
            self.word = nn.Embedding(vocab, dim)
            self.pos = nn.Embedding(max_pos, dim)
            self.tok_type = nn.Embedding(2, dim)
            self.ln_emb = nn.LayerNorm(dim, eps=1e-12)
            self.heads = heads
            self.layers = nn.ModuleList(nn.ModuleDict(dict(
                q=nn.Linear(dim, dim), k=nn.Linear(dim, dim), v=nn.Linear(dim, dim), o=nn.Linear(dim, dim),
                ln1=nn.LayerNorm(dim, eps=1e-12), fc1=nn.Linear(dim, 4 * dim), fc2=nn.Linear(4 * dim, dim),
                ln2=nn.LayerNorm(dim, eps=1e-12))) for _ in range(layers))
            self.pool = nn.Linear(dim, dim)

        def forward(self, ids, token_type, attention_mask):
            b, t = ids.shape
            pos = torch.arange(t, dtype=torch.long).unsqueeze(0).expand(b, t)
            x = self.ln_emb(self.word(ids) + self.pos(pos) + self.tok_type(token_type))
            ext = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * -10000.0
            d = x.shape[-1] // self.heads
            for L in self.layers:
                def split(y):
                    return y.view(b, t, self.heads, d).permute(0, 2, 1, 3)
                q, k, v = split(L["q"](x)), split(L["k"](x)), split(L["v"](x))
                s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(d) + ext
                a = torch.matmul(s.softmax(-1), v).permute(0, 2, 1, 3).reshape(b, t, -1)
                x = L["ln1"](x + L["o"](a))
                x = L["ln2"](x + L["fc2"](F.gelu(L["fc1"](x))))
            return x, torch.tanh(self.pool(x[:, 0]))

    class T5Like(nn.Module):
        """T5 encoder block pair: RMS norm (pow/mean/rsqrt), no biases, bucketed relative position bias
        (log of distances, min/where, an Embedding of buckets), ReLU feed-forward."""

        def __init__(self, vocab=80, dim=32, heads=4, buckets=8, max_distance=16):
            super().__init__()
            self.emb = nn.Embedding(vocab, dim)
            self.rel = nn.Embedding(buckets, heads)
            self.heads, self.buckets, self.max_distance = heads, buckets, max_distance
            self.blocks = nn.ModuleList(nn.ModuleDict(dict(
                qkv=nn.Linear(dim, 3 * dim, bias=False), o=nn.Linear(dim, dim, bias=False),
                wi=nn.Linear(dim, 64, bias=False), wo=nn.Linear(64, dim, bias=False))) for _ in range(2))
            self.n1 = nn.Parameter(torch.rand(2, dim) + 0.5)
            self.n2 = nn.Parameter(torch.rand(2, dim) + 0.5)

        @staticmethod
        def rms(x, w):
            return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))

        def bucket(self, rel):
            n = self.buckets // 2
            ret = (rel > 0).to(torch.long) * n
            rel = rel.abs()
            max_exact = n // 2
            is_small = rel < max_exact
            large = max_exact + (torch.log(rel.float() / max_exact) / math.log(self.max_distance / max_exact)
                                 * (n - max_exact)).to(torch.long)
            large = torch.min(large, torch.full_like(large, n - 1))
            return ret + torch.where(is_small, rel, large)

        def forward(self, ids):
            b, t = ids.shape
            x = self.emb(ids)
            pos = torch.arange(t, dtype=torch.long)
            bias = self.rel(self.bucket(pos[None, :] - pos[:, None])).permute(2, 0, 1).unsqueeze(0)
            d = x.shape[-1] // self.heads
            for i, blk in enumerate(self.blocks):
                h = self.rms(x, self.n1[i])
                q, k, v = blk["qkv"](h).view(b, t, 3, self.heads, d).permute(2, 0, 3, 1, 4)
                a = (q @ k.transpose(-1, -2) + bias).softmax(-1) @ v
                x = x + blk["o"](a.transpose(1, 2).reshape(b, t, -1))
                x = x + blk["wo"](F.relu(blk["wi"](self.rms(x, self.n2[i]))))
            return x

    class GptPast(nn.Module):
        """One decoding step of a GPT with past keys/values as inputs: concatenates them, positions start at
        the past length (from a shape), returns logits and the new present keys/values."""

        def __init__(self, vocab=60, dim=32, heads=4):
            super().__init__()
            self.tok = nn.Embedding(vocab, dim)
            self.pos = nn.Embedding(64, dim)
            self.qkv = nn.Linear(dim, 3 * dim)
            self.proj = nn.Linear(dim, dim)
            self.ln = nn.LayerNorm(dim)
            self.head = nn.Linear(dim, vocab)
            self.heads = heads

        def forward(self, ids, past_k, past_v):
            b, t = ids.shape
            past = past_k.shape[2]
            pos = torch.arange(past, past + t, dtype=torch.long).unsqueeze(0)
            x = self.tok(ids) + self.pos(pos)
            d = x.shape[-1] // self.heads
            q, k, v = self.qkv(self.ln(x)).split(x.shape[-1], -1)
            q, k, v = (y.view(b, t, self.heads, d).transpose(1, 2) for y in (q, k, v))
            k = torch.cat([past_k, k], 2)
            v = torch.cat([past_v, v], 2)
            total = past + t
            causal = torch.ones(total, total, dtype=torch.bool).tril()[past:total, :total]
            s = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(d))
            s = torch.where(causal, s, torch.tensor(torch.finfo(s.dtype).min))
            y = (s.softmax(-1) @ v).transpose(1, 2).reshape(b, t, -1)
            x = x + self.proj(y)
            return self.head(x), k, v

    class CrossAttn(nn.Module):
        """Decoder layer with self attention, cross attention over a padded memory (key_padding_mask), and
        attention weights returned (averaged over heads)."""

        def __init__(self):
            super().__init__()
            self.self_attn = nn.MultiheadAttention(24, 3, batch_first=True)
            self.cross = nn.MultiheadAttention(24, 3, batch_first=True, kdim=16, vdim=16)
            self.ln1, self.ln2 = nn.LayerNorm(24), nn.LayerNorm(24)

        def forward(self, tgt, memory, memory_pad):
            t = tgt.shape[1]
            causal = torch.triu(torch.ones(t, t, dtype=torch.bool), 1)
            a, _ = self.self_attn(tgt, tgt, tgt, attn_mask=causal, need_weights=False)
            x = self.ln1(tgt + a)
            c, w = self.cross(x, memory, memory, key_padding_mask=memory_pad, need_weights=True)
            return self.ln2(x + c), w

    class MhaBoolPad(nn.Module):
        """nn.MultiheadAttention self attention with a key_padding_mask and per-head weights."""

        def __init__(self):
            super().__init__()
            self.mha = nn.MultiheadAttention(16, 4, bias=False, add_bias_kv=True)

        def forward(self, x, pad):
            return self.mha(x, x, x, key_padding_mask=pad, need_weights=True, average_attn_weights=False)

    class AudioConv(nn.Module):
        """Raw-waveform front end (no STFT): strided Conv1d stack with groups and dilations, BatchNorm1d,
        GLU, depthwise-separable convs, a transposed conv back up, global pooling."""

        def __init__(self):
            super().__init__()
            self.front = nn.Sequential(nn.Conv1d(1, 16, 10, stride=5), nn.BatchNorm1d(16), nn.GELU(),
                                       nn.Conv1d(16, 32, 3, stride=2), nn.GLU(1))
            self.dw = nn.Conv1d(16, 16, 5, padding=4, dilation=2, groups=16)
            self.pw = nn.Conv1d(16, 24, 1)
            self.grouped = nn.Conv1d(24, 24, 3, padding=1, groups=4, bias=False)
            self.same = nn.Conv1d(24, 24, 4, dilation=3)  # padding="same" does not export: padded by hand
            self.up = nn.ConvTranspose1d(24, 8, 4, stride=2, padding=1)
            self.bn = nn.BatchNorm1d(24)

        def forward(self, wav):
            x = self.front(wav)
            x = F.relu(self.bn(self.pw(self.dw(x))))
            x = x + self.grouped(x)
            x = torch.tanh(self.same(F.pad(x, (4, 5))))
            return self.up(x), F.adaptive_max_pool1d(x, 1).squeeze(-1), F.max_pool1d(x, 3, 2, 1)

    class GridModes(nn.Module):
        def forward(self, x, grid):
            return (F.grid_sample(x, grid, mode="bicubic", padding_mode="zeros", align_corners=False),
                    F.grid_sample(x, grid, mode="bicubic", padding_mode="border", align_corners=True),
                    F.grid_sample(x, grid, mode="bilinear", padding_mode="reflection", align_corners=False),
                    F.grid_sample(x, grid, mode="bilinear", padding_mode="reflection", align_corners=True),
                    F.grid_sample(x, grid, mode="nearest", padding_mode="zeros", align_corners=False),
                    F.grid_sample(x, grid, mode="nearest", padding_mode="reflection", align_corners=False))

    class InterpModes(nn.Module):
        def forward(self, x):
            return (F.interpolate(x, scale_factor=1.7, mode="nearest"),
                    F.interpolate(x, scale_factor=(0.6, 1.3), mode="bilinear", align_corners=False),
                    F.interpolate(x, scale_factor=2.5, mode="bilinear", align_corners=False,
                                  recompute_scale_factor=True),
                    F.interpolate(x, size=(5, 11), mode="bicubic", align_corners=True),
                    F.interpolate(x, size=(9, 4), mode="bicubic", align_corners=False),
                    F.interpolate(x, scale_factor=0.5, mode="nearest"),
                    F.interpolate(x, size=(3, 4), mode="area"),
                    F.interpolate(x, scale_factor=0.75, mode="bilinear", align_corners=True))

    class Interp1dModes(nn.Module):
        def forward(self, x):
            return (F.interpolate(x, size=13, mode="linear", align_corners=True),
                    F.interpolate(x, scale_factor=0.6, mode="linear", align_corners=False),
                    F.interpolate(x, scale_factor=1.5, mode="nearest"))

    class RoiPool(nn.Module):
        def forward(self, feats, boxes, scores):
            import torchvision.ops as ops
            keep = ops.batched_nms(boxes, scores, torch.tensor([0, 1, 0, 1, 0, 0]), 0.5)
            rois = torch.cat([torch.zeros(boxes.shape[0], 1), boxes], 1)
            return (ops.roi_align(feats, rois, (4, 4), spatial_scale=0.25, sampling_ratio=0, aligned=True),
                    ops.roi_pool(feats, rois, (3, 3), spatial_scale=0.25), keep)

    class LstmPacked(nn.Module):
        """pack_padded_sequence over a batch of different lengths (sorted), a bidirectional LSTM, unpacked."""

        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(6, 8, batch_first=True, bidirectional=True)

        def forward(self, x, lengths):
            packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=True)
            y, (h, c) = self.lstm(packed)
            y, _ = nn.utils.rnn.pad_packed_sequence(y, batch_first=True, total_length=x.shape[1])
            return y, h, c

    class LstmProjSize(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(6, 10, proj_size=4, batch_first=True)

        def forward(self, x):
            return self.lstm(x)[0]

    class GruBidirInit(nn.Module):
        def __init__(self):
            super().__init__()
            self.gru = nn.GRU(7, 9, num_layers=3, bidirectional=True, batch_first=False, bias=True)

        def forward(self, x, h0):
            return self.gru(x, h0)

    class LstmCells(nn.Module):
        """LSTM with layer-to-layer dropout=0 and no biases, unidirectional 3 layers, seq-first."""

        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(5, 7, num_layers=3, bias=False)

        def forward(self, x, h0, c0):
            y, (h, c) = self.lstm(x, (h0, c0))
            return y, h, c

    class GreedyDecode(torch.jit.ScriptModule):
        """Greedy decoding loop: a GRU cell written out by hand, argmax over logits, a list of tokens, a
        break on the end token, nested ifs on the step."""

        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(12, 8)
            self.wx = nn.Linear(8, 24)
            self.wh = nn.Linear(8, 24)
            self.out = nn.Linear(8, 12)

        @torch.jit.script_method
        def forward(self, h, max_steps):
            tok = torch.zeros(h.size(0), dtype=torch.long)
            tokens: List[torch.Tensor] = []
            scores = torch.zeros(h.size(0))
            step = 0
            while step < int(max_steps):
                x = self.emb(tok)
                gx = self.wx(x)
                gh = self.wh(h)
                r = torch.sigmoid(gx[:, :8] + gh[:, :8])
                z = torch.sigmoid(gx[:, 8:16] + gh[:, 8:16])
                n = torch.tanh(gx[:, 16:] + r * gh[:, 16:])
                h = (1 - z) * n + z * h
                logp = F.log_softmax(self.out(h), -1)
                best, tok = logp.max(-1)
                if step > 0:
                    if step % 2 == 0:
                        scores = scores + best
                    else:
                        scores = scores + 0.5 * best
                else:
                    scores = best
                tokens.append(tok)
                if bool((tok == 11).all()):
                    break
                step += 1
            return torch.stack(tokens, 1), scores, h

    class ScriptTopkLoop(torch.jit.ScriptModule):
        """Loop over rows with a data-dependent count of kept values (nonzero inside a loop), list of
        different-length tensors concatenated, a scalar accumulated in an If."""

        @torch.jit.script_method
        def forward(self, x, thresh):
            kept: List[torch.Tensor] = []
            count = torch.zeros(1, dtype=torch.long)
            for i in range(x.size(0)):
                row = x[i]
                sel = row[row > thresh]
                if sel.numel() > 0:
                    kept.append(sel.sort(descending=True)[0])
                    count = count + sel.numel()
                else:
                    kept.append(row.max().unsqueeze(0))
            return torch.cat(kept), count

    class SeqOps(torch.jit.ScriptModule):
        @torch.jit.script_method
        def forward(self, x):
            parts = torch.unbind(x, 0)
            out: List[torch.Tensor] = []
            for i in range(len(parts)):
                if i % 2 == 0:
                    out.insert(0, parts[i] * 2.0)
                else:
                    out.append(parts[i] - 1.0)
            last = out.pop()
            return torch.stack(out, 0), last, torch.tensor(len(out))

    class PixelOps(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 27, 3, padding=1)

        def forward(self, x):
            y = F.pixel_shuffle(self.conv(x), 3)
            c = self.conv(x)
            b, ch, h, w = c.shape
            shuffled = c.view(b, 3, ch // 3, h, w).transpose(1, 2).reshape(b, ch, h, w)  # ShuffleNet's channel shuffle
            return y, F.pixel_unshuffle(y, 3), shuffled, F.unfold(y, 2, stride=2)

    class EmbBagWeights(nn.Module):
        def __init__(self):
            super().__init__()
            self.bag = nn.EmbeddingBag(20, 6, mode="sum")
            self.bag_last = nn.EmbeddingBag(20, 6, mode="mean", include_last_offset=True)
            self.emb_pad = nn.Embedding(20, 6, padding_idx=0, max_norm=None)

        def forward(self, ids, offsets, weights):
            return (self.bag(ids, offsets, per_sample_weights=weights), self.bag_last(ids, offsets),
                    self.emb_pad(ids))

    class IndexPut(nn.Module):
        """index_put_ with accumulate (ScatterND reduction add, opset 16), index_add, negative indices,
        masked_scatter-free boolean assignment, one_hot, unique with inverse and counts."""

        def forward(self, x, idx, cats):
            a = torch.zeros(6, 3).index_put((idx,), x, accumulate=True)
            b = x.clone()
            b[x < 0] = 0.0
            c = torch.gather(x, 0, (idx.unsqueeze(1) % 4).expand(-1, 3))
            d = x[-1], x[:, -2:], x[idx[:2] - 4]
            u, inv, cnt = torch.unique(cats, sorted=True, return_inverse=True, return_counts=True)
            return (a, b, c) + d + (F.one_hot(cats, 7), u, inv, cnt)

    class MathMix(nn.Module):
        """Integer and boolean math, clamp with tensor bounds, isnan / isinf, where with scalars, Range with
        float steps, meshgrid, cumprod-free products, std_mean, det."""

        def forward(self, x, n, m):
            lo, hi = x.min(1, keepdim=True)[0] * 0.5, x.max(1, keepdim=True)[0] * 0.5
            y = torch.where(torch.isnan(x.log()), torch.zeros_like(x), x.log())
            g1, g2 = torch.meshgrid(torch.arange(0.0, 1.0, 0.25), torch.arange(3.0), indexing="ij")
            sd, mean = torch.std_mean(x, 1)
            return (torch.max(torch.min(x, hi), lo), y, torch.isinf(1.0 / (x * 0)).to(torch.int32),
                    g1 * g2, sd, mean, n // m, n % m, torch.fmod(n, m), (n > 0) & (m > 2), (n > 0) | (m > 2),
                    (n > 0) ^ (m > 1), torch.linalg.det(x[:3, :3]), x.prod(1), torch.arange(x.shape[1], 0, -1))

    class ConvPadModes(nn.Module):
        def __init__(self):
            super().__init__()
            self.r = nn.Conv2d(3, 4, 3, padding=2, padding_mode="reflect", dilation=2)
            self.c = nn.Conv2d(4, 4, 3, padding=1, padding_mode="circular", groups=2)
            self.p = nn.Conv2d(4, 2, 3, padding=1, padding_mode="replicate", stride=2)
            self.pool = nn.MaxPool2d(2, return_indices=True)  # (MaxUnpool2d does not export in torch 1.13)

        def forward(self, x):
            y = self.c(self.r(x))
            z, idx = self.pool(y)
            return self.p(y), z, idx

    class SmallViT16(nn.Module):
        def __init__(self):
            super().__init__()
            self.m = torchvision.models.vit_b_16(weights=None, image_size=64)
            self.m.encoder.layers = self.m.encoder.layers[:3]

        def forward(self, x):
            return self.m(x)

    def r3d_small():
        return torchvision.models.video.r3d_18(weights=None, num_classes=10)

    def video(name, **kw):
        return lambda: getattr(torchvision.models.video, name)(weights=None, **kw)

    def swin_small_depth():
        m = torchvision.models.swin_t(weights=None)
        return m

    IMG = lambda s=64, b=2: (lambda: [rand(b, 3, s, s)])
    ZOO = [
        # ---- hand-written transformers
        ("bert_like", BertLike, lambda: [torch.randint(0, 100, (2, 9)), torch.tensor([[0] * 4 + [1] * 5, [0] * 9]),
                                         torch.tensor([[1] * 9, [1] * 6 + [0] * 3])], [11, 13, 14, 17], True),
        ("t5_like", T5Like, lambda: [torch.randint(0, 80, (2, 20))], [13, 15, 17], True),
        ("gpt_past_kv", GptPast, lambda: [torch.randint(0, 60, (2, 3)), rand(2, 4, 5, 8), rand(2, 4, 5, 8)],
         [13, 14, 17], False),
        ("cross_attention", CrossAttn, lambda: [rand(2, 5, 24), rand(2, 7, 16),
                                                torch.tensor([[False] * 7, [False] * 3 + [True] * 4])],
         [13, 16, 17], False),
        ("mha_add_bias_kv", MhaBoolPad, lambda: [rand(5, 2, 16), torch.tensor([[False] * 5, [False] * 2 + [True] * 3])],
         [13, 17], False),
        # ---- audio, images, embeddings
        ("audio_conv1d", AudioConv, lambda: [rand(2, 1, 400)], [11, 13, 17], True),
        ("grid_sample_modes", GridModes, lambda: [rand(2, 3, 6, 7), torch.rand(2, 4, 5, 2) * 2.6 - 1.3], [16, 17], False),
        ("interpolate_modes", InterpModes, lambda: [rand(2, 3, 6, 8)], [11, 13, 17], False),
        ("interpolate_1d_modes", Interp1dModes, lambda: [rand(2, 3, 10)], [11, 16], False),
        ("roi_ops", RoiPool, lambda: [rand(1, 4, 16, 16),
                                      torch.tensor([[2., 3, 30, 40], [4, 4, 28, 44], [10, 0, 60, 20], [11, 1, 58, 22],
                                                    [0, 0, 63, 63], [5, 5, 12, 9]]),
                                      torch.tensor([0.9, 0.85, 0.7, 0.75, 0.3, 0.6])], [16], False),
        ("pixel_ops", PixelOps, lambda: [rand(2, 3, 4, 4)], [11, 13, 17], False),
        ("embedding_bag_weights", EmbBagWeights, lambda: [torch.tensor([1, 2, 4, 5, 4, 3, 2, 9, 0]),
                                                          torch.tensor([0, 3, 5, 9]), torch.rand(9)], [11, 13], False),
        # ---- recurrent
        ("lstm_packed", LstmPacked, lambda: [rand(3, 6, 6), torch.tensor([6, 4, 2])], [11, 13, 17], False),
        ("lstm_proj_size", LstmProjSize, lambda: [rand(2, 5, 6)], [14], False),
        ("gru_bidir_3layer_init", GruBidirInit, lambda: [rand(5, 2, 7), rand(6, 2, 9)], [11, 13, 15, 17], False),
        ("lstm_3layer_nobias", LstmCells, lambda: [rand(4, 3, 5), rand(3, 3, 7), rand(3, 3, 7)], [12, 16], False),
        # ---- TorchScript control flow
        ("greedy_decode", GreedyDecode, lambda: [rand(3, 8), torch.tensor(7)], [11, 13, 16, 17], False),
        ("script_topk_loop", ScriptTopkLoop, lambda: [rand(4, 6), torch.tensor(0.8)], [11, 13, 17], False),
        ("script_seq_ops", SeqOps, lambda: [rand(5, 3)], [11, 14, 17], False),
        # ---- less common ops
        ("index_put_unique", IndexPut, lambda: [rand(5, 3), torch.tensor([0, 5, 2, 0, 5]),
                                                torch.tensor([3, 1, 6, 1, 0, 3])], [11, 13, 16, 17], False),
        ("math_mix", MathMix, lambda: [rand(4, 5), torch.tensor([-7, -3, 0, 4, 9]), torch.tensor([2, 3, -2, 3, 4])],
         [11, 13, 17], False),
        ("conv_pad_modes", ConvPadModes, lambda: [rand(2, 3, 9, 10)], [11, 13, 17], False),
        # ---- torchvision classification not in export_zoo.py
        ("convnext_tiny", tv("convnext_tiny"), IMG(64), [13, 17], True),
        ("swin_t", swin_small_depth, IMG(64, 1), [14, 17], False),
        ("swin_v2_t", tv("swin_v2_t"), IMG(64, 1), [17], False),
        ("maxvit_t", tv("maxvit_t"), IMG(224, 1), [17], False),
        ("vit_b_16_small", SmallViT16, IMG(64, 1), [14], False),
        ("regnet_x_400mf", tv("regnet_x_400mf"), IMG(64), [11, 15], True),
        ("regnet_y_800mf", tv("regnet_y_800mf"), IMG(64), [16], True),
        ("wide_resnet50_2", tv("wide_resnet50_2"), IMG(32, 1), [13], False),
        ("resnext50_32x4d", tv("resnext50_32x4d"), IMG(32), [12, 17], True),
        ("alexnet", tv("alexnet"), IMG(224, 1), [11, 16], False),
        ("inception_v3", tv("inception_v3", aux_logits=False, init_weights=True), IMG(80, 1), [13], False),
        ("efficientnet_v2_s", tv("efficientnet_v2_s"), IMG(64, 1), [15], False),
        ("shufflenet_v2_x1_0", tv("shufflenet_v2_x1_0"), IMG(64), [13, 16], True),
        ("mnasnet1_0", tv("mnasnet1_0"), IMG(64), [14], True),
        # ---- segmentation, video, detection
        ("fcn_resnet50", seg("fcn_resnet50", aux_loss=True), IMG(48, 1), [13], False),
        ("deeplabv3_mobilenet_v3_large", seg("deeplabv3_mobilenet_v3_large"), IMG(64), [11, 17], True),
        ("lraspp_mobilenet_v3_large", seg("lraspp_mobilenet_v3_large"), IMG(64), [13, 16], True),
        ("r3d_18", video("r3d_18", num_classes=10), lambda: [rand(1, 3, 4, 32, 32)], [13, 17], False),
        ("mc3_18", video("mc3_18", num_classes=10), lambda: [rand(1, 3, 4, 32, 32)], [14], False),
        ("r2plus1d_18", video("r2plus1d_18", num_classes=10), lambda: [rand(1, 3, 4, 32, 32)], [16], False),
        ("fasterrcnn_mobilenet_v3_large_320_fpn",
         det("fasterrcnn_mobilenet_v3_large_320_fpn", num_classes=5, box_score_thresh=0.0),
         lambda: [torch.rand(1, 3, 128, 160)], [11, 13], False),
        ("ssdlite320_mobilenet_v3_large", det("ssdlite320_mobilenet_v3_large", num_classes=5),
         lambda: [torch.rand(1, 3, 160, 160)], [13], False),
    ]

    def export_dynamic(name, factory, make_inputs, make_other, opset, axes, out_root):
        """Exports with dynamic axes beyond the batch (sequence, past and memory lengths) and saves a second
        case (folder suffix _alt) whose inputs have other lengths, run by the same model.onnx."""
        torch.manual_seed(1)
        model = export_zoo.liven(factory()).eval()
        torch.manual_seed(2)
        cases = [make_inputs(), make_other()]
        outs = []
        with torch.no_grad():
            for inputs in cases:
                o = model(*inputs)
                outs.append(list(o) if isinstance(o, (tuple, list)) else [o])
        in_names = [f"in{i}" for i in range(len(cases[0]))]
        out_names = [f"out{i}" for i in range(len(outs[0]))]
        folder = os.path.join(out_root, f"{name}_op{opset}")
        os.makedirs(folder, exist_ok=True)
        try:
            torch.onnx.export(model, tuple(cases[0]), os.path.join(folder, "model.onnx"), opset_version=opset,
                              input_names=in_names, output_names=out_names, dynamic_axes=axes)
        except Exception as e:
            print(f"{name} op{opset}: export failed: {str(e).splitlines()[0][:150]}", flush=True)
            return
        for suffix, inputs, o in (("", cases[0], outs[0]), ("_alt", cases[1], outs[1])):
            f = folder + suffix
            os.makedirs(f, exist_ok=True)
            if suffix and not os.path.exists(os.path.join(f, "model.onnx")):
                os.link(os.path.join(folder, "model.onnx"), os.path.join(f, "model.onnx"))
            for i, x in enumerate(inputs):
                np.save(os.path.join(f, f"input_{i}.npy"), x.numpy())
            for i, y in enumerate(o):
                np.save(os.path.join(f, f"expected_{i}.npy"), y.numpy())
        print(f"{name} op{opset}: ok", flush=True)

    bs = {0: "batch", 1: "seq"}
    DYNAMIC = [
        ("dyn_bert_like", BertLike, lambda: [torch.randint(0, 100, (2, 9)), torch.tensor([[0] * 4 + [1] * 5, [0] * 9]),
                                             torch.tensor([[1] * 9, [1] * 6 + [0] * 3])],
         lambda: [torch.randint(0, 100, (3, 5)), torch.zeros(3, 5, dtype=torch.long),
                  torch.tensor([[1] * 5, [1] * 2 + [0] * 3, [1] * 4 + [0]])], 14,
         {"in0": bs, "in1": bs, "in2": bs, "out0": bs, "out1": {0: "batch"}}),
        ("dyn_t5_like", T5Like, lambda: [torch.randint(0, 80, (2, 20))], lambda: [torch.randint(0, 80, (1, 7))], 15,
         {"in0": bs, "out0": bs}),
        ("dyn_gpt_past_kv", GptPast, lambda: [torch.randint(0, 60, (2, 3)), rand(2, 4, 5, 8), rand(2, 4, 5, 8)],
         lambda: [torch.randint(0, 60, (1, 1)), rand(1, 4, 11, 8), rand(1, 4, 11, 8)], 17,
         {"in0": bs, "in1": {0: "batch", 2: "past"}, "in2": {0: "batch", 2: "past"}, "out0": bs,
          "out1": {0: "batch", 2: "total"}, "out2": {0: "batch", 2: "total"}}),
        ("dyn_cross_attention", CrossAttn, lambda: [rand(2, 5, 24), rand(2, 7, 16),
                                                    torch.tensor([[False] * 7, [False] * 3 + [True] * 4])],
         lambda: [rand(1, 3, 24), rand(1, 10, 16), torch.tensor([[False] * 8 + [True] * 2])], 17,
         {"in0": bs, "in1": {0: "batch", 1: "mem"}, "in2": {0: "batch", 1: "mem"}, "out0": bs,
          "out1": {0: "batch", 1: "seq", 2: "mem"}}),
        ("dyn_audio_conv1d", AudioConv, lambda: [rand(2, 1, 400)], lambda: [rand(1, 1, 250)], 13,
         {"in0": {0: "batch", 2: "samples"}, "out0": {0: "batch", 2: "t"}, "out1": {0: "batch"},
          "out2": {0: "batch", 2: "t2"}}),
    ]

    out_root = sys.argv[2] if len(sys.argv) > 2 else "/tmp/zoo2"
    wanted = sys.argv[3:]
    torch.set_num_threads(2)
    for name, factory, make_inputs, make_other, opset, axes in DYNAMIC:
        if wanted and not any(w in name for w in wanted):
            continue
        try:
            export_dynamic(name, factory, make_inputs, make_other, opset, axes, out_root)
        except Exception as e:
            print(f"{name}: failed before export: {str(e).splitlines()[0][:200]}", flush=True)
    for name, factory, make_inputs, opsets, dynamic, *kwargs in ZOO:
        if wanted and not any(w in name for w in wanted):
            continue
        try:
            export_zoo.export(name, factory, make_inputs, opsets, dynamic, out_root, *kwargs)
        except Exception as e:
            print(f"{name}: failed before export: {str(e).splitlines()[0][:200]}", flush=True)


# ======================================================================================== scikit-learn


def sklearn_zoo():
    from skl2onnx import to_onnx
    from skl2onnx.common.data_types import FloatTensorType, Int64TensorType, StringTensorType
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.cluster import KMeans, MiniBatchKMeans
    from sklearn.compose import ColumnTransformer
    from sklearn.datasets import make_classification, make_regression
    from sklearn.decomposition import PCA, TruncatedSVD, FastICA
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
    from sklearn.ensemble import (AdaBoostClassifier, AdaBoostRegressor, BaggingClassifier, ExtraTreesClassifier,
                                  HistGradientBoostingClassifier, IsolationForest, RandomForestClassifier,
                                  StackingClassifier, StackingRegressor, VotingClassifier, VotingRegressor)
    from sklearn.feature_selection import SelectKBest, VarianceThreshold
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF, DotProduct
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import (BayesianRidge, ElasticNet, Lasso, LogisticRegression, Perceptron,
                                      PoissonRegressor, RidgeClassifier, SGDClassifier, TweedieRegressor)
    from sklearn.multiclass import OneVsRestClassifier
    from sklearn.naive_bayes import BernoulliNB, ComplementNB, GaussianNB, MultinomialNB
    from sklearn.neighbors import KNeighborsClassifier, KNeighborsRegressor, NearestNeighbors
    from sklearn.neural_network import MLPClassifier, MLPRegressor
    from sklearn.pipeline import FeatureUnion, Pipeline, make_pipeline
    from sklearn.preprocessing import (Binarizer, KBinsDiscretizer, LabelEncoder, MaxAbsScaler, MinMaxScaler,
                                       Normalizer, OneHotEncoder, OrdinalEncoder, PolynomialFeatures,
                                       RobustScaler, StandardScaler)
    from sklearn.svm import SVC, SVR, NuSVC, NuSVR, OneClassSVM
    from sklearn.tree import DecisionTreeClassifier

    out_root = sys.argv[2] if len(sys.argv) > 2 else "/tmp/zoo2"
    wanted = sys.argv[3:]

    Xb, yb = make_classification(200, 6, n_informative=4, n_redundant=1, n_classes=2, random_state=10)
    Xm, ym = make_classification(300, 6, n_informative=5, n_redundant=0, n_classes=3, random_state=11)
    Xr, yr = make_regression(200, 6, noise=0.5, random_state=12)
    Xb, Xm, Xr = (a.astype(np.float32) for a in (Xb, Xm, Xr))
    yr = yr.astype(np.float32)
    Xpos = np.abs(Xm)  # counts-like features for multinomial / complement NB
    rng = np.random.default_rng(13)

    def wanted_name(name):
        return not wanted or any(w in name for w in wanted)

    def convert(model, X, options=None, opset=15, ml=3, initial_types=None):
        kw = dict(options=options or {})
        if initial_types is not None:
            kw["initial_types"] = initial_types
        target = {"": opset, "ai.onnx.ml": ml}
        try:
            return to_onnx(model, None if initial_types is not None else X[:1], target_opset=target, **kw)
        except Exception:  # some converters want their own ml opset
            return to_onnx(model, None if initial_types is not None else X[:1], target_opset=opset, **kw)

    def run_case(name, fn):
        if not wanted_name(name):
            return
        try:
            fn()
        except Exception as e:
            print(f"skl2_{name}: failed: {str(e).splitlines()[0][:200]}", flush=True)
            traceback.print_exc()

    def classifier(name, model, X, y, opsets=((13, 1), (17, 3)), extra_options=None, extra=None):
        def go():
            model.fit(X, y)
            for opset, ml in opsets:
                final = model.steps[-1][1] if isinstance(model, Pipeline) else model
                options = {id(final): {"zipmap": False, **(extra_options or {})}}
                onx = convert(model, X, options, opset, ml)
                Xt = X[:25]
                expected = [model.predict(Xt)]
                if hasattr(model, "predict_proba") and "raw_scores" not in (extra_options or {}):
                    expected.append(model.predict_proba(Xt).astype(np.float32))
                elif hasattr(model, "decision_function"):
                    expected.append(model.decision_function(Xt).astype(np.float32))
                if extra:
                    expected += extra(model, Xt)
                save_case(os.path.join(out_root, f"skl2_{name}_op{opset}"), onx.SerializeToString(), [Xt], expected)
                print(f"skl2_{name}_op{opset}: ok", flush=True)
        run_case(name, go)

    def regressor(name, model, X=None, y=None, opsets=((13, 1), (17, 3))):
        X = Xr if X is None else X
        y = yr if y is None else y

        def go():
            model.fit(X, y)
            for opset, ml in opsets:
                onx = convert(model, X, None, opset, ml)
                pred = np.asarray(model.predict(X[:25])).astype(np.float32).reshape(25, -1)
                save_case(os.path.join(out_root, f"skl2_{name}_op{opset}"), onx.SerializeToString(), [X[:25]], [pred])
                print(f"skl2_{name}_op{opset}: ok", flush=True)
        run_case(name, go)

    def transformer(name, model, X, y=None, opsets=((13, 1), (17, 3)), method="transform", initial_types=None,
                    options=None, extra=None):
        def go():
            model.fit(X, y) if y is not None else model.fit(X)
            for opset, ml in opsets:
                onx = convert(model, X, options, opset, ml, initial_types=initial_types)
                Xt = X[:25]
                outs = [getattr(model, method)(Xt)]
                if extra:
                    outs += extra(model, Xt)
                outs = [np.asarray(o.toarray() if hasattr(o, "toarray") else o) for o in outs]
                outs = [o.astype(np.float32) if o.dtype == np.float64 else o for o in outs]
                save_case(os.path.join(out_root, f"skl2_{name}_op{opset}"), onx.SerializeToString(), [Xt], outs)
                print(f"skl2_{name}_op{opset}: ok", flush=True)
        run_case(name, go)

    # ---- SVMs: every kernel, classifier (OvO, with and without probabilities) and regressor
    for kernel in ("linear", "poly", "sigmoid", "rbf"):
        classifier(f"svc_{kernel}_bin", SVC(kernel=kernel, probability=True, random_state=0, gamma="scale", coef0=0.5),
                   Xb, yb)
        classifier(f"svc_{kernel}_multi_noproba", SVC(kernel=kernel, random_state=0, coef0=0.2), Xm, ym)
        regressor(f"svr_{kernel}", SVR(kernel=kernel, C=10.0, coef0=0.3))
    classifier("svc_ovr_decision", SVC(kernel="rbf", decision_function_shape="ovr"), Xm, ym)
    classifier("nusvc_rbf", NuSVC(probability=True, random_state=0), Xm, ym)
    regressor("nusvr_poly", NuSVR(kernel="poly", degree=2))
    transformer("one_class_svm", OneClassSVM(gamma=0.1), Xb, method="predict",
                extra=lambda m, X: [m.decision_function(X).astype(np.float32).reshape(-1, 1)])
    # ---- KNN variants
    classifier("knn_distance", KNeighborsClassifier(5, weights="distance"), Xm, ym)
    classifier("knn_manhattan", KNeighborsClassifier(4, metric="manhattan"), Xb, yb)
    regressor("knn_reg_distance", KNeighborsRegressor(3, weights="distance"))
    # ---- naive Bayes, discriminant analysis, linear models with links
    classifier("gaussian_nb", GaussianNB(), Xm, ym)
    classifier("bernoulli_nb", BernoulliNB(binarize=0.1), Xm, ym)
    classifier("multinomial_nb", MultinomialNB(), Xpos, ym)
    classifier("complement_nb", ComplementNB(), Xpos, ym)
    classifier("lda", LinearDiscriminantAnalysis(), Xm, ym)
    classifier("ridge_classifier", RidgeClassifier(), Xm, ym)
    classifier("perceptron_bin", Perceptron(random_state=0), Xb, yb)
    classifier("ovr_logreg", OneVsRestClassifier(LogisticRegression(max_iter=300)), Xm, ym)
    regressor("poisson", PoissonRegressor(), Xr, np.abs(yr) / 50 + 0.1)
    regressor("tweedie_log", TweedieRegressor(power=1.5, link="log"), Xr, np.abs(yr) / 50 + 0.1)
    regressor("lasso", Lasso(alpha=0.5))
    regressor("elastic_net", ElasticNet(alpha=0.3))
    regressor("bayesian_ridge", BayesianRidge())
    regressor("gp_rbf", GaussianProcessRegressor(kernel=RBF(2.0) + DotProduct(), alpha=1e-2), Xr[:60], yr[:60] / 100)
    regressor("mlp_reg_tanh", MLPRegressor(hidden_layer_sizes=(12, 6), activation="tanh", max_iter=400, random_state=0))
    classifier("mlp_logistic", MLPClassifier((10,), activation="logistic", max_iter=400, random_state=0), Xm, ym)
    # ---- trees / ensembles
    transformer("isolation_forest", IsolationForest(n_estimators=10, random_state=0), Xb, method="predict",
                opsets=((15, 3), (17, 3)),
                extra=lambda m, X: [m.decision_function(X).astype(np.float32).reshape(-1, 1)])
    classifier("extra_trees_bin", ExtraTreesClassifier(n_estimators=6, max_depth=5, random_state=0), Xb, yb)
    classifier("hist_gb_multi_deep", HistGradientBoostingClassifier(max_iter=8, max_depth=4, random_state=0), Xm, ym,
               opsets=((15, 3), (17, 3)))
    classifier("adaboost", AdaBoostClassifier(n_estimators=8, random_state=0), Xm, ym)
    regressor("adaboost_reg", AdaBoostRegressor(n_estimators=6, random_state=0))
    classifier("bagging_dt", BaggingClassifier(DecisionTreeClassifier(max_depth=4), n_estimators=5, random_state=0),
               Xm, ym)
    classifier("calibrated_svc_sigmoid", CalibratedClassifierCV(SVC(), cv=3, method="sigmoid"), Xm, ym)
    classifier("calibrated_rf_isotonic", CalibratedClassifierCV(RandomForestClassifier(5, max_depth=4,
                                                                                      random_state=0),
                                                               cv=3, method="isotonic"), Xb, yb)
    classifier("voting_soft", VotingClassifier([("lr", LogisticRegression(max_iter=300)), ("nb", GaussianNB()),
                                                ("dt", DecisionTreeClassifier(max_depth=4, random_state=0))],
                                               voting="soft"), Xm, ym)
    classifier("voting_hard", VotingClassifier([("lr", LogisticRegression(max_iter=300)), ("nb", GaussianNB()),
                                                ("dt", DecisionTreeClassifier(max_depth=4, random_state=0))],
                                               voting="hard", flatten_transform=False), Xm, ym)
    classifier("stacking", StackingClassifier([("rf", RandomForestClassifier(5, max_depth=4, random_state=0)),
                                               ("svc", SVC(probability=True, random_state=0))],
                                              final_estimator=LogisticRegression(), cv=3), Xm, ym)
    regressor("voting_reg", VotingRegressor([("la", Lasso()), ("kn", KNeighborsRegressor(3))]))
    regressor("stacking_reg", StackingRegressor([("la", Lasso()), ("kn", KNeighborsRegressor(3))],
                                                final_estimator=BayesianRidge(), cv=3))
    # ---- unsupervised / preprocessing
    transformer("kmeans", KMeans(4, n_init=3, random_state=0), Xm, method="predict",
                extra=lambda m, X: [m.transform(X).astype(np.float32)])
    transformer("minibatch_kmeans", MiniBatchKMeans(3, n_init=3, random_state=0, batch_size=64), Xb, method="predict",
                extra=lambda m, X: [m.transform(X).astype(np.float32)])
    transformer("pca_whiten", PCA(4, whiten=True), Xm)
    transformer("truncated_svd", TruncatedSVD(3, random_state=0), Xm)
    transformer("fast_ica", FastICA(3, random_state=0, max_iter=500), Xm)
    transformer("poly_features", PolynomialFeatures(3, include_bias=True), Xm[:, :3].copy())
    transformer("poly_interaction", PolynomialFeatures(2, interaction_only=True, include_bias=False), Xm)
    transformer("binarizer", Binarizer(threshold=0.2), Xm)
    transformer("robust_maxabs_union", FeatureUnion([("r", RobustScaler()), ("m", MaxAbsScaler()),
                                                      ("n", Normalizer("l1"))]), Xm)
    transformer("kbins_onehot_dense", KBinsDiscretizer(4, encode="onehot-dense", strategy="quantile"), Xm)
    transformer("kbins_ordinal", KBinsDiscretizer(3, encode="ordinal", strategy="uniform"), Xm)
    Xnan = Xm.copy()
    Xnan[rng.random(Xnan.shape) < 0.15] = np.nan
    transformer("imputer_median_scaler", make_pipeline(SimpleImputer(strategy="median"), StandardScaler()), Xnan)
    transformer("select_kbest_var", make_pipeline(VarianceThreshold(0.5), SelectKBest(k=3)), Xm, ym)
    classifier("lda_pipeline_dt", make_pipeline(StandardScaler(), LinearDiscriminantAnalysis(n_components=2),
                                                DecisionTreeClassifier(max_depth=4, random_state=0)), Xm, ym)
    # ---- second batch: mixtures, outlier detectors, transformers with awkward math, converter options
    from sklearn.ensemble import RandomTreesEmbedding, ExtraTreesRegressor
    from sklearn.mixture import BayesianGaussianMixture, GaussianMixture
    from sklearn.neighbors import LocalOutlierFactor
    from sklearn.preprocessing import LabelBinarizer, PowerTransformer, QuantileTransformer, SplineTransformer
    from sklearn.feature_extraction import DictVectorizer
    from sklearn.tree import DecisionTreeRegressor
    transformer("gaussian_mixture_full", GaussianMixture(3, covariance_type="full", random_state=0), Xm,
                method="predict", extra=lambda m, X: [m.predict_proba(X).astype(np.float32)])
    transformer("gaussian_mixture_diag", GaussianMixture(2, covariance_type="diag", random_state=0), Xb,
                method="predict", extra=lambda m, X: [m.predict_proba(X).astype(np.float32)])
    transformer("bayes_gaussian_mixture_tied", BayesianGaussianMixture(n_components=3, covariance_type="tied", random_state=0),
                Xm, method="predict", extra=lambda m, X: [m.predict_proba(X).astype(np.float32)])
    transformer("lof_novelty", LocalOutlierFactor(n_neighbors=5, novelty=True), Xb, method="predict",
                extra=lambda m, X: [m.decision_function(X).astype(np.float32).reshape(-1, 1)])
    transformer("power_yeo_johnson", PowerTransformer(), Xm)
    transformer("power_box_cox", PowerTransformer(method="box-cox"), np.abs(Xm) + 0.1)
    transformer("quantile_uniform", QuantileTransformer(n_quantiles=50), Xm)
    transformer("random_trees_embedding", RandomTreesEmbedding(n_estimators=3, max_depth=3, random_state=0,
                                                               sparse_output=False), Xm)
    classifier("sgd_modified_huber", SGDClassifier(loss="modified_huber", random_state=0), Xm, ym)
    classifier("dt_decision_leaf", DecisionTreeClassifier(max_depth=4, random_state=0), Xm, ym,
               extra_options={"decision_leaf": True}, extra=lambda m, X: [m.apply(X).astype(np.int64).reshape(-1, 1)])
    regressor("extra_trees_reg_double", ExtraTreesRegressor(4, max_depth=4, random_state=0), Xr.astype(np.float64),
              yr.astype(np.float64), opsets=((17, 3),))
    regressor("ridge_double", __import__("sklearn.linear_model", fromlist=["Ridge"]).Ridge(),
              Xr.astype(np.float64), yr.astype(np.float64), opsets=((15, 1),))

    def dict_vectorizer():
        from skl2onnx.common.data_types import DictionaryType, FloatTensorType as FT, StringTensorType as ST
        rows = [{"a": 1.0, "b": 2.0}, {"b": 3.0, "c": -1.0}, {"a": 0.5, "d": 4.0}]
        dv = DictVectorizer(sparse=False).fit(rows)
        onx = to_onnx(dv, initial_types=[("m", DictionaryType(ST([]), FT([])))],
                      target_opset={"": 15, "ai.onnx.ml": 1})
        folder = os.path.join(out_root, "skl2_dict_vectorizer_op15")
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "model.onnx"), "wb") as f:
            f.write(onx.SerializeToString())
        print("skl2_dict_vectorizer_op15: exported (map input: checked by hand, run_zoo feeds .npy only)", flush=True)
    run_case("dict_vectorizer", dict_vectorizer)

    def label_binarizer():
        lb = LabelBinarizer().fit(ym)
        onx = to_onnx(lb, initial_types=[("y", Int64TensorType([None]))], target_opset={"": 15, "ai.onnx.ml": 1})
        t = ym[:20].astype(np.int64)
        save_case(os.path.join(out_root, "skl2_label_binarizer_op15"), onx.SerializeToString(), [t],
                  [lb.transform(t).astype(np.int64)])
        print("skl2_label_binarizer_op15: ok", flush=True)
    run_case("label_binarizer", label_binarizer)

    # ---- categorical / string inputs
    cats = np.array(["red", "green", "blue", "cyan", "magenta"], dtype=object)
    n = 150
    Xs = np.stack([cats[rng.integers(0, 5, n)], cats[rng.integers(1, 4, n)]], 1)
    Xnum = rng.standard_normal((n, 3)).astype(np.float32)
    ycat = (((Xs[:, 0] == "red") | (Xnum[:, 0] > 0.5)).astype(np.int64) + (Xs[:, 1] == "blue")).astype(np.int64)

    def column_transformer_two_inputs():
        import pandas as pd
        df = pd.DataFrame({"c0": Xs[:, 0], "c1": Xs[:, 1], "n0": Xnum[:, 0], "n1": Xnum[:, 1], "n2": Xnum[:, 2]})
        pre = ColumnTransformer([("cat", OneHotEncoder(handle_unknown="ignore"), ["c0", "c1"]),
                                 ("num", StandardScaler(), ["n0", "n1", "n2"])])
        pipe = Pipeline([("pre", pre), ("clf", LogisticRegression(max_iter=500))]).fit(df, ycat)
        types = [("c0", StringTensorType([None, 1])), ("c1", StringTensorType([None, 1]))] + [
            (c, FloatTensorType([None, 1])) for c in ("n0", "n1", "n2")]
        for opset in (13, 17):
            onx = to_onnx(pipe, initial_types=types, options={id(pipe.steps[-1][1]): {"zipmap": False}},
                          target_opset={"": opset, "ai.onnx.ml": 3})
            t = df[:20]
            inputs = [t[c].to_numpy().reshape(-1, 1).astype(str if c[0] == "c" else np.float32) for c in df.columns]
            save_case(os.path.join(out_root, f"skl2_column_transformer_strings_op{opset}"), onx.SerializeToString(),
                      inputs, [pipe.predict(t), pipe.predict_proba(t).astype(np.float32)])
            print(f"skl2_column_transformer_strings_op{opset}: ok", flush=True)
    run_case("column_transformer_strings", column_transformer_two_inputs)

    def ordinal_strings():
        enc = make_pipeline(OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=-1),
                            ).fit(Xs)
        onx = to_onnx(enc, initial_types=[("s", StringTensorType([None, 2]))], target_opset={"": 15, "ai.onnx.ml": 3})
        t = Xs[:20].copy()
        save_case(os.path.join(out_root, "skl2_ordinal_encoder_strings_op15"), onx.SerializeToString(),
                  [t.astype(str)], [enc.transform(t).astype(np.float32)])
        print("skl2_ordinal_encoder_strings_op15: ok", flush=True)
    run_case("ordinal_encoder_strings", ordinal_strings)

    def onehot_int64():
        Xi = rng.integers(0, 6, (120, 3)).astype(np.int64)
        yi = (Xi[:, 0] + Xi[:, 1] > 5).astype(np.int64)
        pipe = make_pipeline(OneHotEncoder(handle_unknown="ignore", drop="first"),
                             LogisticRegression(max_iter=300)).fit(Xi, yi)
        onx = to_onnx(pipe, initial_types=[("x", Int64TensorType([None, 3]))],
                      options={id(pipe.steps[-1][1]): {"zipmap": False}}, target_opset={"": 15, "ai.onnx.ml": 3})
        save_case(os.path.join(out_root, "skl2_onehot_int64_drop_first_op15"), onx.SerializeToString(), [Xi[:20]],
                  [pipe.predict(Xi[:20]), pipe.predict_proba(Xi[:20]).astype(np.float32)])
        print("skl2_onehot_int64_drop_first_op15: ok", flush=True)
    run_case("onehot_int64", onehot_int64)

    def label_encoder():
        le = LabelEncoder().fit(cats)
        t = cats[rng.integers(0, 5, 12)]
        for ml in (1, 2):
            onx = to_onnx(le, initial_types=[("s", StringTensorType([None]))], target_opset={"": 15, "ai.onnx.ml": ml})
            save_case(os.path.join(out_root, f"skl2_label_encoder_ml{ml}_op15"), onx.SerializeToString(),
                      [t.astype(str)], [le.transform(t).astype(np.int64)])
            print(f"skl2_label_encoder_ml{ml}_op15: ok", flush=True)
    run_case("label_encoder", label_encoder)

    def text_tfidf():
        from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer
        docs = np.array(["the cat sat on the mat", "a dog ate the cat food", "The Mat is red!",
                         "dogs and cats, and mats", "red cat (red dog)", "on a red mat: the dog sat."] * 3)
        # skl2onnx's default tokenexp [a-zA-Z0-9_]+ keeps one-letter words that scikit-learn's default
        # token_pattern drops, so the word models use token_pattern=r"\b\w+\b" to agree.
        for name, vec, options in (
                ("tfidf_words", TfidfVectorizer(), {"separators": [" "]}),
                ("count_bigrams", CountVectorizer(ngram_range=(1, 2), lowercase=True), {"separators": [" "]}),
                ("tfidf_tokenexp", TfidfVectorizer(token_pattern=r"[a-zA-Z0-9_]+", sublinear_tf=True), {}),
                ("count_default_separators", CountVectorizer(token_pattern=r"[^ .?,;:!()\n\"'\-\[\]@]+"),
                 {"separators": "DEFAULT"}),
                ("tfidf_char_ngrams", TfidfVectorizer(analyzer="char", ngram_range=(1, 2)), {})):
            vec.fit(docs)
            onx = to_onnx(vec, initial_types=[("text", StringTensorType([None, 1]))],
                          target_opset={"": 15, "ai.onnx.ml": 3}, options={id(vec): options} if options else None)
            t = docs[:6].reshape(-1, 1)
            save_case(os.path.join(out_root, f"skl2_{name}_op15"), onx.SerializeToString(), [t.astype(str)],
                      [vec.transform(docs[:6]).toarray().astype(np.float32)])
            print(f"skl2_{name}_op15: ok", flush=True)
    run_case("text", text_tfidf)


# =========================================================================================== quantized


def quant_zoo():
    """onnxruntime.quantization of float models already exported by the torch half (dynamic; static QDQ
    and QOperator, calibrated on random data). References are onnxruntime's outputs; folders start with
    "quant" so run_zoo.py compares them with one uint8 step of tolerance."""
    import shutil

    import onnxruntime as ort
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType, quantize_dynamic,
                                          quantize_static)
    from onnxruntime.quantization.shape_inference import quant_pre_process

    out_root = sys.argv[2] if len(sys.argv) > 2 else "/tmp/zoo2"
    wanted = sys.argv[3:]
    jobs = [("bert_like_op14", ["dynamic"]), ("t5_like_op15", ["dynamic", "static_qdq"]),
            ("gpt_past_kv_op14", ["dynamic"]), ("cross_attention_op17", ["dynamic"]),
            ("regnet_x_400mf_op15", ["static_qdq", "static_qop"]), ("convnext_tiny_op17", ["static_qdq"]),
            ("lraspp_mobilenet_v3_large_op16", ["static_qop"]), ("audio_conv1d_op13", ["static_qdq"]),
            ("r3d_18_op17", ["static_qdq"]), ("gru_bidir_3layer_init_op15", ["dynamic"]),
            ("resnext50_32x4d_op17", ["static_qdq_s8"])]

    class RandomReader(CalibrationDataReader):
        def __init__(self, names, inputs, count=3):
            rng = np.random.default_rng(0)
            self.it = iter([{n: (rng.standard_normal(x.shape).astype(x.dtype) if x.dtype.kind == "f" else x)
                             for n, x in zip(names, inputs)} for _ in range(count)])

        def get_next(self):
            return next(self.it, None)

    for src, kinds in jobs:
        if wanted and not any(w in src for w in wanted):
            continue
        src_dir = os.path.join(out_root, src)
        if not os.path.exists(os.path.join(src_dir, "model.onnx")):
            print(f"quant: {src} missing", flush=True)
            continue
        files = sorted((f for f in os.listdir(src_dir) if f.startswith("input_")), key=lambda f: int(f[6:-4]))
        inputs = [np.load(os.path.join(src_dir, f)) for f in files]
        prep = os.path.join(out_root, f".prep_{src}.onnx")
        try:
            quant_pre_process(os.path.join(src_dir, "model.onnx"), prep, skip_symbolic_shape=True)
        except Exception:
            shutil.copy(os.path.join(src_dir, "model.onnx"), prep)
        names = [i.name for i in ort.InferenceSession(prep, providers=["CPUExecutionProvider"]).get_inputs()]
        for kind in kinds:
            folder = os.path.join(out_root, f"quant2_{kind}_{src}")
            os.makedirs(folder, exist_ok=True)
            dst = os.path.join(folder, "model.onnx")
            try:
                if kind == "dynamic":
                    quantize_dynamic(prep, dst, weight_type=QuantType.QInt8)
                else:
                    quantize_static(prep, dst, RandomReader(names, inputs),
                                    quant_format=QuantFormat.QDQ if "qdq" in kind else QuantFormat.QOperator,
                                    activation_type=QuantType.QInt8 if kind.endswith("s8") else QuantType.QUInt8,
                                    weight_type=QuantType.QInt8, per_channel=kind.endswith("s8"))
                sess = ort.InferenceSession(dst, providers=["CPUExecutionProvider"])
                expected = sess.run(None, dict(zip(names, inputs)))
                for i, x in enumerate(inputs):
                    np.save(os.path.join(folder, f"input_{i}.npy"), x)
                for i, y in enumerate(expected):
                    np.save(os.path.join(folder, f"expected_{i}.npy"), y)
                print(f"{os.path.basename(folder)}: ok", flush=True)
            except Exception as e:
                shutil.rmtree(folder, ignore_errors=True)
                print(f"{os.path.basename(folder)}: failed: {str(e).splitlines()[0][:200]}", flush=True)


# ======================================================= ONNX Runtime transformer optimizer (fused ops)


def ortopt_zoo():
    """Float transformer models from the torch halves rewritten by onnxruntime.transformers.optimizer, which
    fuses subgraphs into com.microsoft ops (SkipLayerNormalization, BiasGelu, FastGelu, Attention,
    EmbedLayerNormalization, SkipSimplifiedLayerNormalization) and ONNX-domain LayerNormalization /
    SimplifiedLayerNormalization at any opset. The framework outputs stay the references. The optimizer
    imports torch only for a version string and needs sympy: run with
        PYTHONPATH=<dir with a stub torch/version.py and links to Debian's sympy, mpmath> venv python."""
    import shutil

    from onnxruntime.transformers import optimizer

    out_root = sys.argv[2] if len(sys.argv) > 2 else "/tmp/zoo2"
    wanted = sys.argv[3:]
    jobs = [  # (folder, possibly in the first sweep's /tmp/zoo, model_type, heads, hidden)
        ("bert_like_op14", "bert", 4, 32), ("bert_like_op17", "bert", 4, 32), ("t5_like_op15", "bert", 4, 32),
        ("cross_attention_op17", "bert", 3, 24), ("gpt_past_kv_op14", "gpt2", 4, 32),
        ("vit_b_16_small_op14", "vit", 12, 768), ("swin_t_op17", "swin", 3, 96),
        ("/tmp/zoo/gpt_like_op14", "gpt2", 4, 32), ("/tmp/zoo/gpt_like_op17", "gpt2", 4, 32),
        ("/tmp/zoo/small_vit_op17", "vit", 4, 32), ("/tmp/zoo/transformer_encoder_op17", "bert", 4, 32),
        ("/tmp/zoo/transformer_decoder_op17", "bert", 4, 32), ("/tmp/zoo/gpt_mha_op14", "gpt2", 4, 32),
        ("/tmp/zoo/raw_gpt_like_op17", "gpt2", 4, 32), ("/tmp/zoo/f64_gpt_like_op17", "gpt2", 4, 32),
        ("dyn_t5_like_op15", "bert", 4, 32), ("dyn_cross_attention_op17", "bert", 3, 24),
        ("dyn_gpt_past_kv_op17", "gpt2", 4, 32)]
    for src, model_type, heads, hidden in jobs:
        if wanted and not any(w in src for w in wanted):
            continue
        src_dir = src if os.path.isabs(src) else os.path.join(out_root, src)
        if not os.path.exists(os.path.join(src_dir, "model.onnx")):
            print(f"ortopt: {src} missing", flush=True)
            continue
        name = "ortopt_" + os.path.basename(src_dir)
        folder = os.path.join(out_root, name)
        try:
            opt = optimizer.optimize_model(os.path.join(src_dir, "model.onnx"), model_type=model_type,
                                           num_heads=heads, hidden_size=hidden, opt_level=1)
            os.makedirs(folder, exist_ok=True)
            opt.save_model_to_file(os.path.join(folder, "model.onnx"))
            for f in os.listdir(src_dir):
                if f.endswith(".npy"):
                    shutil.copy(os.path.join(src_dir, f), folder)
            if os.path.isdir(src_dir + "_alt"):  # the dynamic-length models' second case
                os.makedirs(folder + "_alt", exist_ok=True)
                shutil.copy(os.path.join(folder, "model.onnx"), folder + "_alt")
                for f in os.listdir(src_dir + "_alt"):
                    if f.endswith(".npy"):
                        shutil.copy(os.path.join(src_dir + "_alt", f), folder + "_alt")
            fused = sorted({f"{n.domain or 'ai.onnx'}.{n.op_type}" for n in opt.model.graph.node
                            if n.domain or n.op_type in ("LayerNormalization", "SimplifiedLayerNormalization")})
            print(f"{name}: ok {fused}", flush=True)
        except Exception as e:
            shutil.rmtree(folder, ignore_errors=True)
            print(f"{name}: failed: {str(e).splitlines()[0][:200]}", flush=True)


# ================================================================= newer opsets by version conversion


def upconvert_zoo():
    """Opset-17 exports converted by onnx.version_converter to opsets 18-21 (ops whose attributes became
    inputs: ReduceMean / Split / Pad / Resize / ScatterElements ...), same framework references."""
    import shutil

    import onnx
    from onnx import version_converter

    out_root = sys.argv[2] if len(sys.argv) > 2 else "/tmp/zoo2"
    wanted = sys.argv[3:]
    sources = [os.path.join(out_root, d) for d in sorted(os.listdir(out_root)) if d.endswith("_op17")]
    sources += [os.path.join("/tmp/zoo", d) for d in sorted(os.listdir("/tmp/zoo")) if d.endswith("_op17")] \
        if os.path.isdir("/tmp/zoo") else []
    for src in sources:
        if wanted and not any(w in src for w in wanted):
            continue
        if os.path.basename(src).startswith(("quant", "skl")) or not os.path.exists(os.path.join(src, "model.onnx")):
            continue
        model = onnx.load(os.path.join(src, "model.onnx"))
        for target in (18, 21):
            name = f"up{target}_" + os.path.basename(src)
            folder = os.path.join(out_root, name)
            try:
                converted = version_converter.convert_version(model, target)
                onnx.checker.check_model(converted)
            except Exception as e:
                print(f"{name}: conversion failed: {str(e).splitlines()[0][:150]}", flush=True)
                continue
            os.makedirs(folder, exist_ok=True)
            onnx.save(converted, os.path.join(folder, "model.onnx"))
            for f in os.listdir(src):
                if f.endswith(".npy"):
                    shutil.copy(os.path.join(src, f), folder)
            print(f"{name}: ok", flush=True)


# ================================================================ small models kept in the repository


def commit_sklearn():
    """Writes the scikit-learn models of this sweep that showed nee bugs into tests/models/sklearn/ in the
    layout test_sklearn_models.py reads (model.onnx, input_0.npy, expected_*.npy, meta.json)."""
    import json

    from skl2onnx import to_onnx
    from skl2onnx.common.data_types import StringTensorType
    from sklearn import datasets
    from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer
    from sklearn.model_selection import train_test_split
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import SVC

    root = os.path.join(HERE, "sklearn")

    def save(name, onx, x, kind, outputs, expected):
        folder = os.path.join(root, name)
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "model.onnx"), "wb") as f:
            f.write(onx.SerializeToString())
        np.save(os.path.join(folder, "input_0.npy"), x)
        for key, value in expected.items():
            np.save(os.path.join(folder, f"expected_{key}.npy"), value)
        meta = {"kind": kind, "outputs": outputs,
                "opset": {o.domain or "ai.onnx": o.version for o in onx.opset_import}}
        with open(os.path.join(folder, "meta.json"), "w") as f:
            json.dump(meta, f, indent=1, sort_keys=True)
            f.write("\n")
        print(f"{name}: {os.path.getsize(os.path.join(folder, 'model.onnx'))} bytes", flush=True)

    # Binary SVC with Platt probabilities: nee skipped the pairwise coupling for two classes.
    x, y = datasets.load_breast_cancer(return_X_y=True)
    x_train, x_test, y_train, _ = train_test_split(x.astype(np.float32), y, test_size=0.25, random_state=0)
    svc = SVC(probability=True, random_state=0)
    pipe = make_pipeline(StandardScaler(), svc).fit(x_train, y_train)
    onx = to_onnx(pipe, x_train[:1], target_opset={"": 17, "ai.onnx.ml": 1}, options={id(svc): {"zipmap": False}})
    save("svc_rbf_binary_proba", onx, x_test[:24], "classifier",
         {"label": onx.graph.output[0].name, "probabilities": onx.graph.output[1].name, "zipmap": False},
         {"label": pipe.predict(x_test[:24]).astype(np.int64),
          "proba": pipe.predict_proba(x_test[:24]).astype(np.float32)})

    # Text vectorizers: com.microsoft Tokenizer (missing in nee) with regex separators and characters.
    docs = np.array(["the cat sat on the mat", "a dog ate the cat food", "The Mat is red!",
                     "dogs and cats, and mats", "red cat (red dog)", "on a red mat: the dog sat.",
                     "cat-food for dogs?", "[mats] @ the shop", "a cat; a dog", "Red, red, RED."])
    text_in = [("text", StringTensorType([None, 1]))]
    vec = CountVectorizer(token_pattern=r"[^ .?,;:!()\n\"'\-\[\]@]+").fit(docs)
    onx = to_onnx(vec, initial_types=text_in, target_opset={"": 17, "ai.onnx.ml": 3},
                  options={id(vec): {"separators": "DEFAULT"}})
    save("count_vectorizer_separators", onx, docs.reshape(-1, 1), "regressor",
         {"value": onx.graph.output[0].name}, {"value": vec.transform(docs).toarray().astype(np.float32)})
    vec = TfidfVectorizer(analyzer="char", ngram_range=(1, 2)).fit(docs)
    onx = to_onnx(vec, initial_types=text_in, target_opset={"": 17, "ai.onnx.ml": 3})
    save("tfidf_char_ngrams", onx, docs.reshape(-1, 1), "regressor",
         {"value": onx.graph.output[0].name}, {"value": vec.transform(docs).toarray().astype(np.float32)})


def commit_ortopt():
    """Copies two optimizer-rewritten models (made by `ortopt`) with their PyTorch references into
    tests/models/torch/: GPT-like at opset 14 (LayerNormalization before 17, SkipLayerNormalization,
    BiasGelu) and T5-like at opset 15 (SimplifiedLayerNormalization, SkipSimplifiedLayerNormalization)."""
    import shutil
    out_root = sys.argv[2] if len(sys.argv) > 2 else "/tmp/zoo2"
    for src, dst in (("ortopt_gpt_like_op14", "ortopt_gpt_like_opset14"), ("ortopt_t5_like_op15", "ortopt_t5_like_opset15")):
        folder = os.path.join(HERE, "torch", dst)
        os.makedirs(folder, exist_ok=True)
        for f in os.listdir(os.path.join(out_root, src)):
            shutil.copy(os.path.join(out_root, src, f), folder)
        print(f"{folder}: ok", flush=True)


def commit_torch():
    """Writes the PyTorch model of this sweep that showed a nee bug into tests/models/torch/."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class GridSampleCubic(nn.Module):
        def forward(self, x, grid):
            return (F.grid_sample(x, grid, mode="bicubic", padding_mode="border", align_corners=True),
                    F.grid_sample(x, grid, mode="bicubic", padding_mode="border", align_corners=False),
                    F.grid_sample(x, grid, mode="bicubic", padding_mode="reflection", align_corners=False),
                    F.grid_sample(x, grid, mode="bicubic", padding_mode="zeros", align_corners=True))

    torch.manual_seed(0)
    inputs = [torch.randn(2, 3, 6, 7), torch.rand(2, 4, 5, 2) * 2.6 - 1.3]
    folder = os.path.join(HERE, "torch", "grid_sample_bicubic_opset16")
    os.makedirs(folder, exist_ok=True)
    model = GridSampleCubic().eval()
    with torch.no_grad():
        outs = model(*inputs)
    torch.onnx.export(model, tuple(inputs), os.path.join(folder, "model.onnx"), opset_version=16,
                      input_names=["x", "grid"], output_names=[f"y{i}" for i in range(len(outs))])
    for i, t in enumerate(inputs):
        np.save(os.path.join(folder, f"input_{i}.npy"), t.numpy())
    for i, t in enumerate(outs):
        np.save(os.path.join(folder, f"expected_{i}.npy"), t.numpy())
    print(f"{folder}: ok", flush=True)


# ============================================================================ second opinion on failures


def second_opinion(folders, nee_bin):
    """For each folder: nee (CLI), onnxruntime and the framework's outputs, pairwise max abs differences.
    When onnxruntime agrees with nee but not with the framework, the exporter (or the framework) is the
    cause; when it agrees with the framework, nee is."""
    import subprocess
    import tempfile

    import onnx
    import onnxruntime as ort
    sys.path.insert(0, HERE)
    from run_zoo import as_array, load_case

    def diff(a, b):
        a, b = as_array(a), as_array(b)
        if a.size != b.size:
            return f"shape {a.shape} vs {b.shape}"
        if a.dtype.kind in "OUS" or b.dtype.kind in "OUS":
            return "equal" if np.array_equal(a.astype(str).ravel(), b.astype(str).ravel()) else "strings differ"
        return f"{float(np.max(np.abs(a.astype(np.float64).ravel() - b.astype(np.float64).ravel()), initial=0)):.3g}"

    for folder in folders:
        inputs, expected = load_case(folder)
        model = onnx.load(os.path.join(folder, "model.onnx"))
        inits = {t.name for t in model.graph.initializer}
        names = [i.name for i in model.graph.input if i.name not in inits]
        try:
            sess = ort.InferenceSession(os.path.join(folder, "model.onnx"), providers=["CPUExecutionProvider"])
            theirs = sess.run(None, dict(zip(names, inputs)))
        except Exception as e:
            theirs = None
            print(f"{os.path.basename(folder)}: onnxruntime failed: {str(e).splitlines()[0][:200]}")
        with tempfile.TemporaryDirectory() as tmp:
            args = [nee_bin, "run", os.path.join(folder, "model.onnx"), "--output-dir", tmp]
            for i, n in enumerate(names):
                args += ["--input", f"{n}={os.path.join(folder, f'input_{i}.npy')}"]
            r = subprocess.run(args, capture_output=True, text=True)
            ours = [np.load(os.path.join(tmp, f"output_{i}.npy"), allow_pickle=True)
                    if os.path.exists(os.path.join(tmp, f"output_{i}.npy")) else None for i in range(len(expected))]
            if r.returncode:
                print(f"{os.path.basename(folder)}: nee failed: {r.stderr.strip()[-300:]}")
        for i, want in enumerate(expected):
            cols = [f"nee-fw {diff(ours[i], want) if ours[i] is not None else '-'}"]
            if theirs is not None:
                cols += [f"ort-fw {diff(theirs[i], want)}",
                         f"nee-ort {diff(ours[i], theirs[i]) if ours[i] is not None else '-'}"]
            print(f"{os.path.basename(folder)} out{i}: " + ", ".join(cols))


if __name__ == "__main__":
    which = sys.argv[1] if len(sys.argv) > 1 else ""
    if which == "torch":
        torch_zoo()
    elif which == "sklearn":
        sklearn_zoo()
    elif which == "quant":
        quant_zoo()
    elif which == "ortopt":
        ortopt_zoo()
    elif which == "upconvert":
        upconvert_zoo()
    elif which == "commit-sklearn":
        commit_sklearn()
    elif which == "commit-ortopt":
        commit_ortopt()
    elif which == "commit-torch":
        commit_torch()
    elif which == "compare":  # compare FOLDER... [--nee build/bin/nee]
        rest = sys.argv[2:]
        nee_bin = rest[rest.index("--nee") + 1] if "--nee" in rest else os.path.join(HERE, "..", "..", "build", "bin", "nee")
        second_opinion([f for f in rest if os.path.isdir(f)], nee_bin)
    else:
        sys.exit(__doc__)
