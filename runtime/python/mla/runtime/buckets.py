"""Decode steps of several batch sizes, as an engine runs them.

An engine runs a few batch sizes (its CUDA-graph capture sizes). A step of
any batch runs on the smallest compiled bucket that holds it. Its rows past
the batch are padding that writes nothing and reads only the null block:

* slot -1, so no cache row is written;
* a block table of block 0 and a length of 1;
* position 0 and zero activations.

Each bucket owns its step buffers. That is what a graph captured per
bucket needs: the engine writes a step's rows into them in place and
replays. mla.compiler.compile_buckets makes the artifacts (docs/python.md).
"""

from ._mlart import Artifact, Executor
from .weights import bind_weights as _bind_weights

_NUMPY = {"bf16": "uint16", "f16": "float16", "f32": "float32",
          "f64": "float64", "i32": "int32", "i64": "int64",
          "f8e4m3fn": "uint8"}
_TORCH = {"bf16": "bfloat16", "f16": "float16", "f32": "float32",
          "f64": "float64", "i32": "int32", "i64": "int64",
          "f8e4m3fn": "uint8"}
# What the padding rows of each step buffer hold.
_PADDING = {"slot_mapping": -1, "seq_lens": 1}


def _zeros(info, device):
    """A zeroed tensor for `info`: NumPy for device None, else torch on
    `device` (a torch.device or a string such as 'cuda:0')."""
    if device is None:
        import numpy as np
        return np.zeros(info.shape, getattr(np, _NUMPY[info.dtype]))
    import torch
    return torch.zeros(info.shape, dtype=getattr(torch, _TORCH[info.dtype]),
                       device=device)


class DecodeBuckets:
    """One executor per batch bucket on `device`, over one set of weights
    and caches bound to all of them. ``artifacts`` maps batch sizes to
    artifacts (or their bytes), as mla.compiler.compile_buckets returns
    them. ``tensor_device`` says where the step buffers live: None for
    NumPy arrays (the CPU device), a torch device for torch tensors."""

    def __init__(self, artifacts, device, tensor_device=None):
        if not artifacts:
            raise ValueError("DecodeBuckets: no artifacts")
        self.sizes = sorted(artifacts)
        self.executors, self.buffers = {}, {}
        for batch in self.sizes:
            artifact = artifacts[batch]
            if not isinstance(artifact, Artifact):
                artifact = Artifact.load(artifact)
            executor = Executor(artifact, device)
            buffers = {}
            for info in artifact.buffers:
                if info.role == "weight":
                    continue
                if not info.shape or info.shape[0] != batch:
                    raise ValueError(
                        f"DecodeBuckets: the batch-{batch} artifact's buffer "
                        f"'{info.name}' has shape {info.shape}; a decode "
                        f"step's buffers lead with the batch")
                buffers[info.name] = _zeros(info, tensor_device)
                executor.bind(info.name, buffers[info.name])
            self.executors[batch], self.buffers[batch] = executor, buffers

    def bucket_for(self, batch):
        """The smallest bucket that holds `batch` requests."""
        for size in self.sizes:
            if size >= batch:
                return size
        raise ValueError(f"a batch of {batch} is larger than the largest "
                         f"bucket ({self.sizes[-1]})")

    def bind_weights(self, weights, stream=None):
        for executor in self.executors.values():
            _bind_weights(executor, weights, stream=stream)

    def bind_cache(self, name, tensor, scale=1.0, stream=None):
        for executor in self.executors.values():
            executor.bind_cache(name, tensor, scale=scale, stream=stream)

    def step(self, batch):
        """(bucket, executor, buffers) for a step of `batch` requests, its
        padding rows set. The caller writes rows [:batch] of the input and
        metadata buffers, runs (or replays its graph of) the executor and
        reads rows [:batch] of the outputs."""
        bucket = self.bucket_for(batch)
        buffers = self.buffers[bucket]
        for name, tensor in buffers.items():
            tensor[batch:] = _PADDING.get(name, 0)
        return bucket, self.executors[bucket], buffers

    def run(self, inputs, stream=None):
        """Runs one step on the caller's rows: ``inputs`` maps every input
        and step-metadata buffer name to the batch's tensor (same library
        and device as the buckets' buffers). Returns the outputs' rows of
        the batch, views into the bucket's buffers (valid until the next
        step of that bucket)."""
        batch = len(next(iter(inputs.values())))
        bucket, executor, buffers = self.step(batch)
        outputs = {}
        for info in executor.artifact.buffers:
            if info.role == "output":
                outputs[info.name] = buffers[info.name][:batch]
            elif info.role != "weight":
                if info.name not in inputs:
                    raise ValueError(f"run: no tensor for '{info.name}'")
                if len(inputs[info.name]) != batch:
                    raise ValueError(f"run: '{info.name}' has "
                                     f"{len(inputs[info.name])} rows, not "
                                     f"{batch}")
                buffers[info.name][:batch] = inputs[info.name]
        executor.run(stream=stream)
        return outputs
