#!/usr/bin/env python3
"""Generates src/ops/attr_spec.inc: for every operator schema of the ONNX
domains nee implements, each since-version with its attributes (name,
AttributeProto type, required or not, and the spec's default value if it
declares one). The checker (src/check/checker.cc, via
src/ops/attr_spec.h) refuses nodes whose attributes do not match, as
onnx.checker and ONNX Runtime do. com.microsoft comes from onnxruntime's own
schemas (ONNX Runtime validates contrib nodes against them); nee's private
domain ai.nee is declared by hand in src/ops/attr_spec.cc. Run with the onnx
and onnxruntime packages:

    .venv/bin/python scripts/gen_attr_spec.py > src/ops/attr_spec.inc
"""
import re
import struct

import onnx
import onnxruntime
from onnx import checker, defs, helper
from onnxruntime.capi import onnxruntime_pybind11_state as ort

ONNX_DOMAINS = ("", "ai.onnx.ml", "ai.onnx.preview", "ai.onnx.preview.training")
TYPE_NAMES = {v: k for k, v in onnx.AttributeProto.AttributeType.items()}


def accepts_any_attribute(s):
    """Whether onnx.checker accepts attributes the schema does not declare (a
    schema built with AllowUncheckedAttributes, which Python does not expose):
    checks a node carrying an undeclared one and no other attribute."""
    node = helper.make_node(s.name, ["x"] * s.min_input, ["y"] * s.min_output, domain=s.domain,
                            nee_probe_undeclared=1)
    ctx = checker.C.CheckerContext()
    ctx.ir_version = onnx.IR_VERSION
    ctx.opset_imports = {"": defs.onnx_opset_version(), s.domain: s.since_version}
    try:
        checker.check_node(node, ctx)
        return True
    except checker.ValidationError as e:
        if "Unrecognized attribute" in str(e):
            return False
        if "Required attribute" in str(e):  # checked after every given attribute passed
            return True
        raise RuntimeError("probe of %s-%d failed otherwise: %s" % (s.name, s.since_version, e))


def float_text(f):
    """The shortest %g spelling that reads back (strtof) as the same float32."""
    want = struct.pack("<f", f)
    for digits in range(1, 10):
        text = "%.*g" % (digits, f)
        try:
            if struct.pack("<f", float(text)) == want:
                return text
        except OverflowError:  # rounded past FLT_MAX (3.4e38 spelt 3e38 is fine, 4e38 is not)
            pass
    raise RuntimeError("no float32 spelling of %r" % f)


WORD = re.compile(r"^[A-Za-z0-9_.+-]*$")


def string_text(b):
    s = b.decode()
    if not WORD.match(s):  # spaces, commas or '=' would need escaping: none in the specs today
        raise RuntimeError("default string %r needs escaping" % s)
    return s


def default_text(d):
    """'=value' for a declared default (an AttributeProto), '' for none. Lists are
    comma-separated; the types with defaults in the specs are the six below."""
    t = onnx.AttributeProto
    if d.type == t.UNDEFINED:
        return ""
    if d.type == t.INT:
        return "=%d" % d.i
    if d.type == t.FLOAT:
        return "=" + float_text(d.f)
    if d.type == t.STRING:
        return "=" + string_text(d.s)
    if d.type == t.INTS:
        return "=" + ",".join("%d" % v for v in d.ints)
    if d.type == t.FLOATS:
        return "=" + ",".join(float_text(v) for v in d.floats)
    if d.type == t.STRINGS:
        return "=" + ",".join(string_text(v) for v in d.strings)
    raise RuntimeError("default of type %s is not encoded" % TYPE_NAMES[d.type])


def default_of(a):
    """The attribute's default as an AttributeProto: onnx's OpSchema.Attribute has
    default_value; onnxruntime's binding exposes it serialized as _default_value."""
    if hasattr(a, "default_value"):
        return a.default_value
    d = onnx.AttributeProto()
    raw = getattr(a, "_default_value", b"")
    if raw:
        d.ParseFromString(raw)
    return d


def decl(name, a):
    d = default_of(a)
    if d.type not in (onnx.AttributeProto.UNDEFINED, int(a.type)):
        raise RuntimeError("default of %s has type %s, declared %s" % (name, TYPE_NAMES[d.type], TYPE_NAMES[int(a.type)]))
    return "%s:%s%s%s" % (name, TYPE_NAMES[int(a.type)], "!" if a.required else "", default_text(d))


def row(domain, name, since, attrs, open_):
    decls = " ".join(decl(n, a) for n, a in sorted(attrs.items()))
    return 'NEE_ATTR_SPEC("%s", "%s", %d, %d, "%s")' % (domain, name, since, 1 if open_ else 0, decls)


def main():
    rows = []
    for s in defs.get_all_schemas_with_history():
        if s.domain in ONNX_DOMAINS:
            open_ = False if s.deprecated else accepts_any_attribute(s)
            rows.append(((s.domain, s.name, s.since_version), row(s.domain, s.name, s.since_version,
                                                                  s.attributes, open_)))
    for s in ort.get_all_operator_schema():
        if s.domain == "com.microsoft":
            rows.append(((s.domain, s.name, s.since_version), row(s.domain, s.name, s.since_version,
                                                                  s.attributes, False)))
    print("// Generated by scripts/gen_attr_spec.py from onnx %s and onnxruntime %s. Do not edit." %
          (onnx.__version__, onnxruntime.__version__))
    print("// NEE_ATTR_SPEC(domain, op, since_version, accepts_undeclared, \"name:TYPE name:TYPE! name:TYPE=default ...\")")
    print("// TYPE is the AttributeProto type's name; '!' marks a required attribute; '=' the spec's default")
    print("// (lists comma-separated, an empty string after '=' for STRING); accepts_undeclared is 1 where")
    print("// onnx.checker lets undeclared attributes through (LayerNormalization-17).")
    for _, r in sorted(rows):
        print(r)


if __name__ == "__main__":
    main()
