"""mla.runtime: run compiled MLA steps on the caller's tensors.

MLIR-free: it needs only the runtime, so it runs on machines that compile
nothing (artifacts come from mla.compiler or mla-translate elsewhere).
Tensors are anything with ``__dlpack__`` (NumPy arrays on the CPU device,
torch tensors on CUDA) and are bound without a copy. NumPy has no bfloat16
or float8: uint16 and uint8 arrays carry their bits. See docs/python.md.
"""

from ._mlart import (Artifact, BufferInfo, CacheInfo, Device, Error, Executor,
                     InstructionInfo, __version__)
from .buckets import DecodeBuckets, PrefillBuckets
from .rope import default_cos_sin, rope_cos_sin_table
from .weights import absorb, bind_weights, split_kv_b_proj

__all__ = ["Artifact", "BufferInfo", "CacheInfo", "DecodeBuckets", "Device",
           "Error", "Executor", "InstructionInfo", "PrefillBuckets", "absorb",
           "bind_weights", "default_cos_sin", "rope_cos_sin_table",
           "split_kv_b_proj"]
