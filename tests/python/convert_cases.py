"""Opset conversion checked on the ONNX backend node tests (shared by test_convert.py and runnable on
its own for the coverage report):

    PYTHONPATH=build/python .venv/bin/python tests/python/convert_cases.py [--all] [--report docs/convert_coverage.md]

Each case's model is converted by nee (`nee.convert_opset`) to several target opsets; every converted model
must pass onnx.checker.check_model(full_check=True) and give the case's expected outputs (the oracle) in nee
and in ONNX Runtime (each where that runtime runs the original model). A conversion nee refuses must fail
cleanly: an InvalidArgument naming the node, the op and both versions.
"""
import os
import sys
import tempfile
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "conformance"))
sys.path.insert(0, os.path.join(HERE, ".."))

TARGETS = (7, 9, 10, 11, 12, 13, 17, 18, 21)

# Ops with an adapter (src/opt/opset_adapters.cc) or a version step of their own worth testing.
ADAPTED_OPS = {
    "BatchNormalization", "Clip", "Constant", "Dropout", "Gelu", "GridSample", "GroupNormalization", "Hardmax",
    "LayerNormalization", "LogSoftmax", "Max", "Mean", "Min", "Pad", "ReduceL1", "ReduceL2", "ReduceLogSum",
    "ReduceLogSumExp", "ReduceMax", "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSum", "ReduceSumSquare",
    "Reshape", "Resize", "Scatter", "ScatterElements", "Slice", "Softmax", "Split", "Squeeze", "Sum", "TopK",
    "Unsqueeze", "Upsample", "ArgMax", "Concat", "Flatten", "Gather", "Cast", "Shape",
}


def load_cases():
    warnings.filterwarnings("ignore")
    from onnx.backend.test.loader import load_model_tests
    return {c.name: c for c in load_model_tests(kind="node")}


# Failures that are not the converter's: onnx.checker rejects MeanVarianceNormalization at opsets 17+ even in a
# model built natively at that opset (its function body's Constant), and nee's inference with the fed value's
# concrete type sees a present optional as a plain tensor, which OptionalGetElement before 18 refuses.
KNOWN = {
    "MeanVarianceNormalization": "onnx.checker: ",
    "OptionalGetElement": "nee: ",
}


def known_issue(model, problem):
    ops = {n.op_type for n in model.graph.node}
    return any(op in ops and problem.startswith(prefix) for op, prefix in KNOWN.items())


def default_opset(model):
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx"):
            return o.version
    return -1


def main_ops(model):
    return {n.op_type for n in model.graph.node if n.domain in ("", "ai.onnx")}


def _feeds(case, model):
    from run_conformance import as_value
    init = {i.name for i in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in init]
    for inputs, expected in case.data_sets:
        yield {n: as_value(v) for n, v in zip(names, inputs)}, [as_value(e) for e in expected]


def _run_nee(path, case, model):
    import nee
    sess = nee.InferenceSession(path)
    for feed, expected in _feeds(case, model):
        outs = sess.run(None, feed)
        yield outs, expected


def _run_ort(path, case, model):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.log_severity_level = 4
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    for feed, expected in _feeds(case, model):
        yield sess.run(None, feed), expected


def _agrees(runner, path, case, model):
    """None when the outputs match the oracle, else the reason."""
    from run_conformance import compare
    try:
        for outs, expected in runner(path, case, model):
            if len(outs) != len(expected):
                return f"{len(outs)} outputs, expected {len(expected)}"
            for i, (e, a) in enumerate(zip(expected, outs)):
                compare(e, a, max(case.rtol, 1e-4), max(case.atol, 1e-5), f"output {i}")
        return None
    except Exception as e:  # noqa: BLE001 - the reason is the result
        return f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"


class Outcome:
    def __init__(self, name, source, target):
        self.name, self.source, self.target = name, source, target
        self.status = ""  # converted | refused | failed
        self.reason = ""

    def __repr__(self):
        return f"{self.name} {self.source}->{self.target}: {self.status} {self.reason}"


_baseline = {}


def baseline(case, path):
    """Whether nee and ONNX Runtime run the original model to the oracle."""
    if case.name not in _baseline:
        _baseline[case.name] = (_agrees(_run_nee, path, case, case.model) is None,
                                _agrees(_run_ort, path, case, case.model) is None)
    return _baseline[case.name]


def convert_case(case, target, workdir):
    """Converts one case to `target` and checks it. Returns an Outcome."""
    import nee
    import onnx
    source = default_opset(case.model)
    out = Outcome(case.name, source, target)
    src = os.path.join(workdir, case.name + ".onnx")
    if not os.path.exists(src):
        onnx.save(case.model, src)
    nee_ok, ort_ok = baseline(case, src)
    dst = os.path.join(workdir, f"{case.name}_{target}.onnx")
    try:
        nee.convert_opset(src, dst, target)
    except nee.InvalidArgument as e:
        msg = str(e)
        clean = ("cannot convert" in msg or "does not exist" in msg or "is outside" in msg
                 or "converts from opset" in msg)
        out.status, out.reason = ("refused", msg) if clean and not os.path.exists(dst) else ("failed", "unclean: " + msg)
        return out
    except Exception as e:  # noqa: BLE001
        out.status, out.reason = "failed", f"{type(e).__name__}: {e}"
        return out
    converted = onnx.load(dst)
    problems = []
    if default_opset(converted) != target:
        problems.append(f"opset import is {default_opset(converted)}")
    try:
        onnx.checker.check_model(converted, full_check=True)
    except Exception as e:  # noqa: BLE001
        problems.append("onnx.checker: " + str(e).splitlines()[0][:200])
    if nee_ok:
        why = _agrees(_run_nee, dst, case, converted)
        if why:
            problems.append("nee: " + why)
    # ONNX Runtime's Dropout before 12 returns an all-false mask at inference (the spec leaves it open there;
    # nee and Dropout-12 give all-true): its mask is not compared.
    old_dropout_mask = target < 12 and any(n.op_type == "Dropout" and len(n.output) > 1 and n.output[1]
                                           for n in converted.graph.node)
    if ort_ok and not old_dropout_mask:
        why = _agrees(_run_ort, dst, case, converted)
        # ONNX Runtime lacks some kernels of older versions (e.g. Max-6 for double): not the converter's doing.
        if why and "Could not find an implementation" not in why:
            problems.append("onnxruntime: " + why)
    problems = [p for p in problems if not known_issue(converted, p)]
    out.status = "failed" if problems else "converted"
    out.reason = "; ".join(problems)
    return out


def selected(cases, all_cases=False):
    chosen = []
    for name in sorted(cases):
        c = cases[name]
        if default_opset(c.model) < 7:
            continue
        if all_cases or main_ops(c.model) & ADAPTED_OPS:
            chosen.append(c)
    return chosen


def run(cases, targets=TARGETS, progress=False):
    outcomes = []
    with tempfile.TemporaryDirectory() as d:
        for i, c in enumerate(cases):
            for t in targets:
                if t == default_opset(c.model):
                    continue
                outcomes.append(convert_case(c, t, d))
            if progress and i % 100 == 0:
                print(f"{i}/{len(cases)}", file=sys.stderr, flush=True)
    return outcomes


def summary(cases, outcomes):
    by_case = {}
    for o in outcomes:
        by_case.setdefault(o.name, []).append(o)
    up_ok = down_ok = both = can_up = can_down = can_both = 0
    for name, os_ in by_case.items():
        up = any(o.status == "converted" and o.target > o.source for o in os_)
        down = any(o.status == "converted" and o.target < o.source for o in os_)
        has_up = any(o.target > o.source for o in os_)
        has_down = any(o.target < o.source for o in os_)
        up_ok += up
        down_ok += down
        both += up and down
        can_up += has_up
        can_down += has_down
        can_both += has_up and has_down
    failed = [o for o in outcomes if o.status == "failed"]
    converted = sum(o.status == "converted" for o in outcomes)
    refused = sum(o.status == "refused" for o in outcomes)
    return {"cases": len(cases), "conversions": len(outcomes), "converted": converted, "refused": refused,
            "failed": len(failed), "cases_with_an_upgrade_target": can_up, "cases_up": up_ok,
            "cases_with_a_downgrade_target": can_down, "cases_down": down_ok,
            "cases_with_both": can_both, "cases_both": both}, failed


def main():
    import argparse
    p = argparse.ArgumentParser()
    p.add_argument("--all", action="store_true", help="every node test, not only those of adapted ops")
    p.add_argument("--report", help="write a markdown report here")
    p.add_argument("--only", help="substring of case names")
    args = p.parse_args()
    cases = selected(load_cases(), args.all)
    if args.only:
        cases = [c for c in cases if args.only in c.name]
    outcomes = run(cases, progress=True)
    s, failed = summary(cases, outcomes)
    print(s)
    for o in failed:
        print(o)
    if args.report:
        with open(args.report, "w") as f:
            f.write("# Opset conversion coverage (generated by tests/python/convert_cases.py --all)\n\n")
            f.write(f"ONNX node tests with a default-domain opset >= 7, each converted by nee to opsets "
                    f"{', '.join(map(str, TARGETS))} (all but its own), then checked with "
                    f"`onnx.checker.check_model(full_check=True)` and run through nee and ONNX Runtime against the "
                    f"test's expected outputs (each runtime where it runs the original).\n\n")
            f.write("| | count |\n|---|---|\n")
            for k, v in s.items():
                f.write(f"| {k} | {v} |\n")
            f.write("\n`converted`: the conversion succeeded and every check passed; `refused`: nee declined "
                    "with an error naming the node, op and versions (the target lacks the op or the spec has no "
                    "equivalent); `failed`: anything else. `cases_up` / `cases_down`: cases converted and agreeing at one "
                    "target above / below their own opset at least (cases at opset 21 and above have no upgrade "
                    "target here); `cases_both`: both.\n\nNot counted against the converter (`KNOWN` in the "
                    "script): onnx.checker rejecting MeanVarianceNormalization at opsets 17+ even when built "
                    "natively, nee refusing a plain tensor fed to OptionalGetElement's optional input before "
                    "opset 18, ONNX Runtime lacking an older kernel (e.g. Max-6 for double) and its all-false "
                    "Dropout mask before opset 12.\n")
            if failed:
                f.write("\n## Failures\n\n")
                for o in failed:
                    f.write(f"- `{o.name}` {o.source} -> {o.target}: {o.reason}\n")


if __name__ == "__main__":
    main()
