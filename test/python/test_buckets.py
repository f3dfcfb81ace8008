"""Decode buckets: compile_buckets with its on-disk cache, and
DecodeBuckets padding a batch to the smallest bucket that holds it."""

import os
import sys

import numpy as np
import pytest

import mla.compiler as mc
import mla.runtime as rt

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..",
                                "examples", "python"))
import deepseek_layer  # noqa: E402
from conftest import FP8_TABLES  # noqa: E402

CONFIG = {
    "hidden_size": 256, "num_attention_heads": 4, "q_lora_rank": None,
    "kv_lora_rank": 128, "qk_nope_head_dim": 32, "qk_rope_head_dim": 16,
    "v_head_dim": 48, "num_hidden_layers": 1, "rms_norm_eps": 1e-6,
}
STEP = dict(layers=1, dtype="f32", block_size=16, max_blocks_per_seq=2,
            max_position=32)


def test_compile_buckets_caches_on_disk(tmp_path):
    first = mc.compile_buckets(CONFIG, [4, 2, 8, 4], cache_dir=tmp_path,
                               **STEP)
    assert sorted(first) == [2, 4, 8]
    files = sorted(os.listdir(tmp_path))
    assert len(files) == 3
    for batch, artifact in first.items():
        hidden = next(b for b in rt.Artifact.load(artifact).buffers
                      if b.name == "hidden_states")
        assert hidden.shape == (batch, 256)
    stamps = {f: os.stat(tmp_path / f).st_mtime_ns for f in files}
    again = mc.compile_buckets(CONFIG, [2, 4, 8], cache_dir=tmp_path, **STEP)
    assert again == first
    assert {f: os.stat(tmp_path / f).st_mtime_ns for f in files} == stamps
    # Other options are another key, not a stale hit.
    other = mc.compile_buckets(CONFIG, [2], cache_dir=tmp_path,
                               pipeline="fuse-rope=false", **STEP)
    assert len(os.listdir(tmp_path)) == 4
    assert other[2] != first[2]
    with pytest.raises(TypeError, match="buckets give the batch"):
        mc.compile_buckets(CONFIG, [2], batch=3)
    with pytest.raises(ValueError, match="positive"):
        mc.compile_buckets(CONFIG, [0])


def test_a_padded_batch_matches_its_exact_step(rng):
    artifacts = mc.compile_buckets(CONFIG, [2, 4], **STEP)
    exact = rt.Artifact.load(mc.compile(model=CONFIG, batch=3, **STEP))
    device = rt.Device("cpu")
    weights = deepseek_layer.random_weights(CONFIG, 0, rng)
    cos_sin = deepseek_layer.cos_sin_table(32, CONFIG["qk_rope_head_dim"])
    absorbed = dict(rt.absorb(weights, exact), cos_sin_cache=cos_sin)
    info = exact.caches[0]
    engine = deepseek_layer.Engine(info, 1 + 3 * 2, 2)
    engine.cache[:] = rng.standard_normal(engine.cache.shape, np.float32)
    # Three requests with 5, 9 and 20 cached tokens, then one decode token.
    for request, count in enumerate([5, 9, 20]):
        engine.schedule(request, count)
    step, _ = engine.metadata([0, 1, 2], [1, 1, 1])
    hidden = rng.standard_normal((3, 256), np.float32)
    inputs = dict(hidden_states=hidden, **{
        k: v for k, v in step.items() if k != "query_start_loc"})
    cache_before = engine.cache.copy()

    buckets = rt.DecodeBuckets(artifacts, device)
    buckets.bind_weights(absorbed)
    buckets.bind_cache(info.name, engine.cache)
    assert buckets.bucket_for(3) == 4
    outputs = buckets.run(inputs)
    padded_out = outputs["hidden_states_out"].copy()
    padded_cache = engine.cache.copy()

    engine.cache[:] = cache_before
    executor = rt.Executor(exact, device)
    rt.bind_weights(executor, absorbed)
    executor.bind_cache(info.name, engine.cache)
    out = np.zeros((3, 256), np.float32)
    for name, tensor in dict(inputs, hidden_states_out=out).items():
        executor.bind(name, tensor)
    executor.run()
    np.testing.assert_array_equal(padded_out, out)
    np.testing.assert_array_equal(padded_cache, engine.cache)
    assert not np.array_equal(padded_cache, cache_before)

    with pytest.raises(ValueError, match="larger than the largest bucket"):
        buckets.bucket_for(5)
    with pytest.raises(ValueError, match="rows, not 3"):
        buckets.run(dict(inputs, positions=step["positions"][:2]))


def test_a_padded_prefill_matches_its_exact_step(rng, tmp_path):
    """Two requests, 13 new tokens (one with 9 cached tokens of context),
    on the 16-token bucket of a 3-request compile: the same output and
    cache as the exact (13 tokens, 2 requests) step."""
    prefill = dict(STEP, max_blocks_per_seq=2)
    artifacts = mc.compile_buckets(CONFIG, [8, 16], phase="prefill",
                                   requests=3, cache_dir=tmp_path, **prefill)
    assert all(name.startswith("prefill-") for name in os.listdir(tmp_path))
    exact = rt.Artifact.load(mc.compile(model=CONFIG, phase="prefill",
                                        tokens=13, requests=2, **prefill))
    device = rt.Device("cpu")
    weights = deepseek_layer.random_weights(CONFIG, 0, rng)
    cos_sin = deepseek_layer.cos_sin_table(32, CONFIG["qk_rope_head_dim"])
    absorbed = dict(rt.absorb(weights, exact), cos_sin_cache=cos_sin)
    info = exact.caches[0]
    engine = deepseek_layer.Engine(info, 6, 2)
    engine.cache[:] = rng.standard_normal(engine.cache.shape, np.float32)
    engine.schedule(0, 9)  # request 0's cached context
    step, _ = engine.metadata([0, 1], [4, 9])
    inputs = dict(step, hidden_states=rng.standard_normal((13, 256),
                                                          np.float32))
    cache_before = engine.cache.copy()

    buckets = rt.PrefillBuckets(artifacts, device)
    assert buckets.requests == 3 and buckets.bucket_for(13) == 16
    buckets.bind_weights(absorbed)
    buckets.bind_cache(info.name, engine.cache)
    padded_out = buckets.run(inputs)["hidden_states_out"].copy()
    padded_cache = engine.cache.copy()

    engine.cache[:] = cache_before
    executor = rt.Executor(exact, device)
    rt.bind_weights(executor, absorbed)
    executor.bind_cache(info.name, engine.cache)
    out = np.zeros((13, 256), np.float32)
    for name, tensor in dict(inputs, hidden_states_out=out).items():
        executor.bind(name, tensor)
    executor.run()
    np.testing.assert_array_equal(padded_out, out)
    np.testing.assert_array_equal(padded_cache, engine.cache)
    assert not np.array_equal(padded_cache, cache_before)

    with pytest.raises(ValueError, match="more than the buckets' 3"):
        buckets.step(4, 4)
    with pytest.raises(ValueError, match="rows, not 3"):
        buckets.run(dict(inputs, query_start_loc=step["query_start_loc"][:2]))
    with pytest.raises(TypeError, match="buckets give the tokens"):
        mc.compile_buckets(CONFIG, [8], phase="prefill", tokens=8)


@pytest.mark.parametrize("cache_dtype", ["fp8", "fp8_e5m2"])
def test_a_compiled_fp8_step_reads_its_scale_buffer_at_run(rng, cache_dtype):
    """A per-tensor fp8 cache's scale is a buffer of the step (vLLM's
    k_scale): the engine writes a new value into the bound array and the
    next run quantises with it, with no rebind; the bytes then decode to
    the same values within the encoding's rounding."""
    artifact = rt.Artifact.load(mc.compile(model=CONFIG, batch=2,
                                           cache_dtype=cache_dtype, **STEP))
    info = artifact.caches[0]
    scale_name = artifact.buffers[info.scale_buffer].name
    assert scale_name == "model.layers.0.kv_scale"
    assert info.dtype == {"fp8": "f8e4m3fn", "fp8_e5m2": "f8e5m2"}[cache_dtype]
    weights = deepseek_layer.random_weights(CONFIG, 0, rng)
    cos_sin = deepseek_layer.cos_sin_table(32, CONFIG["qk_rope_head_dim"])
    executor = rt.Executor(artifact, rt.Device("cpu"))
    scale = np.array(0.05, np.float32)
    rt.bind_weights(executor, dict(rt.absorb(weights, artifact),
                                   cos_sin_cache=cos_sin,
                                   **{scale_name: scale}))
    cache = np.zeros(info.shape(4), np.uint8)
    executor.bind_cache(info.name, cache)
    inputs = dict(hidden_states=rng.standard_normal((2, 256), np.float32),
                  positions=np.array([0, 0], np.int64),
                  slot_mapping=np.array([16, 32], np.int64),
                  block_table=np.array([[1, 0], [2, 0]], np.int32),
                  seq_lens=np.array([1, 1], np.int32),
                  hidden_states_out=np.zeros((2, 256), np.float32))
    for name, tensor in inputs.items():
        executor.bind(name, tensor)
    executor.run()
    first = cache.reshape(-1, cache.shape[-1])[[16, 32]].copy()
    out = inputs["hidden_states_out"].copy()
    scale[...] = 0.2  # recalibrated in place: no rebind
    executor.run()
    second = cache.reshape(-1, cache.shape[-1])[[16, 32]]
    assert not np.array_equal(first, second)
    table = FP8_TABLES[cache_dtype]()
    rounding = 2.0 ** -4 if cache_dtype == "fp8" else 2.0 ** -3
    a, b = table[first] * 0.05, table[second] * 0.2
    # Both within half a step of the true rows, so within one step of
    # each other (the coarser 0.2 scale's subnormals aside).
    assert np.all(np.abs(a - b) <= 2 * rounding * np.abs(a) + 0.2 * 2.0 ** -6)
    np.testing.assert_allclose(inputs["hidden_states_out"], out, rtol=0.1,
                               atol=0.05)
    scale[...] = -1.0
    with pytest.raises(rt.Error, match="scale"):
        executor.run()
