"""examples/python/deepseek_layer.py: prefill then decode of one DeepSeek
layer from NumPy over an engine-owned cache, against its float64 plain
(non-absorbed) reference."""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..",
                                "examples", "python"))
import deepseek_layer  # noqa: E402


def seed():
    return str(int.from_bytes(os.urandom(4), "little"))


def test_v2_lite_prefill_then_decode_matches_the_reference(capsys):
    assert deepseek_layer.main(["--seed", seed()]) == 0
    out = capsys.readouterr().out
    assert out.count("other rows unchanged") == 4


def test_v3_q_lora_path_matches_the_reference():
    assert deepseek_layer.main(["--model", "deepseek-v3", "--prompts", "2",
                                "3", "--decode-steps", "1",
                                "--seed", seed()]) == 0


def test_the_check_can_fail(capsys):
    # f32 kernels are not exact: a tolerance below their error must fail.
    assert deepseek_layer.main(["--tolerance", "1e-12", "--decode-steps",
                                "1"]) == 1
    assert "MISMATCH" in capsys.readouterr().out


def test_kv_b_proj_split_shapes_and_errors():
    import numpy as np
    import mla.runtime as rt
    heads, nope, v_dim, latent = 3, 4, 5, 6
    w = np.arange(heads * (nope + v_dim) * latent, dtype=np.float32).reshape(
        heads * (nope + v_dim), latent)
    w_uk, w_uv = rt.split_kv_b_proj(w, heads, nope, v_dim)
    assert w_uk.shape == (heads, nope, latent)
    assert w_uv.shape == (heads, latent, v_dim)
    assert w_uk.flags.c_contiguous and w_uv.flags.c_contiguous
    # Head 1's first value row is row (nope + v) + nope of kv_b_proj.
    np.testing.assert_array_equal(w_uv[1, :, 0], w[(nope + v_dim) + nope])
    np.testing.assert_array_equal(w_uk[2, 3], w[2 * (nope + v_dim) + 3])
    with pytest.raises(ValueError, match="rows"):
        rt.split_kv_b_proj(w, heads + 1, nope, v_dim)


def test_saved_artifacts_run_without_the_compiler(tmp_path, capsys):
    """--save-artifacts here, --artifacts on a machine without MLIR."""
    assert deepseek_layer.main(["--prompts", "3", "4", "--decode-steps",
                                "1", "--save-artifacts", str(tmp_path)]) == 0
    assert sorted(os.listdir(tmp_path)) == ["decode.mlaa", "model.json",
                                            "prefill.mlaa"]
    assert deepseek_layer.main(["--artifacts", str(tmp_path),
                                "--seed", seed()]) == 0
    assert capsys.readouterr().out.count("other rows unchanged") == 2
