//===- Compiler.cpp - In-process compilation to a runtime artifact --------===//
#include "mla/Compiler/Compiler.h"

#include "mla/InitAll.h"
#include "mla/Pipelines/Pipelines.h"
#include "mla/Target/ArtifactTranslation.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::mla;

namespace {

llvm::Error compileError(const llvm::Twine &what, llvm::StringRef diagnostics) {
  std::string message = what.str();
  if (!diagnostics.empty())
    message += ":\n" + diagnostics.rtrim().str();
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// Collects every diagnostic of one compilation as text, the way mla-opt
/// prints it: "file:line:col: error: message" with the source line when
/// the location points into the compiled source. Unlike MLIR's
/// SourceMgrDiagnosticHandler it never opens a file a location names (a
/// location is input, and could name /dev/zero).
class DiagnosticCollector {
public:
  DiagnosticCollector(MLIRContext &context, llvm::StringRef source,
                      llvm::StringRef sourceName)
      : sourceName(sourceName.str()), os(text),
        handler(&context, [this](Diagnostic &d) {
          print(d);
          return success();
        }) {
    if (!source.empty())
      bufferId = sourceMgr.AddNewSourceBuffer(
          llvm::MemoryBuffer::getMemBuffer(source, sourceName,
                                           /*RequiresNullTerminator=*/false),
          llvm::SMLoc());
  }

  /// Everything reported so far.
  llvm::StringRef str() { return os.str(); }

private:
  static llvm::SourceMgr::DiagKind kindOf(DiagnosticSeverity severity) {
    switch (severity) {
    case DiagnosticSeverity::Error:
      return llvm::SourceMgr::DK_Error;
    case DiagnosticSeverity::Warning:
      return llvm::SourceMgr::DK_Warning;
    case DiagnosticSeverity::Note:
      return llvm::SourceMgr::DK_Note;
    case DiagnosticSeverity::Remark:
      return llvm::SourceMgr::DK_Remark;
    }
    return llvm::SourceMgr::DK_Error;
  }

  void print(Diagnostic &d) {
    printOne(d.getLocation(), d.getSeverity(), d.str());
    for (Diagnostic &note : d.getNotes())
      printOne(note.getLocation(), note.getSeverity(), note.str());
  }

  void printOne(Location loc, DiagnosticSeverity severity,
                const std::string &message) {
    auto fileLoc = dyn_cast<FileLineColLoc>(loc);
    if (!fileLoc)
      if (auto nameLoc = dyn_cast<NameLoc>(loc))
        fileLoc = dyn_cast<FileLineColLoc>(nameLoc.getChildLoc());
    if (fileLoc && bufferId && fileLoc.getFilename() == sourceName) {
      llvm::SMLoc at = sourceMgr.FindLocForLineAndColumn(
          bufferId, fileLoc.getLine(), fileLoc.getColumn());
      if (at.isValid()) {
        sourceMgr.PrintMessage(os, at, kindOf(severity), message);
        return;
      }
    }
    const char *kind = severity == DiagnosticSeverity::Error     ? "error"
                       : severity == DiagnosticSeverity::Warning ? "warning"
                       : severity == DiagnosticSeverity::Note    ? "note"
                                                                 : "remark";
    if (fileLoc)
      os << fileLoc.getFilename().getValue() << ":" << fileLoc.getLine() << ":"
         << fileLoc.getColumn() << ": ";
    else
      os << loc << ": ";
    os << kind << ": " << message << "\n";
  }

  std::string sourceName;
  llvm::SourceMgr sourceMgr;
  unsigned bufferId = 0;
  std::string text;
  llvm::raw_string_ostream os;
  ScopedDiagnosticHandler handler;
};

std::unique_ptr<MLIRContext> makeContext() {
  DialectRegistry registry;
  registerAllDialects(registry);
  return std::make_unique<MLIRContext>(registry);
}

/// Runs the pipeline (unless disabled) and the translation on `module`.
llvm::Expected<CompileResult> compileModule(ModuleOp module,
                                            const CompileOptions &options,
                                            DiagnosticCollector &diagnostics) {
  const bool decode = options.phase == gen::Phase::Decode;
  const char *pipeline =
      decode ? "mla-decode-pipeline" : "mla-prefill-pipeline";
  if (options.optimize) {
    PipelineOptions pipelineOptions;
    std::string optionErrors;
    llvm::raw_string_ostream optionErrorStream(optionErrors);
    if (failed(pipelineOptions.parseFromString(options.pipelineOptions,
                                               optionErrorStream)))
      return compileError(llvm::Twine("bad ") + pipeline + " options '" +
                              options.pipelineOptions + "'",
                          optionErrors);
    PassManager pm(module->getContext(), ModuleOp::getOperationName());
    if (decode)
      buildDecodePipeline(pm, pipelineOptions);
    else
      buildPrefillPipeline(pm, pipelineOptions);
    if (failed(pm.run(module)))
      return compileError(llvm::Twine(pipeline) + " failed", diagnostics.str());
  }
  FailureOr<std::vector<uint8_t>> artifact =
      translateToArtifact(module, options.functionName);
  if (failed(artifact))
    return compileError("the step does not lower to an artifact",
                        diagnostics.str());
  CompileResult result;
  result.artifact = std::move(*artifact);
  if (options.keepIR) {
    llvm::raw_string_ostream irStream(result.ir);
    module->print(irStream);
  }
  return result;
}

} // namespace

llvm::Expected<CompileResult>
mlir::mla::compileSource(llvm::StringRef source, llvm::StringRef sourceName,
                         const CompileOptions &options) {
  std::unique_ptr<MLIRContext> context = makeContext();
  DiagnosticCollector diagnostics(*context, source, sourceName);
  ParserConfig config(context.get());
  OwningOpRef<ModuleOp> module =
      parseSourceString<ModuleOp>(source, config, sourceName);
  if (!module)
    return compileError("the source does not parse or verify",
                        diagnostics.str());
  return compileModule(*module, options, diagnostics);
}

llvm::Expected<CompileResult>
mlir::mla::compileModel(const gen::ModelConfig &config,
                        const gen::StepOptions &step, CompileOptions options) {
  options.phase = step.phase;
  std::unique_ptr<MLIRContext> context = makeContext();
  DiagnosticCollector diagnostics(*context, /*source=*/"", config.name);
  llvm::Expected<OwningOpRef<ModuleOp>> module =
      gen::buildStepModule(*context, config, step);
  if (!module)
    return module.takeError();
  return compileModule(**module, options, diagnostics);
}

llvm::Expected<std::string>
mlir::mla::generateModel(const gen::ModelConfig &config,
                         const gen::StepOptions &step) {
  std::unique_ptr<MLIRContext> context = makeContext();
  DiagnosticCollector diagnostics(*context, /*source=*/"", config.name);
  llvm::Expected<OwningOpRef<ModuleOp>> module =
      gen::buildStepModule(*context, config, step);
  if (!module)
    return module.takeError();
  std::string text;
  llvm::raw_string_ostream os(text);
  (*module)->print(os);
  return text;
}
