"""A model loader's weights, as an artifact's buffers want them.

The artifact's weight buffers carry the Hugging Face names of DeepSeek's
checkpoints (``model.layers.N.self_attn.q_proj.weight``, ...) except one:
the absorbed form splits each layer's ``kv_b_proj.weight`` per head into
its key half ``w_uk`` [heads, nope, latent] and its value half ``w_uv``
[heads, latent, v]. These helpers do that split on NumPy arrays or torch
tensors alike (only reshape, slicing and a contiguous copy) and bind a
whole dict of weights.
"""

_KV_B_PROJ = ".self_attn.kv_b_proj.weight"


def _contiguous(tensor):
    if hasattr(tensor, "contiguous"):  # torch
        return tensor.contiguous()
    import numpy as np
    return np.ascontiguousarray(tensor)


def split_kv_b_proj(kv_b_proj, num_heads, nope, v_dim):
    """(w_uk, w_uv) of one layer's kv_b_proj.weight [heads * (nope + v),
    latent]: per head, its first `nope` rows project the latent to the key,
    the next `v_dim` rows to the value."""
    rows, latent = kv_b_proj.shape
    if rows != num_heads * (nope + v_dim):
        raise ValueError(f"kv_b_proj.weight has {rows} rows; {num_heads} "
                         f"heads of {nope} + {v_dim} need "
                         f"{num_heads * (nope + v_dim)}")
    per_head = kv_b_proj.reshape(num_heads, nope + v_dim, latent)
    w_uk = _contiguous(per_head[:, :nope, :])
    w_uv = _contiguous(per_head[:, nope:, :].swapaxes(1, 2))
    return w_uk, w_uv


def absorb(weights, artifact):
    """A copy of `weights` (name -> tensor) in which every layer's
    kv_b_proj.weight is replaced by the w_uk and w_uv that `artifact`
    declares for it, their head and row sizes taken from the declaration."""
    declared = {b.name: b.shape for b in artifact.buffers}
    out = {}
    for name, tensor in weights.items():
        if not name.endswith(_KV_B_PROJ):
            out[name] = tensor
            continue
        prefix = name[:-len(_KV_B_PROJ)] + ".self_attn."
        uk, uv = prefix + "w_uk", prefix + "w_uv"
        if uk not in declared or uv not in declared:
            raise ValueError(f"{name}: the artifact declares no {uk} / {uv}")
        heads, nope, _ = declared[uk]
        v_dim = declared[uv][2]
        out[uk], out[uv] = split_kv_b_proj(tensor, heads, nope, v_dim)
    return out


def bind_weights(executor, weights, stream=None):
    """Binds every weight buffer of the executor's artifact to the tensor of
    the same name in `weights` (after `absorb`). Names the artifact does
    not declare are an error, and so are weights it needs but `weights`
    lacks; nothing is bound then."""
    needed = {b.name for b in executor.artifact.buffers if b.role == "weight"}
    unknown = sorted(set(weights) - needed)
    missing = sorted(needed - set(weights))
    if unknown or missing:
        raise ValueError("bind_weights: "
                         + (f"no weight buffer named {', '.join(unknown)}; "
                            if unknown else "")
                         + (f"missing {', '.join(missing)}" if missing else ""))
    for name in sorted(needed):
        executor.bind(name, weights[name], stream=stream)
