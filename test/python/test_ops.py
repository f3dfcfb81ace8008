"""mla.ops on NumPy arrays (the CPU kernels): vLLM's concat_and_cache_mla
grid and FlashMLA-shaped decode, against NumPy references, on the caller's
own cache."""

import numpy as np
import pytest

import mla.ops as ops
import mla.runtime as rt
from conftest import FP8_TABLES, bf16_bits

LATENT, ROPE = 512, 64


@pytest.mark.parametrize("num_tokens", [1, 42])
@pytest.mark.parametrize("block_size", [16, 64])
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_concat_and_cache_mla_writes_exactly_the_slots(rng, num_tokens,
                                                       block_size, dtype):
    num_blocks = 8
    kv_c = rng.standard_normal((num_tokens, LATENT), np.float32)
    k_pe = rng.standard_normal((num_tokens, ROPE), np.float32)
    slots = rng.choice(num_blocks * block_size, num_tokens, replace=False)
    if num_tokens > 1:
        slots[0] = -1  # a padded token: skipped
    if dtype == "bf16":  # NumPy has no bfloat16: uint16 carries its bits
        kv_c, k_pe = bf16_bits(kv_c), bf16_bits(k_pe)
        cache = np.full((num_blocks, block_size, LATENT + ROPE), 0xA5A5,
                        np.uint16)
    else:
        cache = np.full((num_blocks, block_size, LATENT + ROPE), -3.5,
                        np.float32)
    expected = cache.copy().reshape(-1, LATENT + ROPE)
    for t, slot in enumerate(slots):
        if slot >= 0:
            expected[slot] = np.concatenate([kv_c[t], k_pe[t]])
    ops.concat_and_cache_mla(kv_c, k_pe, cache, slots.astype(np.int64))
    np.testing.assert_array_equal(cache.reshape(expected.shape), expected)


@pytest.mark.parametrize("kv_cache_dtype", ["fp8", "fp8_e5m2"])
def test_concat_and_cache_mla_fp8_rounds_to_the_nearest_value(rng,
                                                              kv_cache_dtype):
    num_tokens, block_size, scale = 17, 16, np.float32([0.05])
    kv_c = rng.standard_normal((num_tokens, LATENT), np.float32)
    k_pe = rng.standard_normal((num_tokens, ROPE), np.float32)
    cache = np.zeros((4, block_size, LATENT + ROPE), np.uint8)
    slots = np.arange(num_tokens, dtype=np.int64) * 3
    ops.concat_and_cache_mla(kv_c, k_pe, cache, slots, kv_cache_dtype, scale)
    table = FP8_TABLES[kv_cache_dtype]()
    rows = cache.reshape(-1, LATENT + ROPE)[slots]
    want = np.concatenate([kv_c, k_pe], 1).astype(np.float64) / scale[0]
    got = table[rows]
    finite = np.where(np.isnan(table), np.inf, table)
    # Nothing representable is nearer to x/scale than what was stored.
    nearest = np.abs(finite[None, None, :] - want[..., None]).min(-1)
    assert np.all(np.abs(got - want) <= nearest + 1e-12)
    untouched = np.delete(cache.reshape(-1, LATENT + ROPE), slots, 0)
    assert not untouched.any()


def test_concat_and_cache_mla_refuses_a_bad_slot_and_writes_nothing(rng):
    cache = np.zeros((2, 16, LATENT + ROPE), np.float32)
    kv_c = rng.standard_normal((2, LATENT), np.float32)
    k_pe = rng.standard_normal((2, ROPE), np.float32)
    with pytest.raises(rt.Error, match="OUT_OF_RANGE"):
        ops.concat_and_cache_mla(kv_c, k_pe, cache, np.array([0, 32]))
    assert not cache.any()
    with pytest.raises(rt.Error, match="kv_cache needs a"):
        ops.concat_and_cache_mla(kv_c, k_pe, cache[:, :, :500],
                                 np.array([0, 1]))
    with pytest.raises(ValueError, match="kv_cache_dtype"):
        ops.concat_and_cache_mla(kv_c, k_pe, cache, np.array([0, 1]), "fp4")


def decode_reference(q, cache, block_table, seq_lens, scale, latent):
    """Absorbed attention over a paged cache, float64: out [B, H, latent],
    natural-log lse [B, H]."""
    batch, heads, _ = q.shape
    block = cache.shape[1]
    out = np.zeros((batch, heads, latent))
    lse = np.zeros((batch, heads))
    for b in range(batch):
        n = seq_lens[b]
        slots = [block_table[b, j // block] * block + j % block
                 for j in range(n)]
        rows = cache.reshape(-1, cache.shape[-1])[slots].astype(np.float64)
        scores = q[b].astype(np.float64) @ rows.T * scale  # [H, n]
        top = scores.max(-1, keepdims=True)
        p = np.exp(scores - top)
        lse[b] = np.log(p.sum(-1)) + top[:, 0]
        out[b] = (p / p.sum(-1, keepdims=True)) @ rows[:, :latent]
    return out, lse


@pytest.mark.parametrize("heads", [16, 128])
def test_flash_mla_decode_matches_a_float64_reference(rng, heads):
    batch, block, num_blocks = 3, 16, 12
    seq_lens = np.array([1, 17, 40], np.int32)
    table = np.zeros((batch, 4), np.int32)
    table[0, 0], table[1, :2], table[2, :3] = 5, [1, 7], [2, 9, 11]
    cache = rng.standard_normal((num_blocks, block, 1, LATENT + ROPE),
                                np.float32)
    q = rng.standard_normal((batch, 1, heads, LATENT + ROPE), np.float32)
    out, lse = ops.flash_mla_decode(q, cache, table, seq_lens, LATENT)
    assert out.shape == (batch, 1, heads, LATENT)
    assert lse.shape == (batch, heads, 1)
    want, want_lse = decode_reference(q[:, 0], cache[:, :, 0], table,
                                      seq_lens, (LATENT + ROPE) ** -0.5,
                                      LATENT)
    np.testing.assert_allclose(out[:, 0], want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(lse[:, :, 0], want_lse, rtol=1e-5, atol=1e-5)
    # In place, into the caller's output.
    mine = np.full_like(out, np.nan)
    ops.flash_mla_decode(q, cache, table, seq_lens, LATENT, out=mine)
    np.testing.assert_array_equal(mine, out)


@pytest.mark.parametrize("kv_cache_dtype", ["fp8", "fp8_e5m2"])
def test_flash_mla_decode_on_an_fp8_cache_matches_float64(rng,
                                                          kv_cache_dtype):
    """The decode dequantises each byte with the per-tensor scale: the
    float64 reference reads the same bytes through the format's table."""
    batch, heads, block, num_blocks, scale = 2, 16, 16, 6, 0.05
    seq_lens = np.array([20, 33], np.int32)
    table = np.array([[4, 1, 0], [2, 5, 3]], np.int32)
    cache = np.zeros((num_blocks, block, LATENT + ROPE), np.uint8)
    rows = rng.standard_normal((num_blocks * block, LATENT + ROPE),
                               np.float32)
    ops.concat_and_cache_mla(rows[:, :LATENT], rows[:, LATENT:], cache,
                             np.arange(num_blocks * block, dtype=np.int64),
                             kv_cache_dtype, scale)
    q = rng.standard_normal((batch, 1, heads, LATENT + ROPE), np.float32)
    out, lse = ops.flash_mla_decode(q, cache, table, seq_lens, LATENT,
                                    kv_cache_dtype=kv_cache_dtype,
                                    scale=scale)
    values = FP8_TABLES[kv_cache_dtype]()[cache] * np.float32(scale)
    want, want_lse = decode_reference(q[:, 0], values, table, seq_lens,
                                      (LATENT + ROPE) ** -0.5, LATENT)
    np.testing.assert_allclose(out[:, 0], want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(lse[:, :, 0], want_lse, rtol=1e-5, atol=1e-5)


def test_flash_mla_decode_refusals(rng):
    cache = np.zeros((4, 16, LATENT + ROPE), np.float32)
    q = np.zeros((1, 2, 16, LATENT + ROPE), np.float32)
    table = np.array([[1]], np.int32)
    with pytest.raises(ValueError, match="s_q == 1"):
        ops.flash_mla_decode(q, cache, table, np.array([4], np.int32))
    q = q[:, :1]
    with pytest.raises(rt.Error, match="OUT_OF_RANGE|INVALID_ARGUMENT"):
        ops.flash_mla_decode(q, cache, table, np.array([17], np.int32))
    strided_out = np.zeros((1, 1, 16, 2 * LATENT), np.float32)[..., ::2]
    with pytest.raises(rt.Error, match="out must have unit stride"):
        ops.flash_mla_decode(q, cache, table, np.array([4], np.int32),
                             out=strided_out)
    assert not strided_out.any()


def test_ops_on_a_strided_per_layer_view_match_a_dense_cache(rng):
    """vLLM's per-layer [num_blocks, block_size, 576] view of an allocation
    shared by two layers: writes land in this layer's rows only, and the
    decode reads them like a dense cache."""
    num_blocks, block, tokens, heads = 6, 16, 30, 16
    whole = np.full((num_blocks, 2, block, LATENT + ROPE), -9.0, np.float32)
    layer = whole[:, 1]
    assert layer.strides[0] == 2 * layer.strides[1] * block
    dense = np.full((num_blocks, block, LATENT + ROPE), -9.0, np.float32)
    kv_c = rng.standard_normal((tokens, LATENT), np.float32)
    k_pe = rng.standard_normal((tokens, ROPE), np.float32)
    slots = rng.choice(num_blocks * block, tokens, replace=False)
    for cache in (dense, layer):
        ops.concat_and_cache_mla(kv_c, k_pe, cache, slots.astype(np.int64))
    np.testing.assert_array_equal(layer, dense)
    assert (whole[:, 0] == -9.0).all(), "the other layer was written"

    table = np.array([[4, 0, 2], [1, 5, 3]], np.int32)
    seq_lens = np.array([40, 17], np.int32)
    q = rng.standard_normal((2, 1, heads, LATENT + ROPE), np.float32)
    want = ops.flash_mla_decode(q, dense, table, seq_lens, LATENT)
    got = ops.flash_mla_decode(q, layer, table, seq_lens, LATENT)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)


def test_a_cache_with_padded_rows_is_refused():
    cache = np.zeros((4, 16, LATENT + ROPE + 8), np.float32)[..., :LATENT + ROPE]
    kv_c = np.zeros((1, LATENT), np.float32)
    k_pe = np.zeros((1, ROPE), np.float32)
    with pytest.raises(rt.Error, match="dense rows within a block"):
        ops.concat_and_cache_mla(kv_c, k_pe, cache, np.array([0], np.int64))


def test_a_scale_tensor_is_read_when_the_kernel_runs(rng):
    """vLLM's k_scale: a one-element float32 tensor, read at every call, so
    the same bound cache follows a recalibrated scale."""
    tokens, block = 9, 16
    kv_c = rng.standard_normal((tokens, LATENT), np.float32)
    k_pe = rng.standard_normal((tokens, ROPE), np.float32)
    slots = np.arange(tokens, dtype=np.int64)
    k_scale = np.float32([0.05])
    by_tensor = np.zeros((2, block, LATENT + ROPE), np.uint8)
    by_number = np.zeros_like(by_tensor)
    ops.concat_and_cache_mla(kv_c, k_pe, by_tensor, slots, "fp8", k_scale)
    ops.concat_and_cache_mla(kv_c, k_pe, by_number, slots, "fp8", 0.05)
    np.testing.assert_array_equal(by_tensor, by_number)

    table = np.array([[0]], np.int32)
    lens = np.array([tokens], np.int32)
    q = rng.standard_normal((1, 1, 16, LATENT + ROPE), np.float32)
    want = ops.flash_mla_decode(q, by_number, table, lens, LATENT,
                                kv_cache_dtype="fp8", scale=0.05)
    got = ops.flash_mla_decode(q, by_tensor, table, lens, LATENT,
                               kv_cache_dtype="fp8", scale=k_scale)
    np.testing.assert_array_equal(got[0], want[0])
    # A new value in the same tensor: the next call dequantises with it.
    k_scale[0] = 0.1
    doubled = ops.flash_mla_decode(q, by_tensor, table, lens, LATENT,
                                   kv_cache_dtype="fp8", scale=k_scale)
    assert not np.array_equal(doubled[0], want[0])
    # A scale the CPU kernels read as non-positive: refused, nothing written.
    k_scale[0] = -1.0
    before = by_tensor.copy()
    with pytest.raises(rt.Error, match="finite and > 0"):
        ops.concat_and_cache_mla(kv_c, k_pe, by_tensor, slots, "fp8", k_scale)
    np.testing.assert_array_equal(by_tensor, before)
    with pytest.raises(rt.Error, match="one float32"):
        ops.concat_and_cache_mla(kv_c, k_pe, by_tensor, slots, "fp8",
                                 np.float64([0.05]))
