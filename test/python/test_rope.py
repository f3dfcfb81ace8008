"""The cos/sin table the compiler records for a model, against an
independent transcription of Hugging Face DeepSeek's rotary embeddings."""

import math

import numpy as np
import pytest

import mla.compiler as mc
import mla.runtime as rt

STEP = dict(layers=1, batch=2, block_size=16, max_blocks_per_seq=4,
            max_position=512, dtype="f32")


def deepseek_yarn_table(max_position, dim, base=10000.0, factor=1.0,
                        original_max_position=4096, beta_fast=32.0,
                        beta_slow=1.0, mscale=1.0, mscale_all_dim=0.0):
    """modeling_deepseek.py's DeepseekV2YarnRotaryEmbedding._set_cos_sin_cache
    in float64, laid out as vLLM's cos_sin_cache (cos half, sin half)."""
    def correction_dim(rotations):
        return (dim * math.log(original_max_position
                               / (rotations * 2 * math.pi))
                / (2 * math.log(base)))

    def get_mscale(scale, m):
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    freq_extra = 1.0 / base ** (np.arange(0, dim, 2) / dim)
    if factor == 1.0:
        inv_freq, amplitude = freq_extra, 1.0
    else:
        freq_inter = freq_extra / factor
        low = max(math.floor(correction_dim(beta_fast)), 0)
        high = min(math.ceil(correction_dim(beta_slow)), dim - 1)
        if low == high:
            high += 0.001
        ramp = np.clip((np.arange(dim // 2) - low) / (high - low), 0, 1)
        mask = 1.0 - ramp
        inv_freq = freq_inter * (1 - mask) + freq_extra * mask
        amplitude = get_mscale(factor, mscale) / get_mscale(factor,
                                                            mscale_all_dim)
    freqs = np.outer(np.arange(max_position, dtype=np.float64), inv_freq)
    return np.concatenate([np.cos(freqs), np.sin(freqs)], axis=1) * amplitude


@pytest.mark.parametrize("model", ["deepseek-v2-lite", "deepseek-v3"])
def test_preset_records_its_yarn_table(model):
    artifact = rt.Artifact.load(mc.compile(model=model, **STEP))
    params = artifact.rope_tables["cos_sin_cache"]
    config, _ = mc._mlac.model_config(model, "")
    scaling = config["rope_scaling"]
    assert params["factor"] == scaling["factor"] == 40
    expected = deepseek_yarn_table(
        STEP["max_position"], config["qk_rope_head_dim"],
        base=config["rope_theta"], factor=scaling["factor"],
        original_max_position=scaling["original_max_position_embeddings"],
        beta_fast=scaling["beta_fast"], beta_slow=scaling["beta_slow"],
        mscale=scaling["mscale"], mscale_all_dim=scaling["mscale_all_dim"])
    table = rt.default_cos_sin(artifact)
    assert table.dtype == np.float32 and table.shape == expected.shape
    np.testing.assert_allclose(table, expected, rtol=0, atol=2e-7)
    # The scaling matters: plain rope differs by far more than rounding.
    plain = deepseek_yarn_table(STEP["max_position"],
                                config["qk_rope_head_dim"])
    assert np.abs(plain - expected).max() > 0.5


def test_unscaled_model_records_plain_rope():
    config, _ = mc._mlac.model_config("deepseek-v2-lite", "")
    config = dict(config, rope_theta=50000.0)
    del config["rope_scaling"]
    artifact = rt.Artifact.load(mc.compile(model=config, **STEP))
    params = artifact.rope_tables["cos_sin_cache"]
    assert params["factor"] == 1.0 and params["theta"] == 50000.0
    np.testing.assert_allclose(
        rt.default_cos_sin(artifact),
        deepseek_yarn_table(STEP["max_position"], 64, base=50000.0),
        rtol=0, atol=2e-7)


def test_bad_parameters_are_errors():
    with pytest.raises(rt.Error):
        rt.rope_cos_sin_table(8, 64, factor=4.0)  # YaRN without a context
    with pytest.raises(rt.Error):
        rt.rope_cos_sin_table(8, 63)
    with pytest.raises(TypeError):
        rt.rope_cos_sin_table(8, 64, base=10.0)
