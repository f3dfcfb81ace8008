//===- mla-ir-fuzzer.cpp - libFuzzer target: IR text to an artifact ------===//
//
// What mla-opt | mla-translate do to untrusted text, in process: parse,
// verify, run the decode or prefill pipeline with options picked by the
// input's first byte, translate to an artifact and load it back. Any
// outcome is fine except a crash, a sanitizer report, or an "internal
// error" diagnostic (the translator produced an artifact the loader
// refuses, or a pass broke its own invariant): those abort, so libFuzzer
// keeps the input.
//
//===----------------------------------------------------------------------===//
#include "mla/InitAll.h"
#include "mla/Pipelines/Pipelines.h"
#include "mla/Target/ArtifactTranslation.h"

#include "mlart/Artifact.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

using namespace mlir;

namespace {

/// The pipeline options one input byte selects: each bit flips an option
/// whose two settings produce different IR forms.
std::string pipelineOptions(uint8_t bits) {
  std::string s;
  auto add = [&](const char *option, bool on) {
    s += std::string(s.empty() ? "" : " ") + option + (on ? "=true" : "=false");
  };
  s += (bits & 1) ? "target=cuda-sm90" : "target=cpu";
  add("fuse-rope", !(bits & 2));
  add("fuse-into-attention", bits & 4);
  add("lift-q-prep", !(bits & 8));
  add("fuse-kv-norm", bits & 16);
  add("fuse-projections", bits & 32);
  return s;
}

/// A fresh context every so many inputs: contexts intern every type and
/// attribute they see, so one shared for a whole campaign only grows.
constexpr int kInputsPerContext = 256;

struct Session {
  DialectRegistry registry;
  std::unique_ptr<MLIRContext> context;
  int uses = 0;

  Session() { mla::registerAllDialects(registry); }

  MLIRContext &get() {
    if (!context || ++uses > kInputsPerContext) {
      context = std::make_unique<MLIRContext>(registry,
                                              MLIRContext::Threading::DISABLED);
      context->loadAllAvailableDialects();
      context->allowUnregisteredDialects(false);
      uses = 0;
    }
    return *context;
  }
};

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  // The first byte picks the pipeline and its options, the rest is IR.
  if (size < 1 || size > (64 << 10))
    return -1;
  static Session session;
  MLIRContext &context = session.get();
  const uint8_t bits = data[0];
  // MLIR's lexer reads up to a NUL terminator: a std::string has one, the
  // fuzzer's buffer does not.
  const std::string text(reinterpret_cast<const char *>(data + 1), size - 1);

  bool internalError = false;
  std::string internalMessage;
  ScopedDiagnosticHandler quiet(&context, [&](Diagnostic &diag) {
    std::string message = diag.str();
    if (llvm::StringRef(message).contains("internal error")) {
      internalError = true;
      internalMessage = message;
    }
    return success();
  });

  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, &context);
  if (!module || failed(verify(*module)))
    return 0;

  PassManager pm(&context);
  auto options = mla::PipelineOptions::createFromString(pipelineOptions(bits));
  if (!options)
    std::abort(); // the fuzzer's own option string must parse
  if (bits & 64)
    mla::buildPrefillPipeline(pm, *options);
  else
    mla::buildDecodePipeline(pm, *options);
  // Translate the pipeline's output, or (bit 7) the input as written, the
  // way mla-translate accepts hand-written IR.
  if (!(bits & 128) && failed(pm.run(*module)))
    return 0;

  FailureOr<std::vector<uint8_t>> bytes = mla::translateToArtifact(*module);
  if (succeeded(bytes)) {
    mlart::StatusOr<mlart::Artifact> artifact =
        mlart::Artifact::load(bytes->data(), bytes->size());
    if (!artifact.ok()) {
      std::fprintf(stderr, "translated artifact does not load: %s\n",
                   artifact.status().toString().c_str());
      std::abort();
    }
  }
  if (internalError) {
    std::fprintf(stderr, "internal error: %s\n", internalMessage.c_str());
    std::abort();
  }
  return 0;
}
