"""mla.ops: the runtime's kernels as vLLM and FlashMLA call them.

Drop-in calls on the engine's own tensors, run by the kernel library of
the device the tensors live on (the CPU reference kernels for NumPy
arrays, the CUDA kernels for torch CUDA tensors), on the caller's stream:
``stream=None`` is torch's current stream for CUDA tensors. Shapes are the
callers' (vLLM's ``concat_and_cache_mla``; FlashMLA's
``flash_mla_with_kvcache``); nothing is copied. See docs/python.md.
"""

import mla.runtime as _rt
from mla.runtime import _mlart

__all__ = ["concat_and_cache_mla", "device_of", "flash_mla_decode"]

# vLLM's kv_cache_dtype strings -> the runtime's cache layouts.
_LAYOUTS = {"auto": "plain", "bf16": "plain", "fp8": "fp8_per_tensor",
            "fp8_e4m3": "fp8_per_tensor", "fp8_e5m2": "fp8_e5m2_per_tensor",
            "fp8_ds_mla": "fp8_ds_mla"}
_DLPACK_CPU, _DLPACK_CUDA = 1, 2
_devices = {}


def _device_and_stream(tensor, stream):
    """The runtime device a tensor lives on (made once a process) and the
    stream to run on."""
    kind, ordinal = (tensor.__dlpack_device__()
                     if hasattr(tensor, "__dlpack_device__")
                     else (_DLPACK_CPU, 0))
    if kind == _DLPACK_CPU:
        name = "cpu"
    elif kind == _DLPACK_CUDA:
        name = f"cuda:{ordinal}"
        if stream is None and hasattr(tensor, "device"):
            import torch
            stream = torch.cuda.current_stream(tensor.device).cuda_stream
    else:
        raise ValueError(f"mla.ops: tensors on DLPack device type {kind} "
                         f"are not supported")
    if name not in _devices:
        _devices[name] = _rt.Device(name)
    return _devices[name], stream


def device_of(tensor):
    """The runtime Device the ops use for `tensor`'s device: set its
    ``synchronous_checks = False`` for calls that only enqueue (the
    engine's fast path, CUDA graph capture) and read the checks with its
    ``check_errors(stream)``."""
    return _device_and_stream(tensor, 0)[0]


def _layout(kv_cache_dtype):
    try:
        return _LAYOUTS[kv_cache_dtype]
    except KeyError:
        raise ValueError(f"kv_cache_dtype: expected one of "
                         f"{', '.join(_LAYOUTS)}, got {kv_cache_dtype!r}") \
            from None


def _scale(scale):
    """vLLM's per-tensor scale as the kernels take it: a one-element
    float32 tensor on the cache's device (read by the kernel when it runs,
    no synchronisation), or a number (None: 1)."""
    if scale is None:
        return 1.0
    if hasattr(scale, "__dlpack__"):
        return scale
    return float(scale)


def _empty(like, shape, float32=False):
    """A new tensor of `like`'s library and device (NumPy or torch)."""
    if hasattr(like, "new_empty"):  # torch
        import torch
        return like.new_empty(shape, dtype=torch.float32 if float32
                              else like.dtype)
    import numpy as np
    return np.empty(shape, np.float32 if float32 else like.dtype)


def _view(tensor, shape):
    """`tensor` seen with `shape`, never a copy (a kernel writes into it)."""
    if hasattr(tensor, "view") and hasattr(tensor, "new_empty"):  # torch
        return tensor.view(shape)
    import numpy as np
    view = np.reshape(tensor, shape)
    if not np.may_share_memory(view, tensor):
        raise ValueError(f"a tensor of shape {tensor.shape} cannot be seen "
                         f"as {shape} without a copy")
    return view


def concat_and_cache_mla(kv_c, k_pe, kv_cache, slot_mapping,
                         kv_cache_dtype="auto", scale=None, *, stream=None):
    """vLLM's ``concat_and_cache_mla``: writes concat(kv_c[t], k_pe[t])
    into ``kv_cache`` [num_blocks, block_size, row] at slot_mapping[t] for
    every t (a negative slot is skipped). kv_c [T, latent], k_pe [T, rope],
    slot_mapping [N <= T] int64. ``kv_cache_dtype``: 'auto' (rows of
    kv_cache's type), 'fp8' / 'fp8_e4m3' or 'fp8_e5m2' (uint8 bytes,
    per-tensor `scale`)
    or 'fp8_ds_mla' (656-byte rows). A slot outside the cache is an error
    and nothing is written."""
    device, stream = _device_and_stream(kv_cache, stream)
    _mlart._cache_update(device, kv_c, k_pe, slot_mapping, kv_cache,
                         _layout(kv_cache_dtype), _scale(scale), stream)


def flash_mla_decode(q, kv_cache, block_table, cache_seqlens, head_dim_v=512,
                     softmax_scale=None, *, kv_cache_dtype="auto", scale=None,
                     out=None, num_splits=0, stream=None):
    """FlashMLA's decode on a paged latent cache: q [B, 1, H, latent + rope]
    (or [B, H, latent + rope]), kv_cache [num_blocks, block_size, 1, row]
    (or without the 1), block_table [B, max_blocks] int32, cache_seqlens
    [B] int32. Returns (out [B, 1, H, head_dim_v], lse [B, H, 1] f32,
    natural log); with ``out`` given, writes it in place. ``softmax_scale``
    defaults to q's last dimension ** -0.5, as FlashMLA's does."""
    four_d = len(q.shape) == 4
    if four_d:
        batch, s_q, heads, row = q.shape
        if s_q != 1:
            raise ValueError(f"flash_mla_decode: one query token a request "
                             f"(s_q == 1), got {s_q}")
        q3 = q.reshape(batch, heads, row)
    else:
        batch, heads, row = q.shape
        q3 = q
    if softmax_scale is None:
        softmax_scale = row ** -0.5
    if out is None:
        out = _empty(q, (batch, 1, heads, head_dim_v) if four_d
                     else (batch, heads, head_dim_v))
    out3 = _view(out, (batch, heads, head_dim_v))
    lse = _empty(q, (batch, heads), float32=True)
    device, stream = _device_and_stream(q, stream)
    _mlart._decode_attention(device, q3, kv_cache, _layout(kv_cache_dtype),
                             _scale(scale), block_table, cache_seqlens,
                             float(softmax_scale), out3, lse, head_dim_v,
                             num_splits, stream)
    return out, _view(lse, (batch, heads, 1))
