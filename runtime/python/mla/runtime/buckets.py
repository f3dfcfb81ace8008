"""Steps of several sizes, as an engine runs them.

An engine runs a few batch sizes (its CUDA-graph capture sizes) and, for
prefill, a few chunk sizes in tokens. A step runs on the smallest compiled
bucket that holds it. Its rows past the step's are padding that writes
nothing and reads only the null block:

* slot -1, so no cache row is written;
* decode: a block table of block 0 and a length of 1;
* prefill: tokens past query_start_loc[R] (the kernels skip them) and
  requests with no tokens and no context;
* position 0 and zero activations.

Each bucket owns its step buffers. That is what a graph captured per
bucket needs: the engine writes a step's rows into them in place and
replays. mla.compiler.compile_buckets makes the artifacts (docs/python.md).
"""

from ._mlart import Artifact, Executor
from .weights import bind_weights as _bind_weights

_NUMPY = {"bf16": "uint16", "f16": "float16", "f32": "float32",
          "f64": "float64", "i32": "int32", "i64": "int64",
          "f8e4m3fn": "uint8", "f8e5m2": "uint8"}
_TORCH = {"bf16": "bfloat16", "f16": "float16", "f32": "float32",
          "f64": "float64", "i32": "int32", "i64": "int64",
          "f8e4m3fn": "uint8", "f8e5m2": "uint8"}
# What the padding rows of each step buffer hold.
_DECODE_PADDING = {"slot_mapping": -1, "seq_lens": 1}
# A prefill's buffers with a row per request, not per token.
_PER_REQUEST = ("block_table", "seq_lens", "query_start_loc")


def _zeros(info, device):
    """A zeroed tensor for `info`: NumPy for device None, else torch on
    `device` (a torch.device or a string such as 'cuda:0')."""
    if device is None:
        import numpy as np
        return np.zeros(info.shape, getattr(np, _NUMPY[info.dtype]))
    import torch
    return torch.zeros(info.shape, dtype=getattr(torch, _TORCH[info.dtype]),
                       device=device)


class _Buckets:
    """One executor per bucket on `device`, over one set of weights and
    caches bound to all of them, each with its own zeroed step buffers.
    ``check(size, info)`` returns why a buffer does not fit a bucket of
    `size`, or None."""

    def __init__(self, artifacts, device, tensor_device, check):
        if not artifacts:
            raise ValueError(f"{type(self).__name__}: no artifacts")
        self.sizes = sorted(artifacts)
        self.executors, self.buffers = {}, {}
        for size in self.sizes:
            artifact = artifacts[size]
            if not isinstance(artifact, Artifact):
                artifact = Artifact.load(artifact)
            executor = Executor(artifact, device)
            buffers = {}
            for info in artifact.buffers:
                if info.role == "weight":
                    continue
                problem = check(size, info)
                if problem:
                    raise ValueError(f"{type(self).__name__}: the "
                                     f"{size} artifact's buffer "
                                     f"'{info.name}' has shape {info.shape}; "
                                     f"{problem}")
                buffers[info.name] = _zeros(info, tensor_device)
                executor.bind(info.name, buffers[info.name])
            self.executors[size], self.buffers[size] = executor, buffers

    def bucket_for(self, size):
        """The smallest bucket that holds a step of `size`."""
        for bucket in self.sizes:
            if bucket >= size:
                return bucket
        raise ValueError(f"a step of {size} is larger than the largest "
                         f"bucket ({self.sizes[-1]})")

    def bind_weights(self, weights, stream=None):
        for executor in self.executors.values():
            _bind_weights(executor, weights, stream=stream)

    def bind_cache(self, name, tensor, scale=1.0, stream=None):
        for executor in self.executors.values():
            executor.bind_cache(name, tensor, scale=scale, stream=stream)

    def _run(self, bucket, rows, inputs, stream):
        """Copies each input into its bucket buffer's leading rows (`rows`
        maps a buffer name to its expected row count), runs, and returns
        the outputs' leading rows."""
        executor, buffers = self.executors[bucket], self.buffers[bucket]
        outputs = {}
        for info in executor.artifact.buffers:
            if info.role == "output":
                outputs[info.name] = buffers[info.name][:rows[info.name]]
            elif info.role != "weight":
                if info.name not in inputs:
                    raise ValueError(f"run: no tensor for '{info.name}'")
                tensor = inputs[info.name]
                if len(tensor) != rows[info.name]:
                    raise ValueError(f"run: '{info.name}' has {len(tensor)} "
                                     f"rows, not {rows[info.name]}")
                target = buffers[info.name][:len(tensor)]
                if tensor.shape[1:] != target.shape[1:]:
                    raise ValueError(f"run: '{info.name}' has shape "
                                     f"{tuple(tensor.shape)}; its rows must "
                                     f"be {tuple(target.shape[1:])}")
                target[:] = tensor
        executor.run(stream=stream)
        return outputs


class DecodeBuckets(_Buckets):
    """One executor per batch bucket on `device`. ``artifacts`` maps batch
    sizes to artifacts (or their bytes), as mla.compiler.compile_buckets
    returns them. ``tensor_device`` says where the step buffers live: None
    for NumPy arrays (the CPU device), a torch device for torch tensors."""

    def __init__(self, artifacts, device, tensor_device=None):
        def check(batch, info):
            if not info.shape or info.shape[0] != batch:
                return "a decode step's buffers lead with the batch"
            return None
        super().__init__(artifacts, device, tensor_device, check)

    def step(self, batch):
        """(bucket, executor, buffers) for a step of `batch` requests, its
        padding rows set. The caller writes rows [:batch] of the input and
        metadata buffers, runs (or replays its graph of) the executor and
        reads rows [:batch] of the outputs."""
        bucket = self.bucket_for(batch)
        buffers = self.buffers[bucket]
        for name, tensor in buffers.items():
            tensor[batch:] = _DECODE_PADDING.get(name, 0)
        return bucket, self.executors[bucket], buffers

    def run(self, inputs, stream=None):
        """Runs one step on the caller's rows: ``inputs`` maps every input
        and step-metadata buffer name to the batch's tensor (same library
        and device as the buckets' buffers). Returns the outputs' rows of
        the batch, views into the bucket's buffers (valid until the next
        step of that bucket)."""
        batch = len(next(iter(inputs.values())))
        bucket, _, buffers = self.step(batch)
        return self._run(bucket, {name: batch for name in buffers}, inputs,
                         stream)


class PrefillBuckets(_Buckets):
    """One executor per token bucket on `device`, for chunked prefill.
    ``artifacts`` maps token counts to prefill artifacts compiled for the
    same number of requests R (compile_buckets(..., phase="prefill",
    requests=R)); a step may hold fewer requests. The token buffers
    (hidden states, positions, slot_mapping, outputs) lead with the
    tokens; block_table, seq_lens and query_start_loc with the requests."""

    def __init__(self, artifacts, device, tensor_device=None):
        self.requests = None

        def check(tokens, info):
            if info.name in _PER_REQUEST:
                count = info.shape[0] - (info.name == "query_start_loc")
                if self.requests not in (None, count):
                    return (f"every bucket needs the same request count "
                            f"({self.requests})")
                self.requests = count
            elif not info.shape or info.shape[0] != tokens:
                return "a prefill step's token buffers lead with the tokens"
            return None
        super().__init__(artifacts, device, tensor_device, check)

    def step(self, tokens, requests):
        """(bucket, executor, buffers) for a step of `tokens` new tokens of
        `requests` requests, the padding set: tokens past `tokens` get slot
        -1; requests past `requests` get no tokens, no context and block 0
        (query_start_loc[r] = tokens for r > requests). The caller writes
        the leading rows, then runs or replays."""
        if requests > self.requests:
            raise ValueError(f"a step of {requests} requests is more than "
                             f"the buckets' {self.requests}")
        bucket = self.bucket_for(tokens)
        buffers = self.buffers[bucket]
        for name, tensor in buffers.items():
            if name == "query_start_loc":
                tensor[requests + 1:] = tokens
            elif name in _PER_REQUEST:
                tensor[requests:] = 0
            else:
                tensor[tokens:] = -1 if name == "slot_mapping" else 0
        return bucket, self.executors[bucket], buffers

    def run(self, inputs, stream=None):
        """Runs one step: ``inputs`` maps every input and step-metadata
        buffer to the step's tensor (tokens rows, or requests rows and
        requests + 1 for query_start_loc). Returns the outputs' token rows,
        views into the bucket's buffers."""
        if "seq_lens" not in inputs or "hidden_states" not in inputs:
            raise ValueError("run: needs 'hidden_states' and 'seq_lens'")
        tokens = len(inputs["hidden_states"])
        requests = len(inputs["seq_lens"])
        bucket, _, buffers = self.step(tokens, requests)
        rows = {name: (requests + (name == "query_start_loc")
                       if name in _PER_REQUEST else tokens)
                for name in buffers}
        return self._run(bucket, rows, inputs, stream)
