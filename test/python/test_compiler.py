"""mla.compiler in process: the same artifacts as the command-line tools,
located diagnostics raised as CompileError, arguments checked."""

import os
import subprocess

import pytest

import mla.compiler as mc
import mla.runtime as rt
from conftest import RMS_NORM_STEP

V2_LITE_DECODE = dict(layers=1, batch=2, block_size=16, max_blocks_per_seq=4,
                      max_position=256)
V2_LITE_PREFILL = dict(layers=1, tokens=6, requests=2, block_size=16,
                       max_blocks_per_seq=4, max_position=256)


def tool(tools_dir, name, *args, stdin=None):
    result = subprocess.run([os.path.join(tools_dir, name), *args],
                            input=stdin, capture_output=True, check=True)
    return result.stdout


def gen_flags(options):
    return [f"--{key.replace('_', '-')}={value}"
            for key, value in options.items()]


def same_program(a, b):
    return ([repr(x) for x in a.buffers] == [repr(x) for x in b.buffers]
            and [repr(x) for x in a.caches] == [repr(x) for x in b.caches]
            and [i.opcode for i in a.instructions] ==
            [i.opcode for i in b.instructions]
            and [i.opcode for i in a.prepare_instructions] ==
            [i.opcode for i in b.prepare_instructions])


@pytest.mark.parametrize("phase, options", [("decode", V2_LITE_DECODE),
                                            ("prefill", V2_LITE_PREFILL)])
def test_in_process_matches_the_tools(tools_dir, phase, options):
    ir = tool(tools_dir, "mla-gen", "--model=deepseek-v2-lite",
              f"--phase={phase}", *gen_flags(options))
    assert mc.generate("deepseek-v2-lite", phase=phase,
                       **options).strip() == ir.decode().strip()
    optimized = tool(tools_dir, "mla-opt", f"-mla-{phase}-pipeline",
                     stdin=ir)
    expected = tool(tools_dir, "mla-translate", "--mla-to-artifact",
                    "-o", "-", stdin=optimized)
    # The same program; only the instructions' locations differ: the
    # tools' point into mla-opt's output, in-process ones into the source
    # (or nowhere, straight from the builder).
    tools = rt.Artifact.load(expected)
    for artifact in [mc.compile(ir.decode(), phase=phase),
                     mc.compile(model="deepseek-v2-lite", phase=phase,
                                **options)]:
        assert same_program(rt.Artifact.load(artifact), tools)


def test_pipeline_options_are_mla_opts(tools_dir):
    options = "fuse-rope=false schedule=none"
    ir = tool(tools_dir, "mla-gen", "--model=deepseek-v2-lite",
              *gen_flags(V2_LITE_DECODE))
    optimized = tool(tools_dir, "mla-opt",
                     f"-mla-decode-pipeline={options}", stdin=ir)
    expected = tool(tools_dir, "mla-translate", "--mla-to-artifact",
                    "-o", "-", stdin=optimized)
    tools = rt.Artifact.load(expected)
    assert same_program(
        rt.Artifact.load(mc.compile(ir.decode(), pipeline=options)), tools)
    assert not same_program(rt.Artifact.load(mc.compile(ir.decode())), tools)


def test_return_ir_gives_the_optimized_module():
    artifact, ir = mc.compile(model="deepseek-v2-lite", return_ir=True,
                              **V2_LITE_DECODE)
    assert "mla.decode_attention" in ir or "mla.attention" in ir
    assert "mla.rope_kv_cache_update" in ir
    assert same_program(rt.Artifact.load(mc.compile(ir, optimize=False)),
                        rt.Artifact.load(artifact))


def test_a_model_from_a_config_dict_or_file(tmp_path):
    config = {
        "hidden_size": 256, "num_attention_heads": 4, "q_lora_rank": None,
        "kv_lora_rank": 128, "qk_nope_head_dim": 32, "qk_rope_head_dim": 16,
        "v_head_dim": 48, "num_hidden_layers": 2, "rms_norm_eps": 1e-6,
    }
    artifact = rt.Artifact.load(mc.compile(model=config, batch=3,
                                           block_size=16))
    names = [b.name for b in artifact.buffers]
    assert "model.layers.1.self_attn.w_uk" in names
    hidden = next(b for b in artifact.buffers if b.name == "hidden_states")
    assert hidden.shape == (3, 256)
    path = tmp_path / "config.json"
    path.write_text(__import__("json").dumps(config))
    assert mc.compile(model=path, batch=3, block_size=16) == \
        mc.compile(model=config, batch=3, block_size=16)
    del config["kv_lora_rank"]
    with pytest.raises(mc.CompileError, match="kv_lora_rank"):
        mc.compile(model=config)


def test_a_parse_error_is_located():
    source = RMS_NORM_STEP.replace("{epsilon = 1.0e-6 : f32}", "{epsilon}")
    with pytest.raises(mc.CompileError) as error:
        mc.compile(source, source_name="norm.mlir")
    assert "norm.mlir:5:" in str(error.value)


def test_a_verifier_error_is_located():
    source = RMS_NORM_STEP.replace("{epsilon = 1.0e-6 : f32}",
                                   "{epsilon = 0.0 : f32}")
    with pytest.raises(mc.CompileError) as error:
        mc.compile(source, source_name="norm.mlir")
    assert "norm.mlir:5:" in str(error.value)
    assert "positive epsilon" in str(error.value)


def test_a_translation_error_is_located():
    source = RMS_NORM_STEP.replace("4x32xf32", "?x32xf32")
    with pytest.raises(mc.CompileError) as error:
        mc.compile(source, source_name="dynamic.mlir", optimize=False)
    assert "dynamic.mlir:" in str(error.value)
    assert "statically shaped" in str(error.value)


def test_bad_arguments():
    # (llvm::cl prints which value is wrong on stderr.)
    with pytest.raises(mc.CompileError,
                       match="bad mla-decode-pipeline options 'target=gpu'"):
        mc.compile(model="deepseek-v2-lite", pipeline="target=gpu")
    with pytest.raises(TypeError, match="either source or model"):
        mc.compile()
    with pytest.raises(TypeError, match="either source or model"):
        mc.compile(RMS_NORM_STEP, model="deepseek-v2-lite")
    with pytest.raises(TypeError, match="unknown step option"):
        mc.compile(model="deepseek-v2-lite", batchsize=3)
    with pytest.raises(ValueError, match="neither a preset"):
        mc.compile(model="deepseek-v9")
    with pytest.raises(ValueError, match="phase"):
        mc.compile(model="deepseek-v2-lite", phase="train")
    with pytest.raises(ValueError, match="not a regular file"):
        mc.compile(model="/dev/zero")
    assert "deepseek-v2-lite" in mc.presets()
