"""OrtValue, SparseTensor, OrtDevice, OrtMemoryInfo and OrtArenaCfg as ONNX Runtime
has them on the CPU; each check runs against onnxruntime and nee."""
import numpy as np
import pytest

from ort_api_util import X32, mul_model, rt, session  # noqa: F401


def test_ortvalue_from_numpy_shares_the_arrays_memory(rt):
    arr = X32.copy()
    v = rt.OrtValue.ortvalue_from_numpy(arr)
    assert v.device_name() == "cpu"
    assert v.shape() == [3, 2]
    assert v.data_type() == "tensor(float)"
    assert v.element_type() == 1
    assert v.is_tensor() and v.has_value() and not v.is_tensor_sequence() and not v.is_sparse_tensor()
    assert v.tensor_size_in_bytes() == 24
    assert v.data_ptr() == arr.ctypes.data
    arr[0, 0] = 42.0
    assert v.numpy()[0, 0] == 42.0


@pytest.mark.parametrize("dtype,code,name", [(np.int64, 7, "int64"), (np.bool_, 9, "bool"), (np.float16, 10, "float16"),
                                             (np.float64, 11, "double"), (np.uint8, 2, "uint8")])
def test_ortvalue_types(rt, dtype, code, name):
    v = rt.OrtValue.ortvalue_from_numpy(np.zeros((2,), dtype))
    assert (v.element_type(), v.data_type()) == (code, f"tensor({name})")


def test_ortvalue_from_shape_and_type(rt):
    v = rt.OrtValue.ortvalue_from_shape_and_type([2, 5], np.int64)
    assert v.shape() == [2, 5] and v.data_type() == "tensor(int64)"
    w = rt.OrtValue.ortvalue_from_shape_and_type([3], 1)  # an ONNX element type number
    assert w.data_type() == "tensor(float)"
    w.update_inplace(np.array([1, 2, 3], np.float32))
    np.testing.assert_array_equal(w.numpy(), [1, 2, 3])


def test_ortvalue_with_onnx_type(rt):
    v = rt.OrtValue.ortvalue_from_numpy_with_onnx_type(X32, 1)
    assert v.is_tensor() and v.element_type() == 1 and v.shape() == [3, 2]


def test_ortvalue_numpy_array_protocol(rt):
    v = rt.OrtValue.ortvalue_from_numpy(X32)
    assert np.asarray(v).ctypes.data == v.data_ptr()
    np.testing.assert_array_equal(np.asarray(v, dtype=np.float64), X32.astype(np.float64))


def test_ortvalue_dlpack_round_trip(rt):
    src = rt.OrtValue.ortvalue_from_numpy(X32)
    assert src.__dlpack_device__() == (1, 0)
    dst = rt.OrtValue.from_dlpack(src)
    assert dst.data_ptr() == src.data_ptr()
    np.testing.assert_array_equal(dst.numpy(), X32)
    from_capsule = rt.OrtValue.from_dlpack(src.__dlpack__())
    np.testing.assert_array_equal(from_capsule.numpy(), X32)
    flags = rt.OrtValue.from_dlpack(rt.OrtValue.ortvalue_from_numpy(np.array([True, False])))
    assert flags.numpy().dtype == np.bool_
    # and numpy takes an OrtValue through DLPack without a copy
    assert np.from_dlpack(src).ctypes.data == src.data_ptr()


def test_ortvalue_as_run_input_and_output(rt):
    sess = session(rt, mul_model())
    x = rt.OrtValue.ortvalue_from_numpy(X32)
    np.testing.assert_array_equal(sess.run(["Y"], {"X": x})[0], X32 * X32)
    outs = sess.run_with_ort_values(["Y"], {"X": x})
    assert len(outs) == 1 and isinstance(outs[0], rt.OrtValue)
    assert outs[0].data_type() == "tensor(float)" and outs[0].shape() == [3, 2]
    np.testing.assert_array_equal(outs[0].numpy(), X32 * X32)
    np.testing.assert_array_equal(x.numpy(), X32)  # the input is still valid


def test_non_cpu_devices_are_refused(rt):
    with pytest.raises((RuntimeError, ValueError)):
        rt.OrtValue.ortvalue_from_numpy(X32, "cuda", 0)


def test_sparse_coo(rt):
    cpu = rt.OrtDevice.make("cpu", 0)
    values = np.array([1.0, 2.0, 3.0], np.float32)
    indices = np.array([3, 5, 15], np.int64)
    st = rt.SparseTensor.sparse_coo_from_numpy([9, 9], values, indices, cpu)
    assert st.format() == rt.OrtSparseFormat.ORT_SPARSE_COO
    assert st.dense_shape() == [9, 9]
    assert st.data_type() == "sparse_tensor(float)"
    assert st.device_name() == "cpu"
    assert not st.values().flags.writeable
    np.testing.assert_array_equal(st.values(), values)
    np.testing.assert_array_equal(st.as_coo_view().indices(), indices)
    v = rt.OrtValue.ort_value_from_sparse_tensor(st)
    assert v.is_sparse_tensor()
    np.testing.assert_array_equal(v.as_sparse_tensor().values(), values)
    strings = rt.SparseTensor.sparse_coo_from_numpy([9, 9], np.array(["a", "b", "c"]), indices, cpu)
    assert strings.data_type() == "sparse_tensor(string)"
    with pytest.raises(RuntimeError):
        st.to_cuda(rt.OrtDevice.make("cuda", 0))


def test_sparse_csr(rt):
    inner = np.array([1, 1, 1], np.int64)
    outer = np.array([0, 1, 2, 3, 3, 3, 3, 3, 3, 3], np.int64)
    st = rt.SparseTensor.sparse_csr_from_numpy([9, 9], np.array([1, 2, 3], np.float32), inner, outer,
                                               rt.OrtDevice.make("cpu", 0))
    assert st.format() == rt.OrtSparseFormat.ORT_SPARSE_CSRC
    np.testing.assert_array_equal(st.as_csrc_view().inner(), inner)
    np.testing.assert_array_equal(st.as_csrc_view().outer(), outer)


def test_ort_device(rt):
    cpu = rt.OrtDevice.make("cpu", 0)
    assert (cpu.device_id(), cpu.device_type(), cpu.device_mem_type()) == (0, 0, 0)
    assert cpu.device_vendor_id() == rt.OrtDeviceVendorId.NONE
    assert rt.OrtDevice.make("cuda", 0).device_vendor_id() == rt.OrtDeviceVendorId.NVIDIA == 0x10DE


def test_ort_memory_info(rt):
    info = rt.OrtMemoryInfo("Cpu", rt.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0, rt.OrtMemType.DEFAULT)
    assert info.name == "Cpu" and info.device_id == 0
    assert info.mem_type == rt.OrtMemType.DEFAULT
    assert info.allocator_type == rt.OrtAllocatorType.ORT_ARENA_ALLOCATOR


def test_ort_arena_cfg(rt):
    cfg = rt.OrtArenaCfg(8, 0, 4, 2)
    assert (cfg.max_mem, cfg.arena_extend_strategy, cfg.initial_chunk_size_bytes, cfg.max_dead_bytes_per_chunk) == \
        (8, 0, 4, 2)
    kv = {"max_mem": 32, "arena_extend_strategy": 1, "initial_chunk_size_bytes": 18, "max_dead_bytes_per_chunk": 14,
          "initial_growth_chunk_size_bytes": 12, "max_power_of_two_extend_bytes": 17}
    cfg = rt.OrtArenaCfg(kv)
    assert {k: getattr(cfg, k) for k in kv} == kv


def test_c_level_signatures(rt):
    # What scripts written against onnxruntime.capi._pybind_state call.
    C = rt.capi._pybind_state
    v = C.OrtValue.from_dlpack(X32.__dlpack__())
    np.testing.assert_array_equal(v.numpy(), X32)
    cpu = C.OrtDevice(C.OrtDevice.cpu(), C.OrtDevice.default_memory(), 0)
    v = C.OrtValue.ortvalue_from_numpy(X32, cpu)
    np.testing.assert_array_equal(v.numpy(), X32)
    assert C.get_default_session_options().graph_optimization_level == rt.GraphOptimizationLevel.ORT_ENABLE_ALL
