#!/usr/bin/env python3
"""Adds quantized and scikit-learn models to the scratch zoo made by tests/models/torch/export_zoo.py.

    /work/main/.venv/bin/python tests/models/export_zoo_extra.py [OUT_DIR=/tmp/zoo] [quant|sklearn]

Quantized: float models already in OUT_DIR are quantized with onnxruntime.quantization (quantize_dynamic;
quantize_static in QDQ and QOperator formats, calibrated on random data); their references are
onnxruntime's outputs (folders quant_*). scikit-learn: models trained on seeded random data, exported with
skl2onnx with and without ZipMap; references are scikit-learn's own predictions (folders skl_*).
"""
import os
import shutil
import sys
import traceback

import numpy as np

OUT = sys.argv[1] if len(sys.argv) > 1 else "/tmp/zoo"
WHAT = sys.argv[2:] or ["quant", "sklearn"]


def save_case(folder, model_bytes_or_path, inputs, expected):
    os.makedirs(folder, exist_ok=True)
    if isinstance(model_bytes_or_path, bytes):
        with open(os.path.join(folder, "model.onnx"), "wb") as f:
            f.write(model_bytes_or_path)
    elif os.path.abspath(model_bytes_or_path) != os.path.abspath(os.path.join(folder, "model.onnx")):
        shutil.copy(model_bytes_or_path, os.path.join(folder, "model.onnx"))
    for i, x in enumerate(inputs):
        np.save(os.path.join(folder, f"input_{i}.npy"), x)
    for i, y in enumerate(expected):
        np.save(os.path.join(folder, f"expected_{i}.npy"), y, allow_pickle=True)


# ------------------------------------------------------------------------------------------- quantized


def quantize_all():
    import onnxruntime as ort
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType, quantize_dynamic,
                                          quantize_static)
    from onnxruntime.quantization.shape_inference import quant_pre_process

    class RandomReader(CalibrationDataReader):
        def __init__(self, names, inputs, count=4):
            rng = np.random.default_rng(0)
            self.batches = []
            for _ in range(count):
                feed = {}
                for n, x in zip(names, inputs):
                    feed[n] = (rng.standard_normal(x.shape).astype(x.dtype) if x.dtype.kind == "f" else x)
                self.batches.append(feed)
            self.it = iter(self.batches)

        def get_next(self):
            return next(self.it, None)

    def inputs_of(folder):
        files = sorted(f for f in os.listdir(folder) if f.startswith("input_"))
        return [np.load(os.path.join(folder, f)) for f in files]

    def reference(model_path, inputs):
        sess = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
        feed = {a.name: x for a, x in zip(sess.get_inputs(), inputs)}
        return [sess.get_inputs()[i].name for i in range(len(inputs))], sess.run(None, feed)

    jobs = [
        # (source folder, kinds)
        ("resnet18_op13", ["static_qdq", "static_qop", "static_qdq_s8", "dynamic"]),
        ("mobilenet_v2_op13", ["static_qdq", "static_qop"]),
        ("efficientnet_b0_op13", ["static_qdq"]),
        ("squeezenet1_1_op13", ["static_qop"]),
        ("conv1d_3d_op13", ["static_qdq"]),
        ("conv_transpose_op13", ["static_qdq"]),
        ("gpt_like_op14", ["dynamic", "static_qdq"]),
        ("transformer_decoder_op17", ["dynamic", "static_qdq"]),
        ("small_vit_op17", ["dynamic", "static_qdq"]),
        ("lstm_last_step_op13", ["dynamic"]),
        ("gru_bidir_op13", ["dynamic"]),
        ("transformer_full_op14", ["dynamic"]),
    ]
    for src, kinds in jobs:
        src_dir = os.path.join(OUT, src)
        if not os.path.exists(os.path.join(src_dir, "model.onnx")):
            print(f"quant: {src} missing, skipped", flush=True)
            continue
        inputs = inputs_of(src_dir)
        prep = os.path.join(OUT, f".prep_{src}.onnx")
        try:
            quant_pre_process(os.path.join(src_dir, "model.onnx"), prep, skip_symbolic_shape=True)
        except Exception:
            shutil.copy(os.path.join(src_dir, "model.onnx"), prep)
        names, _ = reference(prep, inputs)
        for kind in kinds:
            folder = os.path.join(OUT, f"quant_{kind}_{src}")
            os.makedirs(folder, exist_ok=True)
            dst = os.path.join(folder, "model.onnx")
            try:
                if kind == "dynamic":
                    quantize_dynamic(prep, dst, weight_type=QuantType.QInt8)
                else:
                    fmt = QuantFormat.QDQ if "qdq" in kind else QuantFormat.QOperator
                    act = QuantType.QInt8 if kind.endswith("s8") else QuantType.QUInt8
                    quantize_static(prep, dst, RandomReader(names, inputs), quant_format=fmt,
                                    activation_type=act, weight_type=QuantType.QInt8,
                                    per_channel=kind.endswith("s8"))
                _, expected = reference(dst, inputs)
                save_case(folder, dst, inputs, expected)
                print(f"{os.path.basename(folder)}: ok", flush=True)
            except Exception as e:
                shutil.rmtree(folder, ignore_errors=True)
                print(f"{os.path.basename(folder)}: failed: {str(e).splitlines()[0][:200]}", flush=True)


# ----------------------------------------------------------------------------------------- scikit-learn


def sklearn_all():
    from skl2onnx import to_onnx
    from skl2onnx.common.data_types import FloatTensorType, Int64TensorType, StringTensorType
    from sklearn.compose import ColumnTransformer
    from sklearn.datasets import make_classification, make_regression
    from sklearn.decomposition import PCA
    from sklearn.ensemble import (ExtraTreesClassifier, GradientBoostingClassifier, HistGradientBoostingClassifier,
                                  HistGradientBoostingRegressor, RandomForestClassifier, RandomForestRegressor,
                                  ExtraTreesRegressor, GradientBoostingRegressor)
    from sklearn.linear_model import LinearRegression, LogisticRegression, SGDClassifier, Ridge
    from sklearn.neighbors import KNeighborsClassifier, KNeighborsRegressor
    from sklearn.neural_network import MLPClassifier, MLPRegressor
    from sklearn.pipeline import Pipeline, make_pipeline
    from sklearn.preprocessing import MinMaxScaler, OneHotEncoder, StandardScaler
    from sklearn.svm import LinearSVC, SVC, LinearSVR
    from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

    Xb, yb = make_classification(200, 8, n_informative=5, n_classes=2, random_state=0)
    Xm, ym = make_classification(300, 8, n_informative=6, n_classes=4, random_state=1)
    Xr, yr = make_regression(200, 8, noise=0.5, random_state=2)
    Xb, Xm, Xr = (a.astype(np.float32) for a in (Xb, Xm, Xr))
    yr = yr.astype(np.float32)

    classifiers = [
        ("logreg_bin", LogisticRegression(max_iter=500), "b"),
        ("logreg_multi", LogisticRegression(max_iter=500), "m"),
        ("logreg_ovr", LogisticRegression(max_iter=500, multi_class="ovr") if "multi_class" in
         LogisticRegression().get_params() else LogisticRegression(max_iter=300, C=0.3), "m"),
        ("linear_svc_bin", LinearSVC(), "b"),
        ("linear_svc_multi", LinearSVC(), "m"),
        ("sgd_hinge_multi", SGDClassifier(random_state=0), "m"),
        ("sgd_log_bin", SGDClassifier(loss="log_loss", random_state=0), "b"),
        ("svc_rbf", SVC(probability=True, random_state=0), "m"),
        ("random_forest", RandomForestClassifier(n_estimators=10, max_depth=6, random_state=0), "m"),
        ("random_forest_bin", RandomForestClassifier(n_estimators=10, random_state=0), "b"),
        ("extra_trees", ExtraTreesClassifier(n_estimators=10, max_depth=6, random_state=0), "m"),
        ("gradient_boosting", GradientBoostingClassifier(n_estimators=15, random_state=0), "m"),
        ("gradient_boosting_bin", GradientBoostingClassifier(n_estimators=15, random_state=0), "b"),
        ("hist_gb", HistGradientBoostingClassifier(max_iter=15, random_state=0), "m"),
        ("hist_gb_bin", HistGradientBoostingClassifier(max_iter=15, random_state=0), "b"),
        ("decision_tree", DecisionTreeClassifier(max_depth=5, random_state=0), "m"),
        ("knn", KNeighborsClassifier(3), "m"),
        ("mlp", MLPClassifier((16,), max_iter=300, random_state=0), "m"),
        ("mlp_bin", MLPClassifier((16, 8), max_iter=300, random_state=0), "b"),
        ("pipe_std_logreg", make_pipeline(StandardScaler(), LogisticRegression(max_iter=500)), "m"),
        ("pipe_minmax_pca_rf", make_pipeline(MinMaxScaler(), PCA(4), RandomForestClassifier(8, random_state=0)), "m"),
    ]
    regressors = [
        ("linreg", LinearRegression()),
        ("ridge", Ridge()),
        ("linear_svr", LinearSVR(random_state=0, max_iter=5000)),
        ("rf_reg", RandomForestRegressor(n_estimators=8, max_depth=5, random_state=0)),
        ("et_reg", ExtraTreesRegressor(n_estimators=8, max_depth=5, random_state=0)),
        ("gb_reg", GradientBoostingRegressor(n_estimators=15, random_state=0)),
        ("hist_gb_reg", HistGradientBoostingRegressor(max_iter=15, random_state=0)),
        ("dt_reg", DecisionTreeRegressor(max_depth=6, random_state=0)),
        ("knn_reg", KNeighborsRegressor(4)),
        ("mlp_reg", MLPRegressor(hidden_layer_sizes=(16,), max_iter=300, random_state=0)),
        ("pipe_pca_ridge", make_pipeline(StandardScaler(), PCA(5), Ridge())),
    ]

    def export_classifier(name, model, X, y, zipmap, opset):
        suffix = "zipmap" if zipmap else "nozipmap"
        folder = os.path.join(OUT, f"skl_{name}_{suffix}_op{opset}")
        options = {} if zipmap else {id(model): {"zipmap": False}}
        if isinstance(model, Pipeline):
            options = {} if zipmap else {id(model.steps[-1][1]): {"zipmap": False}}
        try:
            onx = to_onnx(model, X[:1], options=options, target_opset={"": opset, "ai.onnx.ml": 3})
        except Exception:  # some converters (HistGradientBoosting) need their own ai.onnx.ml version
            onx = to_onnx(model, X[:1], options=options, target_opset=opset)
        Xt = X[:20]
        expected = [model.predict(Xt)]
        if hasattr(model, "predict_proba"):
            expected.append(model.predict_proba(Xt).astype(np.float32))
        elif hasattr(model, "decision_function"):
            expected.append(model.decision_function(Xt).astype(np.float32))
        save_case(folder, onx.SerializeToString(), [Xt], expected)
        print(f"{os.path.basename(folder)}: ok", flush=True)

    for name, model, which in classifiers:
        X, y = (Xb, yb) if which == "b" else (Xm, ym)
        try:
            model.fit(X, y)
            for zipmap, opset in ((True, 13), (False, 15)):
                if not zipmap and not hasattr(model, "predict_proba"):
                    continue
                export_classifier(name, model, X, y, zipmap, opset)
        except Exception as e:
            print(f"skl_{name}: failed: {str(e).splitlines()[0][:200]}", flush=True)

    for name, model in regressors:
        try:
            model.fit(Xr, yr)
            for opset in (11, 17):
                folder = os.path.join(OUT, f"skl_{name}_op{opset}")
                try:
                    onx = to_onnx(model, Xr[:1], target_opset={"": opset, "ai.onnx.ml": 3})
                except Exception:
                    onx = to_onnx(model, Xr[:1], target_opset=opset)
                pred = model.predict(Xr[:20]).astype(np.float32).reshape(20, -1)
                save_case(folder, onx.SerializeToString(), [Xr[:20]], [pred])
                print(f"{os.path.basename(folder)}: ok", flush=True)
        except Exception as e:
            print(f"skl_{name}: failed: {str(e).splitlines()[0][:200]}", flush=True)

    # ColumnTransformer on one float matrix: columns 0-2 scaled, columns 3-4 (small integers) one-hot encoded.
    try:
        rng = np.random.default_rng(3)
        X = np.concatenate([rng.standard_normal((120, 3)), rng.integers(0, 4, (120, 2))], 1).astype(np.float32)
        y = ((X[:, 0] + (X[:, 3] == 2)) > 0.5).astype(np.int64)
        for zipmap in (True, False):
            pre = ColumnTransformer([("num", StandardScaler(), [0, 1, 2]),
                                     ("cat", OneHotEncoder(handle_unknown="ignore"), [3, 4])])
            pipe = Pipeline([("pre", pre), ("clf", LogisticRegression(max_iter=300))]).fit(X, y)
            options = {} if zipmap else {id(pipe.steps[-1][1]): {"zipmap": False}}
            onx = to_onnx(pipe, X[:1], options=options, target_opset={"": 15, "ai.onnx.ml": 3})
            expected = [pipe.predict(X[:15]), pipe.predict_proba(X[:15]).astype(np.float32)]
            folder = os.path.join(OUT, f"skl_column_transformer_{'zipmap' if zipmap else 'nozipmap'}_op15")
            save_case(folder, onx.SerializeToString(), [X[:15]], expected)
            print(f"{os.path.basename(folder)}: ok", flush=True)
    except Exception:
        traceback.print_exc()
    # String class labels and string features.
    try:
        names = np.array(["setosa", "versicolor", "virginica", "other"])
        ys = names[ym]
        for name, model in (("logreg_strlabels", LogisticRegression(max_iter=500)),
                            ("rf_strlabels", RandomForestClassifier(n_estimators=5, max_depth=4, random_state=0)),
                            ("dt_strlabels", DecisionTreeClassifier(max_depth=4, random_state=0))):
            model.fit(Xm, ys)
            for zipmap, opset in ((True, 13), (False, 17)):
                folder = os.path.join(OUT, f"skl_{name}_{'zipmap' if zipmap else 'nozipmap'}_op{opset}")
                options = {} if zipmap else {id(model): {"zipmap": False}}
                onx = to_onnx(model, Xm[:1], options=options, target_opset={"": opset, "ai.onnx.ml": 3})
                save_case(folder, onx.SerializeToString(), [Xm[:20]],
                          [model.predict(Xm[:20]), model.predict_proba(Xm[:20]).astype(np.float32)])
                print(f"{os.path.basename(folder)}: ok", flush=True)
        rng = np.random.default_rng(5)
        cats = np.array(["red", "green", "blue", "teal"], dtype=object)
        Xs = np.stack([cats[rng.integers(0, 4, 100)], cats[rng.integers(0, 3, 100)]], 1)
        y = ((Xs[:, 0] == "red") | (Xs[:, 1] == "blue")).astype(np.int64)
        pipe = make_pipeline(OneHotEncoder(handle_unknown="ignore"), LogisticRegression()).fit(Xs, y)
        onx = to_onnx(pipe, initial_types=[("s", StringTensorType([None, 2]))],
                      options={id(pipe.steps[-1][1]): {"zipmap": False}}, target_opset={"": 15, "ai.onnx.ml": 3})
        folder = os.path.join(OUT, "skl_onehot_strings_logreg_nozipmap_op15")
        save_case(folder, onx.SerializeToString(), [Xs[:12].astype(str)],
                  [pipe.predict(Xs[:12]), pipe.predict_proba(Xs[:12]).astype(np.float32)])
        print(f"{os.path.basename(folder)}: ok", flush=True)
    except Exception:
        traceback.print_exc()


if __name__ == "__main__":
    if "quant" in WHAT:
        quantize_all()
    if "sklearn" in WHAT:
        sklearn_all()
