"""Regenerates the bundled demo model: a scikit-learn StandardScaler +
LogisticRegression pipeline trained on the 8x8 digits data set that ships with
scikit-learn (no download), exported to ONNX with skl2onnx.

    /work/main/.venv/bin/python examples/models/make_digits_model.py

Writes next to this script:
    digits_logreg.onnx   input "input" float32 [N, 64] (pixel values 0..16);
                         outputs "label" int64 [N] and "probabilities"
                         float32 [N, 10] (zipmap disabled, plain tensors)
    digits_test_x.npy    the held-out test images, float32 [N, 64]
    digits_test_y.npy    their true labels, int64 [N]
and prints scikit-learn's own accuracy on the test images.
"""
import os

import numpy as np
from skl2onnx import to_onnx
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    x, y = load_digits(return_X_y=True)
    x_train, x_test, y_train, y_test = train_test_split(
        x.astype(np.float32), y.astype(np.int64), test_size=0.25, random_state=0, stratify=y)
    model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))
    model.fit(x_train, y_train)

    onx = to_onnx(model, x_train[:1], target_opset={"": 17, "ai.onnx.ml": 3},
                  options={id(model.steps[-1][1]): {"zipmap": False}})
    # Friendlier names than skl2onnx's defaults.
    renames = {onx.graph.input[0].name: "input", onx.graph.output[0].name: "label",
               onx.graph.output[1].name: "probabilities"}
    for value in list(onx.graph.input) + list(onx.graph.output):
        value.name = renames.get(value.name, value.name)
    for node in onx.graph.node:
        node.input[:] = [renames.get(n, n) for n in node.input]
        node.output[:] = [renames.get(n, n) for n in node.output]
    # skl2onnx lists the default domain twice; keep one entry per domain.
    seen = {}
    for imp in onx.opset_import:
        seen[imp.domain] = max(seen.get(imp.domain, 0), imp.version)
    del onx.opset_import[:]
    for domain, version in sorted(seen.items()):
        onx.opset_import.add(domain=domain, version=version)
    onx.doc_string = "scikit-learn StandardScaler + LogisticRegression on load_digits (8x8 images)"

    with open(os.path.join(HERE, "digits_logreg.onnx"), "wb") as f:
        f.write(onx.SerializeToString())
    np.save(os.path.join(HERE, "digits_test_x.npy"), x_test)
    np.save(os.path.join(HERE, "digits_test_y.npy"), y_test)
    accuracy = float((model.predict(x_test) == y_test).mean())
    print(f"scikit-learn test accuracy: {accuracy:.4f} on {len(y_test)} held-out images")


if __name__ == "__main__":
    main()
