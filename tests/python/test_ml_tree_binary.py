"""Binary TreeEnsembleClassifier (every leaf weight for one class) against ONNX Runtime and onnx.reference.

The binary form is where ONNX leaves the most open; nee follows ONNX Runtime (what exporters test
against). Each case is compared with ONNX Runtime, and with onnx.reference where the two agree, under
the default and the reference-kernel configurations (tree_fast.cc shares the reference's driver).
"""
import os
import sys

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import nee

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from session_configs import session_options  # noqa: E402


def stump_classifier(leaf_weights, base_values, post_transform, class_id=0):
    """One tree: a split on feature 0 at 0.5 with one weight per leaf, all for `class_id`.

    A single weight makes the tree a single leaf (sklearn exports a tree that never split this way)."""
    if len(leaf_weights) == 1:
        nodes = dict(nodes_nodeids=[0], nodes_modes=["LEAF"], nodes_featureids=[0], nodes_values=[0.0],
                     nodes_truenodeids=[0], nodes_falsenodeids=[0])
        leaves = [0]
    else:
        nodes = dict(nodes_nodeids=[0, 1, 2], nodes_modes=["BRANCH_LEQ", "LEAF", "LEAF"], nodes_featureids=[0, 0, 0],
                     nodes_values=[0.5, 0.0, 0.0], nodes_truenodeids=[1, 0, 0], nodes_falsenodeids=[2, 0, 0])
        leaves = [1, 2]
    count = len(nodes["nodes_nodeids"])
    attrs = dict(nodes, nodes_treeids=[0] * count, nodes_hitrates=[1.0] * count,
                 nodes_missing_value_tracks_true=[0] * count, classlabels_int64s=[0, 1],
                 class_ids=[class_id] * len(leaves), class_nodeids=leaves, class_treeids=[0] * len(leaves),
                 class_weights=list(leaf_weights), post_transform=post_transform)
    if base_values is not None:
        attrs["base_values"] = base_values
    node = helper.make_node("TreeEnsembleClassifier", ["X"], ["label", "probabilities"], domain="ai.onnx.ml",
                            name="trees", **attrs)
    graph = helper.make_graph([node], "binary_trees", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, 2])],
                              [helper.make_tensor_value_info("label", TensorProto.INT64, [None]),
                               helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, [None, 2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 3)])
    model.ir_version = 8
    return model.SerializeToString()


X = np.array([[0.0, 1.0], [1.0, 2.0], [0.25, -3.0]], np.float32)

# (leaf weights, base_values, post_transform, what onnx.reference agrees with ONNX Runtime on). Where
# they differ, nee follows ONNX Runtime: its labels threshold the weight sum (0.5 when every weight is
# >= 0, else 0) where onnx.reference takes the argmax of the transformed scores, and for signed weights
# without LOGISTIC its scores are [-s, s] where onnx.reference gives [1-s, s].
CASES = {
    # The reported case: a GradientBoostingClassifier whose only tree never split (one leaf of weight 0)
    # plus the prior log-odds log(0.4 / 0.6) as base value.
    "single_leaf_zero_logistic": ([0.0], [-0.405], "LOGISTIC", "all"),
    "single_leaf_positive_logistic": ([0.3], [-0.405], "LOGISTIC", "all"),
    "stump_positive_logistic": ([0.25, 0.75], [-0.405], "LOGISTIC", "scores"),
    "stump_margin_logistic": ([-1.5, 2.0], [0.2], "LOGISTIC", "all"),
    "stump_positive_no_base_logistic": ([0.1, 0.2], None, "LOGISTIC", "scores"),
    "single_leaf_zero_none": ([0.0], [-0.405], "NONE", "all"),
    "stump_probability_none": ([0.2, 0.9], None, "NONE", "all"),
    "stump_margin_none": ([-1.5, 2.0], [0.2], "NONE", None),
}


@pytest.mark.parametrize("config", ["default", "reference"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_binary_classifier_matches_onnxruntime(case, config):
    weights, base, transform, reference_agrees = CASES[case]
    model = stump_classifier(weights, base, transform)
    expected_label, expected_scores = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, {"X": X})
    label, scores = nee.InferenceSession(model, session_options(config)).run(None, {"X": X})
    np.testing.assert_allclose(scores, expected_scores, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(label, expected_label)
    if reference_agrees:
        ref_label, ref_scores = ReferenceEvaluator(model).run(None, {"X": X})
        np.testing.assert_allclose(scores, ref_scores, rtol=1e-5, atol=1e-6)
        if reference_agrees == "all":
            np.testing.assert_array_equal(label, ref_label)


def test_reported_values():
    """The numbers of the report, written out: logistic(0.405) and logistic(-0.405)."""
    model = stump_classifier([0.0], [-0.405], "LOGISTIC")
    _, scores = nee.InferenceSession(model).run(None, {"X": X[:1]})
    np.testing.assert_allclose(scores, [[1 / (1 + np.exp(-0.405)), 1 / (1 + np.exp(0.405))]], rtol=1e-6)
