"""nee.precision: how far a model drifts from a reference model (src/exec/precision.h, docs/precision.md),
and the per-layer plot that `python -m nee precision ... --plot OUT.png` draws."""
from __future__ import annotations

import json
import os
from typing import Any, Mapping, Optional, Sequence, Union

from . import _nee
from ._convert import _to_value

Inputs = Union[None, str, "os.PathLike[str]", Mapping[str, Any], Sequence[Mapping[str, Any]]]


def precision(model: Union[str, "os.PathLike[str]"], against: Union[None, str, "os.PathLike[str]"] = None,
              inputs: Inputs = None, *, variant: Optional[str] = None, random: int = 0,
              dims: Optional[Mapping[str, int]] = None, seed: int = 12345, threads: int = 0, layers: bool = True,
              max_top1_drop: Optional[float] = None, max_abs: Optional[float] = None, fp64: bool = False) -> dict:
    """Runs `model` and the reference model `against` on the same inputs and returns the comparison as a
    dict, the same content `nee precision --json` writes: "outputs" and (unless layers=False) "layers",
    each entry with max_abs, max_rel, ulp_max, ulp_median, cosine, rms and top1_agreement, and "gates".

    inputs: None (``random`` samples of random values, default 8; symbolic dims from ``dims``, else 1),
    a folder (input_<i>.pb/.npy or <name>.npy, or subfolders of them, one sample each), a dict
    {input name: array} (one sample) or a list of such dicts. max_top1_drop (percent) and max_abs are
    gates: a failed one is listed in result["gates"]["failures"] (passed False), not raised.
    variant="int8", "fp16", "bf16" or "int4" instead of `against`: `model` is the reference, compared with the variant
    nee.quantize (mode dynamic, fp16, bf16 or int4) makes of it, in memory. fp64=True: the reference computed in
    float64 where its ops allow double (its outputs rounded once to float32), so the errors are the model's
    distance from the exact answer rather than from another float32 run."""
    if (against is None) == (variant is None):
        raise ValueError("give either against (a reference model) or variant ('int8', 'fp16', 'bf16' or 'int4')")
    names: list = []
    values: list = []
    inputs_dir = ""
    if inputs is None:
        pass
    elif isinstance(inputs, (str, os.PathLike)):
        inputs_dir = os.fspath(inputs)
    else:
        samples = [inputs] if isinstance(inputs, Mapping) else list(inputs)
        if not samples:
            raise ValueError("inputs: no samples given")
        for s in samples:
            if not isinstance(s, Mapping):
                raise TypeError("inputs: expected a dict of {input name: array} per sample, got "
                                f"{type(s).__name__}")
        names = list(samples[0].keys())
        for i, s in enumerate(samples):
            if set(s.keys()) != set(names):
                raise ValueError(f"inputs: sample {i} names {sorted(s.keys())}, sample 0 {sorted(names)}")
            values.extend(_to_value(s[n]) for n in names)
    result = _nee.compare_precision(
        os.fspath(model), "" if against is None else os.fspath(against), inputs_dir, [str(n) for n in names], values, int(random),
        [(str(k), int(v)) for k, v in (dims or {}).items()], int(seed), int(threads), bool(layers),
        -1.0 if max_top1_drop is None else float(max_top1_drop), -1.0 if max_abs is None else float(max_abs),
        "" if variant is None else str(variant), bool(fp64))
    return json.loads(result)


def plot(report: Mapping[str, Any], path: str) -> bool:
    """Draws the report's per-layer max abs error and cosine similarity (the reference's topological order)
    to `path` with matplotlib. Returns False, drawing nothing, when matplotlib cannot be imported."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    rows = [r for r in report.get("layers", []) if "skipped" not in r]
    if not rows:  # no per-layer table: the outputs
        rows = [r for r in report.get("outputs", []) if "skipped" not in r]
    xs = list(range(len(rows)))
    fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(max(6.0, 0.25 * len(rows) + 2), 6))
    errors = [r["max_abs"] or 0.0 for r in rows]
    positive = [e for e in errors if e > 0]
    zero_at = min(positive) / 10 if positive else 1e-12  # exact agreement, drawn below the smallest error
    top.plot(xs, [e if e > 0 else zero_at for e in errors], marker="o")
    top.set_yscale("log")
    top.set_ylabel("max abs error (0 drawn at %.0e)" % zero_at)
    top.set_title(f"{os.path.basename(report['model'])} against {os.path.basename(report['reference'])}")
    bottom.plot(xs, [r["cosine"] if r["cosine"] is not None else float("nan") for r in rows], marker="o",
                color="tab:orange")
    bottom.set_ylabel("cosine similarity")
    bottom.set_xticks(xs)
    bottom.set_xticklabels([r["name"] for r in rows], rotation=90, fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True
