"""The Vulkan device from Python: kiln.device, Tensor.to("vulkan"), kiln.vulkan, ops on
device tensors against the CPU, and the errors PyTorch raises. Skipped, with the
probe's reason, where no Vulkan device is usable; lavapipe (mesa-vulkan-drivers) makes
one on any machine."""
import os

os.environ.setdefault("KILN_VULKAN_VALIDATION", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import kiln  # noqa: E402

_avail = kiln.vulkan.availability()
needs_vulkan = pytest.mark.skipif(not _avail["usable"], reason="no usable Vulkan device: " + _avail["reason"])


def test_device_objects_parse_like_torch():
    assert str(kiln.device("vulkan")) == "vulkan:0"
    assert kiln.device("vulkan:0") == "vulkan"
    assert kiln.device("cpu").type == "cpu"
    assert repr(kiln.device("vulkan")) == "device(type='vulkan', index=0)"
    assert kiln.device("vulkan", 0) == kiln.device("vulkan:0")
    with pytest.raises(RuntimeError, match="Expected one of cpu, cuda, vulkan"):
        kiln.device("metal")


def test_availability_always_answers():
    a = kiln.vulkan.availability()
    assert a["reason"]
    assert a["usable"] == kiln.vulkan.is_available()
    assert set(a) >= {"built_with_vulkan", "usable", "reason", "selected", "validation", "devices", "memory"}
    for device in a["devices"]:
        assert {"max_workgroup_count_x", "max_push_constants_bytes", "min_storage_buffer_offset_alignment",
                "timestamp_period_ns"} <= set(device)


@needs_vulkan
def test_round_trip_and_ops_match_cpu():
    x = np.random.default_rng(0).standard_normal((5, 33)).astype(np.float32)
    t = kiln.from_numpy(x)
    d = t.to("vulkan")
    assert d.device == "vulkan:0" and d.is_vulkan
    np.testing.assert_array_equal(d.cpu().numpy(), x)
    np.testing.assert_array_equal(d.to(kiln.device("cpu")).numpy(), x)
    # Ops on the device against the same ops on the CPU.
    np.testing.assert_allclose((d * 2.0 + d).cpu().numpy(), (t * 2.0 + t).numpy(), rtol=1e-6)
    np.testing.assert_allclose(kiln.softmax(d, -1).cpu().numpy(), kiln.softmax(t, -1).numpy(), rtol=1e-5, atol=1e-8)
    w = kiln.from_numpy(np.random.default_rng(1).standard_normal((7, 33)).astype(np.float32))
    got = kiln.nn.functional.linear(d, w.to("vulkan")).cpu().numpy()
    np.testing.assert_allclose(got, kiln.nn.functional.linear(t, w).numpy(), rtol=1e-4, atol=1e-4)
    # bfloat16 on the device, converted there.
    np.testing.assert_array_equal(d.to(kiln.bfloat16).cpu().float().numpy(), t.to(kiln.bfloat16).float().numpy())
    assert d[0, 0].item() == pytest.approx(float(x[0, 0]))


@needs_vulkan
def test_memory_stats_and_synchronize():
    kiln.vulkan.synchronize()
    before = kiln.vulkan.memory_allocated()
    d = kiln.zeros([1024, 256]).to("vulkan")
    assert kiln.vulkan.memory_allocated() >= before + 1024 * 256 * 4
    assert kiln.vulkan.max_memory_allocated() >= kiln.vulkan.memory_allocated()
    del d
    assert kiln.vulkan.memory_allocated() == before
    kiln.vulkan.empty_cache()
    assert set(kiln.vulkan.memory_stats()) >= {"allocated_bytes", "reserved_bytes", "num_cache_hits"}


@needs_vulkan
def test_errors_match_torch():
    d = kiln.ones([3]).to("vulkan")
    with pytest.raises(TypeError, match="can't convert vulkan:0 device type tensor to numpy"):
        d.numpy()
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        kiln.add(d, kiln.ones([3]))
    with pytest.raises(NotImplementedError, match="no vulkan kernel"):
        kiln.expm1(d)
    # A Python number is fine, as in PyTorch.
    np.testing.assert_array_equal((d + 1).cpu().numpy(), np.full(3, 2, np.float32))


@needs_vulkan
def test_events_time_the_device():
    start = kiln.vulkan.Event(enable_timing=True)
    end = kiln.vulkan.Event(enable_timing=True)
    a = kiln.randn([128, 128]).to("vulkan")
    start.record()
    for _ in range(10):
        a = a * 1.0001
    end.record()
    end.synchronize()
    assert end.query() and start.query()
    assert start.elapsed_time(end) > 0
    with pytest.raises(RuntimeError, match="enable_timing=True"):
        kiln.vulkan.Event().elapsed_time(end)


@needs_vulkan
def test_zz_no_validation_errors():
    # Runs last in this file: every test above ran under the validation layer when it is
    # installed (vulkan-validationlayers).
    kiln.vulkan.synchronize()
    assert kiln.vulkan.validation_error_count() == 0


@needs_vulkan
def test_ops_without_a_vulkan_kernel_raise_instead_of_touching_device_memory():
    x = kiln.arange(6, dtype=kiln.float32).to("vulkan")
    for call in (lambda: x[x > 2], lambda: kiln.nonzero(x), lambda: kiln.linalg.inv(x.reshape(2, 3)[:, :2])):
        with pytest.raises((NotImplementedError, RuntimeError), match="vulkan"):
            call()


@needs_vulkan
def test_index_tensor_on_another_device_is_refused_and_device_tensors_print():
    x = kiln.arange(6, dtype=kiln.float32)
    with pytest.raises(RuntimeError, match="same device"):
        x[kiln.tensor([1, 2]).to("vulkan")]
    assert repr(x.to("vulkan")) == "tensor([0., 1., 2., 3., 4., 5.], device='vulkan:0')"


@needs_vulkan
def test_streams_events_and_record_stream_as_pytorch():
    assert kiln.vulkan.current_stream() == kiln.vulkan.default_stream()
    side = kiln.vulkan.Stream()
    assert side != kiln.vulkan.default_stream() and "id=" in repr(side)
    x = kiln.from_numpy(np.arange(1000, dtype=np.float32)).to("vulkan")
    side.wait_stream(kiln.vulkan.current_stream())  # x's upload was queued on the default stream
    with kiln.vulkan.stream(side):
        assert kiln.vulkan.current_stream() == side
        y = x * 2.0 + 1.0
        done = side.record_event()
    assert kiln.vulkan.current_stream() == kiln.vulkan.default_stream()
    kiln.vulkan.current_stream().wait_event(done)
    np.testing.assert_allclose((y - 1.0).cpu().numpy(), np.arange(1000, dtype=np.float32) * 2.0)
    y.record_stream(side)
    side.synchronize()
    assert side.query() and done.query()
    e = kiln.vulkan.Event()
    e.record(side)
    e.wait()  # the current stream waits on the device
    e.synchronize()
    with kiln.vulkan.stream(None):
        assert kiln.vulkan.current_stream() == kiln.vulkan.default_stream()
    with pytest.raises(RuntimeError, match="expected a tensor on vulkan:0"):
        kiln.zeros(2).record_stream(side)
