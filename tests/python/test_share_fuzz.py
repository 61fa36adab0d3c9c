"""A few hundred random graphs of Slice/Split/Concat/views/elementwise ops and
If nodes (share_fuzz.py): buffer sharing on and NEE_SHARE_BUFFERS=0 give
onnx.reference's values and the same bits, at 1-3 threads, run after run and
from two Python threads at once. More cases: run share_fuzz.py alone."""
import pytest

import share_fuzz


@pytest.mark.parametrize("first", range(0, 240, 40))
def test_random_graphs_share_buffers_safely(first):
    problems = [p for p in (share_fuzz.check_case(seed) for seed in range(first, first + 40)) if p]
    assert not problems, problems


def _halves_model():
    """x [1, C, 16]: Slice's ends from Shape (known per signature), so each
    input shape places the halves inside x at its own offsets; both halves and
    x are read again after a Concat made of them."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    k = lambda name, v: numpy_helper.from_array(np.array(v, np.int64), name)  # noqa: E731
    nodes = [
        helper.make_node("Abs", ["x"], ["a"]),
        helper.make_node("Shape", ["a"], ["shape"]),
        helper.make_node("Gather", ["shape", "one"], ["c"]),
        helper.make_node("Div", ["c", "two"], ["half"]),
        helper.make_node("Unsqueeze", ["half", "zero"], ["half1"]),
        helper.make_node("Slice", ["a", "zero", "half1", "one"], ["lo"]),
        helper.make_node("Slice", ["a", "half1", "big", "one"], ["hi"]),
        helper.make_node("Concat", ["hi", "lo", "a"], ["y"], axis=1),
        helper.make_node("Neg", ["lo"], ["nlo"]),
        helper.make_node("Add", ["hi", "nlo"], ["z"]),
        helper.make_node("Mul", ["a", "a"], ["w"]),
    ]
    graph = helper.make_graph(
        nodes, "halves", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "C", 16])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("y", "z", "w")],
        initializer=[k("one", [1]), k("two", 2), k("zero", [0]), k("big", [1 << 30])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.parametrize("threads", [1, 2])
def test_new_input_shapes_plan_slice_views_anew(threads):
    """Each signature plans its own views; alternating shapes (and two Python
    threads running different shapes at once) give numpy's values."""
    import threading

    import numpy as np

    import nee

    options = nee.SessionOptions()
    options.intra_op_num_threads = threads
    sess = nee.InferenceSession(_halves_model().SerializeToString(), options)

    def expected(x):
        a = np.abs(x)
        h = x.shape[1] // 2
        return [np.concatenate([a[:, h:], a[:, :h], a], axis=1), a[:, h:] - a[:, :h], a * a]

    rng = np.random.default_rng(threads)
    xs = [rng.standard_normal((1, c, 16)).astype(np.float32) for c in (8, 6, 4, 12, 8, 6)]
    for x in xs:
        for g, e in zip(sess.run(None, {"x": x}), expected(x)):
            np.testing.assert_array_equal(g, e)
    problems = []

    def work(offset):
        for i in range(12):
            x = xs[(i + offset) % len(xs)]
            for g, e in zip(sess.run(None, {"x": x}), expected(x)):
                if not np.array_equal(g, e):
                    problems.append(x.shape)

    workers = [threading.Thread(target=work, args=(t,)) for t in range(2)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    assert not problems
