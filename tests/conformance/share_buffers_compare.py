#!/usr/bin/env python3
"""Runs the ONNX backend test cases (the kinds run_conformance.py runs) in nee
with buffer sharing on and with NEE_SHARE_BUFFERS=0 (every planned value its
own bytes), each data set twice in one session, and reports every case whose
outputs differ in any bit between the two. Cases that fail to load or run in
both settings are skipped (run_conformance.py judges those); a case that runs
in one setting only is reported.

  PYTHONPATH=build/python .venv/bin/python tests/conformance/share_buffers_compare.py [--filter REGEX]
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_conformance import KINDS, as_value, case_model_and_data, load_cases  # noqa: E402


def _bits(value):
    """Comparable bytes of an output (tensor, sequence, map, optional)."""
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            return (value.shape, tuple(str(v) for v in value.ravel()))
        return (value.shape, str(value.dtype), value.tobytes())
    if isinstance(value, (list, tuple)):
        return tuple(_bits(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _bits(v)) for k, v in value.items()))
    return repr(value)


def _run(model, data_sets, share):
    import nee

    if share:
        os.environ.pop("NEE_SHARE_BUFFERS", None)
    else:
        os.environ["NEE_SHARE_BUFFERS"] = "0"
    try:
        sess = nee.InferenceSession(model.SerializeToString())
        init_names = {i.name for i in model.graph.initializer}
        feedable = [i.name for i in model.graph.input if i.name not in init_names]
        results = []
        for inputs, _ in data_sets:
            feed = {name: as_value(v) for name, v in zip(feedable, inputs)}
            for _ in range(2):  # the second run reuses the arena
                results.append(_bits(sess.run(None, feed)))
        return results
    finally:
        os.environ.pop("NEE_SHARE_BUFFERS", None)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--filter", default="")
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    cases = load_cases(KINDS)
    compared = differ = skipped = 0
    for key in sorted(cases):
        if args.filter and not re.search(args.filter, key):
            continue
        model, data_sets = case_model_and_data(cases[key])
        outcome = {}
        for share in (True, False):
            try:
                outcome[share] = _run(model, data_sets, share)
            except Exception as e:  # noqa: BLE001
                outcome[share] = f"error: {type(e).__name__}"
        on, off = outcome[True], outcome[False]
        if isinstance(on, str) and isinstance(off, str):
            skipped += 1
            continue
        compared += 1
        if on != off:
            differ += 1
            print(f"DIFFERS {key}: {on if isinstance(on, str) else ''} {off if isinstance(off, str) else ''}",
                  flush=True)
    print(f"{compared} cases compared, {differ} differ, {skipped} fail in both settings (skipped)")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
