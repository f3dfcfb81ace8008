"""mla.runtime on the CPU device with NumPy: binding without copies, errors
that name the buffer and write nothing, artifacts from bytes and paths."""

import gc

import numpy as np
import pytest

import mla.compiler as mc
import mla.runtime as rt
from conftest import RMS_NORM_STEP, rms_norm_reference

POISON = np.float32(-7.25)


@pytest.fixture(scope="module")
def norm_artifact():
    return rt.Artifact.load(mc.compile(RMS_NORM_STEP, optimize=False))


@pytest.fixture
def executor(norm_artifact):
    return rt.Executor(norm_artifact, rt.Device("cpu"))


def test_artifact_lists_its_buffers(norm_artifact):
    assert norm_artifact.function_name == "norm"
    buffers = {b.name: b for b in norm_artifact.buffers}
    assert set(buffers) == {"hidden_states", "norm.weight",
                            "hidden_states_out"}
    assert buffers["hidden_states"].role == "input"
    assert buffers["norm.weight"].role == "weight"
    assert buffers["hidden_states_out"].role == "output"
    assert buffers["norm.weight"].shape == (32,)
    assert buffers["hidden_states"].dtype == "f32"
    assert norm_artifact.caches == []


def test_binds_numpy_arrays_without_copying(executor, rng):
    x = rng.standard_normal((4, 32), dtype=np.float32)
    w = rng.standard_normal(32, dtype=np.float32)
    out = np.full((4, 32), POISON, np.float32)
    executor.bind("hidden_states", x)
    executor.bind("norm.weight", w)
    executor.bind("hidden_states_out", out)
    assert executor.fully_bound
    executor.run()
    np.testing.assert_allclose(out, rms_norm_reference(x, w), rtol=2e-6,
                               atol=2e-6)
    # The executor reads the caller's memory itself: new values written in
    # place after bind() are what the next step sees.
    x[:] = rng.standard_normal((4, 32), dtype=np.float32)
    executor.run()
    np.testing.assert_allclose(out, rms_norm_reference(x, w), rtol=2e-6,
                               atol=2e-6)


def test_a_bound_tensor_outlives_the_callers_reference(executor, rng):
    x = rng.standard_normal((4, 32), dtype=np.float32)
    expected = rms_norm_reference(x, np.ones(32))
    executor.bind("hidden_states", x.copy())  # the only reference
    executor.bind("norm.weight", np.ones(32, np.float32))
    out = np.zeros((4, 32), np.float32)
    executor.bind("hidden_states_out", out)
    gc.collect()
    executor.run()
    np.testing.assert_allclose(out, expected, rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("tensor, message", [
    (np.zeros((4, 32), np.float64), "declared [4, 32] f32, got [4, 32] f64"),
    (np.zeros((4, 33), np.float32), "declared [4, 32] f32, got [4, 33] f32"),
    (np.zeros((32, 4), np.float32).T, "must be contiguous"),
    (np.zeros((4, 32), np.int8), "has no runtime equivalent"),
    ([[0.0] * 32] * 4, "it has no __dlpack__"),
])
def test_a_bad_tensor_is_refused_naming_the_buffer(executor, tensor,
                                                    message):
    with pytest.raises(rt.Error) as error:
        executor.bind("hidden_states", tensor)
    assert "'hidden_states'" in str(error.value)
    assert message in str(error.value)
    assert not executor.is_bound("hidden_states")


def test_a_refused_output_is_not_written(executor, rng):
    executor.bind("hidden_states",
                  rng.standard_normal((4, 32), dtype=np.float32))
    executor.bind("norm.weight", np.ones(32, np.float32))
    wrong = np.full((4, 31), POISON, np.float32)
    with pytest.raises(rt.Error, match="hidden_states_out"):
        executor.bind("hidden_states_out", wrong)
    with pytest.raises(rt.Error, match="FAILED_PRECONDITION.*not bound"):
        executor.run()
    assert (wrong == POISON).all()


def test_unknown_names_are_errors(executor):
    with pytest.raises(rt.Error, match="no buffer 'nothing'"):
        executor.bind("nothing", np.zeros(1, np.float32))
    with pytest.raises(rt.Error, match="no cache 'hidden_states'"):
        executor.bind_cache("hidden_states", np.zeros((1, 1, 1), np.float32))


def test_artifact_loads_from_a_path(tmp_path, norm_artifact):
    path = tmp_path / "norm.mlaa"
    path.write_bytes(mc.compile(RMS_NORM_STEP, optimize=False))
    assert rt.Artifact.load(path).function_name == "norm"
    assert rt.Artifact.load(str(path)).buffers[0].name == "hidden_states"


@pytest.mark.parametrize("source", [b"", b"MLAA" + b"\0" * 60, "/nonexistent",
                                    "/"])
def test_a_bad_artifact_is_an_error(source):
    with pytest.raises(rt.Error):
        rt.Artifact.load(source)


def test_device_specs():
    assert rt.Device("cpu").name == "cpu"
    assert rt.Device().name == "cpu"
    for bad in ["gpu", "cuda:", "cuda:x", "cuda:-1", "cuda:0x"]:
        with pytest.raises(ValueError):
            rt.Device(bad)
    with pytest.raises(TypeError):
        rt.Artifact.load(3)


def test_the_cpu_device_has_no_streams(executor):
    with pytest.raises(ValueError, match="no streams"):
        executor.run(stream=1234)
    with pytest.raises(TypeError):
        executor.run(stream="default")


def test_memory_limit_refuses_an_executor_before_allocating(rng):
    artifact = rt.Artifact.load(
        mc.compile(model="deepseek-v2-lite", layers=1, batch=2,
                   block_size=16, max_blocks_per_seq=2, max_position=64,
                   dtype="f32"))
    device = rt.Device("cpu")
    device.memory_limit = 1024
    with pytest.raises(rt.Error, match="RESOURCE_EXHAUSTED"):
        rt.Executor(artifact, device)
    assert device.bytes_allocated == 0
    device.memory_limit = 0
    rt.Executor(artifact, device)


def test_bind_weights_checks_names_before_binding(norm_artifact):
    executor = rt.Executor(norm_artifact, rt.Device("cpu"))
    with pytest.raises(ValueError, match="missing norm.weight"):
        rt.bind_weights(executor, {})
    with pytest.raises(ValueError, match="no weight buffer named extra"):
        rt.bind_weights(executor, {"norm.weight": np.ones(32, np.float32),
                                   "extra": np.ones(1, np.float32)})
    assert not executor.is_bound("norm.weight")
    rt.bind_weights(executor, {"norm.weight": np.ones(32, np.float32)})
    assert executor.is_bound("norm.weight")


def test_version_is_the_projects():
    import os
    import re
    assert re.fullmatch(r"\d+\.\d+\.\d+", rt.__version__)
    version_file = os.path.join(os.path.dirname(__file__), "..", "..",
                                "runtime", "VERSION")
    with open(version_file) as f:
        assert f.read().strip() == rt.__version__
