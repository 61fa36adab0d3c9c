"""Trains small scikit-learn models on data sets shipped with scikit-learn and
exports them to ONNX with skl2onnx, together with scikit-learn's own outputs
for a held-out input batch. nee's tests then run the .onnx files without
scikit-learn and compare against these .npy files.

Run from the repository root:
    /work/main/.venv/bin/python tests/models/sklearn/export_models.py

Each model lands in tests/models/sklearn/<name>/:
    model.onnx           the exported model
    input_0.npy          the test batch (float32 [24, features]) from the held-out split
    expected_label.npy   classifiers: predict(), int64 [24]
    expected_proba.npy   classifiers: predict_proba(), float32 [24, classes]
    expected_value.npy   regressors: predict(), float32 [24, 1]
    meta.json            kind, which ONNX outputs hold label / probabilities /
                         value, whether probabilities go through ZipMap, opsets
skl2onnx writes the lowest ai.onnx.ml opset its nodes need (1 here, even when
3 is allowed), so the *_as_tensor_ml3 and *_tree_ensemble_ml5 models are
derived from its exports by rewriting the tree nodes (same expectations).
"""
import json
import os
import shutil

import numpy as np
import onnx
from onnx import helper, numpy_helper
from skl2onnx import to_onnx
from sklearn import datasets
from sklearn.ensemble import (GradientBoostingClassifier, GradientBoostingRegressor,
                              RandomForestClassifier, RandomForestRegressor)
from sklearn.linear_model import LinearRegression, LogisticRegression, Ridge
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.svm import SVC, SVR
from sklearn.preprocessing import Normalizer, StandardScaler

HERE = os.path.dirname(os.path.abspath(__file__))
BATCH = 24  # rows of the held-out split stored per model
SEED = 0
OPSET_ML3 = {"": 17, "ai.onnx.ml": 3}
OPSET_ML1 = {"": 15, "ai.onnx.ml": 1}


def split(loader):
    x, y = loader(return_X_y=True)
    return train_test_split(x.astype(np.float32), y, test_size=0.25, random_state=SEED)


def binary_iris():
    """Iris with 2 classes whose labels are not 0/1 (exercises label mapping)."""
    x, y = datasets.load_iris(return_X_y=True)
    keep = y > 0
    return train_test_split(x[keep].astype(np.float32), y[keep] * 10 + 1, test_size=0.3,
                            random_state=SEED)


def save(name, model, onnx_model, x_test, kind, outputs):
    folder = os.path.join(HERE, name)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "model.onnx"), "wb") as f:
        f.write(onnx_model.SerializeToString())
    np.save(os.path.join(folder, "input_0.npy"), x_test)
    meta = {"kind": kind, "outputs": outputs,
            "opset": {o.domain or "ai.onnx": o.version for o in onnx_model.opset_import}}
    if kind == "classifier":
        np.save(os.path.join(folder, "expected_label.npy"), model.predict(x_test).astype(np.int64))
        np.save(os.path.join(folder, "expected_proba.npy"),
                model.predict_proba(x_test).astype(np.float32))
    else:
        pred = model.predict(x_test).reshape(len(x_test), -1)
        np.save(os.path.join(folder, "expected_value.npy"), pred.astype(x_test.dtype))
    with open(os.path.join(folder, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"{name}: {os.path.getsize(os.path.join(folder, 'model.onnx'))} bytes, "
          f"score {model.score(x_test, y_test_of[name]):.4f}")


y_test_of = {}


def classifier(name, model, data, opset=OPSET_ML3, zipmap=True):
    x_train, x_test, y_train, y_test = data
    model.fit(x_train, y_train)
    options = None if zipmap else {id(model): {"zipmap": False}}
    onx = to_onnx(model, x_train[:1], target_opset=opset, options=options)
    y_test_of[name] = y_test[:BATCH]
    outputs = {"label": onx.graph.output[0].name, "probabilities": onx.graph.output[1].name,
               "zipmap": zipmap}
    save(name, model, onx, x_test[:BATCH], "classifier", outputs)


def regressor(name, model, data, opset=OPSET_ML3, dtype=np.float32):
    x_train, x_test, y_train, y_test = data
    x_train, x_test = x_train.astype(dtype), x_test.astype(dtype)
    model.fit(x_train, y_train)
    onx = to_onnx(model, x_train[:1], target_opset=opset)
    y_test_of[name] = y_test[:BATCH]
    save(name, model, onx, x_test[:BATCH], "regressor", {"value": onx.graph.output[0].name})


def set_ml_opset(model, version):
    for imp in model.opset_import:
        if imp.domain == "ai.onnx.ml":
            imp.version = version


def to_as_tensor(model):
    """Moves the real-valued tree attributes into *_as_tensor form (ml opset 3)."""
    for node in model.graph.node:
        if not node.op_type.startswith("TreeEnsemble"):
            continue
        keep = []
        for att in node.attribute:
            if att.name in ("nodes_values", "class_weights", "target_weights", "base_values"):
                keep.append(helper.make_attribute(
                    att.name + "_as_tensor",
                    numpy_helper.from_array(np.array(att.floats, dtype=np.float32), att.name)))
            elif att.name != "nodes_hitrates":
                keep.append(att)
        del node.attribute[:]
        node.attribute.extend(keep)
    set_ml_opset(model, 3)
    return model


def to_tree_ensemble(model):
    """Rewrites single-target TreeEnsembleRegressor nodes as TreeEnsemble (ml opset 5)."""
    for node in model.graph.node:
        if node.op_type != "TreeEnsembleRegressor":
            continue
        a = {att.name: helper.get_attribute_value(att) for att in node.attribute}
        assert a["n_targets"] == 1 and a.get("aggregate_function", b"SUM") == b"SUM"
        branch_index, leaf_index = {}, {}
        for t, n, mode in zip(a["nodes_treeids"], a["nodes_nodeids"], a["nodes_modes"]):
            table = leaf_index if mode == b"LEAF" else branch_index
            table[(t, n)] = len(table)
        weights = {(t, n): w for t, n, w in zip(a["target_treeids"], a["target_nodeids"], a["target_weights"])}
        splits, features, modes, true_ids, true_leafs, false_ids, false_leafs = [], [], [], [], [], [], []
        leaf_weights = [0.0] * len(leaf_index)
        roots = {}
        modes_code = {b"BRANCH_LEQ": 0, b"BRANCH_LT": 1, b"BRANCH_GTE": 2, b"BRANCH_GT": 3,
                      b"BRANCH_EQ": 4, b"BRANCH_NEQ": 5}
        for i, (t, n, mode) in enumerate(zip(a["nodes_treeids"], a["nodes_nodeids"], a["nodes_modes"])):
            if mode == b"LEAF":
                leaf_weights[leaf_index[(t, n)]] = weights.get((t, n), 0.0)
                continue
            roots.setdefault(t, branch_index[(t, n)])
            splits.append(a["nodes_values"][i])
            features.append(a["nodes_featureids"][i])
            modes.append(modes_code[mode])
            for child, ids, leafs in ((a["nodes_truenodeids"][i], true_ids, true_leafs),
                                      (a["nodes_falsenodeids"][i], false_ids, false_leafs)):
                is_leaf = (t, child) in leaf_index
                ids.append(leaf_index[(t, child)] if is_leaf else branch_index[(t, child)])
                leafs.append(int(is_leaf))
        new = helper.make_node(
            "TreeEnsemble", list(node.input), list(node.output), domain="ai.onnx.ml",
            n_targets=1, aggregate_function=1, post_transform=0,
            tree_roots=[roots[t] for t in sorted(roots)],
            nodes_splits=numpy_helper.from_array(np.array(splits, np.float32), "nodes_splits"),
            nodes_featureids=features,
            nodes_modes=numpy_helper.from_array(np.array(modes, np.uint8), "nodes_modes"),
            nodes_truenodeids=true_ids, nodes_trueleafs=true_leafs,
            nodes_falsenodeids=false_ids, nodes_falseleafs=false_leafs,
            leaf_targetids=[0] * len(leaf_weights),
            leaf_weights=numpy_helper.from_array(np.array(leaf_weights, np.float32), "leaf_weights"))
        base = a.get("base_values", [0.0])[0]
        node.CopyFrom(new)
        if base:
            # TreeEnsemble has no base value: add it with an Add node.
            out = node.output[0]
            node.output[0] = out + "_trees"
            model.graph.initializer.append(numpy_helper.from_array(np.array([base], np.float32), "base_value"))
            model.graph.node.append(helper.make_node("Add", [out + "_trees", "base_value"], [out]))
    set_ml_opset(model, 5)
    return model


def derive(source, name, rewrite):
    """Writes a copy of model `source` rewritten by `rewrite` under `name`."""
    src, dst = os.path.join(HERE, source), os.path.join(HERE, name)
    os.makedirs(dst, exist_ok=True)
    model = rewrite(onnx.load(os.path.join(src, "model.onnx")))
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(dst, "model.onnx"))
    for f in os.listdir(src):
        if f.endswith(".npy"):
            shutil.copy(os.path.join(src, f), os.path.join(dst, f))
    with open(os.path.join(src, "meta.json")) as f:
        meta = json.load(f)
    meta["opset"] = {o.domain or "ai.onnx": o.version for o in model.opset_import}
    meta["derived_from"] = source
    with open(os.path.join(dst, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"{name}: derived from {source}")


def main():
    iris = split(datasets.load_iris)
    cancer = split(datasets.load_breast_cancer)
    diabetes = split(datasets.load_diabetes)
    digits = split(datasets.load_digits)

    classifier("logreg_binary", LogisticRegression(max_iter=5000), cancer)
    classifier("logreg_binary_labels", LogisticRegression(max_iter=1000), binary_iris(),
               zipmap=False)
    classifier("logreg_multiclass", LogisticRegression(max_iter=1000), iris)
    classifier("logreg_multiclass_ml1", LogisticRegression(max_iter=1000), iris, opset=OPSET_ML1)
    classifier("scaler_logreg_digits",
               make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000)), digits,
               zipmap=False)
    classifier("normalizer_logreg",
               make_pipeline(Normalizer(norm="l2"), LogisticRegression(max_iter=1000)), iris)
    classifier("rf_classifier",
               RandomForestClassifier(n_estimators=8, max_depth=5, random_state=SEED), iris)
    classifier("rf_classifier_binary_ml1",
               RandomForestClassifier(n_estimators=6, max_depth=4, random_state=SEED), cancer,
               opset=OPSET_ML1)
    classifier("gb_classifier_binary",
               GradientBoostingClassifier(n_estimators=10, max_depth=3, random_state=SEED),
               cancer, zipmap=False)
    classifier("gb_classifier_multiclass",
               GradientBoostingClassifier(n_estimators=6, max_depth=3, random_state=SEED), iris)

    classifier("svc_multiclass_proba", SVC(probability=True, random_state=SEED), iris, zipmap=False)
    regressor("svr_poly", SVR(kernel="poly", degree=2), diabetes)

    regressor("linear_regression", LinearRegression(), diabetes)
    regressor("ridge", Ridge(alpha=0.5), diabetes)
    regressor("rf_regressor",
              RandomForestRegressor(n_estimators=8, max_depth=6, random_state=SEED), diabetes)
    regressor("gb_regressor",
              GradientBoostingRegressor(n_estimators=10, max_depth=3, random_state=SEED),
              diabetes)
    regressor("gb_regressor_ml1",
              GradientBoostingRegressor(n_estimators=6, max_depth=3, random_state=SEED),
              diabetes, opset=OPSET_ML1)

    # skl2onnx only writes ml opset 1 trees for float input; derive the newer
    # attribute forms from its exports (same model, same expectations).
    derive("rf_classifier", "rf_classifier_as_tensor_ml3", to_as_tensor)
    derive("gb_regressor", "gb_regressor_as_tensor_ml3", to_as_tensor)
    derive("rf_regressor", "rf_regressor_tree_ensemble_ml5", to_tree_ensemble)
    derive("gb_regressor", "gb_regressor_tree_ensemble_ml5", to_tree_ensemble)


if __name__ == "__main__":
    main()
