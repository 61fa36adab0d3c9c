#!/usr/bin/python3
"""The torch half of the benchmark zoo: model definitions and ONNX export (opset 17).

Runs under the system interpreter, which has Debian's python3-torch and
python3-torchvision (CPU); bench/zoo.py calls it, one model per process:

  /usr/bin/python3 bench/zoo_torch.py NAME OUT_DIR

It writes OUT_DIR/NAME.onnx and OUT_DIR/NAME.npz (the fixed inputs, "in:<name>",
and torch's outputs for them, "out:<name>") and prints a JSON line describing
the model. Weights are random with a fixed seed; nothing is downloaded.
"""
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

OPSET = 17
SEED = 0


# ---------------------------------------------------------------- BERT-base

class BertLayer(nn.Module):
    """Post-LayerNorm encoder layer: self-attention, then a 4x MLP with erf GELU."""

    def __init__(self, hidden=768, heads=12, inner=3072, eps=1e-12):
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.query, self.key, self.value = (nn.Linear(hidden, hidden) for _ in range(3))
        self.attn_out = nn.Linear(hidden, hidden)
        self.attn_norm = nn.LayerNorm(hidden, eps=eps)
        self.inner = nn.Linear(hidden, inner)
        self.outer = nn.Linear(inner, hidden)
        self.out_norm = nn.LayerNorm(hidden, eps=eps)

    def split(self, x):
        b, t, _ = x.shape
        return x.view(b, t, self.heads, self.head_dim).transpose(1, 2)

    def forward(self, x, mask_bias):
        q, k, v = self.split(self.query(x)), self.split(self.key(x)), self.split(self.value(x))
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim) + mask_bias
        ctx = (scores.softmax(-1) @ v).transpose(1, 2).reshape(x.shape)
        x = self.attn_norm(x + self.attn_out(ctx))
        return self.out_norm(x + self.outer(F.gelu(self.inner(x))))


class Bert(nn.Module):
    """BERT-base encoder (12 layers, hidden 768, 12 heads) with the pooler."""

    def __init__(self, vocab=30522, hidden=768, layers=12, max_pos=512):
        super().__init__()
        self.word = nn.Embedding(vocab, hidden)
        self.position = nn.Embedding(max_pos, hidden)
        self.token_type = nn.Embedding(2, hidden)
        self.emb_norm = nn.LayerNorm(hidden, eps=1e-12)
        self.layers = nn.ModuleList(BertLayer(hidden) for _ in range(layers))
        self.pooler = nn.Linear(hidden, hidden)

    def forward(self, input_ids, attention_mask, token_type_ids):
        positions = torch.arange(input_ids.shape[1]).unsqueeze(0)
        x = self.word(input_ids) + self.position(positions) + self.token_type(token_type_ids)
        x = self.emb_norm(x)
        mask_bias = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * -10000.0
        for layer in self.layers:
            x = layer(x, mask_bias)
        return x, torch.tanh(self.pooler(x[:, 0]))


def bert_inputs(batch=1, seq=128, vocab=30522, padding=28):
    g = torch.Generator().manual_seed(SEED + 1)
    ids = torch.randint(0, vocab, (batch, seq), generator=g)
    mask = torch.ones(batch, seq, dtype=torch.int64)
    mask[:, seq - padding:] = 0  # the tail is padding, so the mask matters
    types = torch.zeros(batch, seq, dtype=torch.int64)
    types[:, seq // 2:] = 1
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


# ---------------------------------------------------------------- GPT-2 small

def gelu_new(x):
    """GPT-2's tanh approximation of GELU."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))))


class Gpt2Block(nn.Module):
    """Pre-LayerNorm decoder block with causal self-attention."""

    def __init__(self, hidden=768, heads=12, max_pos=1024):
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.ln_1 = nn.LayerNorm(hidden, eps=1e-5)
        self.c_attn = nn.Linear(hidden, 3 * hidden)
        self.c_proj = nn.Linear(hidden, hidden)
        self.ln_2 = nn.LayerNorm(hidden, eps=1e-5)
        self.c_fc = nn.Linear(hidden, 4 * hidden)
        self.mlp_proj = nn.Linear(4 * hidden, hidden)
        causal = torch.tril(torch.ones(max_pos, max_pos, dtype=torch.bool))
        self.register_buffer("causal", causal.view(1, 1, max_pos, max_pos), persistent=False)

    def attention(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, self.head_dim).transpose(1, 2) for z in (q, k, v))
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim)
        scores = scores.masked_fill(~self.causal[:, :, :t, :t], torch.finfo(scores.dtype).min)
        return self.c_proj((scores.softmax(-1) @ v).transpose(1, 2).reshape(b, t, c))

    def forward(self, x):
        x = x + self.attention(self.ln_1(x))
        return x + self.mlp_proj(gelu_new(self.c_fc(self.ln_2(x))))


class Gpt2(nn.Module):
    """GPT-2 small (12 layers, hidden 768, 12 heads); the LM head is the token embedding.
    (The exporter's constant folding stores the head's transposed copy as its own initializer,
    as exports of GPT-2 usually do: the .onnx is about 650 MB.)"""

    def __init__(self, vocab=50257, hidden=768, layers=12, max_pos=1024):
        super().__init__()
        self.wte = nn.Embedding(vocab, hidden)
        self.wpe = nn.Embedding(max_pos, hidden)
        self.blocks = nn.ModuleList(Gpt2Block(hidden, max_pos=max_pos) for _ in range(layers))
        self.ln_f = nn.LayerNorm(hidden, eps=1e-5)

    def forward(self, input_ids):
        positions = torch.arange(input_ids.shape[1]).unsqueeze(0)
        x = self.wte(input_ids) + self.wpe(positions)
        for block in self.blocks:
            x = block(x)
        return F.linear(self.ln_f(x), self.wte.weight)  # tied LM head


def transformer_init(model):
    """The BERT/GPT-2 initialisation: N(0, 0.02) weights, zero biases, unit LayerNorm."""
    for m in model.modules():
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)
        if isinstance(m, nn.Linear):
            nn.init.zeros_(m.bias)
    return model


# ---------------------------------------------------------------- YOLO-style detector

class ConvBnAct(nn.Sequential):
    def __init__(self, cin, cout, k=1, s=1, p=None):
        p = k // 2 if p is None else p
        super().__init__(nn.Conv2d(cin, cout, k, s, p, bias=False), nn.BatchNorm2d(cout), nn.SiLU())


class Bottleneck(nn.Module):
    def __init__(self, c, shortcut=True):
        super().__init__()
        self.a, self.b, self.shortcut = ConvBnAct(c, c, 1), ConvBnAct(c, c, 3), shortcut

    def forward(self, x):
        y = self.b(self.a(x))
        return x + y if self.shortcut else y


class C3(nn.Module):
    """CSP block: two 1x1 branches, one through n bottlenecks, concatenated and fused."""

    def __init__(self, cin, cout, n=1, shortcut=True):
        super().__init__()
        h = cout // 2
        self.a, self.b = ConvBnAct(cin, h), ConvBnAct(cin, h)
        self.m = nn.Sequential(*(Bottleneck(h, shortcut) for _ in range(n)))
        self.out = ConvBnAct(2 * h, cout)

    def forward(self, x):
        return self.out(torch.cat([self.m(self.a(x)), self.b(x)], 1))


class Sppf(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.a, self.out = ConvBnAct(c, c // 2), ConvBnAct(c * 2, c)
        self.pool = nn.MaxPool2d(5, 1, 2)

    def forward(self, x):
        x = self.a(x)
        y1 = self.pool(x)
        y2 = self.pool(y1)
        return self.out(torch.cat([x, y1, y2, self.pool(y2)], 1))


class Detector(nn.Module):
    """Single-stage, YOLOv5n-sized: CSP backbone, SPPF, FPN+PAN neck, 3 anchor heads
    (strides 8/16/32) decoded to [batch, boxes, 5 + classes] (xywh, objectness, classes)."""

    def __init__(self, classes=80, w=16):
        super().__init__()
        self.no = classes + 5
        self.stem = ConvBnAct(3, w, 6, 2, 2)
        self.s2 = nn.Sequential(ConvBnAct(w, 2 * w, 3, 2), C3(2 * w, 2 * w, 1))
        self.s3 = nn.Sequential(ConvBnAct(2 * w, 4 * w, 3, 2), C3(4 * w, 4 * w, 2))
        self.s4 = nn.Sequential(ConvBnAct(4 * w, 8 * w, 3, 2), C3(8 * w, 8 * w, 3))
        self.s5 = nn.Sequential(ConvBnAct(8 * w, 16 * w, 3, 2), C3(16 * w, 16 * w, 1), Sppf(16 * w))
        self.lat5, self.top4 = ConvBnAct(16 * w, 8 * w), C3(16 * w, 8 * w, 1, False)
        self.lat4, self.top3 = ConvBnAct(8 * w, 4 * w), C3(8 * w, 4 * w, 1, False)
        self.down3, self.bot4 = ConvBnAct(4 * w, 4 * w, 3, 2), C3(8 * w, 8 * w, 1, False)
        self.down4, self.bot5 = ConvBnAct(8 * w, 8 * w, 3, 2), C3(16 * w, 16 * w, 1, False)
        self.heads = nn.ModuleList(nn.Conv2d(c, 3 * self.no, 1) for c in (4 * w, 8 * w, 16 * w))
        anchors = torch.tensor([[10, 13, 16, 30, 33, 23], [30, 61, 62, 45, 59, 119],
                                [116, 90, 156, 198, 373, 326]], dtype=torch.float32)
        self.register_buffer("anchors", anchors.view(3, 1, 3, 1, 1, 2))

    def decode(self, i, p, stride):
        b, _, h, w = p.shape
        p = p.view(b, 3, self.no, h, w).permute(0, 1, 3, 4, 2).sigmoid()
        ys, xs = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
        grid = torch.stack((xs, ys), 2).view(1, 1, h, w, 2).float()
        xy = (p[..., :2] * 2 - 0.5 + grid) * stride
        wh = (p[..., 2:4] * 2) ** 2 * self.anchors[i]
        return torch.cat((xy, wh, p[..., 4:]), -1).view(b, -1, self.no)

    def forward(self, x):
        c3 = self.s3(self.s2(self.stem(x)))
        c4 = self.s4(c3)
        c5 = self.s5(c4)
        p5 = self.lat5(c5)
        p4 = self.lat4(self.top4(torch.cat([F.interpolate(p5, scale_factor=2.0), c4], 1)))
        n3 = self.top3(torch.cat([F.interpolate(p4, scale_factor=2.0), c3], 1))
        n4 = self.bot4(torch.cat([self.down3(n3), p4], 1))
        n5 = self.bot5(torch.cat([self.down4(n4), p5], 1))
        feats = (n3, n4, n5)
        return torch.cat([self.decode(i, h(f), 8 * 2 ** i) for i, (h, f) in enumerate(zip(self.heads, feats))], 1)


# ---------------------------------------------------------------- speech

class SpeechLstm(nn.Module):
    """CTC acoustic model (DeepSpeech2-like): 2 strided 1-D convs over 80-dim log-mel
    features (4x time subsampling), 3 bidirectional LSTM layers (hidden 320), a linear
    layer to 29 characters and log-softmax."""

    def __init__(self, feats=80, channels=256, hidden=320, layers=3, symbols=29):
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv1d(feats, channels, 5, 2, 2), nn.BatchNorm1d(channels), nn.Hardtanh(0, 20),
            nn.Conv1d(channels, channels, 5, 2, 2), nn.BatchNorm1d(channels), nn.Hardtanh(0, 20))
        self.rnn = nn.LSTM(channels, hidden, layers, batch_first=True, bidirectional=True)
        self.out = nn.Linear(2 * hidden, symbols)

    def forward(self, features):  # [batch, time, 80]
        x = self.conv(features.transpose(1, 2)).transpose(1, 2)
        x, _ = self.rnn(x)
        return self.out(x).log_softmax(-1)


# ---------------------------------------------------------------- calibration, export

def calibrate_batchnorm(model, make_input, batches=2):
    """Sets BatchNorm running statistics from random inputs, so activations stay in range
    with random weights (as they would after training)."""
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return
    for m in bns:
        m.reset_running_stats()
        m.momentum = None  # cumulative average over the calibration batches
    model.train()
    with torch.no_grad():
        for i in range(batches):
            model(make_input(SEED + 100 + i))
    model.eval()


def image_input(batch, size):
    def make(seed):
        return torch.randn(batch, 3, size, size, generator=torch.Generator().manual_seed(seed))
    return make


def torchvision_model(arch, batch, size=224):
    import torchvision

    def build():
        model = getattr(torchvision.models, arch)(weights=None)
        if arch.startswith("vit"):  # torchvision zero-initialises ViT's head: outputs would be all 0
            nn.init.normal_(model.heads.head.weight, std=0.02)
        return model
    return build, {"input": image_input(batch, size)(SEED)}, image_input(batch, size)


def speech_input(batch=1, frames=400):
    def make(seed):
        return torch.randn(batch, frames, 80, generator=torch.Generator().manual_seed(seed))
    return make


# Models exported as users often export them, with the batch axis left symbolic ("batch"): the
# optimizer then sees no fixed batch (the blocked layout, for one, must not need it).
DYNAMIC_BATCH = {"mobilenetv3_b1", "efficientnetb0_b1"}


# name: (constructor, inputs, calibration-input maker or None, output names, description)
def spec(name):
    if name.startswith(("resnet50", "mobilenetv2", "vit_b16", "mobilenetv3", "efficientnetb0")):
        base, batch = name.rsplit("_b", 1)
        arch = {"resnet50": "resnet50", "mobilenetv2": "mobilenet_v2", "vit_b16": "vit_b_16",
                "mobilenetv3": "mobilenet_v3_large", "efficientnetb0": "efficientnet_b0"}[base]
        build, inputs, calib = torchvision_model(arch, int(batch))
        dynamic = " (exported with a dynamic batch axis)" if name in DYNAMIC_BATCH else ""
        return build, inputs, calib, ["logits"], f"torchvision {arch}, batch {batch}, 3x224x224{dynamic}"
    if name.startswith("yolo"):
        batch = int(name.rsplit("_b", 1)[1])
        make = image_input(batch, 640)
        return Detector, {"images": make(SEED)}, make, ["detections"], \
            f"YOLOv5n-style detector (CSP backbone, SPPF, FPN+PAN, 3 heads), batch {batch}, 3x640x640"
    if name == "bert_base":
        return lambda: transformer_init(Bert()), bert_inputs(), None, ["last_hidden_state", "pooler_output"], \
            "BERT-base encoder + pooler, batch 1, sequence 128 (last 28 tokens masked)"
    if name == "gpt2":
        g = torch.Generator().manual_seed(SEED + 2)
        ids = {"input_ids": torch.randint(0, 50257, (1, 128), generator=g)}
        return lambda: transformer_init(Gpt2()), ids, None, ["logits"], \
            "GPT-2 small, batch 1, 128 tokens, full-sequence forward, causal mask, tied LM head"
    if name == "speech_lstm":
        make = speech_input()
        return SpeechLstm, {"features": make(SEED)}, make, ["log_probs"], \
            "conv + 3-layer BiLSTM CTC acoustic model, batch 1, 400 frames x 80 log-mel"
    raise SystemExit(f"zoo_torch.py: unknown model {name!r}")


def export(name, out_dir):
    build, inputs, calib, output_names, description = spec(name)
    torch.manual_seed(SEED)
    model = build()
    if calib is not None:
        calibrate_batchnorm(model, calib)
    model.eval()
    args = tuple(inputs.values())
    with torch.no_grad():
        outputs = model(*args)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    path = os.path.join(out_dir, name + ".onnx")
    start = time.perf_counter()
    # Grad stays enabled: under no_grad nn.MultiheadAttention (ViT) takes its fused fast path,
    # which has no ONNX export.
    dynamic_axes = {n: {0: "batch"} for n in list(inputs) + output_names} if name in DYNAMIC_BATCH else None
    torch.onnx.export(model, args, path, opset_version=OPSET, input_names=list(inputs),
                      output_names=output_names, do_constant_folding=True, dynamic_axes=dynamic_axes)
    arrays = {f"in:{k}": v.numpy() for k, v in inputs.items()}
    arrays.update({f"out:{k}": v.numpy() for k, v in zip(output_names, outputs)})
    np.savez(os.path.join(out_dir, name + ".npz"), **arrays)
    return {"name": name, "description": description, "framework": f"torch {torch.__version__}",
            "opset": OPSET, "seed": SEED, "export_s": round(time.perf_counter() - start, 2)}


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    print(json.dumps(export(argv[1], argv[2])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
