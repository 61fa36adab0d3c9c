#!/usr/bin/env python3
"""Exports small models from other frameworks with their real ONNX converters, together with
the framework's own outputs, for tests/models/test_framework_models.py (which needs only numpy
and nee). Run by hand, never in CI; the frameworks live in throwaway venvs (PyPI), never in .venv. Versions
the committed fixtures were made with (also recorded in each meta.json):

    python3 -m venv /work/fxvenv
    /work/fxvenv/bin/pip install lightgbm==4.7.0 xgboost==3.2.0 onnxmltools==1.16.0 \
        onnxconverter-common==1.16.0 skl2onnx==1.20.0 scikit-learn==1.9.1 pandas==2.3.3 \
        onnx==1.23.2 numpy==2.4.6 onnxruntime==1.32.0
    /work/fxvenv/bin/python tests/models/export_frameworks.py lightgbm xgboost sklearn

    python3 -m venv /work/fxvenv-tf        # separate: TensorFlow pins its own protobuf / numpy
    /work/fxvenv-tf/bin/pip install tensorflow-cpu==2.21.0 keras==3.15.1 tf2onnx==1.17.0 \
        onnx==1.23.2 numpy==2.4.6 scikit-learn==1.9.1 onnxruntime==1.32.0
    /work/fxvenv-tf/bin/python tests/models/export_frameworks.py keras

    python3 -m venv /work/fxvenv-jax
    /work/fxvenv-jax/bin/pip install jax==0.10.2 jaxlib==0.10.2 flax==0.12.8 jax2onnx==0.17.1 \
        onnx-ir==1.1.0 onnx==1.23.2 numpy==2.4.6 scikit-learn==1.9.1 onnxruntime==1.32.0
    /work/fxvenv-jax/bin/python tests/models/export_frameworks.py jax

Regeneration is byte-stable except the Keras lstm_gru and attention_block exports: tf2onnx orders
and names some nodes differently from run to run (same graph, same expected outputs).

Not exported, and why:
  - HistGradientBoostingClassifier / Regressor: skl2onnx 1.20 with scikit-learn 1.9 fails
    ("Expected an int, got a boolean": it writes nodes_missing_value_tracks_true as bools).
  - LinearSVC inside a Pipeline: skl2onnx 1.20 raises "Option 'zipmap' not in [...] for class
    'LinearSVC'" (a bare LinearSVC exports); the SVM pipeline uses SVC(kernel="linear").
  - exact GELU in Keras: tf2onnx 1.17 has no Erfc converter; the Keras block uses the tanh form.
  - onnxmltools 1.16 exports at most opset 15.

Each model lands in tests/models/frameworks/<framework>/<name>/:
    model.onnx           the converter's export, unchanged
    input_<name>.npy     one file per graph input, named after the input
    expected_<key>.npy   the framework's own outputs (predict / predict_proba / forward pass)
    meta.json            framework and converter versions, opsets, and "checks": which ONNX
                         output is compared with which expected_<key>.npy and how
                         ("label": exact, "proba": probabilities, maybe through ZipMap,
                         "value": floats)
Expectations come from the framework. As a guard against converter bugs (not a source of
expectations), the export is also run through onnxruntime when it is installed, and the script
stops if onnxruntime disagrees with the framework.

Data are generated with fixed seeds or come from data sets shipped with scikit-learn; nothing
is downloaded.
"""
import json
import os
import shutil
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
# The fixtures live under tests/models/frameworks/, not beside this script: folders named jax,
# keras, ... on the import path would shadow the real packages as namespace packages (Keras
# probes for jax). Drop this script's folder from the path all the same.
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != HERE]
SEED = 0
BATCH = 24


def versions(*modules):
    out = {}
    for m in modules:
        try:
            mod = __import__(m)
            out[m] = getattr(mod, "__version__", "?")
        except Exception:  # pragma: no cover - only informative
            pass
    return out


def ort_outputs(model_bytes, feeds):
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    try:
        sess = ort.InferenceSession(model_bytes, providers=["CPUExecutionProvider"])
    except Exception as e:  # StringNormalizer without the en_US.UTF-8 locale installed
        if "locale" not in str(e):
            raise
        print(f"  (onnxruntime cross-check skipped: {str(e).splitlines()[0][:160]})")
        return None
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(None, feeds)))


def as_matrix(value, zipmap):
    if not zipmap:
        return np.asarray(value)
    keys = sorted(value[0])
    return np.array([[row[k] for k in keys] for row in value], dtype=np.float32)


def save(framework, name, model_bytes, feeds, expected, checks, extra_meta, mods):
    """feeds: {input name: array}; expected: {key: array};
    checks: list of {"output": onnx output name, "expected": key, "kind": label|proba|value,
    "zipmap": bool}."""
    import onnx

    model = onnx.load_from_string(model_bytes)
    # Byte-stable regeneration: onnxmltools names the graph with a random uuid4 hex, and skl2onnx
    # lists opset imports in set order.
    if len(model.graph.name) == 32:
        model.graph.name = name
    imports = sorted(model.opset_import, key=lambda o: o.domain)
    del model.opset_import[:]
    model.opset_import.extend(imports)
    model_bytes = model.SerializeToString()
    folder = os.path.join(HERE, "frameworks", framework, name)
    if os.path.isdir(folder):
        shutil.rmtree(folder)
    os.makedirs(folder)
    with open(os.path.join(folder, "model.onnx"), "wb") as f:
        f.write(model_bytes)
    graph_inputs = [i.name for i in model.graph.input
                    if i.name not in {t.name for t in model.graph.initializer}]
    assert sorted(graph_inputs) == sorted(feeds), (graph_inputs, list(feeds))
    for k, v in feeds.items():
        np.save(os.path.join(folder, f"input_{k}.npy"), v)
    for k, v in expected.items():
        np.save(os.path.join(folder, f"expected_{k}.npy"), v)
    # Guard against converter bugs: onnxruntime must reproduce the framework.
    got = ort_outputs(model_bytes, feeds)
    if got is not None:
        for c in checks:
            value = as_matrix(got[c["output"]], c.get("zipmap", False))
            want = expected[c["expected"]]
            if c["kind"] == "label":
                np.testing.assert_array_equal(value, want, err_msg=f"{name}: onnxruntime vs framework")
            else:
                np.testing.assert_allclose(value, want, rtol=1e-4, atol=1e-4,
                                           err_msg=f"{name}: onnxruntime vs framework")
    meta = {"framework": framework, "versions": versions(*mods), "inputs": graph_inputs,
            "opset": {o.domain or "ai.onnx": o.version for o in model.opset_import},
            "ops": sorted({(n.domain + "." if n.domain else "") + n.op_type for n in model.graph.node}),
            "checks": checks}
    meta.update(extra_meta)
    with open(os.path.join(folder, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"{framework}/{name}: {len(model_bytes)} bytes, ops {meta['ops']}")


def classifier_checks(zipmap, label="label", proba="probabilities"):
    return [{"output": label, "expected": "label", "kind": "label"},
            {"output": proba, "expected": "proba", "kind": "proba", "zipmap": zipmap}]


def split(loader):
    from sklearn.model_selection import train_test_split

    x, y = loader(return_X_y=True)
    x_train, x_test, y_train, y_test = train_test_split(x.astype(np.float32), y, test_size=0.25,
                                                        random_state=SEED)
    return x_train, x_test[:BATCH], y_train, y_test[:BATCH]


# ------------------------------------------------------------------------------------ LightGBM


def export_lightgbm():
    import lightgbm as lgb
    from onnxmltools import convert_lightgbm
    from onnxmltools.convert.common.data_types import FloatTensorType
    from sklearn import datasets

    mods = ["lightgbm", "onnxmltools", "onnx", "numpy"]
    common = dict(n_estimators=20, num_leaves=8, learning_rate=0.2, random_state=SEED, verbose=-1,
                  deterministic=True, n_jobs=1)

    def typ(x):
        return [("input", FloatTensorType([None, x.shape[1]]))]

    # Multiclass (softmax over 3 classes), probabilities as a tensor.
    xt, xs, yt, _ = split(datasets.load_iris)
    m = lgb.LGBMClassifier(**common).fit(xt, yt)
    onx = convert_lightgbm(m, initial_types=typ(xt), target_opset=15,
                           zipmap=False)
    save("lightgbm", "classifier_multiclass", onx.SerializeToString(), {"input": xs},
         {"label": m.predict(xs).astype(np.int64), "proba": m.predict_proba(xs).astype(np.float32)},
         classifier_checks(False), {"trained_on": "iris"}, mods)

    # Binary (sigmoid), probabilities through ZipMap (the converter's default).
    xt, xs, yt, _ = split(datasets.load_breast_cancer)
    m = lgb.LGBMClassifier(**common).fit(xt, yt)
    onx = convert_lightgbm(m, initial_types=typ(xt), target_opset=13)
    save("lightgbm", "classifier_binary_zipmap", onx.SerializeToString(), {"input": xs},
         {"label": m.predict(xs).astype(np.int64), "proba": m.predict_proba(xs).astype(np.float32)},
         classifier_checks(True), {"trained_on": "breast_cancer"}, mods)

    # Regression.
    xt, xs, yt, _ = split(datasets.load_diabetes)
    m = lgb.LGBMRegressor(**common).fit(xt, yt)
    onx = convert_lightgbm(m, initial_types=typ(xt), target_opset=15)
    save("lightgbm", "regressor", onx.SerializeToString(), {"input": xs},
         {"value": m.predict(xs).astype(np.float32).reshape(-1, 1)},
         [{"output": "variable", "expected": "value", "kind": "value"}],
         {"trained_on": "diabetes"}, mods)


# ------------------------------------------------------------------------------------- XGBoost


def export_xgboost():
    import xgboost as xgb
    from onnxmltools import convert_xgboost
    from onnxmltools.convert.common.data_types import FloatTensorType
    from sklearn import datasets

    mods = ["xgboost", "onnxmltools", "onnx", "numpy"]
    common = dict(n_estimators=20, max_depth=4, learning_rate=0.3, random_state=SEED, n_jobs=1,
                  tree_method="exact")

    def typ(x):
        return [("input", FloatTensorType([None, x.shape[1]]))]

    xt, xs, yt, _ = split(datasets.load_iris)
    m = xgb.XGBClassifier(objective="multi:softprob", **common).fit(xt, yt)
    onx = convert_xgboost(m, initial_types=typ(xt), target_opset=15)
    save("xgboost", "classifier_multiclass", onx.SerializeToString(), {"input": xs},
         {"label": m.predict(xs).astype(np.int64), "proba": m.predict_proba(xs).astype(np.float32)},
         classifier_checks(False), {"trained_on": "iris"}, mods)

    xt, xs, yt, _ = split(datasets.load_breast_cancer)
    m = xgb.XGBClassifier(objective="binary:logistic", **common).fit(xt, yt)
    onx = convert_xgboost(m, initial_types=typ(xt), target_opset=13)
    save("xgboost", "classifier_binary", onx.SerializeToString(), {"input": xs},
         {"label": m.predict(xs).astype(np.int64), "proba": m.predict_proba(xs).astype(np.float32)},
         classifier_checks(False), {"trained_on": "breast_cancer"}, mods)

    xt, xs, yt, _ = split(datasets.load_diabetes)
    m = xgb.XGBRegressor(objective="reg:squarederror", **common).fit(xt, yt)
    onx = convert_xgboost(m, initial_types=typ(xt), target_opset=15)
    save("xgboost", "regressor", onx.SerializeToString(), {"input": xs},
         {"value": m.predict(xs).astype(np.float32).reshape(-1, 1)},
         [{"output": "variable", "expected": "value", "kind": "value"}],
         {"trained_on": "diabetes"}, mods)


# --------------------------------------------------------------------------- scikit-learn pipelines


def export_sklearn():
    import pandas as pd
    from skl2onnx import to_onnx
    from skl2onnx.common.data_types import FloatTensorType, StringTensorType
    from sklearn import datasets
    from sklearn.cluster import KMeans
    from sklearn.compose import ColumnTransformer
    from sklearn.decomposition import PCA
    from sklearn.ensemble import GradientBoostingClassifier
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import MinMaxScaler, OneHotEncoder, OrdinalEncoder, StandardScaler
    from sklearn.svm import SVC

    mods = ["sklearn", "skl2onnx", "onnx", "numpy", "pandas"]
    fw = "sklearn_pipelines"
    opts = {"zipmap": False}

    # ColumnTransformer over a table with numeric and string columns: scalers and encoders, then
    # logistic regression. Each column is its own graph input, as skl2onnx exports tables.
    rng = np.random.default_rng(SEED)
    n = 400
    table = pd.DataFrame({
        "age": rng.uniform(18, 80, n).astype(np.float32),
        "income": rng.lognormal(10, 0.5, n).astype(np.float32),
        "visits": rng.poisson(3, n).astype(np.float32),
        "city": rng.choice(["paris", "lyon", "nice", "lille"], n),
        "plan": rng.choice(["free", "basic", "pro"], n),
    })
    score = (0.03 * table.age - 0.8 * (table.city == "nice") + 1.2 * (table.plan == "pro")
             + 0.2 * table.visits + rng.normal(0, 0.5, n))
    y = np.digitize(score, np.quantile(score, [0.33, 0.66]))
    train, test = table.iloc[:300], table.iloc[300:300 + BATCH]
    pre = ColumnTransformer([
        ("std", StandardScaler(), ["age", "income"]),
        ("minmax", MinMaxScaler(), ["visits"]),
        ("onehot", OneHotEncoder(handle_unknown="ignore"), ["city"]),
        ("ordinal", OrdinalEncoder(categories=[["free", "basic", "pro"]]), ["plan"]),
    ])
    m = make_pipeline(pre, LogisticRegression(max_iter=1000)).fit(train, y[:300])
    types = [(c, FloatTensorType([None, 1])) for c in ["age", "income", "visits"]] + \
            [(c, StringTensorType([None, 1])) for c in ["city", "plan"]]
    onx = to_onnx(m, initial_types=types, target_opset={"": 17, "ai.onnx.ml": 3}, options=opts)
    feeds = {c: test[[c]].to_numpy().astype(np.float32 if c in ("age", "income", "visits") else str)
             for c in table.columns}
    save(fw, "column_transformer_logreg", onx.SerializeToString(), feeds,
         {"label": m.predict(test).astype(np.int64), "proba": m.predict_proba(test).astype(np.float32)},
         classifier_checks(False), {"trained_on": "seeded synthetic table"}, mods)

    # The same preprocessing in front of gradient boosting. (HistGradientBoostingClassifier does not
    # export with skl2onnx 1.20 + scikit-learn 1.9, nor does the regressor: the converter writes
    # nodes_missing_value_tracks_true as bools into an ints attribute, "Expected an int, got a
    # boolean".)
    m = make_pipeline(pre, GradientBoostingClassifier(n_estimators=20, max_depth=3, random_state=SEED))
    m.fit(train, y[:300])
    onx = to_onnx(m, initial_types=types, target_opset={"": 17, "ai.onnx.ml": 3}, options=opts)
    save(fw, "column_transformer_gradient_boosting", onx.SerializeToString(), feeds,
         {"label": m.predict(test).astype(np.int64), "proba": m.predict_proba(test).astype(np.float32)},
         classifier_checks(False), {"trained_on": "seeded synthetic table"}, mods)

    # Scaler -> PCA -> SVM with a linear kernel and probabilities. (LinearSVC inside a pipeline
    # does not export with skl2onnx 1.20: "Option 'zipmap' not in [...] for class 'LinearSVC'".)
    xt, xs, yt, _ = split(datasets.load_digits)
    m = make_pipeline(StandardScaler(), PCA(n_components=20, random_state=SEED),
                      SVC(kernel="linear", probability=True, random_state=SEED)).fit(xt, yt)
    onx = to_onnx(m, xt[:1], target_opset={"": 17, "ai.onnx.ml": 3}, options=opts)
    save(fw, "scaler_pca_linear_svc", onx.SerializeToString(), {"X": xs},
         {"label": m.predict(xs).astype(np.int64), "proba": m.predict_proba(xs).astype(np.float32)},
         classifier_checks(False), {"trained_on": "digits"}, mods)

    # KMeans: cluster labels and distances to the centres (transform()).
    xt, xs, yt, _ = split(datasets.load_iris)
    m = make_pipeline(StandardScaler(), KMeans(n_clusters=3, n_init=4, random_state=SEED)).fit(xt)
    onx = to_onnx(m, xt[:1], target_opset={"": 17, "ai.onnx.ml": 3})
    save(fw, "scaler_kmeans", onx.SerializeToString(), {"X": xs},
         {"label": m.predict(xs).astype(np.int64), "distances": m.transform(xs).astype(np.float32)},
         [{"output": "label", "expected": "label", "kind": "label"},
          {"output": "scores", "expected": "distances", "kind": "value"}],
         {"trained_on": "iris"}, mods)

    # Text: word 1-2-gram TF-IDF -> logistic regression over seeded sentences.
    words = {0: "cat dog bird fish horse", 1: "car train plane boat bike", 2: "red green blue pink gray"}
    common = "the a of and with very".split()
    rng = np.random.default_rng(SEED)
    docs, labels = [], []
    for i in range(240):
        c = i % 3
        vocab = words[c].split()
        k = rng.integers(4, 9)
        toks = [str(rng.choice(vocab)) if rng.random() < 0.6 else str(rng.choice(common)) for _ in range(k)]
        docs.append(" ".join(toks))
        labels.append(c)
    docs, labels = np.array(docs), np.array(labels)
    # token_pattern: skl2onnx turns scikit-learn's default r"(?u)\b\w\w+\b" into the Tokenizer
    # regex "[a-zA-Z0-9_]+", which keeps one-letter words ("a"), so bigrams around them differ from
    # scikit-learn's; with this pattern both tokenize alike.
    m = make_pipeline(TfidfVectorizer(ngram_range=(1, 2), token_pattern=r"[a-zA-Z0-9_]+"),
                      LogisticRegression(max_iter=1000))
    m.fit(docs[:200], labels[:200])
    test_docs = docs[200:200 + BATCH]
    onx = to_onnx(m, initial_types=[("text", StringTensorType([None, 1]))],
                  target_opset={"": 17, "ai.onnx.ml": 3}, options=opts)
    save(fw, "tfidf_word_ngrams_logreg", onx.SerializeToString(), {"text": test_docs.reshape(-1, 1)},
         {"label": m.predict(test_docs).astype(np.int64),
          "proba": m.predict_proba(test_docs).astype(np.float32)},
         classifier_checks(False), {"trained_on": "seeded synthetic sentences"}, mods)


# -------------------------------------------------------------------------- Keras / TensorFlow


def export_keras():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf
    import tf2onnx
    from sklearn import datasets

    mods = ["tensorflow", "keras", "tf2onnx", "onnx", "numpy"]
    keras = tf.keras
    keras.utils.set_random_seed(SEED)
    tf.config.experimental.enable_op_determinism()

    def export(name, model, x, opset, meta):
        spec = (tf.TensorSpec((None,) + x.shape[1:], tf.float32, name="input"),)
        fn = tf.function(lambda t: model(t, training=False))
        onx, _ = tf2onnx.convert.from_function(fn, input_signature=spec, opset=opset)
        want = model(x, training=False).numpy()
        out = onx.graph.output[0].name
        save("keras", name, onx.SerializeToString(), {"input": x}, {"value": want},
             [{"output": out, "expected": "value", "kind": "value"}], meta, mods)

    # MLP on iris: Dense / ReLU / Dropout / softmax.
    xt, xs, yt, _ = split(datasets.load_iris)
    m = keras.Sequential([keras.Input((4,)), keras.layers.Dense(32, activation="relu"),
                          keras.layers.Dropout(0.2), keras.layers.Dense(16, activation="tanh"),
                          keras.layers.Dense(3, activation="softmax")])
    m.compile("adam", "sparse_categorical_crossentropy")
    m.fit(xt, yt, epochs=30, batch_size=16, verbose=0)
    export("mlp_iris", m, xs, 13, {"trained_on": "iris"})

    # Small CNN on the 8x8 digits (NHWC): Conv2D, BatchNormalization, MaxPooling2D,
    # DepthwiseConv2D, GlobalAveragePooling2D, Dense.
    xt, xs, yt, _ = split(datasets.load_digits)
    xt, xs = (xt / 16.0).reshape(-1, 8, 8, 1), (xs / 16.0).reshape(-1, 8, 8, 1).astype(np.float32)
    m = keras.Sequential([keras.Input((8, 8, 1)),
                          keras.layers.Conv2D(8, 3, padding="same", use_bias=False),
                          keras.layers.BatchNormalization(), keras.layers.ReLU(),
                          keras.layers.MaxPooling2D(2),
                          keras.layers.DepthwiseConv2D(3, padding="same", activation="relu6"),
                          keras.layers.Conv2D(16, 1, activation="swish"),
                          keras.layers.GlobalAveragePooling2D(),
                          keras.layers.Dense(10)])
    m.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    m.fit(xt, yt, epochs=5, batch_size=32, verbose=0)
    export("cnn_digits", m, xs, 15, {"trained_on": "digits (8x8, NHWC)"})

    # Recurrent: LSTM and GRU over seeded random sequences (untrained weights, seeded).
    rng = np.random.default_rng(SEED)
    seq = rng.standard_normal((4, 10, 6)).astype(np.float32)
    inp = keras.Input((10, 6))
    h = keras.layers.LSTM(12, return_sequences=True)(inp)
    h = keras.layers.GRU(8)(h)
    m = keras.Model(inp, keras.layers.Dense(2)(h))
    export("lstm_gru", m, seq, 15, {"trained_on": "none (seeded initial weights)"})

    # Transformer-style block: LayerNormalization, MultiHeadAttention, residuals, GELU.
    x = rng.standard_normal((2, 7, 16)).astype(np.float32)
    inp = keras.Input((7, 16))
    a = keras.layers.MultiHeadAttention(num_heads=2, key_dim=8)(inp, inp)
    h = keras.layers.LayerNormalization()(inp + a)
    # GELU in its tanh form: tf2onnx 1.17 has no converter for Erfc (exact GELU).
    f = keras.layers.Dense(32)(h)
    f = keras.layers.Activation(lambda t: keras.activations.gelu(t, approximate=True))(f)
    h = keras.layers.LayerNormalization()(h + keras.layers.Dense(16)(f))
    m = keras.Model(inp, h)
    export("attention_block", m, x, 17, {"trained_on": "none (seeded initial weights)"})


# ---------------------------------------------------------------------------------------- JAX


def export_jax():
    import jax
    import jax.numpy as jnp
    from flax import nnx
    from jax2onnx import to_onnx
    from sklearn import datasets

    mods = ["jax", "flax", "jax2onnx", "onnx", "numpy"]
    opset = 21

    def export(name, fn, feeds, meta):
        arrays = list(feeds.values())
        want = np.asarray(fn(*[jnp.asarray(a) for a in arrays]))
        spec = [("B",) + a.shape[1:] for a in arrays]
        onx = to_onnx(fn, spec, opset=opset, model_name=name, input_names=list(feeds),
                      output_names=["output"])
        save("jax", name, onx.SerializeToString(), feeds, {"value": want},
             [{"output": "output", "expected": "value", "kind": "value"}], meta, mods)

    # Plain jax.numpy MLP trained by a few hundred full-batch gradient steps on iris.
    xt, xs, yt, _ = split(datasets.load_iris)
    key = jax.random.PRNGKey(SEED)
    k1, k2 = jax.random.split(key)
    params = {"w1": jax.random.normal(k1, (4, 16)) * 0.5, "b1": jnp.zeros(16),
              "w2": jax.random.normal(k2, (16, 3)) * 0.5, "b2": jnp.zeros(3)}

    def mlp(p, x):
        h = jnp.tanh(x @ p["w1"] + p["b1"])
        return jax.nn.softmax(h @ p["w2"] + p["b2"], axis=-1)

    def loss(p, x, y):
        return -jnp.mean(jnp.log(mlp(p, x)[jnp.arange(len(y)), y] + 1e-7))

    step = jax.jit(lambda p, x, y: jax.tree.map(lambda a, g: a - 0.1 * g, p,
                                                jax.grad(loss)(p, x, y)))
    for _ in range(300):
        params = step(params, jnp.asarray(xt), jnp.asarray(yt))
    export("mlp_iris", lambda x: mlp(params, x), {"x": xs}, {"trained_on": "iris"})

    # Flax NNX CNN (NHWC): Conv, BatchNorm (inference), relu, avg_pool, Linear; seeded weights.
    class CNN(nnx.Module):
        def __init__(self, rngs):
            self.conv1 = nnx.Conv(1, 8, (3, 3), rngs=rngs)
            self.bn = nnx.BatchNorm(8, use_running_average=True, rngs=rngs)
            self.conv2 = nnx.Conv(8, 16, (3, 3), strides=(2, 2), rngs=rngs)
            self.fc = nnx.Linear(16 * 4 * 4, 10, rngs=rngs)

        def __call__(self, x):
            x = nnx.relu(self.bn(self.conv1(x)))
            x = nnx.gelu(self.conv2(x))
            x = nnx.avg_pool(x, window_shape=(2, 2), strides=(1, 1), padding="SAME")
            return self.fc(x.reshape(x.shape[0], -1))

    cnn = CNN(nnx.Rngs(SEED))
    cnn.bn.mean.value = jnp.linspace(-0.2, 0.2, 8)  # non-trivial running statistics
    cnn.bn.var.value = jnp.linspace(0.5, 1.5, 8)
    _, xs, _, _ = split(datasets.load_digits)
    images = (xs / 16.0).reshape(-1, 8, 8, 1).astype(np.float32)
    export("cnn_digits", cnn, {"x": images}, {"trained_on": "none (seeded weights); digits input"})

    # Flax NNX attention block: LayerNorm, MultiHeadAttention, residual, Linear + gelu.
    class Block(nnx.Module):
        def __init__(self, rngs):
            self.ln1 = nnx.LayerNorm(16, rngs=rngs)
            self.attn = nnx.MultiHeadAttention(num_heads=2, in_features=16, decode=False, rngs=rngs)
            self.ln2 = nnx.LayerNorm(16, rngs=rngs)
            self.fc1 = nnx.Linear(16, 32, rngs=rngs)
            self.fc2 = nnx.Linear(32, 16, rngs=rngs)

        def __call__(self, x):
            h = self.ln1(x)
            x = x + self.attn(h, h, h)
            return x + self.fc2(nnx.gelu(self.fc1(self.ln2(x))))

    block = Block(nnx.Rngs(SEED + 1))
    x = np.random.default_rng(SEED).standard_normal((2, 7, 16)).astype(np.float32)
    export("attention_block", block, {"x": x}, {"trained_on": "none (seeded weights)"})


FRAMEWORKS = {"lightgbm": export_lightgbm, "xgboost": export_xgboost, "sklearn": export_sklearn,
              "keras": export_keras, "jax": export_jax}


if __name__ == "__main__":
    for name in sys.argv[1:] or list(FRAMEWORKS):
        FRAMEWORKS[name]()
