#!/usr/bin/env python3
"""Generates the reference tables for tests/unit/ir/float_formats_test.cc.

The expected values come from numpy, ml_dtypes and onnx.numpy_helper (the
ONNX reference implementation of Cast), never from nee. Run with the project
virtual environment:

    /work/main/.venv/bin/python tests/unit/ir/make_float_tables.py

Every file is raw little-endian data without padding:

decode_narrow.bin   float32 bits (uint32) of every code, decoded by ml_dtypes:
                    256 x float8e4m3fn, 256 x float8e4m3fnuz, 256 x float8e5m2,
                    256 x float8e5m2fnuz, 256 x float8e8m0fnu, 16 x float4e2m1fn.
half_to_float.bin   65536 x uint32: numpy float16 -> float32, every code.
bf16_to_float.bin   65536 x uint32: ml_dtypes bfloat16 -> float32, every code.
half_to_narrow.bin  every float16 code converted to narrow formats, one block of
                    65536 per conversion, in this order: 8 uint8 blocks
                    [e4m3fn, e4m3fnuz, e5m2, e5m2fnuz] x [saturate, no saturate],
                    1 uint8 block float4e2m1, then 65536 x uint16 bfloat16.
floats_to_narrow.bin  uint32 N, then N float32 inputs (bits) chosen to hit
                    ties, subnormals, overflow, NaN payloads and Inf plus random
                    bit patterns, followed by their conversions: N x uint16
                    float16 (numpy), N x uint16 bfloat16, 8 x N uint8 float8
                    (same order as above), N x uint8 float4e2m1, and 6 x N uint8
                    float8e8m0 for round_mode [up, down, nearest] x
                    [saturate, no saturate] (onnx.numpy_helper.to_float8e8m0).

number_strings.txt  one line per value: "<f16|f32|f64> <bits in hex> <numpy astype(str)>"
                    for random bit patterns and magnitudes of each type (and every
                    power of two of float16, where the shortest digits are subtle).

Saturating float8 conversions use onnx.numpy_helper.saturate_cast (clip, then
astype) exactly as ONNX's Cast reference and test data do; the non-saturating
ones are plain ml_dtypes astype.
"""
import os
import warnings

import ml_dtypes
import numpy as np
from onnx.numpy_helper import saturate_cast, to_float8e8m0

warnings.simplefilter("ignore")  # overflow/invalid warnings are the point here

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
F8_TYPES = [ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e4m3fnuz, ml_dtypes.float8_e5m2,
            ml_dtypes.float8_e5m2fnuz]


def bits(a):
    return np.ascontiguousarray(a).view(np.uint8 if a.dtype.itemsize == 1 else
                                        np.uint16 if a.dtype.itemsize == 2 else np.uint32)


def narrow_blocks(x):
    """Conversions of float array x (float16 or float32) to every narrow format."""
    blocks = []
    for t in F8_TYPES:
        blocks.append(bits(saturate_cast(x, t)))
        blocks.append(bits(x.astype(t)))
    blocks.append(bits(x.astype(ml_dtypes.float4_e2m1fn)))
    return blocks


def decode_tables():
    out = []
    codes = np.arange(256, dtype=np.uint8)
    for t in F8_TYPES + [ml_dtypes.float8_e8m0fnu]:
        out.append(codes.view(t).astype(np.float32).view(np.uint32))
    out.append(np.arange(16, dtype=np.uint8).view(ml_dtypes.float4_e2m1fn).astype(np.float32).view(np.uint32))
    return np.concatenate(out)


def interesting_floats(rng):
    """Float32 inputs: ties and near-ties of every narrow format, edges, random."""
    vals = []
    # Midpoints between neighbouring values of each format (exact ties), and
    # the float32 neighbours of each midpoint (just below / above a tie).
    formats = F8_TYPES + [ml_dtypes.float4_e2m1fn]
    for t in formats:
        n = 16 if t == ml_dtypes.float4_e2m1fn else 256
        v = np.arange(n, dtype=np.uint8).view(t).astype(np.float64)
        v = np.unique(v[np.isfinite(v)])
        mids = (v[:-1] + v[1:]) / 2
        vals += [v, mids]
        top = v.max()
        vals.append(np.array([top * 1.0625, top * 1.125, top * 1.25, top * 2, -top * 1.0625]))
    half = np.arange(65536, dtype=np.uint16).view(np.float16).astype(np.float64)
    half = np.unique(half[np.isfinite(half)])
    hmids = (half[:-1] + half[1:]) / 2
    vals.append(rng.choice(hmids, 1000, replace=False))
    bf = np.arange(65536, dtype=np.uint16).view(ml_dtypes.bfloat16).astype(np.float64)
    bf = np.unique(bf[np.isfinite(bf)])
    bmids = (bf[:-1] + bf[1:]) / 2
    vals.append(rng.choice(bmids, 1000, replace=False))
    x = np.concatenate(vals).astype(np.float32)
    near = np.concatenate([np.nextafter(x, np.float32(np.inf)), np.nextafter(x, np.float32(-np.inf))])
    edges = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 65504, 65519.996, 65520, 65536,
                      2.0 ** -24, 2.0 ** -25, 2.0 ** -25 * 1.0000001, 2.0 ** -14, 3.4028235e38,
                      1.17549435e-38, 1.4e-45, 2.0 ** -126, 2.0 ** -127, 1.5 * 2.0 ** 127],
                     dtype=np.float32)
    nan_payloads = np.array([0x7f800001, 0xff800001, 0x7fc00001, 0x7fbfffff, 0xffffffff, 0x7f802000,
                             0x7fa00000], dtype=np.uint32).view(np.float32)
    random_bits = rng.integers(0, 2 ** 32, 3000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    # Log-uniform magnitudes over the narrow formats' ranges.
    logs = (rng.uniform(-30, 20, 3000) * np.log(2)).astype(np.float64)
    signs = rng.choice([-1.0, 1.0], 3000)
    log_uniform = (signs * np.exp(logs)).astype(np.float32)
    all_vals = np.concatenate([x, near, edges, -edges, nan_payloads, random_bits, log_uniform])
    # Deduplicated by bit pattern (keeping the order stable).
    _, idx = np.unique(all_vals.view(np.uint32), return_index=True)
    return all_vals[np.sort(idx)]


def write_number_strings(rng):
    n = 800
    f32 = np.concatenate([rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32).view(np.float32),
                          (10.0 ** rng.uniform(-7, 9, n)).astype(np.float32) * rng.choice([-1, 1], n).astype(np.float32),
                          np.round(rng.uniform(0, 2e6, 200)).astype(np.float32)])
    f64 = np.concatenate([rng.integers(0, 2 ** 64, n, dtype=np.uint64).view(np.float64),
                          10.0 ** rng.uniform(-7, 18, n), np.round(rng.uniform(0, 2e16, 200))])
    halves = np.arange(65536, dtype=np.uint16)
    powers = halves[(halves & 0x3FF) == 0]
    f16 = np.concatenate([rng.choice(halves, n, replace=False), powers]).view(np.float16)
    lines = []
    for tag, arr, view in [("f16", f16, np.uint16), ("f32", f32, np.uint32), ("f64", f64, np.uint64)]:
        for bits_, text in zip(arr.view(view), arr.astype(np.str_)):
            lines.append(f"{tag} {int(bits_):x} {text}")
    with open(os.path.join(OUT, "number_strings.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    os.makedirs(OUT, exist_ok=True)
    decode_tables().astype("<u4").tofile(os.path.join(OUT, "decode_narrow.bin"))

    half = np.arange(65536, dtype=np.uint16).view(np.float16)
    half.astype(np.float32).view(np.uint32).astype("<u4").tofile(os.path.join(OUT, "half_to_float.bin"))
    bf = np.arange(65536, dtype=np.uint16).view(ml_dtypes.bfloat16)
    bf.astype(np.float32).view(np.uint32).astype("<u4").tofile(os.path.join(OUT, "bf16_to_float.bin"))

    with open(os.path.join(OUT, "half_to_narrow.bin"), "wb") as f:
        for block in narrow_blocks(half):
            f.write(block.astype("<u1").tobytes())
        f.write(bits(half.astype(ml_dtypes.bfloat16)).astype("<u2").tobytes())

    rng = np.random.default_rng(20261130)
    x = interesting_floats(rng)
    with open(os.path.join(OUT, "floats_to_narrow.bin"), "wb") as f:
        f.write(np.array([x.size], dtype="<u4").tobytes())
        f.write(x.view(np.uint32).astype("<u4").tobytes())
        f.write(bits(x.astype(np.float16)).astype("<u2").tobytes())
        f.write(bits(x.astype(ml_dtypes.bfloat16)).astype("<u2").tobytes())
        for block in narrow_blocks(x):
            f.write(block.astype("<u1").tobytes())
        for mode in ["up", "down", "nearest"]:
            for saturate in [True, False]:
                f.write(bits(to_float8e8m0(x, saturate, mode)).astype("<u1").tobytes())
    write_number_strings(np.random.default_rng(7))
    total = sum(os.path.getsize(os.path.join(OUT, n)) for n in os.listdir(OUT))
    print(f"{x.size} float inputs; {total} bytes in {OUT}")


if __name__ == "__main__":
    main()
