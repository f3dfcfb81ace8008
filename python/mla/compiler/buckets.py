"""One step compiled per bucket, and an on-disk cache of them.

Artifacts have static shapes. An engine runs a handful of batch sizes (its
CUDA-graph capture sizes) and prefill chunk sizes, so mla compiles one step
per bucket and pads each step to the smallest bucket that holds it
(mla.runtime's DecodeBuckets and PrefillBuckets). Why buckets and not
dynamic shapes: every kernel of the
step is chosen and laid out for its shape (split counts, GEMM
algorithms, the arena plan), each bucket is captured as its own CUDA graph
anyway, and compiling a bucket takes milliseconds. docs/python.md says
more.
"""

import hashlib
import json
import os

from . import _mlac, compile as _compile, model_config as _model_config

# vLLM's default CUDA-graph capture sizes up to 256.
DEFAULT_BUCKETS = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256)


def _compiler_id():
    """What identifies this compiler build: the extension's bytes."""
    with open(_mlac.__file__, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def compile_buckets(model, buckets=DEFAULT_BUCKETS, *, phase="decode",
                    pipeline="", cache_dir=None, **step):
    """{size: artifact bytes} of ``model``'s step for every size in
    ``buckets``: batch sizes for ``phase="decode"``, token counts for
    ``phase="prefill"`` (give ``requests=``, the most requests a chunk
    holds). mla.compiler.compile's step options apply to all. With
    ``cache_dir`` each artifact is kept there under a key of the model's
    config, the options and the compiler build, and read back by a later
    call with the same key instead of compiled again."""
    size_option = {"decode": "batch", "prefill": "tokens"}.get(phase)
    if size_option is None:
        raise ValueError(f"compile_buckets: phase must be 'decode' or "
                         f"'prefill', got {phase!r}")
    if size_option in step:
        raise TypeError(f"compile_buckets: the buckets give the "
                        f"{size_option} sizes")
    sizes = sorted(set(int(b) for b in buckets))
    if not sizes or sizes[0] < 1:
        raise ValueError("compile_buckets: bucket sizes must be positive")
    key_base = None
    if cache_dir is not None:
        config, _ = _model_config(model)
        key_base = json.dumps({"config": config, "step": step,
                               "phase": phase, "pipeline": pipeline,
                               "compiler": _compiler_id()}, sort_keys=True)
        os.makedirs(cache_dir, exist_ok=True)
    out = {}
    for size in sizes:
        path = None
        if key_base is not None:
            key = hashlib.sha256(
                f"{key_base}|{size_option}={size}".encode()).hexdigest()[:32]
            path = os.path.join(cache_dir, f"{phase}-{size}-{key}.mlaa")
            if os.path.isfile(path):
                with open(path, "rb") as f:
                    out[size] = f.read()
                continue
        artifact = _compile(model=model, phase=phase, pipeline=pipeline,
                            **{size_option: size}, **step)
        if path is not None:
            # Written whole, then renamed: a reader never sees half a file.
            with open(path + ".tmp", "wb") as f:
                f.write(artifact)
            os.replace(path + ".tmp", path)
        out[size] = artifact
    return out
