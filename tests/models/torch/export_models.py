#!/usr/bin/env python3
"""Exports small PyTorch models to ONNX with PyTorch's own outputs as references.

Run with Debian's python3-torch (1.13, CPU):  /usr/bin/python3 tests/models/torch/export_models.py
Writes <name>/model.onnx, <name>/input_<i>.npy and <name>/expected_<i>.npy for each
model. The tests (test_torch_models.py) run them through nee without torch installed.
Weights are random (seeded): nothing is downloaded.
"""
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
torch.manual_seed(0)
np.random.seed(0)


class SmallCnn(nn.Module):
    """Conv/BatchNorm/ReLU/MaxPool/residual/AdaptiveAvgPool/Linear: a miniature ResNet."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        self.pool = nn.MaxPool2d(2)
        self.block = nn.Sequential(nn.Conv2d(16, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                                   nn.Conv2d(16, 16, 3, padding=1), nn.BatchNorm2d(16))
        self.down = nn.Conv2d(16, 32, 3, stride=2, padding=1)
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        x = self.pool(self.stem(x))
        x = F.relu(x + self.block(x))
        x = F.relu(self.down(x))
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return F.softmax(self.head(x), dim=1)


class Recurrent(nn.Module):
    """Embedding -> 2-layer bidirectional LSTM -> GRU -> Linear over the last step."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(50, 16)
        self.lstm = nn.LSTM(16, 24, num_layers=2, batch_first=True, bidirectional=True)
        self.gru = nn.GRU(48, 20, batch_first=True)
        self.out = nn.Linear(20, 5)

    def forward(self, tokens):
        h, _ = self.lstm(self.embed(tokens))
        h, _ = self.gru(h)
        return self.out(h[:, -1])


class TinyTransformer(nn.Module):
    """Token + position embeddings, two encoder layers (attention, LayerNorm, GELU), mean pooling."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(100, 32)
        self.pos = nn.Parameter(torch.randn(1, 16, 32) * 0.1)
        layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, activation="gelu", batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2)
        self.norm = nn.LayerNorm(32)
        self.cls = nn.Linear(32, 3)

    def forward(self, tokens):
        x = self.embed(tokens) + self.pos[:, : tokens.shape[1]]
        x = self.norm(self.encoder(x))
        return self.cls(x.mean(dim=1))


class ControlFlow(nn.Module):
    """Data-dependent loop and branch (exported as ONNX Loop and If via scripting)."""

    def forward(self, x, steps):
        y = x
        for i in range(int(steps)):
            if bool(y.sum() > 0):
                y = y * 0.5 - 1.0
            else:
                y = torch.tanh(y) + float(i)
        return y


def export(name, model, inputs, opset, input_names, output_names, dynamic_axes=None):
    folder = os.path.join(HERE, name)
    os.makedirs(folder, exist_ok=True)
    if not isinstance(model, torch.jit.ScriptModule):
        model.eval()
    with torch.no_grad():
        expected = model(*inputs)
    if isinstance(expected, torch.Tensor):
        expected = (expected,)
    torch.onnx.export(model, inputs, os.path.join(folder, "model.onnx"), opset_version=opset,
                      input_names=input_names, output_names=output_names, dynamic_axes=dynamic_axes,
                      do_constant_folding=True)
    for i, t in enumerate(inputs):
        np.save(os.path.join(folder, f"input_{i}.npy"), t.numpy())
    for i, t in enumerate(expected):
        np.save(os.path.join(folder, f"expected_{i}.npy"), t.numpy())
    print(f"{name}: opset {opset}, {os.path.getsize(os.path.join(folder, 'model.onnx'))} bytes")


def main():
    image = torch.randn(2, 3, 32, 32)
    cnn = SmallCnn()
    # Non-trivial BatchNorm statistics, as a trained model would have.
    for m in cnn.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
    for opset in (11, 13, 17):
        export(f"cnn_opset{opset}", cnn, (image,), opset, ["image"], ["probs"], {"image": {0: "batch"}})

    tokens = torch.randint(0, 50, (3, 7))
    rnn = Recurrent()
    for opset in (11, 14):
        export(f"rnn_opset{opset}", rnn, (tokens,), opset, ["tokens"], ["logits"])

    words = torch.randint(0, 100, (2, 16))
    transformer = TinyTransformer()
    for opset in (13, 17):
        export(f"transformer_opset{opset}", transformer, (words,), opset, ["tokens"], ["logits"],
               {"tokens": {0: "batch"}})

    x = torch.randn(4, 3)
    export("control_flow_opset13", torch.jit.script(ControlFlow()), (x, torch.tensor(5)), 13, ["x", "steps"], ["y"])

    try:
        import torchvision

        net = torchvision.models.mobilenet_v3_small(num_classes=20)
        export("mobilenet_v3_small_opset13", net, (torch.randn(1, 3, 64, 64),), 13, ["image"], ["logits"])
    except Exception as exc:  # torchvision missing: the other models still stand
        print("skipping mobilenet_v3_small:", exc, file=sys.stderr)


if __name__ == "__main__":
    main()
