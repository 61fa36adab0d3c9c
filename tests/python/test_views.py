"""Zero-copy views (plan/memory_plan.cc alias groups): Reshape, Flatten, Squeeze,
Unsqueeze and Identity outputs share their input's arena bytes. These graphs keep
the input of a view alive after the view (read again later), chain views, mix
views with graph inputs/outputs, and feed the same value to two views; every
result is checked against numpy, in every session configuration, at 1-3 threads."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import nee

CONFIGS = [
    {},
    {"graph_optimization_level": 0},
    {"reference_kernels_only": True},
]


def _session(model, config, threads):
    options = nee.SessionOptions()
    options.intra_op_num_threads = threads
    for key, value in config.items():
        setattr(options, key, value)
    return nee.InferenceSession(model.SerializeToString(), options)


def _model(nodes, inputs, outputs, initializers=()):
    graph = helper.make_graph(nodes, "views", inputs, outputs, initializer=list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def _tensor(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _chain_model():
    # a = x + 1; r = Reshape(a); u = Unsqueeze(r); s = Squeeze(u); f = Flatten(s); i = Identity(f)
    # m = Relu(i) * 2; b = a * 3 (a read again after its views); out = m + Reshape(b)
    shape = numpy_helper.from_array(np.array([6, 20], np.int64), "shape")
    axes = numpy_helper.from_array(np.array([0], np.int64), "axes")
    two = numpy_helper.from_array(np.array(2.0, np.float32), "two")
    one = numpy_helper.from_array(np.array(1.0, np.float32), "one")
    three = numpy_helper.from_array(np.array(3.0, np.float32), "three")
    nodes = [
        helper.make_node("Add", ["x", "one"], ["a"]),
        helper.make_node("Reshape", ["a", "shape"], ["r"]),
        helper.make_node("Unsqueeze", ["r", "axes"], ["u"]),
        helper.make_node("Squeeze", ["u", "axes"], ["s"]),
        helper.make_node("Flatten", ["s"], ["f"], axis=1),
        helper.make_node("Identity", ["f"], ["i"]),
        helper.make_node("Relu", ["i"], ["relu"]),
        helper.make_node("Mul", ["relu", "two"], ["m"]),
        helper.make_node("Mul", ["a", "three"], ["b"]),
        helper.make_node("Reshape", ["b", "shape"], ["rb"]),
        helper.make_node("Add", ["m", "rb"], ["out"]),
        helper.make_node("Identity", ["r"], ["r_out"]),  # a view that is a graph output
    ]
    model = _model(nodes, [_tensor("x", [3, 4, 10])], [_tensor("out", [6, 20]), _tensor("r_out", [6, 20])],
                   [shape, axes, two, one, three])

    def expected(x):
        a = x + 1
        return [np.maximum(a.reshape(6, 20), 0) * 2 + (a * 3).reshape(6, 20), a.reshape(6, 20)]

    return model, expected


def _input_view_model():
    # Views of a graph input and of an initializer, and a view feeding two views.
    w = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(3, 4), "w")
    shape = numpy_helper.from_array(np.array([4, 3], np.int64), "shape")
    nodes = [
        helper.make_node("Reshape", ["x", "shape"], ["rx"]),
        helper.make_node("Reshape", ["w", "shape"], ["rw"]),
        helper.make_node("Add", ["rx", "rw"], ["sum"]),
        helper.make_node("Identity", ["sum"], ["i1"]),
        helper.make_node("Flatten", ["sum"], ["i2"], axis=0),
        helper.make_node("Neg", ["i1"], ["n"]),
        helper.make_node("Reshape", ["i2", "shape"], ["i3"]),
        helper.make_node("Sub", ["n", "i3"], ["out"]),
    ]
    model = _model(nodes, [_tensor("x", [2, 6])], [_tensor("out", [4, 3])], [w, shape])

    def expected(x):
        s = x.reshape(4, 3) + np.arange(12, dtype=np.float32).reshape(4, 3)
        return [-s - s]

    return model, expected


def _concat_model():
    # Concat inputs produced in place inside the output (memory_plan.cc): a part
    # read again after the Concat, an input repeated, a Concat of a Concat, a graph
    # input as a part, parts at unaligned offsets (3 x 5 x 5 floats), a Concat on
    # the last axis (outer dims 1), and one with batch 2 (parts not contiguous).
    one = numpy_helper.from_array(np.array(1.0, np.float32), "one")
    nodes = [
        helper.make_node("Relu", ["x"], ["a"]),
        helper.make_node("Sigmoid", ["a"], ["b"]),
        helper.make_node("Mul", ["a", "b"], ["c"]),
        helper.make_node("Concat", ["a", "c", "b", "a"], ["k"], axis=1),
        helper.make_node("Neg", ["c"], ["n"]),
        helper.make_node("Concat", ["k", "n", "x"], ["kk"], axis=-3),
        helper.make_node("Add", ["kk", "one"], ["out"]),
        helper.make_node("Add", ["a", "one"], ["a_again"]),
        helper.make_node("Slice", ["x", "starts", "ends", "axes"], ["xs"]),
        helper.make_node("Abs", ["xs"], ["s1"]),
        helper.make_node("Exp", ["xs"], ["s2"]),
        helper.make_node("Concat", ["s1", "s2"], ["odd"], axis=1),
        helper.make_node("Add", ["odd", "one"], ["odd_out"]),
        helper.make_node("Abs", ["x"], ["w1"]),
        helper.make_node("Concat", ["w1", "a"], ["wide"], axis=3),
        helper.make_node("Add", ["wide", "one"], ["wide_out"]),
        helper.make_node("Concat", ["b", "c"], ["batch"], axis=0),
        helper.make_node("Relu", ["batch"], ["b2"]),
        helper.make_node("Concat", ["b2", "b2"], ["batch_cat"], axis=1),
        helper.make_node("Add", ["batch_cat", "one"], ["batch_out"]),
    ]
    starts = numpy_helper.from_array(np.array([0, 0, 0], np.int64), "starts")
    ends = numpy_helper.from_array(np.array([3, 5, 5], np.int64), "ends")
    axes = numpy_helper.from_array(np.array([1, 2, 3], np.int64), "axes")
    outs = [_tensor("out", [1, 96, 8, 8]), _tensor("a_again", [1, 16, 8, 8]), _tensor("odd_out", [1, 6, 5, 5]),
            _tensor("wide_out", [1, 16, 8, 16]), _tensor("batch_out", [2, 32, 8, 8])]
    model = _model(nodes, [_tensor("x", [1, 16, 8, 8])], outs, [one, starts, ends, axes])

    def expected(x):
        a = np.maximum(x, 0)
        b = 1 / (1 + np.exp(-a))
        c = a * b
        k = np.concatenate([a, c, b, a], axis=1)
        xs = x[:, :3, :5, :5]
        batch = np.maximum(np.concatenate([b, c], axis=0), 0)
        return [np.concatenate([k, -c, x], axis=1) + 1, a + 1,
                np.concatenate([np.abs(xs), np.exp(xs)], axis=1) + 1,
                np.concatenate([np.abs(x), a], axis=3) + 1,
                np.concatenate([batch, batch], axis=1) + 1]

    return model, expected


def _slice_split_model():
    # Slice and Split outputs as views of their input (contiguous: outer dims 1, step 1) next to ones that
    # are not (a stepped slice, a last-axis slice, batch 2), a YOLOv8 C2f (Split, a branch on the second
    # half, Concat of both halves and the branch), the Split's input read again after the Concat, and a
    # Concat with the halves swapped (copied).
    one = numpy_helper.from_array(np.array(1.0, np.float32), "one")
    ints = lambda name, v: numpy_helper.from_array(np.array(v, np.int64), name)  # noqa: E731
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Split", ["r", "halves"], ["a", "b"], axis=1),
        helper.make_node("Sigmoid", ["b"], ["m1"]),
        helper.make_node("Mul", ["m1", "b"], ["m2"]),
        helper.make_node("Concat", ["a", "b", "m1", "m2"], ["c2f"], axis=1),
        helper.make_node("Add", ["c2f", "one"], ["c2f_out"]),
        helper.make_node("Concat", ["b", "a"], ["swapped"], axis=1),
        helper.make_node("Add", ["swapped", "r"], ["swapped_out"]),
        helper.make_node("Slice", ["r", "s_mid", "e_mid", "axes1"], ["mid"]),
        helper.make_node("Slice", ["r", "s_all", "e_all", "axes1", "step2"], ["stepped"]),
        helper.make_node("Slice", ["r", "s_all", "e_last", "axes3"], ["last"]),
        helper.make_node("Concat", ["mid", "stepped"], ["slices"], axis=1),
        helper.make_node("Neg", ["slices"], ["slices_out"]),
        helper.make_node("Abs", ["last"], ["last_out"]),
        helper.make_node("Concat", ["r", "r"], ["pair"], axis=0),
        helper.make_node("Split", ["pair"], ["p1", "p2"], axis=1),
        helper.make_node("Sub", ["p1", "p2"], ["pair_out"]),
    ]
    inits = [one, ints("halves", [8, 8]), ints("s_mid", [4]), ints("e_mid", [12]), ints("axes1", [1]),
             ints("s_all", [0]), ints("e_all", [16]), ints("step2", [2]), ints("e_last", [3]), ints("axes3", [3])]
    outs = [_tensor("c2f_out", [1, 32, 8, 8]), _tensor("swapped_out", [1, 16, 8, 8]),
            _tensor("slices_out", [1, 16, 8, 8]), _tensor("last_out", [1, 16, 8, 3]), _tensor("pair_out", [2, 8, 8, 8])]
    model = _model(nodes, [_tensor("x", [1, 16, 8, 8])], outs, inits)

    def expected(x):
        r = np.maximum(x, 0)
        a, b = r[:, :8], r[:, 8:]
        m1 = 1 / (1 + np.exp(-b))
        pair = np.concatenate([r, r], axis=0)
        return [np.concatenate([a, b, m1, m1 * b], axis=1) + 1, np.concatenate([b, a], axis=1) + r,
                -np.concatenate([r[:, 4:12], r[:, ::2]], axis=1), np.abs(r[..., :3]), pair[:, :8] - pair[:, 8:]]

    return model, expected


def _output_concat_model():
    # A detector head's last step: the graph output is a Concat whose parts are views of Concats made just
    # before, so those are produced straight into the output's own buffer; one part is read again after it.
    shape = numpy_helper.from_array(np.array([1, -1, 16], np.int64), "shape")
    nodes = [
        helper.make_node("Sigmoid", ["x"], ["s"]),
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Concat", ["s", "r"], ["h1"], axis=-1),
        helper.make_node("Reshape", ["h1", "shape"], ["p1"]),
        helper.make_node("Neg", ["x"], ["n"]),
        helper.make_node("Reshape", ["n", "shape"], ["p2"]),
        helper.make_node("Concat", ["p1", "p2", "p1"], ["detections"], axis=1),
        helper.make_node("Abs", ["p2"], ["after"]),
    ]
    model = _model(nodes, [_tensor("x", [1, 3, 8, 8])], [_tensor("detections", [1, 60, 16]),
                                                          _tensor("after", [1, 12, 16])], [shape])

    def expected(x):
        p1 = np.concatenate([1 / (1 + np.exp(-x)), np.maximum(x, 0)], axis=-1).reshape(1, -1, 16)
        p2 = (-x).reshape(1, -1, 16)
        return [np.concatenate([p1, p2, p1], axis=1), np.abs(p2)]

    return model, expected


def _subgraph_model():
    # Bodies of an If read values that live inside a Concat's output (a part, and Split views of the output);
    # one branch hands a captured value straight back as its output (it must outlive the arena bytes).
    big = numpy_helper.from_array(np.array(-1e30, np.float32), "big")
    then_body = helper.make_graph([helper.make_node("Add", ["s1", "a"], ["t"])], "then", [], [_tensor("t", [1, 8, 4, 4])])
    else_body = helper.make_graph([helper.make_node("Identity", ["s2"], ["e"])], "else", [], [_tensor("e", [1, 8, 4, 4])])
    nodes = [
        helper.make_node("Relu", ["x"], ["a"]),
        helper.make_node("Neg", ["x"], ["c"]),
        helper.make_node("Concat", ["a", "c"], ["cat"], axis=1),
        helper.make_node("Split", ["cat"], ["s1", "s2"], axis=1),
        helper.make_node("ReduceSum", ["x"], ["sum"], keepdims=0),
        helper.make_node("Greater", ["sum", "big"], ["cond"]),
        helper.make_node("Not", ["cond"], ["not_cond"]),
        helper.make_node("If", ["cond"], ["then_out"], then_branch=then_body, else_branch=else_body),
        helper.make_node("If", ["not_cond"], ["else_out"], then_branch=then_body, else_branch=else_body),
        helper.make_node("Sigmoid", ["cat"], ["sig"]),
        helper.make_node("Mul", ["else_out", "then_out"], ["prod"]),
        helper.make_node("Abs", ["x"], ["after"]),  # new values written after the bodies ran
        helper.make_node("Add", ["after", "prod"], ["out"]),
    ]
    model = _model(nodes, [_tensor("x", [1, 8, 4, 4])], [_tensor("out", [1, 8, 4, 4]), _tensor("sig", [1, 16, 4, 4]),
                                                        _tensor("else_out", [1, 8, 4, 4])], [big])

    def expected(x):
        a = np.maximum(x, 0)
        return [np.abs(x) + (-x) * (a + a), 1 / (1 + np.exp(-np.concatenate([a, -x], axis=1))), -x]

    return model, expected


def _c2f_conv_model():
    # The same C2f with convolutions (what the blocked layout and the fused kernels see), channels a multiple of 8.
    rng = np.random.default_rng(5)
    w = lambda name, co, ci, k: numpy_helper.from_array(  # noqa: E731
        (rng.standard_normal((co, ci, k, k)) * 0.2).astype(np.float32), name)
    nodes = [
        helper.make_node("Conv", ["x", "w0"], ["c0"]),
        helper.make_node("Split", ["c0", "halves"], ["a", "b"], axis=1),
        helper.make_node("Conv", ["b", "w1"], ["m1"], pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["m1", "w2"], ["m2"], pads=[1, 1, 1, 1]),
        helper.make_node("Concat", ["a", "b", "m1", "m2"], ["cat"], axis=1),
        helper.make_node("Conv", ["cat", "w3"], ["out"]),
    ]
    inits = [w("w0", 32, 16, 1), numpy_helper.from_array(np.array([16, 16], np.int64), "halves"),
             w("w1", 16, 16, 3), w("w2", 16, 16, 3), w("w3", 24, 64, 1)]
    model = _model(nodes, [_tensor("x", [1, 16, 12, 12])], [_tensor("out", [1, 24, 12, 12])], inits)
    return model, None


@pytest.mark.parametrize("make", [_chain_model, _input_view_model, _concat_model, _slice_split_model,
                                  _output_concat_model, _subgraph_model])
@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_views_compute_what_numpy_does(make, config, threads):
    model, expected = make()
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    x = np.random.default_rng(threads).standard_normal(shape).astype(np.float32)
    sess = _session(model, config, threads)
    for _ in range(3):  # the arena is reused run after run
        got = sess.run(None, {"x": x})
        for g, e in zip(got, expected(x)):
            np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-6)
    # Outputs are the caller's own: writing to them must not change a later run.
    got[0][...] = 123.0
    again = sess.run(None, {"x": x})
    np.testing.assert_allclose(again[0], expected(x)[0], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("make", [_chain_model, _input_view_model, _concat_model, _slice_split_model,
                                  _output_concat_model, _subgraph_model, _c2f_conv_model])
@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("threads", [1, 2])
def test_shared_buffers_give_bitwise_the_outputs_of_unshared_ones(make, config, threads, monkeypatch):
    """NEE_SHARE_BUFFERS=0 plans every value its own bytes: the outputs must be the same bits."""
    model, _ = make()
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    x = np.random.default_rng(threads + 10).standard_normal(shape).astype(np.float32)
    shared = _session(model, config, threads).run(None, {"x": x})
    monkeypatch.setenv("NEE_SHARE_BUFFERS", "0")
    unshared = _session(model, config, threads).run(None, {"x": x})
    for s, u in zip(shared, unshared):
        assert s.tobytes() == u.tobytes()
