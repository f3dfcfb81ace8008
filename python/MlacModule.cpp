//===- MlacModule.cpp - mla.compiler: in-process compilation for Python ---===//
//
// The extension behind `mla.compiler` (docs/python.md): mla/Compiler's
// calls, with the GIL released while MLIR works. A failed compilation
// raises mla.compiler.CompileError carrying every located diagnostic.
//
//===----------------------------------------------------------------------===//
#include "mla/Compiler/Compiler.h"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>

namespace py = pybind11;
using namespace mlir::mla;

namespace {

struct CompileErrorTag {};
py::object compileErrorType;

template <typename T> T valueOrRaise(llvm::Expected<T> value) {
  if (value)
    return std::move(*value);
  const std::string message = llvm::toString(value.takeError());
  PyErr_SetString(compileErrorType.ptr(), message.c_str());
  throw py::error_already_set();
}

gen::Phase parsePhase(const std::string &phase) {
  if (phase == "decode")
    return gen::Phase::Decode;
  if (phase == "prefill")
    return gen::Phase::Prefill;
  throw py::value_error("phase: expected 'decode' or 'prefill', got '" + phase +
                        "'");
}

gen::ModelConfig modelConfig(const std::string &preset,
                             const std::string &configJson) {
  if (!configJson.empty())
    return valueOrRaise(gen::parseModelConfig(configJson, "config"));
  if (std::optional<gen::ModelConfig> config = gen::lookupPreset(preset))
    return *config;
  std::string names;
  for (llvm::StringRef name : gen::getPresetNames())
    names += (names.empty() ? "" : ", ") + name.str();
  throw py::value_error("unknown model preset '" + preset +
                        "' (presets: " + names + ")");
}

/// StepOptions from the keyword arguments mla.compiler passes (the names
/// are mla-gen's flags with '_' for '-').
gen::StepOptions stepOptions(const py::dict &kw) {
  gen::StepOptions step;
  auto get = [&](const char *key, auto &field) {
    if (kw.contains(key))
      field = kw[key].cast<std::decay_t<decltype(field)>>();
  };
  std::string phase = "decode", dtype = "bf16", cacheDType = "auto";
  get("phase", phase);
  get("dtype", dtype);
  get("cache_dtype", cacheDType);
  step.phase = parsePhase(phase);
  get("layers", step.numLayers);
  get("batch", step.batch);
  get("tokens", step.tokens);
  get("requests", step.requests);
  get("block_size", step.blockSize);
  get("max_blocks_per_seq", step.maxBlocksPerSeq);
  get("max_position", step.maxPosition);
  get("dummy_run", step.dummyRun);
  get("layer_outputs", step.layerOutputs);
  get("function_name", step.funcName);
  if (dtype == "bf16")
    step.dtype = gen::DType::BF16;
  else if (dtype == "f32")
    step.dtype = gen::DType::F32;
  else
    throw py::value_error("dtype: expected 'bf16' or 'f32', got '" + dtype +
                          "'");
  if (cacheDType == "auto")
    step.cacheDType = gen::CacheDType::Auto;
  else if (cacheDType == "bf16")
    step.cacheDType = gen::CacheDType::BF16;
  else if (cacheDType == "f32")
    step.cacheDType = gen::CacheDType::F32;
  else if (cacheDType == "fp8" || cacheDType == "fp8_e4m3")
    step.cacheDType = gen::CacheDType::FP8;
  else if (cacheDType == "fp8_e5m2")
    step.cacheDType = gen::CacheDType::FP8E5M2;
  else
    throw py::value_error("cache_dtype: expected 'auto', 'bf16', 'f32', "
                          "'fp8', 'fp8_e4m3' or 'fp8_e5m2', got '" +
                          cacheDType + "'");
  return step;
}

CompileOptions compileOptions(const std::string &phase,
                              const std::string &pipeline, bool optimize,
                              const std::string &function, bool keepIR) {
  CompileOptions options;
  options.phase = parsePhase(phase);
  options.pipelineOptions = pipeline;
  options.optimize = optimize;
  options.functionName = function;
  options.keepIR = keepIR;
  return options;
}

py::tuple toPython(CompileResult result) {
  py::bytes artifact(reinterpret_cast<const char *>(result.artifact.data()),
                     result.artifact.size());
  return py::make_tuple(artifact, py::str(result.ir));
}

} // namespace

PYBIND11_MODULE(_mlac, m) {
  m.doc() = "The MLA compiler, in process (mla/Compiler/Compiler.h).";
  compileErrorType =
      py::exception<CompileErrorTag>(m, "CompileError", PyExc_RuntimeError);

  m.def("presets", [] {
    std::vector<std::string> names;
    for (llvm::StringRef name : gen::getPresetNames())
      names.push_back(name.str());
    return names;
  });

  m.def(
      "model_config",
      [](const std::string &preset, const std::string &configJson) {
        gen::ModelConfig c = modelConfig(preset, configJson);
        py::dict d;
        d["hidden_size"] = c.hiddenSize;
        d["num_attention_heads"] = c.numHeads;
        d["q_lora_rank"] =
            c.qLoraRank ? py::object(py::int_(*c.qLoraRank)) : py::none();
        d["kv_lora_rank"] = c.kvLoraRank;
        d["qk_nope_head_dim"] = c.qkNopeHeadDim;
        d["qk_rope_head_dim"] = c.qkRopeHeadDim;
        d["v_head_dim"] = c.vHeadDim;
        d["num_hidden_layers"] = c.numLayers;
        d["rms_norm_eps"] = c.rmsNormEps;
        d["rope_theta"] = c.ropeTheta;
        if (c.ropeScaling) {
          // Hugging Face's spelling, so the dict reads as a config.json.
          py::dict scaling;
          scaling["type"] = "yarn";
          scaling["factor"] = c.ropeScaling->factor;
          scaling["original_max_position_embeddings"] =
              c.ropeScaling->originalMaxPosition;
          scaling["beta_fast"] = c.ropeScaling->betaFast;
          scaling["beta_slow"] = c.ropeScaling->betaSlow;
          scaling["mscale"] = c.ropeScaling->mscale;
          scaling["mscale_all_dim"] = c.ropeScaling->mscaleAllDim;
          d["rope_scaling"] = scaling;
        }
        return py::make_tuple(d, c.softmaxScale());
      },
      py::arg("preset"), py::arg("config_json"));

  m.def(
      "compile_source",
      [](const std::string &source, const std::string &sourceName,
         const std::string &phase, const std::string &pipeline, bool optimize,
         const std::string &function, bool keepIR) {
        CompileOptions options =
            compileOptions(phase, pipeline, optimize, function, keepIR);
        llvm::Expected<CompileResult> result = [&] {
          py::gil_scoped_release release;
          return compileSource(source, sourceName, options);
        }();
        return toPython(valueOrRaise(std::move(result)));
      },
      py::arg("source"), py::arg("source_name"), py::arg("phase"),
      py::arg("pipeline"), py::arg("optimize"), py::arg("function"),
      py::arg("keep_ir"));

  m.def(
      "compile_model",
      [](const std::string &preset, const std::string &configJson,
         const py::dict &step, const std::string &pipeline, bool optimize,
         bool keepIR) {
        gen::ModelConfig config = modelConfig(preset, configJson);
        gen::StepOptions stepOpts = stepOptions(step);
        CompileOptions options =
            compileOptions("decode", pipeline, optimize, "", keepIR);
        llvm::Expected<CompileResult> result = [&] {
          py::gil_scoped_release release;
          return compileModel(config, stepOpts, options);
        }();
        return toPython(valueOrRaise(std::move(result)));
      },
      py::arg("preset"), py::arg("config_json"), py::arg("step"),
      py::arg("pipeline"), py::arg("optimize"), py::arg("keep_ir"));

  m.def(
      "generate_model",
      [](const std::string &preset, const std::string &configJson,
         const py::dict &step) {
        gen::ModelConfig config = modelConfig(preset, configJson);
        gen::StepOptions stepOpts = stepOptions(step);
        llvm::Expected<std::string> text = [&] {
          py::gil_scoped_release release;
          return generateModel(config, stepOpts);
        }();
        return valueOrRaise(std::move(text));
      },
      py::arg("preset"), py::arg("config_json"), py::arg("step"));
}
