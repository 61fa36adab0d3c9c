#!/usr/bin/env python3
"""Generates src/ops/attr_spec.inc: for every operator schema of the ONNX
domains nee implements, each since-version's declaration: its attributes
(name, AttributeProto type, required or not, and the spec's default value if
it declares one), its formal inputs and outputs (name, type or type
constraint, single / optional / variadic) and its type constraints (each
letter's allowed types, as an index into a table of distinct type sets). The
checker (src/check/checker.cc and type_constraints.cc, via src/ops/attr_spec.h)
refuses nodes whose attributes or input types do not match, as onnx.checker
and ONNX Runtime do. com.microsoft comes from onnxruntime's own
schemas (ONNX Runtime validates contrib nodes against them), and so do the
two ONNX-domain ops onnxruntime declares at versions onnx lacks; nee's private
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
# The ONNX-domain ops onnxruntime declares in its contrib schemas that nee
# implements: LayerNormalization-1 and SimplifiedLayerNormalization-1, which its
# transformer optimizer writes. The others there (Affine, Crop, Scale, GRUUnit,
# ... experimental ops onnx dropped; Memcpy*, *_TRT plugins) nee does not run.
ORT_ONNX_DOMAIN_OPS = ("LayerNormalization", "SimplifiedLayerNormalization")
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


def ort_accepts_any_attribute(s):
    """The same question for an onnxruntime schema, which onnx.checker does not know: whether
    ONNX Runtime creates a session for a node carrying an undeclared attribute (its inputs float
    where allowed). Asked only of the ONNX-domain ops below: their schemas, like onnx's
    LayerNormalization-17, let undeclared attributes through."""

    def first_type(letter):
        for c in s.type_constraints:
            if c.type_param_str == letter:
                return "tensor(float)" if "tensor(float)" in c.allowed_type_strs else c.allowed_type_strs[0]
        return letter
    elem = {"tensor(float)": onnx.TensorProto.FLOAT, "tensor(double)": onnx.TensorProto.DOUBLE}
    ins = [helper.make_tensor_value_info("x%d" % i, elem[first_type(f.typeStr)], [2, 4])
           for i, f in enumerate(s.inputs[:s.min_input])]
    outs = [helper.make_tensor_value_info("y%d" % i, elem[first_type(f.typeStr)], None)
            for i, f in enumerate(s.outputs[:max(s.min_output, 1)])]
    node = helper.make_node(s.name, [i.name for i in ins], [o.name for o in outs], domain=s.domain,
                            nee_probe_undeclared=1)
    model = helper.make_model(helper.make_graph([node], "probe", ins, outs),
                              opset_imports=[helper.make_opsetid(s.domain, max(s.since_version, 13))])
    model.ir_version = 8
    so = onnxruntime.SessionOptions()
    so.log_severity_level = 4
    try:
        onnxruntime.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        return True
    except Exception as e:  # noqa: BLE001 - onnxruntime's error classes
        if "Unrecognized attribute" in str(e):
            return False
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


SCALARS = ("float", "double", "int64", "int32", "string", "bool")


def canonical_type(t):
    """A type string as nee's TypeInfo::ToString spells it (ONNX Runtime's): no spaces, and a map's
    value a full type ("map(int64, float)" in the spec is map(int64,tensor(float)))."""
    t = t.replace(" ", "")
    m = re.match(r"^(seq|optional|map)\((.*)\)$", t)
    if not m:
        return t
    kind, inner = m.groups()
    if kind != "map":
        return "%s(%s)" % (kind, canonical_type(inner))
    key, value = inner.split(",", 1)
    if value in SCALARS:
        value = "tensor(%s)" % value
    return "map(%s,%s)" % (key, canonical_type(value))


def short_type(t):
    """A type set's spelling of a type: a tensor's element type alone ("float" for tensor(float)),
    which keeps the table small; other types in full."""
    m = re.match(r"^tensor\((\w+)\)$", t)
    return m.group(1) if m else t


class TypeSets:
    """Distinct allowed-type lists, numbered in the order first seen (a list is the same set
    whatever its order; the first spelling is kept, so errors list types as the spec does)."""

    def __init__(self):
        self.ids = {}
        self.lists = []

    def id(self, types):
        types = [canonical_type(t) for t in types]
        key = frozenset(types)
        if key not in self.ids:
            self.ids[key] = len(self.lists)
            self.lists.append(types)
        return self.ids[key]


def option_text(option, homogeneous, min_arity):
    """'' single, '?' optional, '*N' variadic of one type (at least N values), '%N' variadic
    whose values may differ in type (heterogeneous)."""
    option = str(option).rsplit(".", 1)[-1]
    if option == "Single":
        return ""
    if option == "Optional":
        return "?"
    if option == "Variadic":
        return "%s%d" % ("*" if homogeneous else "%", min_arity)
    raise RuntimeError("formal parameter option %s" % option)


def formals_text(formals, onnx_api, least):
    """`least`: the schema's min_input (min_output). onnxruntime's binding has no min_arity: a variadic
    formal (always the last) needs what the schema's least count leaves after the formals before it."""
    words = []
    for i, f in enumerate(formals):
        if onnx_api:
            type_str, homogeneous, min_arity = f.type_str, f.is_homogeneous, f.min_arity
        else:  # onnxruntime's binding: camelCase
            type_str, homogeneous, min_arity = f.typeStr, f.isHomogeneous, least - i
        if not re.match(r"^[A-Za-z0-9_.]+$", f.name):
            raise RuntimeError("formal name %r needs escaping" % f.name)
        words.append("%s:%s%s" % (f.name, canonical_type(type_str), option_text(f.option, homogeneous, min_arity)))
    return " ".join(words)


def row(domain, name, since, attrs, open_, s, onnx_api, sets):
    decls = " ".join(decl(n, a) for n, a in sorted(attrs.items()))
    constraints = " ".join("%s=%d" % (c.type_param_str, sets.id(c.allowed_type_strs)) for c in s.type_constraints)
    return 'NEE_ATTR_SPEC("%s", "%s", %d, %d, "%s", "%s", "%s", "%s")' % (
        domain, name, since, 1 if open_ else 0, decls, formals_text(s.inputs, onnx_api, s.min_input),
        formals_text(s.outputs, onnx_api, s.min_output), constraints)


def main():
    rows = []
    schemas = [(s, True) for s in defs.get_all_schemas_with_history() if s.domain in ONNX_DOMAINS]
    # onnxruntime's contrib schemas also put a few ops in the ONNX domain, at
    # versions onnx does not define, and ONNX Runtime validates nodes against
    # them. Filtering on com.microsoft alone missed the two nee implements.
    onnx_versions = {(s.domain, s.name, s.since_version) for s, _ in schemas}
    schemas += [(s, False) for s in ort.get_all_operator_schema()
                if s.domain == "com.microsoft" or
                (s.domain == "" and s.name in ORT_ONNX_DOMAIN_OPS and
                 (s.domain, s.name, s.since_version) not in onnx_versions)]
    schemas.sort(key=lambda e: (e[0].domain, e[0].name, e[0].since_version))
    sets = TypeSets()  # numbered in row order, so regenerating changes only what changed
    for s, onnx_api in schemas:
        if onnx_api:
            open_ = accepts_any_attribute(s) if not s.deprecated else False
        else:
            open_ = ort_accepts_any_attribute(s) if s.domain == "" else False
        rows.append(row(s.domain, s.name, s.since_version, s.attributes, open_, s, onnx_api, sets))
    print("// Generated by scripts/gen_attr_spec.py from onnx %s and onnxruntime %s. Do not edit." %
          (onnx.__version__, onnxruntime.__version__))
    print("// NEE_TYPE_SET(id, \"type type ...\"): a distinct list of allowed types, as TypeInfo::ToString spells them,")
    print("// a tensor by its element type alone (\"float\" is tensor(float)).")
    print("// NEE_ATTR_SPEC(domain, op, since_version, accepts_undeclared, attributes, inputs, outputs, constraints)")
    print("// attributes: \"name:TYPE name:TYPE! name:TYPE=default ...\": TYPE is the AttributeProto type's name; '!'")
    print("// marks a required attribute; '=' the spec's default (lists comma-separated, an empty string after '='")
    print("// for STRING); accepts_undeclared is 1 where onnx.checker (ONNX Runtime for its own ONNX-domain")
    print("// schemas) lets undeclared attributes through (LayerNormalization-1 and -17, SimplifiedLayerNormalization-1).")
    print("// inputs, outputs: \"name:T name:T? name:T*N name:T%N ...\" in order: T is a constraint letter or a type;")
    print("// '?' optional, '*N' variadic of one type (at least N values), '%N' variadic of mixed types.")
    print("// constraints: \"T=id T1=id ...\": each letter's allowed types, a NEE_TYPE_SET's id.")
    for i, types in enumerate(sets.lists):
        print('NEE_TYPE_SET(%d, "%s")' % (i, " ".join(short_type(t) for t in types)))
    for r in rows:
        print(r)


if __name__ == "__main__":
    main()
