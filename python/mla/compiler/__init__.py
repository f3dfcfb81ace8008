"""mla.compiler: compile MLA steps in process.

What ``mla-gen | mla-opt -mla-{decode,prefill}-pipeline | mla-translate
--mla-to-artifact`` does, without a subprocess: from MLIR text or a model
configuration to the bytes of an artifact that ``mla.runtime.Artifact.load``
takes. The pipelines and their option spelling are mla-opt's. A failed
compilation raises :class:`CompileError` with every located diagnostic.
See docs/python.md.
"""

import json
import os
import stat

from . import _mlac
from ._mlac import CompileError

__all__ = ["CompileError", "compile", "generate", "model_config", "presets"]

# The step options compile() and generate() take: mla-gen's flags.
_STEP_OPTIONS = {
    "layers", "batch", "tokens", "requests", "block_size",
    "max_blocks_per_seq", "max_position", "dtype", "cache_dtype",
    "dummy_run", "layer_outputs", "function_name",
}
# A config.json is small; a bigger file is a mistake, not a model.
_MAX_CONFIG_BYTES = 1 << 20


def presets():
    """The names of the built-in model presets."""
    return list(_mlac.presets())


def _model_arguments(model):
    """(preset, config_json) for a preset name, a config dict or a path."""
    if isinstance(model, str) and model in _mlac.presets():
        return model, ""
    if isinstance(model, dict):
        return "", json.dumps(model)
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        try:
            info = os.stat(path)
        except OSError as error:
            raise ValueError(
                f"model: '{path}' is neither a preset ({', '.join(presets())})"
                f" nor a readable config.json: {error.strerror}") from None
        if not stat.S_ISREG(info.st_mode) or info.st_size > _MAX_CONFIG_BYTES:
            raise ValueError(f"model: '{path}' is not a regular file of at "
                             f"most {_MAX_CONFIG_BYTES} bytes")
        with open(path, encoding="utf-8") as f:
            return "", f.read()
    raise TypeError("model: expected a preset name, a config dict (Hugging "
                    "Face config.json fields) or a path to a config.json")


def _step_arguments(phase, options):
    unknown = sorted(set(options) - _STEP_OPTIONS)
    if unknown:
        raise TypeError(f"unknown step option(s) {', '.join(unknown)}; "
                        f"expected some of {', '.join(sorted(_STEP_OPTIONS))}")
    return dict(options, phase=phase)


def compile(source=None, *, model=None, phase="decode", pipeline="",
            optimize=True, function=None, return_ir=False,
            source_name="<source>", **step):
    """Compiles one step to artifact bytes.

    Either ``source`` (MLIR text of a step function) or ``model`` (a preset
    name, a dict of Hugging Face config.json fields, or a config.json path)
    with mla-gen's step options as keywords (``batch=8``, ``tokens=``,
    ``requests=``, ``layers=``, ``block_size=``, ``max_blocks_per_seq=``,
    ``max_position=``, ``dtype='bf16'|'f32'``, ``cache_dtype=``, ...).
    ``phase`` picks the pipeline, ``pipeline`` its options as mla-opt
    spells them (``"target=cuda-sm90 fuse-rope=false"``); ``optimize=False``
    translates the IR as given. With ``return_ir`` the result is
    ``(artifact, optimized_ir_text)``.
    """
    if (source is None) == (model is None):
        raise TypeError("compile: give either source or model")
    if source is not None:
        if step:
            raise TypeError("compile: step options only go with model=")
        artifact, ir = _mlac.compile_source(
            source, source_name, phase, pipeline, optimize, function or "",
            return_ir)
    else:
        if function is not None:
            raise TypeError("compile: function= only goes with source=")
        preset, config = _model_arguments(model)
        artifact, ir = _mlac.compile_model(
            preset, config, _step_arguments(phase, step), pipeline, optimize,
            return_ir)
    return (artifact, ir) if return_ir else artifact


def generate(model, *, phase="decode", **step):
    """The MLIR text of one step of ``model``, as mla-gen prints it."""
    preset, config = _model_arguments(model)
    return _mlac.generate_model(preset, config, _step_arguments(phase, step))


def model_config(model):
    """(config, softmax_scale) of ``model``: its attention-relevant Hugging
    Face config.json fields as the compiler reads them, and the softmax
    scale the compiled attention uses ((nope + rope)^-0.5, times YaRN's
    mscale^2 when the config scales rope)."""
    preset, config = _model_arguments(model)
    return _mlac.model_config(preset, config)


from .buckets import DEFAULT_BUCKETS, compile_buckets  # noqa: E402
__all__ += ["DEFAULT_BUCKETS", "compile_buckets"]
