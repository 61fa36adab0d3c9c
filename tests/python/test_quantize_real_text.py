"""Dynamic int8 quantization of a transformer on real text (issue 10's accuracy requirement): a byte-level
encoder classifies lines of source files that installed packages ship by the language of their file, is
quantized by `nee.quantize(mode="dynamic")` and scored on held-out lines against the float model (top-1
agreement) and against the labels.

The text: lines of at least 30 characters from numpy's Python sources (code lines only: docstrings and
comments dropped), numpy's C headers, onnx's C++ headers, onnx's protobuf schemas and scikit-learn's
reStructuredText dataset descriptions; labelled by language, read in file and line order, de-duplicated,
500 lines per language drawn with a fixed seed, a fixed stratified split (1750 to fit, 750 held out).
Tokens are bytes + 1 (0 pads), 64 per line. (numpy docstring lines labelled by submodule were tried
first: this random encoder reached 0.46-0.57 accuracy there, about what byte counts give (0.48-0.58), so
many predictions were near-ties and full-range int8 kept 0.92-0.95 of them: a classifier that unsure
measures its own margins more than the quantization.)

The model: token embedding (Gather) + position embedding, LayerNorm, one post-norm encoder layer (Q/K/V/O
MatMuls, 8-head scaled dot-product attention with the padding mask, Softmax, LayerNorm, Erf-GELU FFN,
LayerNorm), mean pooling over the valid tokens and a Gemm classifier. The encoder's weights are seeded
random; the Gemm is fitted by scikit-learn's LogisticRegression on the pooled features computed by ONNX
Runtime (not by nee). Expected values are the labels and the float model's predictions (ONNX Runtime).
ONNX Runtime runs nee's int8 model as a second opinion on reduce_range models only: on this AVX2 CPU
without VNNI its u8 x s8 MatMulInteger saturates with full-range weights (docs/quantization.md), even with
graph optimizations off (measured on these lines with the embedding float: within 1e-4 of nee on 10% / 0% of
them, per tensor / per channel, against 96% with reduce_range; top-1 0.997 / 0.971), so the full-range models
are checked against onnx's reference evaluator instead."""
import collections
import io
import pathlib
import tokenize

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import sklearn
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from sklearn import linear_model, model_selection
from threadpoolctl import threadpool_limits

import nee

SEQ, DIM, HEADS, PER_LANGUAGE = 64, 128, 8, 500


def package_dir(module):
    return pathlib.Path(module.__file__).parent


def python_code_lines(path):
    """The lines of a Python file holding code: a docstring's inner lines and comments hold English."""
    source = path.read_text(encoding="utf-8")
    code_rows = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type in (tokenize.NAME, tokenize.OP, tokenize.NUMBER) or (
                token.type == tokenize.STRING and token.start[0] == token.end[0]):
            code_rows.add(token.start[0])
    lines = source.splitlines()
    return [lines[row - 1] for row in sorted(code_rows)]


def text_lines(path):
    return path.read_text(encoding="utf-8").splitlines()


def corpus():
    """(lines, labels): PER_LANGUAGE lines of each language, a line found under two languages dropped."""
    sources = {
        "python": (sorted((package_dir(np) / "lib").glob("_*.py")), python_code_lines),
        "c": (sorted((package_dir(np) / "_core" / "include" / "numpy").glob("*.h")), text_lines),
        "c++": (sorted((package_dir(onnx) / "defs").rglob("*.h")), text_lines),
        "protobuf": (sorted(p for p in package_dir(onnx).glob("*.proto") if ".in." not in p.name), text_lines),
        "rest": (sorted((package_dir(sklearn) / "datasets" / "descr").glob("*.rst")), text_lines),
    }
    per_language = {name: sorted({line.strip() for f in files for line in read(f) if len(line.strip()) >= 30})
                    for name, (files, read) in sources.items()}
    seen = collections.Counter(line for lines in per_language.values() for line in lines)
    rng = np.random.default_rng(0)
    texts, labels = [], []
    for label, lines in enumerate(per_language.values()):
        own = [line for line in lines if seen[line] == 1]
        assert len(own) >= PER_LANGUAGE, (label, len(own))
        texts += [own[i] for i in sorted(rng.permutation(len(own))[:PER_LANGUAGE])]
        labels += [label] * PER_LANGUAGE
    return texts, np.array(labels)


def byte_tokens(texts):
    tokens = np.zeros((len(texts), SEQ), np.int64)  # 0 is padding
    for row, text in enumerate(texts):
        data = np.frombuffer(text.encode("utf-8")[:SEQ], np.uint8)
        tokens[row, :len(data)] = data.astype(np.int64) + 1
    return tokens


def encoder_weights():
    rng = np.random.default_rng(0)

    def normal(shape, scale):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    w = {"embed": normal((257, DIM), 1.0), "pos": normal((SEQ, DIM), 0.5)}
    for p in "qkvo":  # 1/sqrt(fan_in): projections keep the LayerNorm'd inputs' scale
        w[f"W{p}"], w[f"b{p}"] = normal((DIM, DIM), DIM ** -0.5), normal(DIM, 0.05)
    w["W1"], w["b1"] = normal((DIM, 4 * DIM), DIM ** -0.5), normal(4 * DIM, 0.05)
    w["W2"], w["b2"] = normal((4 * DIM, DIM), (4 * DIM) ** -0.5), normal(DIM, 0.05)
    for ln in ("ln0", "ln1", "ln2"):
        w[f"{ln}_g"], w[f"{ln}_b"] = np.ones(DIM, np.float32), np.zeros(DIM, np.float32)
    return w


def encoder(weights, head=None):
    """tokens[n, SEQ] -> pooled[n, DIM], or logits[n, classes] with head = (W[classes, DIM], b)."""
    n = helper.make_node
    constants = {
        "zero": np.array(0, np.int64), "one": np.array(1, np.float32), "big": np.array(1e4, np.float32),
        "heads_shape": np.array([0, 0, HEADS, DIM // HEADS], np.int64), "merge_shape": np.array([0, 0, DIM], np.int64),
        "axes_1": np.array([1], np.int64), "axes_2": np.array([2], np.int64), "axes_12": np.array([1, 2], np.int64),
        "inv_sqrt_dh": np.array((DIM // HEADS) ** -0.5, np.float32), "half": np.array(0.5, np.float32),
        "inv_sqrt2": np.array(0.5 ** 0.5, np.float32)}
    nodes = [  # padding mask [n, SEQ] and the attention bias [n, 1, 1, SEQ]: 0 on tokens, -1e4 on padding
        n("Greater", ["tokens", "zero"], ["valid"]), n("Cast", ["valid"], ["mask"], to=TensorProto.FLOAT),
        n("Sub", ["mask", "one"], ["m0"]), n("Mul", ["m0", "big"], ["m1"]),
        n("Unsqueeze", ["m1", "axes_12"], ["attn_bias"]),
        n("Gather", ["embed", "tokens"], ["e0"]), n("Add", ["e0", "pos"], ["e1"]),
        n("LayerNormalization", ["e1", "ln0_g", "ln0_b"], ["x"], axis=-1)]
    for p in "qkv":
        nodes += [n("MatMul", ["x", f"W{p}"], [f"{p}0"], name=f"{p}_proj"), n("Add", [f"{p}0", f"b{p}"], [f"{p}1"]),
                  n("Reshape", [f"{p}1", "heads_shape"], [f"{p}2"]),
                  n("Transpose", [f"{p}2"], [f"{p}3"], perm=[0, 2, 3, 1] if p == "k" else [0, 2, 1, 3])]
    nodes += [
        n("MatMul", ["q3", "k3"], ["s0"], name="scores"), n("Mul", ["s0", "inv_sqrt_dh"], ["s1"]),
        n("Add", ["s1", "attn_bias"], ["s2"]), n("Softmax", ["s2"], ["probs"], axis=-1),
        n("MatMul", ["probs", "v3"], ["c0"], name="context"), n("Transpose", ["c0"], ["c1"], perm=[0, 2, 1, 3]),
        n("Reshape", ["c1", "merge_shape"], ["c2"]),
        n("MatMul", ["c2", "Wo"], ["o0"], name="o_proj"), n("Add", ["o0", "bo"], ["o1"]), n("Add", ["x", "o1"], ["r1"]),
        n("LayerNormalization", ["r1", "ln1_g", "ln1_b"], ["a"], axis=-1),
        n("MatMul", ["a", "W1"], ["f0"], name="ffn1"), n("Add", ["f0", "b1"], ["f1"]),
        n("Mul", ["f1", "inv_sqrt2"], ["g0"]), n("Erf", ["g0"], ["g1"]), n("Add", ["g1", "one"], ["g2"]),
        n("Mul", ["f1", "g2"], ["g3"]), n("Mul", ["g3", "half"], ["g4"]),
        n("MatMul", ["g4", "W2"], ["f2"], name="ffn2"), n("Add", ["f2", "b2"], ["f3"]), n("Add", ["a", "f3"], ["r2"]),
        n("LayerNormalization", ["r2", "ln2_g", "ln2_b"], ["h"], axis=-1),
        # mean over the valid tokens: sum(h * mask) / sum(mask)
        n("Unsqueeze", ["mask", "axes_2"], ["mask3"]), n("Mul", ["h", "mask3"], ["hm"]),
        n("ReduceSum", ["hm", "axes_1"], ["h_sum"], keepdims=0),
        n("ReduceSum", ["mask", "axes_1"], ["count"], keepdims=1), n("Div", ["h_sum", "count"], ["pooled"])]
    initializers = [numpy_helper.from_array(v, k) for k, v in {**constants, **weights}.items()]
    output, width = "pooled", DIM
    if head is not None:
        nodes.append(n("Gemm", ["pooled", "Wc", "bc"], ["logits"], name="classifier", transB=1))
        initializers += [numpy_helper.from_array(head[0], "Wc"), numpy_helper.from_array(head[1], "bc")]
        output, width = "logits", head[0].shape[0]
    graph = helper.make_graph(nodes, "byte_encoder",
                              [helper.make_tensor_value_info("tokens", TensorProto.INT64, ["n", SEQ])],
                              [helper.make_tensor_value_info(output, TensorProto.FLOAT, ["n", width])], initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    onnx.checker.check_model(model, full_check=True)
    return model


def run_rows(session, tokens):
    """One line per run, as a classifier serving requests runs: dynamic quantization then takes each line's
    own activation ranges (one scale per tensor per run), so a line's result does not depend on the others."""
    return np.concatenate([session.run(None, {"tokens": tokens[i:i + 1]})[0] for i in range(len(tokens))])


def ort_session(path):
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


@pytest.fixture(scope="module")
def lines(tmp_path_factory):
    texts, labels = corpus()
    x_train, x_test, y_train, y_test = model_selection.train_test_split(
        byte_tokens(texts), labels, test_size=0.3, random_state=0, stratify=labels)
    weights = encoder_weights()
    features = ort.InferenceSession(encoder(weights).SerializeToString(), providers=["CPUExecutionProvider"])
    # One BLAS thread: on 2 shared cores two threads took this fit from 0.3 s to 19 s.
    with threadpool_limits(limits=1):
        clf = linear_model.LogisticRegression(max_iter=3000).fit(features.run(None, {"tokens": x_train})[0], y_train)
    folder = tmp_path_factory.mktemp("text")
    path = folder / "encoder.onnx"
    onnx.save(encoder(weights, (clf.coef_.astype(np.float32), clf.intercept_.astype(np.float32))), str(path))
    fp32 = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"tokens": x_test})[0]
    return {"path": path, "x": x_test, "y": y_test, "fp32": fp32, "folder": folder}


def quantized(lines, per_channel, reduce_range):
    out = lines["folder"] / f"int8_{per_channel}_{reduce_range}.onnx"
    nee.quantize(str(lines["path"]), str(out), mode="dynamic", per_channel=per_channel, reduce_range=reduce_range)
    return out


def scores(lines, logits):
    """(top-1 agreement with the float model, accuracy, max |logit - float logit|)."""
    return ((logits.argmax(1) == lines["fp32"].argmax(1)).mean(), (logits.argmax(1) == lines["y"]).mean(),
            np.abs(logits - lines["fp32"]).max())


@pytest.mark.parametrize("per_channel", [False, True])
def test_dynamic_int8_keeps_the_float_models_predictions(lines, per_channel):
    fp32_accuracy = (lines["fp32"].argmax(1) == lines["y"]).mean()
    assert fp32_accuracy > 0.8, fp32_accuracy  # a real classifier: 5 languages, chance 0.2 (measured 0.860)
    out = quantized(lines, per_channel, reduce_range=False)
    logits = run_rows(nee.InferenceSession(str(out)), lines["x"])
    agreement, accuracy, error = scores(lines, logits)
    print(f"\nreal text, dynamic int8, per_channel={per_channel}: {len(lines['y'])} held-out lines, fp32 accuracy "
          f"{fp32_accuracy:.3f}, int8 accuracy {accuracy:.3f}, top-1 agreement {agreement:.3f}, "
          f"max |logit error| {error:.3f} (max |logit| {np.abs(lines['fp32']).max():.1f})")
    assert agreement >= 0.99, agreement  # issue 10's target for dynamic int8 transformers
    assert abs(fp32_accuracy - accuracy) <= 0.01, (fp32_accuracy, accuracy)
    # The spec on the first lines: onnx's reference evaluator runs the same int8 model (slow, hence a few).
    rows = 24
    spec = run_rows(ReferenceEvaluator(str(out)), lines["x"][:rows])
    row_error = np.abs(spec - logits[:rows]).max(1)
    print(f"  vs onnx's reference evaluator ({rows} lines): {(row_error <= 1e-4).sum()} within 1e-4, "
          f"max |difference| {row_error.max():.4f}")
    assert (spec.argmax(1) == logits[:rows].argmax(1)).all()
    assert row_error.max() <= 0.1, row_error.max()  # see test_nee_agrees_with_onnx_runtime for why not 0
    assert (row_error <= 1e-4).mean() >= 0.8, row_error


@pytest.mark.parametrize("per_channel", [False, True])
def test_nee_agrees_with_onnx_runtime(lines, per_channel):
    """On 7-bit weights (reduce_range), where ONNX Runtime's integer kernels follow the spec on this CPU.
    Most lines come out identical (within 1e-4); on the others a float value computed in a different order
    (LayerNorm, Softmax, Erf) lands on the other side of one of DynamicQuantizeLinear's rounding steps and
    the later layers carry that step on (measured on one such line: the attention output differs by 3e-7,
    one of its 8192 uint8 values by one step, then 3 of the next LayerNorm's, 52 of the FFN's; logits 0.02)."""
    out = quantized(lines, per_channel, reduce_range=True)
    logits = run_rows(nee.InferenceSession(str(out)), lines["x"])
    expected = run_rows(ort_session(out), lines["x"])
    row_error = np.abs(expected - logits).max(1)
    agreement, accuracy, _ = scores(lines, logits)
    print(f"\nreal text, dynamic int8 reduce_range, per_channel={per_channel}: top-1 agreement with fp32 "
          f"{agreement:.3f}, accuracy {accuracy:.3f}; vs ONNX Runtime: top-1 agreement "
          f"{(expected.argmax(1) == logits.argmax(1)).mean():.3f}, {(row_error <= 1e-4).mean():.3f} of the lines "
          f"within 1e-4, max |difference| {row_error.max():.4f}")
    assert (expected.argmax(1) == logits.argmax(1)).mean() >= 0.995
    assert (row_error <= 1e-4).mean() >= 0.85, row_error
    assert row_error.max() <= 0.1, row_error.max()
    assert agreement >= 0.98, agreement  # 7-bit weights: coarser, still close
