#!/usr/bin/env bash
# The main job: set everything up, build, and classify scikit-learn's
# handwritten digits with the bundled model through `nee run`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh >/dev/null
echo
build/bin/nee inspect examples/models/digits_logreg.onnx
echo
echo "Classifying the 450 held-out digit images (scikit-learn's own accuracy on them: 436 of 450 = 96.89%):"
build/bin/nee run examples/models/digits_logreg.onnx \
  --input input=examples/models/digits_test_x.npy \
  --output-dir build/demo-out \
  --expect label=examples/models/digits_test_y.npy
