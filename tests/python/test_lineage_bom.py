"""`nee meta` (list, edit, --verify), the lineage records nee optimize and nee meta append, `nee inspect`'s
chain, and `nee bom` (CycloneDX 1.6 ML-BOM). The oracles: the `onnx` package reads what nee wrote, hashlib
hashes files and weights (as docs/lineage.md defines the weights digest, computed here from onnx's
TensorProtos), ONNX Runtime runs the edited models, and the official CycloneDX 1.6 JSON schema shipped by
cyclonedx-python-lib validates the BOMs, its $refs (spdx, jsf) resolved from the package's own files."""
import datetime
import hashlib
import json
import os
import re
import struct
from pathlib import Path

import jsonschema
import numpy as np
import onnx
import onnxruntime as ort
import pytest
import referencing
import referencing.jsonschema
from onnx import TensorProto, helper, numpy_helper

from cli_util import nee_cli

ROOT = Path(__file__).resolve().parents[2]
LINEAGE_KEY = re.compile(r"^nee\.lineage\.(\d+)$")


def sha256_file(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def weights_sha256(model):
    """The nee-weights-sha256-v1 digest of docs/lineage.md, computed from onnx's TensorProtos."""
    h = hashlib.sha256()
    for t in model.graph.initializer:
        name = t.name.encode()
        h.update(struct.pack("<Q", len(name)) + name)
        h.update(struct.pack("<QQ", t.data_type, len(t.dims)))
        h.update(b"".join(struct.pack("<q", d) for d in t.dims))
        if t.data_type == TensorProto.STRING:
            data = b"".join(struct.pack("<Q", len(s)) + s for s in t.string_data)
        else:
            data = t.raw_data if t.HasField("raw_data") else numpy_helper.to_array(t).tobytes()
        h.update(struct.pack("<Q", len(data)) + data)
    return h.hexdigest()


def metadata(model):
    return {p.key: p.value for p in model.metadata_props}


def lineage(model):
    """The records as (N, parsed JSON), oldest first."""
    records = [(int(m.group(1)), json.loads(p.value)) for p in model.metadata_props
               if (m := LINEAGE_KEY.match(p.key))]
    return sorted(records, key=lambda r: r[0])


def conv_bn_model(tmp_path, name="convbn.onnx", external=False):
    """Conv + BatchNormalization (nee optimize folds the BN into the conv weights) with custom metadata."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((16, 3, 3, 3)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal(16).astype(np.float32), "b")]
    for n, v in (("scale", 1 + 0.1 * rng.standard_normal(16)), ("bias", rng.standard_normal(16)),
                 ("mean", rng.standard_normal(16)), ("var", 1 + rng.random(16))):
        inits.append(numpy_helper.from_array(v.astype(np.float32), n))
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
         helper.make_node("BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["y"], name="bn")],
        "convbn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 16, 8, 8])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)], producer_name="lineage-test",
                              producer_version="1.0")
    model.ir_version = 8
    model.doc_string = "a conv and a batch norm"
    model.metadata_props.add(key="training_data", value="dataset:synthetic-v1")
    model.metadata_props.add(key="purpose", value="testing")
    path = tmp_path / name
    if external:
        onnx.save(model, path, save_as_external_data=True, all_tensors_to_one_file=True,
                  location=name + ".weights", size_threshold=0)
    else:
        onnx.save(model, path)
    return path


def run_ort(path, x):
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


# --- nee meta: listing -----------------------------------------------------------------------------------

def test_meta_lists_the_fields_of_a_model_from_tests_models():
    path = ROOT / "tests" / "models" / "sklearn" / "logreg_binary" / "model.onnx"
    model = onnx.load(path)
    r = nee_cli("meta", path)
    assert r.returncode == 0, r.stderr
    fields = dict(line.split(":", 1) for line in r.stdout.splitlines() if not line.startswith(" ") and ":" in line)
    fields = {k.strip(): v.strip() for k, v in fields.items()}
    assert fields["producer name"] == model.producer_name == "skl2onnx"
    assert fields["producer version"] == model.producer_version
    assert fields["domain"] == model.domain
    assert fields["model version"] == str(model.model_version)
    assert fields["ir version"] == str(model.ir_version)
    expected_opsets = {(o.domain or "ai.onnx", o.version) for o in model.opset_import}
    listed = {(d, int(v)) for d, v in (item.split() for item in fields["opsets"].split(","))}
    assert listed == expected_opsets


def test_meta_lists_custom_metadata(tmp_path):
    path = conv_bn_model(tmp_path)
    r = nee_cli("meta", path)
    assert r.returncode == 0, r.stderr
    assert "  training_data = dataset:synthetic-v1\n" in r.stdout and "  purpose = testing\n" in r.stdout
    assert "doc string:       a conv and a batch norm" in r.stdout
    assert "lineage (oldest first)" not in r.stdout  # a model nee never wrote has no chain


# --- nee meta: editing ------------------------------------------------------------------------------------

def test_meta_set_delete_round_trip_read_back_by_onnx(tmp_path):
    src = conv_bn_model(tmp_path)
    out = tmp_path / "edited.onnx"
    r = nee_cli("meta", src, "--set", "purpose=production", "--set", "owner=team a=b", "--delete", "training_data",
                "--producer-name", "edited", "--model-version", "7", "--doc-string", "new doc", "-o", out)
    assert r.returncode == 0, r.stderr
    before, after = onnx.load(src), onnx.load(out)
    onnx.checker.check_model(after)
    props = metadata(after)
    assert props["purpose"] == "production" and props["owner"] == "team a=b" and "training_data" not in props
    assert [k for k in props if not LINEAGE_KEY.match(k)] == ["purpose", "owner"]  # replaced in place, appended
    assert (after.producer_name, after.producer_version, after.model_version, after.doc_string) == (
        "edited", "1.0", 7, "new doc")
    assert after.ir_version == before.ir_version and list(after.opset_import) == list(before.opset_import)
    # The weights are carried byte for byte.
    assert [t.name for t in after.graph.initializer] == [t.name for t in before.graph.initializer]
    for a, b in zip(after.graph.initializer, before.graph.initializer):
        assert numpy_helper.to_array(a).tobytes() == numpy_helper.to_array(b).tobytes()
    x = np.random.default_rng(1).standard_normal((2, 3, 8, 8)).astype(np.float32)
    np.testing.assert_array_equal(run_ort(out, x), run_ort(src, x))
    # One lineage record describing the edit.
    [(n, record)] = lineage(after)
    assert n == 1 and record["tool"] == "nee" and record["action"] == "meta"
    assert record["parameters"] == {"fields": {"producer_name": "edited", "model_version": 7, "doc_string": "new doc"},
                                    "set": {"purpose": "production", "owner": "team a=b"},
                                    "delete": ["training_data"]}
    assert record["input"] == {"file": "convbn.onnx", "sha256": sha256_file(src), "weights_sha256": weights_sha256(before)}
    assert record["output"]["weights_sha256"] == weights_sha256(after) == weights_sha256(before)
    assert datetime.datetime.strptime(record["time"], "%Y-%m-%dT%H:%M:%SZ")


def test_meta_edit_keeps_external_data_external(tmp_path):
    src = conv_bn_model(tmp_path, "ext.onnx", external=True)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "ext_edited.onnx"
    r = nee_cli("meta", src, "--set", "stage=edited", "-o", out)
    assert r.returncode == 0, r.stderr
    raw = onnx.load(out, load_external_data=False)
    locations = {e.value for t in raw.graph.initializer for e in t.external_data if e.key == "location"}
    assert locations == {"ext_edited.onnx.data"}  # the 1728-byte conv weight; the 64-byte ones went inline
    assert (out_dir / "ext_edited.onnx.data").exists()
    before, after = onnx.load(src), onnx.load(out)
    for a, b in zip(after.graph.initializer, before.graph.initializer):
        assert a.name == b.name and numpy_helper.to_array(a).tobytes() == numpy_helper.to_array(b).tobytes()
    assert lineage(after)[0][1]["output"]["weights_sha256"] == weights_sha256(before)
    x = np.random.default_rng(2).standard_normal((1, 3, 8, 8)).astype(np.float32)
    np.testing.assert_array_equal(run_ort(out, x), run_ort(src, x))
    v = nee_cli("meta", out, "--verify")
    assert v.returncode == 0 and "nee.lineage.1: ok" in v.stdout, v.stdout + v.stderr


def test_meta_refuses_bad_edits_without_crashing(tmp_path):
    src = conv_bn_model(tmp_path)
    out = tmp_path / "out.onnx"
    r = nee_cli("meta", src, "--delete", "no_such_key", "-o", out)
    assert r.returncode == 1 and "no_such_key" in r.stderr and not out.exists()
    for args in (["--set", "nee.lineage.1=x", "-o", out], ["--delete", "nee.lineage.1", "-o", out],
                 ["--set", "novalue", "-o", out], ["--set", "k=v"], ["-o", out], ["--verify", "--set", "k=v", "-o", out],
                 ["--model-version", "x", "-o", out], ["--bogus"]):
        r = nee_cli("meta", src, *args)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert "usage:" in r.stderr
    assert not out.exists()
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"\x0a\xff\xff\xff\xff\x0f not a model")
    for cmd in (["meta", garbage], ["meta", garbage, "--verify"], ["bom", garbage], ["meta", tmp_path / "missing.onnx"]):
        r = nee_cli(*cmd)
        assert r.returncode == 1 and "error" in r.stderr, (cmd, r.stderr)


# --- lineage: optimize + meta, verify, tampering -----------------------------------------------------------

def make_chain(tmp_path):
    """convbn.onnx -> nee optimize -> optimized.onnx -> nee meta -> released.onnx."""
    src = conv_bn_model(tmp_path)
    optimized, released = tmp_path / "optimized.onnx", tmp_path / "released.onnx"
    r = nee_cli("optimize", src, "-o", optimized, "--opt-level", "2")
    assert r.returncode == 0, r.stderr
    r = nee_cli("meta", optimized, "--set", "release=v1", "-o", released)
    assert r.returncode == 0, r.stderr
    return src, optimized, released


def test_optimize_and_meta_append_verifiable_lineage(tmp_path):
    src, optimized, released = make_chain(tmp_path)
    m_src, m_opt, m_rel = onnx.load(src), onnx.load(optimized), onnx.load(released)
    assert [n for n, _ in lineage(m_opt)] == [1]
    records = lineage(m_rel)
    assert [n for n, _ in records] == [1, 2]
    (_, opt), (_, meta) = records
    assert opt == lineage(m_opt)[0][1]  # the earlier record is carried unchanged
    assert opt["action"] == "optimize" and opt["parameters"] == {"opt_level": 2}
    assert opt["input"] == {"file": "convbn.onnx", "sha256": sha256_file(src), "weights_sha256": weights_sha256(m_src)}
    assert opt["output"]["weights_sha256"] == weights_sha256(m_opt) != weights_sha256(m_src)  # BN folded in
    assert opt["weights_digest"] == "nee-weights-sha256-v1"
    assert meta["action"] == "meta" and meta["parameters"] == {"set": {"release": "v1"}}
    assert meta["input"] == {"file": "optimized.onnx", "sha256": sha256_file(optimized),
                             "weights_sha256": weights_sha256(m_opt)}
    assert meta["output"]["weights_sha256"] == weights_sha256(m_rel) == weights_sha256(m_opt)
    r = nee_cli("meta", released, "--verify")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "nee.lineage.1: ok" in r.stdout and "nee.lineage.2: ok" in r.stdout and "2 records, 0 mismatched" in r.stdout


def test_inspect_and_meta_show_the_chain(tmp_path):
    src, _, released = make_chain(tmp_path)
    for cmd in ("inspect", "meta"):
        r = nee_cli(cmd, released)
        assert r.returncode == 0, r.stderr
        out = r.stdout
        assert "lineage (oldest first):" in out
        assert out.index("nee.lineage.1: optimize (opt_level=2) by nee") < out.index("nee.lineage.2: meta (set=")
        assert sha256_file(src) in out
        assert "{\"tool\"" not in out  # the chain, not the raw JSON
        assert "release = v1" in out


def test_verify_detects_a_tampered_weight(tmp_path):
    _, _, released = make_chain(tmp_path)
    model = onnx.load(released)
    w = model.graph.initializer[0]
    values = numpy_helper.to_array(w).copy()
    values.flat[0] += 1.0
    w.CopyFrom(numpy_helper.from_array(values, w.name))
    tampered = tmp_path / "tampered.onnx"
    onnx.save(model, tampered)
    r = nee_cli("meta", tampered, "--verify")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "nee.lineage.1: ok" in r.stdout
    assert "nee.lineage.2: mismatch" in r.stdout and weights_sha256(model) in r.stdout


def test_verify_detects_weights_changed_between_two_nee_steps(tmp_path):
    src = conv_bn_model(tmp_path)
    optimized = tmp_path / "optimized.onnx"
    assert nee_cli("optimize", src, "-o", optimized).returncode == 0
    model = onnx.load(optimized)
    model.graph.initializer[-1].raw_data = bytes(len(model.graph.initializer[-1].raw_data))  # zeroed outside nee
    changed, released = tmp_path / "changed.onnx", tmp_path / "released.onnx"
    onnx.save(model, changed)
    assert nee_cli("meta", changed, "--set", "k=v", "-o", released).returncode == 0
    r = nee_cli("meta", released, "--verify")
    assert r.returncode == 1
    assert "nee.lineage.1: mismatch" in r.stdout and "nee.lineage.2: ok" in r.stdout, r.stdout


def test_unreadable_lineage_record_is_reported_not_fatal(tmp_path):
    src = conv_bn_model(tmp_path)
    model = onnx.load(src)
    model.metadata_props.add(key="nee.lineage.1", value="{not json")
    model.metadata_props.add(key="nee.lineage.x", value="{}")
    model.metadata_props.add(key="nee.lineage.7", value="[" * 100000)  # nesting far past the parser's bound
    bad = tmp_path / "bad.onnx"
    onnx.save(model, bad)
    r = nee_cli("meta", bad, "--verify")
    assert r.returncode == 1 and "nee.lineage.1: mismatch: unreadable record: invalid JSON" in r.stdout, r.stdout
    assert "nee.lineage.x: mismatch" in r.stdout and "nee.lineage.7: mismatch: unreadable record" in r.stdout
    assert nee_cli("inspect", bad).returncode == 0
    bom = nee_cli("bom", bad)
    assert bom.returncode == 0, bom.stderr
    cyclonedx_validator().validate(json.loads(bom.stdout))
    notes = json.loads(bom.stdout)["components"][0]["pedigree"]["notes"]
    assert "nee.lineage.1 is unreadable" in notes and "nee.lineage.7 is unreadable" in notes
    # A new record is numbered after the existing ones, whatever they hold.
    out = tmp_path / "next.onnx"
    assert nee_cli("meta", bad, "--set", "k=v", "-o", out).returncode == 0
    props = metadata(onnx.load(out))
    assert props["nee.lineage.1"] == "{not json" and json.loads(props["nee.lineage.8"])["action"] == "meta"


# --- nee bom ----------------------------------------------------------------------------------------------

def cyclonedx_validator():
    """A Draft-7 validator for the CycloneDX 1.6 schema with every $ref served from the package's files."""
    import cyclonedx.schema._res as res  # the schema files cyclonedx-python-lib ships
    folder = Path(res.__file__).parent
    bom = json.loads((folder / "bom-1.6.SNAPSHOT.schema.json").read_text())
    resources = []
    for file in ("bom-1.6.SNAPSHOT.schema.json", "spdx.SNAPSHOT.schema.json", "jsf-0.82.SNAPSHOT.schema.json"):
        contents = json.loads((folder / file).read_text())
        resource = referencing.Resource.from_contents(contents, default_specification=referencing.jsonschema.DRAFT7)
        # Under its $id and under the name the bom schema's relative $refs resolve to.
        resources += [(contents["$id"], resource), ("http://cyclonedx.org/schema/" + file, resource)]

    def offline(uri):
        raise referencing.exceptions.NoSuchResource(ref=uri)

    registry = referencing.Registry(retrieve=offline).with_resources(resources)
    return jsonschema.Draft7Validator(bom, registry=registry, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER)


def properties(items):
    return {p["name"]: p.get("value") for p in items}


def test_bom_validates_against_cyclonedx_1_6_and_carries_the_hashes(tmp_path):
    src, optimized, released = make_chain(tmp_path)
    bom_path = tmp_path / "bom.json"
    r = nee_cli("bom", released, "-o", bom_path)
    assert r.returncode == 0, r.stderr
    bom = json.loads(bom_path.read_text())
    cyclonedx_validator().validate(bom)
    assert bom["bomFormat"] == "CycloneDX" and bom["specVersion"] == "1.6"
    datetime.datetime.strptime(bom["metadata"]["timestamp"], "%Y-%m-%dT%H:%M:%SZ")
    [model] = bom["components"]
    m = onnx.load(released)
    assert model["type"] == "machine-learning-model" and model["name"] == "released.onnx"
    assert model["hashes"] == [{"alg": "SHA-256", "content": sha256_file(released)}]
    assert properties(model["properties"])["nee:weights-sha256"] == weights_sha256(m)
    card = model["modelCard"]
    assert card["modelParameters"]["inputs"] == [{"format": "x: tensor(float) [batch,3,8,8]"}]
    assert card["modelParameters"]["outputs"] == [{"format": "y: tensor(float) [batch,16,8,8]"}]
    props = properties(card["properties"])
    assert props["nee:parameter-count"] == str(sum(numpy_helper.to_array(t).size for t in m.graph.initializer))
    assert props["onnx:opset:ai.onnx"] == "15" and props["onnx:ir-version"] == "8"
    assert props["onnx:producer-name"] == "lineage-test" and props["onnx:producer-version"] == "1.0"
    assert props["onnx:metadata:training_data"] == "dataset:synthetic-v1" and props["onnx:metadata:release"] == "v1"
    assert not any(k.startswith("onnx:metadata:nee.lineage") for k in props)
    pedigree = model["pedigree"]
    assert [a["hashes"][0]["content"] for a in pedigree["ancestors"]] == [sha256_file(src), sha256_file(optimized)]
    assert [properties(a["properties"])["nee:weights-sha256"] for a in pedigree["ancestors"]] == [
        weights_sha256(onnx.load(src)), weights_sha256(onnx.load(optimized))]
    assert [c["uid"] for c in pedigree["commits"]] == ["nee.lineage.1", "nee.lineage.2"]
    assert pedigree["commits"][0]["message"].startswith("optimize (opt_level=2) by nee")


def test_bom_to_stdout_with_external_data_validates(tmp_path):
    src = conv_bn_model(tmp_path, "ext.onnx", external=True)
    r = nee_cli("bom", src)
    assert r.returncode == 0, r.stderr
    bom = json.loads(r.stdout)
    cyclonedx_validator().validate(bom)
    [model] = bom["components"]
    assert model["hashes"][0]["content"] == sha256_file(src)
    assert [(c["name"], c["hashes"][0]["content"]) for c in model["components"]] == [
        ("ext.onnx.weights", sha256_file(tmp_path / "ext.onnx.weights"))]
    assert properties(model["properties"])["nee:weights-sha256"] == weights_sha256(onnx.load(src))
    assert "pedigree" not in model  # no lineage yet


def test_bom_of_a_sklearn_model_from_tests_models_validates():
    path = ROOT / "tests" / "models" / "sklearn" / "logreg_binary" / "model.onnx"
    r = nee_cli("bom", path, env={**os.environ, "SOURCE_DATE_EPOCH": "1700000000"})
    assert r.returncode == 0, r.stderr
    bom = json.loads(r.stdout)
    cyclonedx_validator().validate(bom)
    assert bom["metadata"]["timestamp"] == "2023-11-14T22:13:20Z"
    props = properties(bom["components"][0]["modelCard"]["properties"])
    assert props["onnx:opset:ai.onnx.ml"] == "1" and props["onnx:domain"] == "ai.onnx"
    # SOURCE_DATE_EPOCH makes the BOM reproducible, serial number included.
    again = nee_cli("bom", path, env={**os.environ, "SOURCE_DATE_EPOCH": "1700000000"})
    assert again.stdout == r.stdout


def test_the_schema_check_rejects_a_broken_bom(tmp_path):
    """The validator is not vacuous: a wrong component type or a bad hash fails it."""
    r = nee_cli("bom", conv_bn_model(tmp_path))
    bom = json.loads(r.stdout)
    validator = cyclonedx_validator()
    validator.validate(bom)
    wrong_type = json.loads(r.stdout)
    wrong_type["components"][0]["type"] = "model"
    bad_hash = json.loads(r.stdout)
    bad_hash["components"][0]["hashes"][0]["content"] = "xyz"
    for broken in (wrong_type, bad_hash):
        with pytest.raises(jsonschema.ValidationError):
            validator.validate(broken)


def test_weights_digest_covers_every_storage_form(tmp_path):
    """nee's weights digest equals docs/lineage.md's definition computed from onnx for raw_data and typed-field
    tensors of several element types, strings and 4-bit integers included."""
    import ml_dtypes
    rng = np.random.default_rng(3)
    inits = [
        numpy_helper.from_array(rng.standard_normal((2, 3)).astype(np.float16), "half"),
        numpy_helper.from_array(rng.integers(-100, 100, 7).astype(np.int8), "bytes"),
        numpy_helper.from_array(np.array([True, False, True]), "flags"),
        numpy_helper.from_array(np.array([-8, -1, 0, 7, 3], dtype=ml_dtypes.int4), "nibbles"),
        numpy_helper.from_array(np.array(2.5, dtype=np.float64), "scalar"),
        helper.make_tensor("typed", TensorProto.FLOAT, [3], [1.0, -2.0, 0.5]),  # float_data, not raw_data
        helper.make_tensor("typed_i64", TensorProto.INT64, [2], [5, -6]),
        helper.make_tensor("words", TensorProto.STRING, [3], [b"", b"abc", "\u00e9".encode()]),
        numpy_helper.from_array(np.zeros((0, 4), np.float32), "empty"),
    ]
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "dtypes",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    path = tmp_path / "dtypes.onnx"
    onnx.save(model, path)
    assert not onnx.load(path).graph.initializer[5].HasField("raw_data")
    r = nee_cli("bom", path)
    assert r.returncode == 0, r.stderr
    bom = json.loads(r.stdout)
    assert properties(bom["components"][0]["properties"])["nee:weights-sha256"] == weights_sha256(onnx.load(path))
    # ... and the same digest is recorded, and verified, after an edit.
    out = tmp_path / "edited.onnx"
    assert nee_cli("meta", path, "--set", "k=v", "-o", out).returncode == 0
    [(_, record)] = lineage(onnx.load(out))
    assert record["input"]["weights_sha256"] == record["output"]["weights_sha256"] == weights_sha256(model)
    assert nee_cli("meta", out, "--verify").returncode == 0


def test_optimize_keeps_external_data_external_and_records_lineage(tmp_path):
    src = conv_bn_model(tmp_path, "ext.onnx", external=True)
    out = tmp_path / "ext_optimized.onnx"
    r = nee_cli("optimize", src, "-o", out, "--opt-level", "2")
    assert r.returncode == 0, r.stderr
    raw = onnx.load(out, load_external_data=False)
    locations = {e.value for t in raw.graph.initializer for e in t.external_data if e.key == "location"}
    assert locations == {"ext_optimized.onnx.data"}
    optimized = onnx.load(out)
    [(_, record)] = lineage(optimized)
    assert record["input"]["sha256"] == sha256_file(src)
    assert record["input"]["weights_sha256"] == weights_sha256(onnx.load(src))
    assert record["output"]["weights_sha256"] == weights_sha256(optimized)
    x = np.random.default_rng(4).standard_normal((2, 3, 8, 8)).astype(np.float32)
    np.testing.assert_allclose(run_ort(out, x), run_ort(src, x), rtol=1e-5, atol=1e-5)
    assert nee_cli("meta", out, "--verify").returncode == 0
