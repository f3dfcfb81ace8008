"""Rotary cos/sin tables as DeepSeek models expect them.

The compiled steps read a caller-provided ``cos_sin_cache`` of shape
``[max_position, rope_dim]`` (float32; row p is cos then sin of p times each
frequency). An engine usually computes its own; these helpers compute the
one the compiler recorded for the model (plain or YaRN rope, docs/python.md).
"""

from . import _mlart

_DEFAULTS = dict(theta=10000.0, factor=1.0, original_max_position=0,
                 beta_fast=32.0, beta_slow=1.0, mscale=1.0,
                 mscale_all_dim=0.0)


def rope_cos_sin_table(max_position, rope_dim, **params):
    """The ``[max_position, rope_dim]`` float32 NumPy table of
    mlart::ropeCosSinTable. ``params`` are those of ``#mla.rope_table``
    (``theta``, ``factor``, ``original_max_position``, ``beta_fast``,
    ``beta_slow``, ``mscale``, ``mscale_all_dim``); the defaults give plain
    base-10000 rope. Raises mla.runtime.Error for invalid parameters."""
    import numpy as np

    unknown = set(params) - set(_DEFAULTS)
    if unknown:
        raise TypeError("rope_cos_sin_table: unknown parameter(s) "
                        + ", ".join(sorted(unknown)))
    values = dict(_DEFAULTS, **params)
    raw = _mlart._rope_cos_sin_table(int(max_position), int(rope_dim),
                                     **values)
    return np.frombuffer(raw, dtype=np.float32).reshape(
        int(max_position), int(rope_dim)).copy()


def default_cos_sin(artifact, name="cos_sin_cache"):
    """The table the compiler recorded for ``artifact``'s buffer ``name``,
    at that buffer's shape. KeyError when the artifact has no such record
    (artifacts from IR without ``mla.rope_table``)."""
    tables = artifact.rope_tables
    if name not in tables:
        raise KeyError(f"artifact records no rope table for '{name}'")
    shape = next(b.shape for b in artifact.buffers if b.name == name)
    return rope_cos_sin_table(shape[0], shape[1], **tables[name])
