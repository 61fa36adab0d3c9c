#!/usr/bin/env python3
"""Exports a zoo of diverse PyTorch models to ONNX (several opsets) with torch's outputs as references.

Run with Debian's python3-torch (1.13, CPU):
    /usr/bin/python3 tests/models/torch/export_zoo.py [OUT_DIR=/tmp/zoo] [name-substring ...]
Writes OUT_DIR/<name>_op<opset>/{model.onnx,input_<i>.npy,expected_<i>.npy}. The models can be large,
so they go to a scratch folder, not into the repository; tests/models/run_zoo.py runs them through nee.
Weights are random (seeded): nothing is downloaded.
"""
import os
import sys
import traceback

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision
from typing import List

torch.manual_seed(0)
np.random.seed(0)


def rand(*shape):
    return torch.randn(*shape)


# ----------------------------------------------------------------------------------------------- models


class GptLike(nn.Module):
    """GPT-2-like causal decoder: token+position embeddings, manual causal attention, LayerNorm, GELU."""

    def __init__(self, vocab=64, dim=32, heads=4, layers=2, ctx=16):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(ctx, dim)
        self.heads = heads
        self.blocks = nn.ModuleList()
        for _ in range(layers):
            self.blocks.append(nn.ModuleDict(dict(
                ln1=nn.LayerNorm(dim), qkv=nn.Linear(dim, 3 * dim), proj=nn.Linear(dim, dim),
                ln2=nn.LayerNorm(dim), fc=nn.Linear(dim, 4 * dim), out=nn.Linear(4 * dim, dim))))
        self.ln_f = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, ids):
        b, t = ids.shape
        pos = torch.arange(t, device=ids.device).unsqueeze(0)
        x = self.tok(ids) + self.pos(pos)
        mask = torch.tril(torch.ones(t, t, dtype=torch.bool))
        for blk in self.blocks:
            h = blk["ln1"](x)
            q, k, v = blk["qkv"](h).split(x.shape[-1], dim=-1)
            d = x.shape[-1] // self.heads
            q = q.view(b, t, self.heads, d).transpose(1, 2)
            k = k.view(b, t, self.heads, d).transpose(1, 2)
            v = v.view(b, t, self.heads, d).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) / (d ** 0.5)
            att = att.masked_fill(~mask, float("-inf"))
            att = F.softmax(att, dim=-1)
            y = (att @ v).transpose(1, 2).reshape(b, t, -1)
            x = x + blk["proj"](y)
            x = x + blk["out"](F.gelu(blk["fc"](blk["ln2"](x))))
        return self.head(self.ln_f(x))


class GptMha(nn.Module):
    """Causal decoder using nn.MultiheadAttention with an attn_mask and tanh-GELU."""

    def __init__(self, vocab=50, dim=32):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.attn = nn.MultiheadAttention(dim, 4, batch_first=True)
        self.ln = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 64), nn.GELU(approximate="tanh"), nn.Linear(64, dim))
        self.head = nn.Linear(dim, vocab)

    def forward(self, ids):
        x = self.emb(ids)
        t = ids.shape[1]
        mask = torch.triu(torch.full((t, t), float("-inf")), diagonal=1)
        a, _ = self.attn(x, x, x, attn_mask=mask, need_weights=False)
        x = self.ln(x + a)
        return self.head(x + self.mlp(x))


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True, norm_first=False)
        self.enc = nn.TransformerEncoder(layer, 2)

    def forward(self, x, pad_mask):
        return self.enc(x, src_key_padding_mask=pad_mask)


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        layer = nn.TransformerDecoderLayer(32, 4, 64, dropout=0.0, batch_first=True, norm_first=True,
                                           activation="gelu")
        self.dec = nn.TransformerDecoder(layer, 2)

    def forward(self, tgt, memory):
        t = tgt.shape[1]
        mask = torch.triu(torch.full((t, t), float("-inf")), diagonal=1)
        return self.dec(tgt, memory, tgt_mask=mask)


class FullTransformer(nn.Module):
    def __init__(self):
        super().__init__()
        self.t = nn.Transformer(32, 4, 1, 1, 64, dropout=0.0)

    def forward(self, src, tgt):
        return self.t(src, tgt)


class LstmVariants(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(8, 12, num_layers=2, bidirectional=True, batch_first=True)

    def forward(self, x, h0, c0):
        y, (h, c) = self.lstm(x, (h0, c0))
        return y, h, c


class GruSeqFirst(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(8, 10, num_layers=3, bidirectional=False)

    def forward(self, x, h0):
        return self.gru(x, h0)


class GruBidir(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(8, 10, num_layers=2, bidirectional=True, batch_first=True)

    def forward(self, x):
        return self.gru(x)


class RnnTanhRelu(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.RNN(6, 9, num_layers=2, nonlinearity="tanh", bidirectional=True)
        self.b = nn.RNN(18, 7, nonlinearity="relu")

    def forward(self, x):
        y, h = self.a(x)
        z, h2 = self.b(y)
        return z, h, h2


class LstmProj(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(8, 12, num_layers=1, batch_first=True)
        self.lin = nn.Linear(12, 3)

    def forward(self, x):
        y, _ = self.lstm(x)
        return self.lin(y[:, -1, :])


class Conv1d3d(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv1d(4, 8, 5, stride=2, padding=2, dilation=1, groups=2)
        self.c1b = nn.Conv1d(8, 8, 3, padding=2, dilation=2)
        self.c3 = nn.Conv3d(2, 4, (3, 3, 3), stride=(1, 2, 2), padding=1)
        self.p3 = nn.MaxPool3d(2)
        self.a1 = nn.AvgPool1d(3, stride=2, padding=1, count_include_pad=False)

    def forward(self, x1, x3):
        y1 = self.a1(F.relu(self.c1b(self.c1(x1))))
        y3 = self.p3(self.c3(x3))
        return y1, y3, F.adaptive_avg_pool3d(y3, 1).flatten(1)


class ConvTranspose(nn.Module):
    def __init__(self):
        super().__init__()
        self.t1 = nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1)
        self.t2 = nn.ConvTranspose2d(6, 4, 4, stride=2, padding=1, groups=2, dilation=1)
        self.t3 = nn.ConvTranspose1d(4, 3, 5, stride=3, padding=2)
        self.t4 = nn.ConvTranspose2d(4, 2, 3, stride=1, padding=0, dilation=2, bias=False)

    def forward(self, x, y):
        return self.t4(self.t2(self.t1(x))), self.t3(y)


class Interp(nn.Module):
    def forward(self, x):
        a = F.interpolate(x, scale_factor=2, mode="nearest")
        b = F.interpolate(x, size=(7, 9), mode="bilinear", align_corners=False)
        c = F.interpolate(x, size=(7, 9), mode="bilinear", align_corners=True)
        d = F.interpolate(x, scale_factor=1.5, mode="bilinear", align_corners=False)
        e = nn.Upsample(scale_factor=3, mode="nearest")(x)
        f = F.interpolate(x, size=(3, 4), mode="nearest")
        g = F.interpolate(x, scale_factor=2, mode="bicubic", align_corners=False)
        return a, b, c, d, e, f, g


class Interp1d3d(nn.Module):
    def forward(self, x1, x3):
        return (F.interpolate(x1, scale_factor=2, mode="linear", align_corners=False),
                F.interpolate(x3, scale_factor=2, mode="trilinear", align_corners=True),
                F.interpolate(x3, size=(3, 5, 6), mode="nearest"))


class PixelShuffleNorms(nn.Module):
    def __init__(self):
        super().__init__()
        self.gn = nn.GroupNorm(4, 16)
        self.inorm = nn.InstanceNorm2d(16, affine=True)
        self.inorm_plain = nn.InstanceNorm1d(4)
        self.ln = nn.LayerNorm([4, 4])
        self.conv = nn.Conv2d(4, 16, 3, padding=1)

    def forward(self, x, s):
        y = self.conv(x)
        y = self.gn(y) + self.inorm(y)
        z = F.pixel_shuffle(y, 2)
        w = F.pixel_unshuffle(z, 2)
        return z, w, self.ln(x), self.inorm_plain(s)


class EmbBag(nn.Module):
    def __init__(self):
        super().__init__()
        self.bag = nn.EmbeddingBag(30, 8, mode="mean")
        self.bag_sum = nn.EmbeddingBag(30, 8, mode="sum")

    def forward(self, ids, offsets):
        return self.bag(ids, offsets), self.bag_sum(ids, offsets)


class EmbBag2d(nn.Module):
    def __init__(self):
        super().__init__()
        self.bag = nn.EmbeddingBag(30, 8, mode="max")

    def forward(self, ids):
        return self.bag(ids)


class TopkSort(nn.Module):
    def forward(self, x):
        v, i = torch.topk(x, 3, dim=1)
        vs, is_ = torch.sort(x, dim=-1, descending=True)
        v2, i2 = torch.topk(x, 2, dim=-1, largest=False)
        return v, i, vs, is_, x.argmax(dim=1), x.argmin(dim=-1, keepdim=True), v2, i2, x.max(dim=0)[0]


class Indexing(nn.Module):
    def forward(self, x, idx, mask):
        g = torch.gather(x, 1, idx)
        s = torch.zeros_like(x).scatter(1, idx, torch.ones_like(g))
        sa = torch.zeros_like(x).scatter_add(1, idx, g)
        sel = torch.index_select(x, 0, torch.tensor([2, 0, 1]))
        m = x.masked_fill(mask, -1.0)
        w = torch.where(mask, x, x * 2)
        fancy = x[:, [0, 2, 3]]
        sl = x[1:, ::2]
        nz = x[x > 0.5].sum().unsqueeze(0)
        x2 = x.clone()
        x2[:, 1] = 5.0
        return g, s, sa, sel, m, w, fancy, sl, nz, x2


class CumsumEinsum(nn.Module):
    def forward(self, a, b, c):
        return (torch.cumsum(a, dim=1), torch.cumsum(a, dim=-1).flip(0),
                torch.einsum("bij,bjk->bik", a, b), torch.einsum("bij->bj", a),
                torch.einsum("ij,ij->i", a[0], a[1]), torch.einsum("bi,bj->bij", c, c),
                torch.einsum("bij,jk->bik", a, b[0]))


class MiscOps(nn.Module):
    def forward(self, x):
        return (F.silu(x), F.hardswish(x), F.hardsigmoid(x), F.mish(x), F.elu(x), F.selu(x),
                F.leaky_relu(x, 0.1), F.softplus(x), F.log_softmax(x, -1), torch.clamp(x, -0.5, 0.5),
                x.pow(2).sum(-1, keepdim=True).sqrt(), F.normalize(x, dim=-1), x.std(-1), x.var(1, keepdim=True),
                torch.erf(x), torch.round(x * 3), x.norm(p=2, dim=1), torch.logsumexp(x, 1), F.prelu(x, torch.tensor([0.2])),
                torch.remainder(x, 0.7), torch.fmod(x, 0.7), torch.floor_divide(x * 5, 2.0), F.glu(x, -1), F.relu6(x * 4))


class Reductions(nn.Module):
    def forward(self, x):
        return (x.mean((1, 2)), x.sum(0), x.prod(-1), x.amax((0, 2)), x.amin(1), torch.any(x > 1, 1),
                torch.all(x > -3, -1), x.flatten(1).mean(-1, keepdim=True), x.permute(2, 0, 1).contiguous(),
                x.repeat(1, 2, 1), x.expand(2, 3, 4, 5).sum(0), torch.cat([x, x * 2], -1), torch.stack([x, -x], 1),
                torch.chunk(x, 2, dim=2)[1], x.unsqueeze(1).squeeze(1).transpose(0, 1), torch.tril(x), torch.triu(x, 1))


@torch.jit.script
def loop_fn(x, n: int):
    acc = torch.zeros_like(x)
    for i in range(n):
        if bool(acc.sum() > 10.0):
            acc = acc - x
        else:
            acc = acc + x * i
    return acc


class ScriptedLoop(nn.Module):
    def forward(self, x, n):
        return loop_fn(x, int(n))


class ScriptLoopIf(torch.jit.ScriptModule):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    @torch.jit.script_method
    def forward(self, x, steps):
        h = x
        for i in range(int(steps)):
            h = torch.tanh(self.lin(h))
            if bool(h.mean() > 0):
                h = h * 2
            else:
                h = h - 1
        k = 0
        while k < 3:
            h = h + float(k)
            k += 1
        return h


class ScriptedIf(torch.jit.ScriptModule):
    @torch.jit.script_method
    def forward(self, x):
        if bool(x.sum() > 0):
            y = x.relu()
        else:
            y = -x
        return y.cumsum(0)


class SmallVit(nn.Module):
    def __init__(self):
        super().__init__()
        self.m = torchvision.models.VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=4,
                                                      hidden_dim=32, mlp_dim=64, num_classes=10)

    def forward(self, x):
        return self.m(x)


class PadPool(nn.Module):
    def forward(self, x):
        mp, idx = F.max_pool2d(x, 2, stride=2, return_indices=True)
        return (F.pad(x, (1, 2, 2, 1), mode="reflect"), F.pad(x, (2, 1, 0, 3), mode="replicate"),
                F.pad(x, (1, 1, 2, 0), value=0.5), F.pad(x, (1, 1, 1, 1), mode="circular"),
                mp, idx, F.avg_pool2d(x, 3, stride=2, ceil_mode=True),
                F.avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=True), F.adaptive_max_pool2d(x[:, :, :6], (2, 4)),
                F.adaptive_avg_pool2d(x[:, :, :6], (3, 2)), F.lp_pool2d(x, 2, 2), F.max_pool2d(x, 3, 2, 1, ceil_mode=True),
                F.max_pool2d(x, 2, dilation=2))


class GridRoi(nn.Module):
    def forward(self, x, grid, boxes):
        import torchvision.ops as ops
        return (F.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False),
                F.grid_sample(x, grid, mode="nearest", padding_mode="border", align_corners=True),
                ops.roi_align(x, boxes, (2, 2), spatial_scale=0.5, sampling_ratio=2, aligned=True),
                ops.roi_align(x, boxes, (3, 3), spatial_scale=1.0, sampling_ratio=-1, aligned=False))


class Nms(nn.Module):
    def forward(self, boxes, scores):
        import torchvision.ops as ops
        return ops.nms(boxes, scores, 0.4)


class IntMath(nn.Module):
    def forward(self, a, b):
        return (torch.div(a, b, rounding_mode="floor"), torch.div(a, b, rounding_mode="trunc"),
                a % b, a * b - a, a.abs().max(), (a > b).to(torch.int32).sum(1),
                torch.div(a.float(), b.float(), rounding_mode="floor"), a.argsort(1), torch.unique(a, sorted=True),
                torch.nonzero(a > 0), torch.masked_select(a, a > 2), a.flip(1), torch.roll(a, 2, 1),
                a.narrow(1, 1, 2), torch.arange(a.shape[1]) * a[0])


class MoreActs(nn.Module):
    def forward(self, x, y):
        return (F.hardtanh(x, -0.3, 0.4), F.celu(x, 0.7), F.threshold(x, 0.0, 0.0), F.softsign(x),
                F.tanhshrink(x), F.logsigmoid(x), F.softshrink(x, 0.3), F.hardshrink(x, 0.3),
                F.cosine_similarity(x, y, dim=1), F.pairwise_distance(x, y), torch.cdist(x, y),
                torch.addmm(x[:, :3], x, y.t()[:, :3]), torch.baddbmm(x.unsqueeze(0)[:, :, :4], x.unsqueeze(0), y.t().unsqueeze(0)[:, :, :4]),
                F.rrelu(x, training=False), torch.sign(x), torch.atan2(x, y) if hasattr(torch, "atan2") else x,
                F.softmin(x, 1), F.gumbel_softmax if False else x.exp().log1p())


class ScriptSeq(torch.jit.ScriptModule):
    @torch.jit.script_method
    def forward(self, x):
        outs: List[torch.Tensor] = []
        for i in range(x.size(0)):
            outs.append(x[i] * float(i))
        parts = torch.split(x, 2, 1)
        total = torch.zeros_like(parts[0])
        for p in parts:
            if p.size(1) == 2:
                total = total + p
        return torch.stack(outs, 0), torch.cat(outs, 0), total


class ScriptWhile(torch.jit.ScriptModule):
    @torch.jit.script_method
    def forward(self, x):
        i = 0
        while bool(x.abs().sum() < 100.0) and i < 20:
            x = x * 1.5 + 0.1
            i += 1
        return x, torch.tensor(i)


class ScriptNested(torch.jit.ScriptModule):
    """Nested loops, a loop-carried list of differently sized tensors, an If whose branches give
    different shapes, and a data-dependent early exit."""

    @torch.jit.script_method
    def forward(self, x, n):
        rows: List[torch.Tensor] = []
        total = torch.zeros(1)
        for i in range(int(n)):
            acc = x[: i + 1].sum(0)
            for j in range(i):
                acc = acc * 0.5 + x[j]
            rows.append(acc[: i + 1])
            total = total + acc.sum()
            if bool(total > 50.0):
                break
        if bool(x.mean() > 0):
            out = torch.cat(rows, 0)
        else:
            out = torch.cat(rows, 0)[:2] * 2.0
        return out, total, torch.tensor(len(rows))


class ScriptRnnCell(torch.jit.ScriptModule):
    """A hand-written recurrent loop over time (loop-carried hidden state; torch cannot export GRUCell)."""

    def __init__(self):
        super().__init__()
        self.wx = nn.Linear(6, 16)
        self.wh = nn.Linear(8, 16)
        self.out = nn.Linear(8, 3)

    @torch.jit.script_method
    def forward(self, x):
        h = torch.zeros(x.size(1), 8)
        outs: List[torch.Tensor] = []
        for t in range(x.size(0)):
            gates = self.wx(x[t]) + self.wh(h)
            z = torch.sigmoid(gates[:, :8])
            h = z * h + (1 - z) * torch.tanh(gates[:, 8:])
            outs.append(self.out(h))
        return torch.stack(outs, 0), h


class DynamicShapes(nn.Module):
    def forward(self, x):
        b, c, h, w = x.shape
        y = x.reshape(b, c, h * w).transpose(1, 2)
        z = x.new_zeros((b, h)) + x.mean()
        pos = torch.arange(h * w, dtype=torch.float32).unsqueeze(0).expand(b, -1)
        up = F.interpolate(x, size=(h * 2, w + 3), mode="bilinear", align_corners=False)
        return y.sum(-1) + pos, z, up, x.view(b, -1)[:, : h * w // 2], x.reshape(b, c, 1, h, w).squeeze(2)


class MhaPadding(nn.Module):
    def __init__(self):
        super().__init__()
        self.mha = nn.MultiheadAttention(16, 2, kdim=12, vdim=10, batch_first=False)

    def forward(self, q, k, v, pad):
        return self.mha(q, k, v, key_padding_mask=pad, need_weights=True)


class Stft(nn.Module):
    def forward(self, x):
        s = torch.stft(x, 16, hop_length=4, window=torch.hann_window(16), return_complex=False, center=False)
        return s


class Unfold(nn.Module):
    def forward(self, x):
        return F.unfold(x, 3, padding=1, stride=2), F.unfold(x, 2, dilation=2)



def vgg11_small():
    m = torchvision.models.vgg11()
    m.avgpool = nn.AdaptiveAvgPool2d(1)
    m.classifier = nn.Sequential(nn.Linear(512, 64), nn.ReLU(), nn.Dropout(), nn.Linear(64, 10))
    return m


def tv(name, **kw):
    return lambda: getattr(torchvision.models, name)(**kw)


# (name, factory, input builder, opsets, dynamic batch?)
IMG = lambda s=64: (lambda: [rand(2, 3, s, s)])
ZOO = [
    ("resnet18", tv("resnet18"), IMG(64), [11, 13, 17], True),
    ("mobilenet_v2", tv("mobilenet_v2"), IMG(64), [11, 13, 16], True),
    ("shufflenet_v2_x0_5", tv("shufflenet_v2_x0_5"), IMG(64), [11, 14], True),
    ("squeezenet1_1", tv("squeezenet1_1"), IMG(64), [11, 13], True),
    ("densenet121", tv("densenet121"), IMG(32), [13], True),
    ("efficientnet_b0", tv("efficientnet_b0"), IMG(64), [13, 17], True),
    ("regnet_y_400mf", tv("regnet_y_400mf"), IMG(64), [14], True),
    ("googlenet", tv("googlenet", aux_logits=False, init_weights=True), IMG(64), [11, 15], True),
    ("vgg11", vgg11_small, IMG(32), [13], True),
    ("mobilenet_v3_large", tv("mobilenet_v3_large"), IMG(64), [17], True),
    ("mnasnet0_5", tv("mnasnet0_5"), IMG(64), [12], True),
    ("small_vit", SmallVit, IMG(32), [13, 14, 17], True),
    ("gpt_like", GptLike, lambda: [torch.randint(0, 64, (2, 12))], [13, 14, 17], True),
    ("gpt_mha", GptMha, lambda: [torch.randint(0, 50, (2, 10))], [11, 14, 17], False),
    ("transformer_encoder", Encoder,
     lambda: [rand(2, 7, 32), torch.tensor([[False] * 7, [False] * 5 + [True] * 2])], [13, 16, 17], False),
    ("transformer_decoder", Decoder, lambda: [rand(2, 6, 32), rand(2, 5, 32)], [13, 17], False),
    ("transformer_full", FullTransformer, lambda: [rand(5, 2, 32), rand(4, 2, 32)], [14], False),
    ("lstm_bidir_2layer_init", LstmVariants, lambda: [rand(3, 5, 8), rand(4, 3, 12), rand(4, 3, 12)], [11, 14, 17], False),
    ("gru_3layer_init", GruSeqFirst, lambda: [rand(6, 2, 8), rand(3, 2, 10)], [11, 14], False),
    ("gru_bidir", GruBidir, lambda: [rand(2, 5, 8)], [13, 16], True),
    ("rnn_tanh_relu", RnnTanhRelu, lambda: [rand(5, 2, 6)], [11, 15], False),
    ("lstm_last_step", LstmProj, lambda: [rand(3, 7, 8)], [13, 17], True),
    ("conv1d_3d", Conv1d3d, lambda: [rand(2, 4, 20), rand(1, 2, 6, 10, 12)], [11, 13, 17], False),
    ("conv_transpose", ConvTranspose, lambda: [rand(2, 4, 5, 6), rand(2, 4, 7)], [11, 13, 17], False),
    ("interpolate", Interp, lambda: [rand(1, 3, 4, 6)], [11, 13, 16], False),
    ("interpolate_1d_3d", Interp1d3d, lambda: [rand(2, 3, 5), rand(1, 2, 3, 4, 5)], [11, 13], False),
    ("pixel_shuffle_norms", PixelShuffleNorms, lambda: [rand(2, 4, 4, 4), rand(2, 4, 9)], [11, 13, 17], False),
    ("embedding_bag", EmbBag, lambda: [torch.tensor([1, 2, 4, 5, 4, 3, 2, 9]), torch.tensor([0, 3, 5])],
     [11, 13], False),
    ("embedding_bag_2d", EmbBag2d, lambda: [torch.randint(0, 30, (3, 4))], [13, 15], False),
    ("topk_sort", TopkSort, lambda: [rand(4, 6)], [11, 13, 17], False),
    ("indexing", Indexing, lambda: [rand(4, 5), torch.randint(0, 5, (4, 3)), torch.rand(4, 5) > 0.5],
     [11, 13, 16], False),
    ("cumsum_einsum", CumsumEinsum, lambda: [rand(2, 3, 4), rand(2, 4, 5), rand(2, 3)], [12, 13, 17], False),
    ("misc_activations", MiscOps, lambda: [rand(3, 8)], [14, 17], False),
    ("reductions_shapes", Reductions, lambda: [rand(3, 4, 5)], [11, 13, 17], False),
    ("script_loop", ScriptedLoop, lambda: [rand(3, 4), torch.tensor(5)], [11, 13, 16], False),
    ("script_loop_if", ScriptLoopIf, lambda: [rand(2, 4), torch.tensor(4)], [11, 13, 17], False),
    ("script_if", ScriptedIf, lambda: [rand(5, 3)], [11, 13, 16], False),
    ("pad_pool", PadPool, lambda: [rand(2, 3, 7, 8)], [11, 13, 17], False),
    ("grid_roi", GridRoi, lambda: [rand(2, 3, 8, 8), torch.rand(2, 5, 6, 2) * 2.2 - 1.1,
                                    torch.tensor([[0, 1.0, 1.0, 9.0, 7.0], [1, 0.5, 2.0, 6.0, 13.0]])], [16, 17], False),
    ("nms", Nms, lambda: [torch.tensor([[0, 0, 10, 10], [1, 1, 11, 11], [20, 20, 30, 30], [0, 0, 9, 11.0],
                                        [21, 19, 29, 31]]), torch.tensor([0.9, 0.8, 0.7, 0.95, 0.6])], [11, 13], False),
    ("int_math", IntMath, lambda: [torch.randint(-7, 9, (3, 5)), torch.randint(1, 4, (3, 5))], [11, 13, 17], False),
    ("more_activations", MoreActs, lambda: [rand(4, 6), rand(4, 6)], [13, 17], False),
    ("script_sequence", ScriptSeq, lambda: [rand(3, 5)], [11, 13, 17], False),
    ("script_while", ScriptWhile, lambda: [rand(2, 3) * 0.1], [11, 13, 16], False),
    ("script_nested", ScriptNested, lambda: [rand(5, 4), torch.tensor(4)], [11, 13, 17], False),
    ("script_rnn_cell", ScriptRnnCell, lambda: [rand(5, 2, 6)], [11, 14, 17], False),
    ("dynamic_shapes", DynamicShapes, lambda: [rand(2, 3, 4, 5)], [11, 13, 17], True),
    ("mha_padding", MhaPadding, lambda: [rand(4, 2, 16), rand(6, 2, 12), rand(6, 2, 10),
                                         torch.tensor([[False] * 6, [False] * 4 + [True] * 2])], [13, 17], False),
    ("unfold_fold", Unfold, lambda: [rand(2, 3, 6, 8)], [11, 13, 17], False),
    # float64 models: the same layers in double precision
    ("f64_resnet18", lambda: tv("resnet18", num_classes=10)().double(), lambda: [rand(1, 3, 32, 32).double()], [13], False),
    ("f64_lstm_bidir", lambda: LstmVariants().double(),
     lambda: [rand(3, 5, 8).double(), rand(4, 3, 12).double(), rand(4, 3, 12).double()], [14], False),
    ("f64_gru_bidir", lambda: GruBidir().double(), lambda: [rand(2, 5, 8).double()], [14], False),
    ("f64_gpt_like", lambda: GptLike().double(), lambda: [torch.randint(0, 64, (2, 12))], [17], False),
    ("f64_conv_transpose", lambda: ConvTranspose().double(), lambda: [rand(2, 4, 5, 6).double(), rand(2, 4, 7).double()],
     [13], False),
    ("f64_pixel_norms", lambda: PixelShuffleNorms().double(), lambda: [rand(2, 4, 4, 4).double(), rand(2, 4, 9).double()],
     [17], False),
    ("f64_interpolate", Interp, lambda: [rand(1, 3, 4, 6).double()], [13], False),
    # Export options seen in the wild: initializers also listed as graph inputs, no constant folding.
    ("raw_resnet18", tv("resnet18", num_classes=10), IMG(32), [11, 13], True,
     dict(keep_initializers_as_inputs=True, do_constant_folding=False)),
    ("raw_gpt_like", GptLike, lambda: [torch.randint(0, 64, (2, 12))], [14, 17], True,
     dict(keep_initializers_as_inputs=True, do_constant_folding=False)),
    ("raw_lstm_bidir", LstmVariants, lambda: [rand(3, 5, 8), rand(4, 3, 12), rand(4, 3, 12)], [11, 16], False,
     dict(do_constant_folding=False)),
    ("raw_dynamic_shapes", DynamicShapes, lambda: [rand(2, 3, 4, 5)], [11, 17], True,
     dict(do_constant_folding=False)),
    ("raw_interpolate", Interp, lambda: [rand(1, 3, 4, 6)], [11, 13], False, dict(do_constant_folding=False)),
    ("raw_small_vit", SmallVit, IMG(32), [14], True, dict(do_constant_folding=False)),
    ("raw_encoder", Decoder, lambda: [rand(2, 6, 32), rand(2, 5, 32)], [14], False, dict(do_constant_folding=False)),
    ("train_mode_cnn", lambda: nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.Dropout(0.0),
                                             nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 4)),
     IMG(16), [13], False, dict(training=torch.onnx.TrainingMode.PRESERVE, do_constant_folding=False)),
]


def liven(model):
    """Random-init networks can compute near-constant outputs (zero-initialized heads, BatchNorm at its
    identity statistics, activations that vanish over depth), which would make the comparison weak.
    Give BatchNorm random statistics and zero-initialized parameters small random values."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm) and m.running_mean is not None:
                m.running_mean.normal_(0, 0.1)
                m.running_var.uniform_(0.5, 1.5)
                if m.weight is not None:
                    m.weight.uniform_(0.8, 1.6)
                    m.bias.normal_(0, 0.1)
        for p in model.parameters():
            if p.numel() and float(p.abs().max()) == 0.0:
                p.normal_(0, 0.05)
    return model


def export(name, factory, make_inputs, opsets, dynamic, out_root, export_kwargs=None):
    torch.manual_seed(1)
    model = liven(factory()).eval()
    torch.manual_seed(2)
    inputs = make_inputs()
    with torch.no_grad():
        out = model(*inputs)
    outs = out if isinstance(out, (tuple, list)) else [out]
    flat = []
    for o in outs:
        flat.extend(o if isinstance(o, (tuple, list)) else [o])
    other_batch = None
    if dynamic:  # the same model run at batch 3, to test the dynamic batch axis
        more = [torch.cat([x, x[:1] * 0.5 if x.is_floating_point() else x[:1]], 0) for x in inputs]
        with torch.no_grad():
            o = model(*more)
        o = o if isinstance(o, (tuple, list)) else [o]
        other_batch = (more, [t for item in o for t in (item if isinstance(item, (tuple, list)) else [item])])
    in_names = [f"in{i}" for i in range(len(inputs))]
    out_names = [f"out{i}" for i in range(len(flat))]
    dyn = None
    if dynamic:
        dyn = {n: {0: "batch"} for n in in_names + out_names}
    for opset in opsets:
        folder = os.path.join(out_root, f"{name}_op{opset}")
        os.makedirs(folder, exist_ok=True)
        try:
            torch.onnx.export(model, tuple(inputs), os.path.join(folder, "model.onnx"), opset_version=opset,
                              input_names=in_names, output_names=out_names, dynamic_axes=dyn,
                              **({"do_constant_folding": True} | (export_kwargs or {})))
        except Exception as e:  # record export failures; they are torch's, not nee's
            with open(os.path.join(folder, "EXPORT_FAILED"), "w") as f:
                f.write(traceback.format_exc())
            print(f"{name} op{opset}: export failed: {str(e).splitlines()[0][:150]}", flush=True)
            continue
        for i, x in enumerate(inputs):
            np.save(os.path.join(folder, f"input_{i}.npy"), x.numpy())
        for i, y in enumerate(flat):
            np.save(os.path.join(folder, f"expected_{i}.npy"), y.numpy())
        print(f"{name} op{opset}: ok", flush=True)
        if dynamic and other_batch is not None:
            folder_b = folder + "_b3"
            os.makedirs(folder_b, exist_ok=True)
            if not os.path.exists(os.path.join(folder_b, "model.onnx")):
                os.link(os.path.join(folder, "model.onnx"), os.path.join(folder_b, "model.onnx"))
            for i, x in enumerate(other_batch[0]):
                np.save(os.path.join(folder_b, f"input_{i}.npy"), x.numpy())
            for i, y in enumerate(other_batch[1]):
                np.save(os.path.join(folder_b, f"expected_{i}.npy"), y.numpy())


def main():
    out_root = sys.argv[1] if len(sys.argv) > 1 else "/tmp/zoo"
    wanted = sys.argv[2:]
    torch.set_num_threads(1)
    for name, factory, make_inputs, opsets, dynamic, *kwargs in ZOO:
        if wanted and not any(w in name for w in wanted):
            continue
        try:
            export(name, factory, make_inputs, opsets, dynamic, out_root, *kwargs)
        except Exception as e:
            print(f"{name}: failed before export: {e}", flush=True)
            traceback.print_exc()


if __name__ == "__main__":
    main()
