//===- ArtifactTranslation.cpp - mla IR to a runtime step artifact --------===//
//
// The lowering is a small destination-passing bufferization specialised to
// what a step contains:
//  - function arguments become named buffers and caches;
//  - tensor.extract_slice / expand_shape / collapse_shape become views of
//    their source (no copy) whenever strides can express them;
//  - every other result gets a fresh arena allocation, or the output buffer
//    directly when it is only returned;
//  - each op becomes one or a few kernel instructions;
//  - the decode query's producers (q_absorb and the fused rope update's
//    q_pe) write straight into their columns of the assembled query, so the
//    q_concat between them lowers to nothing;
//  - the fused rope update rotates k_pe where it lies when nobody can see
//    the rotation (a view of a temporary with no later reader), else a copy;
//    it reads q_pe where it lies and writes the rotation to its destination
//    (no copy) unless the kernel cannot read the view or it may share bytes
//    with what the op writes;
//  - arena allocations are then placed by liveness (ArenaPlanner), so the
//    arena does not grow with the number of layers.
//
//===----------------------------------------------------------------------===//
#include "mla/Target/ArtifactTranslation.h"

#include "mla/Dialect/MLA/IR/MLAAttrs.h"
#include "mla/Dialect/MLA/IR/MLADialect.h"
#include "mla/Dialect/MLA/IR/MLAOps.h"
#include "mla/InitAll.h"
#include "mla/Target/ArenaPlanner.h"
#include "mla/Target/RuntimeTypes.h"

#include "mlart/ArtifactWriter.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/CompilationInterfaces.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/Path.h"

#include <functional>

using namespace mlir;
using namespace mlir::mla;

namespace {

constexpr unsigned kAbsent = ~0u;

mlart::CacheLayout toLayout(CacheLayout layout) {
  switch (layout) {
  case CacheLayout::plain:
    return mlart::CacheLayout::Plain;
  case CacheLayout::per_tensor:
    return mlart::CacheLayout::Fp8PerTensor;
  case CacheLayout::fp8_ds_mla:
    return mlart::CacheLayout::Fp8DsMla;
  }
  llvm_unreachable("unknown layout");
}

void setRowMajor(mlart::ViewDecl &view, ArrayRef<int64_t> sizes) {
  view.rank = int(sizes.size());
  int64_t stride = 1;
  for (int d = view.rank - 1; d >= 0; --d) {
    view.sizes[d] = sizes[d];
    view.strides[d] = stride;
    stride *= sizes[d];
  }
}

/// mlart::rowWindowsDisjoint for two views of one base: their byte offsets
/// stand in for addresses (only the difference matters).
bool rowWindowsDisjoint(const mlart::ViewDecl &a, const mlart::ViewDecl &b) {
  auto ref = [](const mlart::ViewDecl &v) {
    mlart::TensorRef t;
    t.data = reinterpret_cast<void *>(uintptr_t(v.byteOffset));
    t.dtype = v.dtype;
    t.rank = v.rank;
    for (int d = 0; d < v.rank; ++d) {
      t.sizes[d] = v.sizes[d];
      t.strides[d] = v.strides[d];
    }
    return t;
  };
  return mlart::rowWindowsDisjoint(ref(a), ref(b));
}

/// The largest tensor the lowering accepts, in bytes: far above any step's,
/// and small enough that every offset and extent computed from it (sizes
/// times strides times the element size) fits in int64.
constexpr int64_t kMaxTensorBytes = int64_t(1) << 46;

/// Checks what the format can represent before anything indexes a view's
/// kMaxRank dimensions or multiplies its sizes: the verifiers of the ops
/// the lowering accepts bound neither the rank nor the size.
LogicalResult checkRepresentable(Operation *op, RankedTensorType type,
                                 const Twine &what) {
  if (!type.hasStaticShape())
    return op->emitError() << what << " must be statically shaped, got "
                           << type;
  if (type.getRank() > mlart::kMaxRank)
    return op->emitError() << what << " has rank " << type.getRank()
                           << "; the runtime's views have at most "
                           << mlart::kMaxRank << " dimensions";
  int64_t bytes = 8; // the widest element
  for (int64_t dim : type.getShape())
    if (dim != 0 && bytes > kMaxTensorBytes / dim)
      return op->emitError() << what << " of type " << type
                             << " is larger than the runtime accepts (2^46 "
                                "bytes)";
    else
      bytes *= dim;
  return success();
}

/// Ops that lower to a view of their source, never to an instruction.
bool isViewOp(Operation *op) {
  return isa<tensor::ExtractSliceOp, tensor::ExpandShapeOp,
             tensor::CollapseShapeOp>(op);
}

/// A view whose arena offset is known only after planning.
struct PendingView {
  mlart::ViewDecl decl;
  /// Arena allocation the view lies in (offset relative to it), or -1 for a
  /// view of an argument buffer.
  int allocId = -1;
};

/// An instruction waiting for its final view indices.
struct PendingInst {
  SmallVector<unsigned> views; ///< pending view ids, kAbsent if absent
  std::function<void(ArrayRef<uint32_t>)> emit;
};

class Translator {
public:
  explicit Translator(func::FuncOp func)
      : func(func), writer(func.getSymName().str()) {}

  FailureOr<std::vector<uint8_t>> run();

private:
  LogicalResult declareArguments();
  LogicalResult declareResults();
  /// Records `name` as the buffer or cache name of `what`; an error at the
  /// function when an earlier argument or result has it (the runtime binds
  /// by name, so names must be unique).
  LogicalResult claimName(StringRef name, const Twine &what);
  LogicalResult planQueryAssembly();
  bool canRotateKPeInPlace(RopeKVCacheUpdateOp update, unsigned kPeView);
  /// True when the two views are disjoint column windows of rows of one
  /// base (rowWindowsDisjoint).
  bool disjointColumns(unsigned a, unsigned b) const;
  bool canRotateQPeFrom(unsigned source, unsigned dest, unsigned kPe) const;
  /// True when the two views may share bytes.
  bool mayOverlap(unsigned a, unsigned b) const;
  LogicalResult translate(Operation *op);
  LogicalResult translateView(Operation *op);

  // Views.
  unsigned addView(PendingView view) {
    // Dimensions past the rank are zero in the format.
    for (int d = view.decl.rank; d < mlart::kMaxRank; ++d)
      view.decl.sizes[d] = view.decl.strides[d] = 0;
    views.push_back(view);
    return unsigned(views.size() - 1);
  }
  unsigned newAllocation(RankedTensorType type, mlart::DType dtype);
  /// True when `value` is a weight argument, a value the prepare program
  /// computes, or a view of either: bytes that do not change between steps.
  bool isWeightDerived(Value value) const;
  /// A row-major view of new prepared-arena bytes for `op`'s result.
  FailureOr<unsigned> preparedAllocation(Operation *op);
  FailureOr<unsigned> resultView(Value result);
  FailureOr<unsigned> viewOf(Operation *user, Value value);
  unsigned subview(unsigned base, ArrayRef<int64_t> offsets,
                   ArrayRef<int64_t> sizes, ArrayRef<int64_t> steps);
  unsigned broadcastRows(unsigned base, int64_t heads);

  void addInst(SmallVector<unsigned> operands,
               std::function<void(ArrayRef<uint32_t>)> emit) {
    insts.push_back({std::move(operands), std::move(emit)});
  }
  std::string location(Operation *op) const;
  FailureOr<mlart::DType> dtypeOf(Operation *op, Type type);
  /// The cache index of `op`'s cache operand; `scale` is the op's scale of
  /// a per-tensor fp8 cache (null otherwise), which becomes the cache's
  /// scale buffer: one function argument for every op on the cache.
  FailureOr<uint32_t> cacheOf(Operation *op, Value cache, Value scale);
  /// The generated kernel an `mla.kernel`-marked cache write runs, or
  /// kAbsent for the library kernel.
  FailureOr<uint32_t> kernelOf(Operation *op, mlart::Opcode opcode);

  func::FuncOp func;
  mlart::ArtifactWriter writer;
  DenseMap<Value, unsigned> valueViews;
  DenseMap<Value, uint32_t> caches;
  /// The scale argument of each per-tensor fp8 cache, by cache index.
  DenseMap<uint32_t, Value> cacheScales;
  /// Weight arguments and the values the prepare program computes.
  DenseSet<Value> weightValues;
  /// Results written straight into a destination: the output buffer, or
  /// their columns of an assembled query.
  DenseMap<Value, unsigned> outputViews;
  /// q_concat ops whose result is assembled by its producers.
  DenseSet<Operation *> assembledConcats;
  SmallVector<unsigned> resultViews;     ///< output buffer view per result
  std::vector<PendingView> views;
  std::vector<PendingInst> insts;
  std::vector<int64_t> allocBytes;
  llvm::StringMap<uint32_t> kernels;
  /// Buffer and cache names claimed so far, with who claimed them.
  llvm::StringMap<std::string> names;
};

std::string Translator::location(Operation *op) const {
  std::string text = op->getName().getStringRef().str();
  if (auto loc = dyn_cast<FileLineColLoc>(op->getLoc())) {
    // The format's strings hold no NUL byte; a file name may (it is only
    // displayed, so the byte is dropped rather than the input refused).
    std::string file =
        llvm::sys::path::filename(loc.getFilename().getValue()).str();
    llvm::erase(file, '\0');
    text += " (" + file + ":" + std::to_string(loc.getLine()) + ")";
  }
  return text;
}

LogicalResult Translator::claimName(StringRef name, const Twine &what) {
  auto [it, inserted] = names.try_emplace(name, what.str());
  if (inserted)
    return success();
  return func.emitError() << what << " is named '" << name << "', as is "
                          << it->second
                          << "; buffer and cache names must be unique";
}

FailureOr<mlart::DType> Translator::dtypeOf(Operation *op, Type type) {
  Type element = type;
  if (auto shaped = dyn_cast<ShapedType>(type))
    element = shaped.getElementType();
  if (std::optional<mlart::DType> dtype = toRuntimeDType(element))
    return *dtype;
  return op->emitError() << "element type " << element
                         << " has no runtime equivalent";
}

unsigned Translator::newAllocation(RankedTensorType type, mlart::DType dtype) {
  PendingView view;
  view.decl.base = mlart::ViewBase::Arena;
  view.decl.dtype = dtype;
  setRowMajor(view.decl, type.getShape());
  view.allocId = int(allocBytes.size());
  allocBytes.push_back(type.getNumElements() *
                       int64_t(mlart::dtypeSize(dtype)));
  return addView(view);
}

bool Translator::isWeightDerived(Value value) const {
  while (Operation *def = value.getDefiningOp()) {
    if (!isViewOp(def))
      break;
    value = def->getOperand(0);
  }
  return weightValues.contains(value);
}

FailureOr<unsigned> Translator::preparedAllocation(Operation *op) {
  Value result = op->getResult(0);
  auto type = cast<RankedTensorType>(result.getType());
  FailureOr<mlart::DType> dtype = dtypeOf(op, type);
  if (failed(dtype))
    return failure();
  // Prepared bytes live as long as the executor: no liveness planning.
  PendingView view;
  view.decl.base = mlart::ViewBase::Prepared;
  view.decl.dtype = *dtype;
  view.decl.byteOffset = writer.allocatePrepared(
      type.getNumElements() * int64_t(mlart::dtypeSize(*dtype)));
  setRowMajor(view.decl, type.getShape());
  unsigned id = addView(view);
  valueViews[result] = id;
  weightValues.insert(result);
  return id;
}

FailureOr<unsigned> Translator::resultView(Value result) {
  auto it = outputViews.find(result);
  unsigned id;
  if (it != outputViews.end()) {
    id = it->second;
  } else {
    auto type = cast<RankedTensorType>(result.getType());
    FailureOr<mlart::DType> dtype = dtypeOf(result.getDefiningOp(), type);
    if (failed(dtype))
      return failure();
    id = newAllocation(type, *dtype);
  }
  valueViews[result] = id;
  return id;
}

FailureOr<unsigned> Translator::viewOf(Operation *user, Value value) {
  auto it = valueViews.find(value);
  if (it == valueViews.end())
    return user->emitError() << "operand has no runtime buffer (produced by an "
                                "unsupported op?)";
  return it->second;
}

unsigned Translator::subview(unsigned base, ArrayRef<int64_t> offsets,
                             ArrayRef<int64_t> sizes, ArrayRef<int64_t> steps) {
  PendingView view = views[base];
  int64_t elementBytes = int64_t(mlart::dtypeSize(view.decl.dtype));
  for (size_t d = 0; d < offsets.size(); ++d) {
    view.decl.byteOffset += offsets[d] * view.decl.strides[d] * elementBytes;
    // A step only matters between elements: with one element it may be
    // anything in bounds, so do not let it scale the stride (or overflow).
    if (sizes[d] > 1)
      view.decl.strides[d] *= steps[d];
    view.decl.sizes[d] = sizes[d];
  }
  return addView(view);
}

/// [T, X] -> [T, heads, X] with stride 0 over heads (a broadcast read).
unsigned Translator::broadcastRows(unsigned base, int64_t heads) {
  PendingView view = views[base];
  view.decl.rank = 3;
  view.decl.sizes[2] = view.decl.sizes[1];
  view.decl.strides[2] = view.decl.strides[1];
  view.decl.sizes[1] = heads;
  view.decl.strides[1] = 0;
  return addView(view);
}

FailureOr<uint32_t> Translator::cacheOf(Operation *op, Value cache,
                                        Value scale) {
  auto it = caches.find(cache);
  if (it == caches.end())
    return op->emitError() << "the cache must be a function argument";
  const uint32_t index = it->second;
  // The dialect verified that a per-tensor cache comes with a scale.
  if (!scale)
    return index;
  // The artifact declares the scale once, on the cache (CacheDecl::
  // scaleBuffer): the bytes of a cache mean one scale, whoever reads or
  // writes them.
  auto arg = dyn_cast<BlockArgument>(scale);
  auto view = valueViews.find(scale);
  if (!arg || arg.getOwner()->getParentOp() != func || view == valueViews.end())
    return op->emitError()
           << "the scale of a per-tensor fp8 cache must be a function "
              "argument (the runtime binds it as a buffer)";
  auto [known, inserted] = cacheScales.try_emplace(index, scale);
  if (inserted)
    writer.setCacheScale(index, views[view->second].decl.baseIndex);
  else if (known->second != scale)
    return op->emitError()
           << "every op on a per-tensor fp8 cache must use the same scale "
              "argument; this one uses argument #"
           << arg.getArgNumber() << ", an earlier one argument #"
           << cast<BlockArgument>(known->second).getArgNumber();
  return index;
}

FailureOr<uint32_t> Translator::kernelOf(Operation *op, mlart::Opcode opcode) {
  // The dialect verified the attribute's shape.
  auto dict = op->getAttrOfType<DictionaryAttr>(MLADialect::getKernelAttrName());
  if (!dict)
    return kAbsent;
  auto symbol = cast<SymbolRefAttr>(dict.get("symbol"));
  StringRef name = symbol.getLeafReference().getValue();
  auto it = kernels.find(name);
  if (it != kernels.end())
    return it->second;
  auto module = func->getParentOfType<ModuleOp>();
  StringRef root = symbol.getRootReference().getValue();
  auto binary = module.lookupSymbol<gpu::BinaryOp>(root);
  if (!binary) {
    if (module.lookupSymbol<gpu::GPUModuleOp>(root))
      return op->emitError()
             << "generated kernel " << symbol
             << " is not compiled yet: lower the gpu.module to PTX "
                "(nvvm-attach-target, convert-gpu-to-nvvm, "
                "gpu-module-to-binary format=isa), as mla-decode-pipeline "
                "kernels=codegen does";
    return op->emitError() << "generated kernel " << symbol
                           << " refers to no gpu.binary";
  }
  StringRef ptx;
  for (Attribute attr : binary.getObjects()) {
    auto object = dyn_cast<gpu::ObjectAttr>(attr);
    if (object && isa<NVVM::NVVMTargetAttr>(object.getTarget()) &&
        object.getFormat() == gpu::CompilationTarget::Assembly)
      ptx = object.getObject().getValue();
  }
  if (ptx.empty())
    return op->emitError() << "gpu.binary @" << root
                           << " holds no NVVM PTX text (use "
                              "gpu-module-to-binary format=isa)";
  if (!ptx.contains((".entry " + name + "(").str()))
    return op->emitError() << "the PTX of @" << root << " defines no kernel '"
                           << name << "'";
  if (ptx.contains('\0'))
    return op->emitError() << "the PTX of @" << root << " contains a NUL byte";
  uint32_t id = writer.addCodegenKernel(
      name.str(), ptx.str(), opcode,
      uint32_t(cast<IntegerAttr>(dict.get("block_threads")).getInt()),
      uint32_t(cast<IntegerAttr>(dict.get("tokens_per_block")).getInt()));
  kernels[name] = id;
  return id;
}

/// The runtime's form of `#mla.rope_table` (field for field).
static mlart::RopeTableParams toRopeTableParams(RopeTableAttr attr) {
  mlart::RopeTableParams p;
  p.theta = attr.getTheta().convertToDouble();
  p.factor = attr.getFactor().convertToDouble();
  p.originalMaxPosition = attr.getOriginalMaxPosition();
  p.betaFast = attr.getBetaFast().convertToDouble();
  p.betaSlow = attr.getBetaSlow().convertToDouble();
  p.mscale = attr.getMscale().convertToDouble();
  p.mscaleAllDim = attr.getMscaleAllDim().convertToDouble();
  return p;
}

LogicalResult Translator::declareArguments() {
  for (BlockArgument arg : func.getArguments()) {
    unsigned i = arg.getArgNumber();
    std::string name = "arg" + std::to_string(i);
    if (auto attr = func.getArgAttrOfType<StringAttr>(
            i, MLADialect::getNameAttrName()))
      name = attr.getValue().str();
    if (failed(claimName(name, "argument #" + Twine(i))))
      return failure();
    if (auto cacheType = dyn_cast<KVCacheType>(arg.getType())) {
      mlart::KVCacheDesc desc;
      // A dynamic block count is fixed by the cache bound at run time.
      desc.numBlocks = cacheType.hasStaticNumBlocks() ? cacheType.getNumBlocks()
                                                      : 0;
      desc.blockSize = cacheType.getBlockSize();
      desc.latentRank = cacheType.getLatentRank();
      desc.ropeDim = cacheType.getRopeDim();
      desc.layout = toLayout(cacheType.getLayout());
      FailureOr<mlart::DType> dtype =
          dtypeOf(func, cacheType.getElementType());
      if (failed(dtype))
        return failure();
      desc.dtype = *dtype;
      caches[arg] = writer.addCache(name, desc);
      continue;
    }
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!type || !type.hasStaticShape() || type.getRank() > mlart::kMaxRank)
      return func.emitError() << "argument #" << i
                              << " must be a statically shaped tensor of rank "
                                 "<= 4 or a cache, got "
                              << arg.getType();
    if (failed(checkRepresentable(func, type, "argument #" + Twine(i))))
      return failure();
    FailureOr<mlart::DType> dtype = dtypeOf(func, type);
    if (failed(dtype))
      return failure();
    mlart::BufferDecl decl;
    decl.name = name;
    decl.dtype = *dtype;
    decl.rank = int(type.getRank());
    for (int d = 0; d < decl.rank; ++d)
      decl.sizes[d] = type.getDimSize(d);
    bool isInteger = type.getElementType().isInteger();
    decl.role = isInteger ? mlart::BufferRole::StepMetadata
                : (name == "hidden_states" || (i == 0 && name == "arg0"))
                    ? mlart::BufferRole::Input
                    : mlart::BufferRole::Weight;
    uint32_t buffer = writer.addBuffer(decl);
    if (auto rope = func.getArgAttrOfType<RopeTableAttr>(
            i, MLADialect::getRopeTableAttrName()))
      writer.setRopeTable(buffer, toRopeTableParams(rope));
    if (decl.role == mlart::BufferRole::Weight)
      weightValues.insert(arg);
    PendingView view;
    view.decl.base = mlart::ViewBase::Buffer;
    view.decl.baseIndex = buffer;
    view.decl.dtype = *dtype;
    setRowMajor(view.decl, type.getShape());
    valueViews[arg] = addView(view);
  }
  return success();
}

LogicalResult Translator::declareResults() {
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  for (auto [i, value] : llvm::enumerate(ret.getOperands())) {
    auto type = dyn_cast<RankedTensorType>(value.getType());
    if (!type)
      return ret.emitError()
             << "result #" << i << " must be a tensor, got " << value.getType();
    if (failed(checkRepresentable(ret, type, "result #" + Twine(i))))
      return failure();
    FailureOr<mlart::DType> dtype = dtypeOf(ret, type);
    if (failed(dtype))
      return failure();
    mlart::BufferDecl decl;
    decl.name = "result" + std::to_string(i);
    if (auto attr = func.getResultAttrOfType<StringAttr>(
            i, MLADialect::getNameAttrName()))
      decl.name = attr.getValue().str();
    if (failed(claimName(decl.name, "result #" + Twine(i))))
      return failure();
    decl.role = mlart::BufferRole::Output;
    decl.dtype = *dtype;
    decl.rank = int(type.getRank());
    for (int d = 0; d < decl.rank; ++d)
      decl.sizes[d] = type.getDimSize(d);
    PendingView view;
    view.decl.base = mlart::ViewBase::Buffer;
    view.decl.baseIndex = writer.addBuffer(decl);
    view.decl.dtype = *dtype;
    setRowMajor(view.decl, type.getShape());
    unsigned id = addView(view);
    resultViews.push_back(id);
    // A value computed only to be returned is written in place.
    Operation *def = value.getDefiningOp();
    if (def && value.hasOneUse() && !isViewOp(def))
      outputViews[value] = id;
  }
  return success();
}

/// The decode query is concat(q_absorb(...), rotated q_pe): instead of a
/// q_concat kernel copying both parts, allocate the query once and let
/// q_absorb write its first L columns (a strided view) and the fused rope
/// update rotate q_pe into its last P columns. Only when q_concat is
/// each part's sole reader (otherwise the part stays a tensor of its own)
/// and the element types agree; anything else keeps the q_concat
/// instruction.
LogicalResult Translator::planQueryAssembly() {
  for (auto concat : func.getBody().front().getOps<QConcatOp>()) {
    Value latent = concat.getQLatent(), pe = concat.getQPe();
    auto update = pe.getDefiningOp<RopeKVCacheUpdateOp>();
    if (!latent.getDefiningOp<QAbsorbOp>() || !update ||
        pe != update.getQPeOut() || !latent.hasOneUse() || !pe.hasOneUse())
      continue;
    auto latentType = cast<RankedTensorType>(latent.getType());
    auto peType = cast<RankedTensorType>(pe.getType());
    auto queryType = cast<RankedTensorType>(concat.getResult().getType());
    if (latentType.getElementType() != queryType.getElementType() ||
        peType.getElementType() != queryType.getElementType() ||
        !queryType.hasStaticShape())
      continue;
    FailureOr<unsigned> query = resultView(concat.getResult());
    if (failed(query))
      return failure();
    // Views of one allocation: liveness keeps the whole query alive from
    // its first writer to its last reader.
    int64_t batch = queryType.getDimSize(0), heads = queryType.getDimSize(1);
    int64_t l = latentType.getDimSize(2), p = peType.getDimSize(2);
    outputViews[latent] =
        subview(*query, {0, 0, 0}, {batch, heads, l}, {1, 1, 1});
    outputViews[pe] = subview(*query, {0, 0, l}, {batch, heads, p}, {1, 1, 1});
    assembledConcats.insert(concat);
  }
  return success();
}

/// The fused update rotates k_pe in place. Without a copy it rotates bytes of
/// k_pe's source P, which is unobservable only when: P is a temporary (an
/// arena allocation of its own, neither an argument nor returned), k_pe
/// (a view of P) is read by this op alone, and every other reader of P or
/// of any view of P is before this op (it reads the unrotated bytes) or
/// reads a view whose columns are disjoint from k_pe's (rotating k_pe
/// cannot change those bytes: the latent columns the norm or this op read,
/// the q heads of a fused q + kv_a projection). No later instruction, the
/// return included, can see the rotation. P stays live through the op (the
/// op reads k_pe, a view of P's allocation), so the arena planner gives its
/// bytes to nobody else meanwhile. The view must also be one the kernel
/// accepts and whose rows do not overlap.
bool Translator::canRotateKPeInPlace(RopeKVCacheUpdateOp update,
                                     unsigned kPeView) {
  Value kPe = update.getKPe();
  if (update.getKPeOut() || !kPe.hasOneUse())
    return false;
  Value root = kPe;
  while (Operation *def = root.getDefiningOp()) {
    if (!isViewOp(def))
      break;
    root = def->getOperand(0);
  }
  // P owns its allocation: not an argument, the output buffer or a part
  // of an assembled query.
  if (isa<BlockArgument>(root) || outputViews.count(root))
    return false;
  auto rootView = valueViews.find(root);
  if (rootView == valueViews.end() || views[rootView->second].allocId < 0 ||
      views[rootView->second].allocId != views[kPeView].allocId)
    return false;
  // Every reader of P's bytes other than this op's k_pe comes before it.
  SmallVector<Value> worklist{root};
  while (!worklist.empty()) {
    Value value = worklist.pop_back_val();
    for (OpOperand &use : value.getUses()) {
      Operation *user = use.getOwner();
      if (isViewOp(user)) {
        worklist.push_back(user->getResult(0));
        continue;
      }
      if (user == update && value == kPe)
        continue;
      // A reader of bytes the rotation does not touch (the latent columns
      // the norm reads, the q heads of a fused projection) may come after.
      auto read = valueViews.find(value);
      if (value != root && read != valueViews.end() &&
          disjointColumns(read->second, kPeView))
        continue;
      if (user == update || user->getBlock() != update->getBlock() ||
          !user->isBeforeInBlock(update))
        return false;
    }
  }
  const mlart::ViewDecl &decl = views[kPeView].decl;
  return decl.rank == 2 && (decl.sizes[1] <= 1 || decl.strides[1] == 1) &&
         (decl.sizes[0] <= 1 || decl.strides[0] >= decl.sizes[1]);
}

bool Translator::disjointColumns(unsigned a, unsigned b) const {
  const PendingView &x = views[a], &y = views[b];
  if (x.decl.base != y.decl.base ||
      (x.decl.base == mlart::ViewBase::Arena ? x.allocId != y.allocId
                                             : x.decl.baseIndex !=
                                                   y.decl.baseIndex))
    return false;
  return rowWindowsDisjoint(x.decl, y.decl);
}

bool Translator::mayOverlap(unsigned a, unsigned b) const {
  const PendingView &x = views[a], &y = views[b];
  // Distinct arena allocations that one instruction uses are live together,
  // so the planner keeps them apart; distinct buffers are distinct
  // arguments (the kernels check what is actually bound).
  if (x.decl.base != y.decl.base)
    return false;
  if (x.decl.base == mlart::ViewBase::Arena ? x.allocId != y.allocId
                                            : x.decl.baseIndex !=
                                                  y.decl.baseIndex)
    return false;
  auto [x0, x1] = x.decl.byteExtent();
  auto [y0, y1] = y.decl.byteExtent();
  return x0 < x1 && y0 < y1 && x0 < y1 && y0 < x1 &&
         !rowWindowsDisjoint(x.decl, y.decl);
}

/// The kernel reads q_pe from `source` and writes the rotation to `dest`
/// when the source has unit inner stride (the kernels' operand rule) and
/// none of the bytes the op writes - the destination and the rotated k_pe
/// `kPe` - can be among the source's. Otherwise the source is copied into
/// the destination first, as before.
bool Translator::canRotateQPeFrom(unsigned source, unsigned dest,
                                  unsigned kPe) const {
  const mlart::ViewDecl &s = views[source].decl, &d = views[dest].decl;
  if (s.rank != 3 || d.rank != 3 || s.dtype != d.dtype ||
      (s.sizes[2] > 1 && s.strides[2] != 1))
    return false;
  for (int i = 0; i < 3; ++i)
    if (s.sizes[i] != d.sizes[i])
      return false;
  return !mayOverlap(source, dest) && !mayOverlap(source, kPe);
}

LogicalResult Translator::translateView(Operation *op) {
  return TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](tensor::ExtractSliceOp slice) -> LogicalResult {
        if (!slice.getOffsets().empty() || !slice.getSizes().empty() ||
            !slice.getStrides().empty())
          return slice.emitError() << "only static slices are supported";
        // Dynamic (kDynamic, negative) entries are refused here too; the
        // verifier keeps static ones in bounds.
        if (llvm::any_of(slice.getStaticOffsets(),
                         [](int64_t v) { return v < 0; }) ||
            llvm::any_of(slice.getStaticStrides(),
                         [](int64_t v) { return v < 1; }))
          return slice.emitError() << "only static, non-negative offsets "
                                      "and positive strides lower to a view";
        FailureOr<unsigned> base = viewOf(op, slice.getSource());
        if (failed(base))
          return failure();
        unsigned id = subview(*base, slice.getStaticOffsets(),
                              slice.getStaticSizes(), slice.getStaticStrides());
        // Rank-reducing slices drop unit dimensions.
        llvm::SmallBitVector dropped = slice.getDroppedDims();
        if (dropped.any()) {
          PendingView view = views[id];
          int out = 0;
          for (int d = 0; d < view.decl.rank; ++d) {
            if (dropped.test(d))
              continue;
            view.decl.sizes[out] = view.decl.sizes[d];
            view.decl.strides[out] = view.decl.strides[d];
            ++out;
          }
          view.decl.rank = out;
          id = addView(view);
        }
        valueViews[slice.getResult()] = id;
        return success();
      })
      .Case([&](tensor::ExpandShapeOp expand) -> LogicalResult {
        FailureOr<unsigned> base = viewOf(op, expand.getSrc());
        if (failed(base))
          return failure();
        PendingView view = views[*base];
        const mlart::ViewDecl src = view.decl;
        ArrayRef<int64_t> shape = expand.getResultType().getShape();
        view.decl.rank = int(shape.size());
        // The verifier keeps the reassociation within both ranks, and
        // run() bounded the result's rank.
        for (auto [srcDim, group] :
             llvm::enumerate(expand.getReassociationIndices())) {
          int64_t stride = src.strides[srcDim];
          for (int64_t d : llvm::reverse(group)) {
            view.decl.sizes[d] = shape[d];
            view.decl.strides[d] = stride;
            stride *= shape[d];
          }
        }
        valueViews[expand.getResult()] = addView(view);
        return success();
      })
      .Case([&](tensor::CollapseShapeOp collapse) -> LogicalResult {
        FailureOr<unsigned> base = viewOf(op, collapse.getSrc());
        if (failed(base))
          return failure();
        PendingView view = views[*base];
        const mlart::ViewDecl src = view.decl;
        auto groups = collapse.getReassociationIndices();
        view.decl.rank = int(groups.size());
        for (auto [outDim, group] : llvm::enumerate(groups)) {
          int64_t size = 1;
          for (size_t k = 0; k < group.size(); ++k) {
            int64_t d = group[k];
            size *= src.sizes[d];
            bool packed = k + 1 == group.size() || src.sizes[d] == 1 ||
                          src.strides[d] ==
                              src.strides[group[k + 1]] * src.sizes[group[k + 1]];
            if (!packed)
              return collapse.emitError()
                     << "cannot collapse a strided view without a copy";
          }
          view.decl.sizes[outDim] = size;
          view.decl.strides[outDim] = src.strides[group.back()];
        }
        valueViews[collapse.getResult()] = addView(view);
        return success();
      })
      .Default([](Operation *) { return failure(); });
}

LogicalResult Translator::translate(Operation *op) {
  if (isViewOp(op))
    return translateView(op);

  std::string loc = location(op);
  auto operands = [&](ValueRange values) -> FailureOr<SmallVector<unsigned>> {
    SmallVector<unsigned> ids;
    for (Value v : values) {
      FailureOr<unsigned> id = viewOf(op, v);
      if (failed(id))
        return failure();
      ids.push_back(*id);
    }
    return ids;
  };
  auto copy = [&](unsigned src, unsigned dst) {
    addInst({src, dst}, [this, loc](ArrayRef<uint32_t> v) {
      writer.copy(v[0], v[1], loc);
    });
  };

  return TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](RmsNormOp norm) -> LogicalResult {
        auto in = operands({norm.getInput(), norm.getWeight()});
        auto out = resultView(norm.getResult());
        if (failed(in) || failed(out))
          return failure();
        float eps = norm.getEpsilon().convertToFloat();
        addInst({(*in)[0], (*in)[1], *out},
                [this, eps, loc](ArrayRef<uint32_t> v) {
                  writer.rmsNorm(v[0], v[1], v[2], eps, loc);
                });
        return success();
      })
      .Case([&](LinearOp linear) -> LogicalResult {
        SmallVector<Value> values = {linear.getInput(), linear.getWeight()};
        if (Value addend = linear.getAddend())
          values.push_back(addend);
        auto in = operands(values);
        auto out = resultView(linear.getResult());
        if (failed(in) || failed(out))
          return failure();
        SmallVector<unsigned> slots = {(*in)[0], (*in)[1], *out};
        if (linear.getAddend())
          slots.push_back((*in)[2]);
        addInst(slots, [this, loc](ArrayRef<uint32_t> v) {
          if (v.size() == 4)
            writer.linear(v[0], v[1], v[2], v[3], loc);
          else
            writer.linear(v[0], v[1], v[2], loc);
        });
        return success();
      })
      .Case([&](arith::AddFOp add) -> LogicalResult {
        auto type = dyn_cast<RankedTensorType>(add.getType());
        if (!type || type.getRank() != 2)
          return add.emitError() << "only rank-2 tensor additions lower to "
                                    "the runtime";
        auto in = operands({add.getLhs(), add.getRhs()});
        auto out = resultView(add.getResult());
        if (failed(in) || failed(out))
          return failure();
        addInst({(*in)[0], (*in)[1], *out}, [this, loc](ArrayRef<uint32_t> v) {
          writer.add(v[0], v[1], v[2], loc);
        });
        return success();
      })
      .Case([&](RopeOp rope) -> LogicalResult {
        // The runtime rotates in place: copy, then rotate the copy.
        auto in = operands({rope.getInput(), rope.getPositions(),
                            rope.getCosSin()});
        auto out = resultView(rope.getResult());
        if (failed(in) || failed(out))
          return failure();
        copy((*in)[0], *out);
        auto style = rope.getStyle() == RopeStyle::neox ? mlart::RopeStyle::NeoX
                                                        : mlart::RopeStyle::GptJ;
        addInst({*out, (*in)[1], (*in)[2]},
                [this, style, loc](ArrayRef<uint32_t> v) {
                  writer.rope(v[0], v[1], v[2], style, loc);
                });
        return success();
      })
      .Case([&](KVCacheUpdateOp update) -> LogicalResult {
        auto cache = cacheOf(op, update.getCache(), update.getScale());
        auto in = operands(
            {update.getKvC(), update.getKPe(), update.getSlotMapping()});
        auto kernel = kernelOf(op, mlart::Opcode::CacheUpdate);
        if (failed(cache) || failed(in) || failed(kernel))
          return failure();
        uint32_t c = *cache, k = *kernel;
        addInst(*in, [this, c, k, loc](ArrayRef<uint32_t> v) {
          uint32_t i = writer.cacheUpdate(c, v[0], v[1], v[2], loc);
          if (k != kAbsent)
            writer.setInstructionKernel(i, k);
        });
        return success();
      })
      .Case([&](RopeKVCacheUpdateOp update) -> LogicalResult {
        auto cache = cacheOf(op, update.getCache(), update.getScale());
        auto in = operands({update.getKvC(), update.getKPe(),
                            update.getSlotMapping(), update.getPositions(),
                            update.getCosSin()});
        auto kernel = kernelOf(op, mlart::Opcode::RopeCacheUpdate);
        if (failed(cache) || failed(in) || failed(kernel))
          return failure();
        // The kernel rotates k_pe in place: rotate a copy, which is the
        // op's k_pe_out result when it has one, or k_pe itself when no one
        // can observe that.
        auto kPeType = cast<RankedTensorType>(update.getKPe().getType());
        unsigned kPe = (*in)[1];
        if (Value kOut = update.getKPeOut()) {
          FailureOr<unsigned> id = resultView(kOut);
          if (failed(id))
            return failure();
          kPe = *id;
          copy((*in)[1], kPe);
        } else if (!canRotateKPeInPlace(update, kPe)) {
          kPe = newAllocation(kPeType, views[(*in)[1]].decl.dtype);
          copy((*in)[1], kPe);
        }
        // q_pe is rotated from its source into the result (no copy) when
        // the kernel can read the source where it lies (see
        // canRotateQPeFrom), else from a copy in the result.
        unsigned qPe = kAbsent, qPeIn = kAbsent;
        if (Value q = update.getQPe()) {
          auto qIn = viewOf(op, q);
          auto qOut = resultView(update.getQPeOut());
          if (failed(qIn) || failed(qOut))
            return failure();
          qPe = *qOut;
          if (canRotateQPeFrom(*qIn, *qOut, kPe))
            qPeIn = *qIn;
          else
            copy(*qIn, *qOut);
        }
        auto style = update.getStyle() == RopeStyle::neox
                         ? mlart::RopeStyle::NeoX
                         : mlart::RopeStyle::GptJ;
        // The latent norm: its weight in slot 8, epsilon as the float
        // attribute (docs/artifact.md).
        unsigned normWeight = kAbsent;
        float normEps = 0.0f;
        if (Value w = update.getLatentNormWeight()) {
          auto wView = viewOf(op, w);
          if (failed(wView))
            return failure();
          normWeight = *wView;
          normEps = update.getLatentNormEpsilon()->convertToFloat();
        }
        uint32_t c = *cache, k = *kernel;
        addInst({(*in)[0], kPe, (*in)[2], (*in)[3], (*in)[4], qPe, qPeIn,
                 normWeight},
                [this, c, k, style, normEps, loc](ArrayRef<uint32_t> v) {
                  uint32_t i = writer.ropeCacheUpdate(
                      c, v[0], v[1], v[2], v[3], v[4], style, v[5],
                      mlart::kNoIndex, loc, v[6], v[7], normEps);
                  if (k != kAbsent)
                    writer.setInstructionKernel(i, k);
                });
        return success();
      })
      .Case([&](DecodeAttentionOp attention) -> LogicalResult {
        if (attention.getQScale())
          return attention.emitError()
                 << "a quantised query must be explicit (run mla-lift-q-prep, "
                    "part of mla-decode-pipeline)";
        auto cache = cacheOf(op, attention.getCache(), attention.getKvScale());
        auto in = operands({attention.getQ(), attention.getBlockTable(),
                            attention.getSeqLens()});
        if (succeeded(in) && attention.isAbsorbing()) {
          // Assemble the latent query here: absorb q_nope straight into the
          // first L columns, copy q_pe into the last P.
          auto w = viewOf(op, attention.getWUk());
          if (failed(w))
            return failure();
          auto qType = cast<RankedTensorType>(attention.getQ().getType());
          KVCacheType cacheType = attention.getCache().getType();
          int64_t batch = qType.getDimSize(0), heads = qType.getDimSize(1);
          int64_t latent = cacheType.getLatentRank(),
                  rope = cacheType.getRopeDim();
          int64_t nope = qType.getDimSize(2) - rope;
          unsigned query = newAllocation(
              RankedTensorType::get({batch, heads, latent + rope},
                                    qType.getElementType()),
              views[(*in)[0]].decl.dtype);
          unsigned qNope =
              subview((*in)[0], {0, 0, 0}, {batch, heads, nope}, {1, 1, 1});
          unsigned qPe =
              subview((*in)[0], {0, 0, nope}, {batch, heads, rope}, {1, 1, 1});
          unsigned dstLatent =
              subview(query, {0, 0, 0}, {batch, heads, latent}, {1, 1, 1});
          unsigned dstPe =
              subview(query, {0, 0, latent}, {batch, heads, rope}, {1, 1, 1});
          addInst({qNope, *w, dstLatent}, [this, loc](ArrayRef<uint32_t> v) {
            writer.qAbsorb(v[0], v[1], v[2], loc);
          });
          copy(qPe, dstPe);
          (*in)[0] = query;
        }
        auto out = resultView(attention.getOut());
        FailureOr<unsigned> lse =
            attention.getLse() ? resultView(attention.getLse()) : kAbsent;
        if (failed(cache) || failed(in) || failed(out) || failed(lse))
          return failure();
        uint32_t c = *cache;
        float scale = attention.getSoftmaxScale().convertToFloat();
        addInst({(*in)[0], (*in)[1], (*in)[2], *out, *lse},
                [this, c, scale, loc](ArrayRef<uint32_t> v) {
                  writer.decodeAttention(c, v[0], v[1], v[2], v[3], scale,
                                         v[4], 0, loc);
                });
        return success();
      })
      .Case([&](DecodeAttentionWithUpdateOp fused) -> LogicalResult {
        auto cache = cacheOf(op, fused.getCache(), fused.getKvScale());
        auto in = operands({fused.getKvC(), fused.getKPe(),
                            fused.getSlotMapping(), fused.getQ(),
                            fused.getBlockTable(), fused.getSeqLens()});
        auto out = resultView(fused.getOut());
        FailureOr<unsigned> lse =
            fused.getLse() ? resultView(fused.getLse()) : kAbsent;
        if (failed(cache) || failed(in) || failed(out) || failed(lse))
          return failure();
        uint32_t c = *cache;
        float scale = fused.getSoftmaxScale().convertToFloat();
        addInst({(*in)[0], (*in)[1], (*in)[2], (*in)[3], (*in)[4], (*in)[5],
                 *out, *lse},
                [this, c, scale, loc](ArrayRef<uint32_t> v) {
                  writer.decodeAttentionWithUpdate(c, v[0], v[1], v[2], v[3],
                                                   v[4], v[5], v[6], scale,
                                                   v[7], 0, loc);
                });
        return success();
      })
      .Case([&](PrefillAttentionOp attention) -> LogicalResult {
        auto in = operands({attention.getQ(), attention.getK(),
                            attention.getV(), attention.getQueryStartLoc()});
        auto out = resultView(attention.getOut());
        FailureOr<unsigned> lse =
            attention.getLse() ? resultView(attention.getLse()) : kAbsent;
        if (failed(in) || failed(out) || failed(lse))
          return failure();
        uint32_t c = mlart::kNoIndex;
        SmallVector<unsigned> ctx(4, kAbsent);
        if (attention.hasContext()) {
          auto cache =
              cacheOf(op, attention.getCache(), attention.getKvScale());
          auto ctxViews =
              operands({attention.getBlockTable(), attention.getSeqLens(),
                        attention.getWUk(), attention.getWUv()});
          if (failed(cache) || failed(ctxViews))
            return failure();
          c = *cache;
          ctx = *ctxViews;
        }
        float scale = attention.getSoftmaxScale().convertToFloat();
        addInst({(*in)[0], (*in)[1], (*in)[2], (*in)[3], *out, *lse, ctx[0],
                 ctx[1], ctx[2], ctx[3]},
                [this, c, scale, loc](ArrayRef<uint32_t> v) {
                  writer.prefillAttentionTotalLens(v[0], v[1], v[2], v[3],
                                                   v[4], scale, v[5], c, v[6],
                                                   v[7], v[8], v[9], loc);
                });
        return success();
      })
      .Case([&](QAbsorbOp absorb) -> LogicalResult {
        auto in = operands({absorb.getQNope(), absorb.getWUk()});
        auto out = resultView(absorb.getResult());
        if (failed(in) || failed(out))
          return failure();
        addInst({(*in)[0], (*in)[1], *out}, [this, loc](ArrayRef<uint32_t> v) {
          writer.qAbsorb(v[0], v[1], v[2], loc);
        });
        return success();
      })
      .Case([&](QConcatOp concat) -> LogicalResult {
        // Its producers already wrote both parts (planQueryAssembly).
        if (assembledConcats.contains(op))
          return success();
        auto in = operands({concat.getQLatent(), concat.getQPe()});
        auto out = resultView(concat.getResult());
        if (failed(in) || failed(out))
          return failure();
        addInst({(*in)[0], (*in)[1], *out}, [this, loc](ArrayRef<uint32_t> v) {
          writer.qConcat(v[0], v[1], v[2], loc);
        });
        return success();
      })
      .Case([&](QuantizeOp quantize) -> LogicalResult {
        auto in = operands({quantize.getInput(), quantize.getScale()});
        auto out = resultView(quantize.getResult());
        if (failed(in) || failed(out))
          return failure();
        addInst({(*in)[0], (*in)[1], *out}, [this, loc](ArrayRef<uint32_t> v) {
          writer.quantize(v[0], v[1], v[2], loc);
        });
        return success();
      })
      .Case([&](VUpOp vUp) -> LogicalResult {
        auto in = operands({vUp.getOLatent(), vUp.getWUv()});
        auto out = resultView(vUp.getResult());
        if (failed(in) || failed(out))
          return failure();
        addInst({(*in)[0], (*in)[1], *out}, [this, loc](ArrayRef<uint32_t> v) {
          writer.vUp(v[0], v[1], v[2], loc);
        });
        return success();
      })
      .Case([&](DecompressKVOp decompress) -> LogicalResult {
        auto in = operands({decompress.getKvC(), decompress.getKPe(),
                            decompress.getWUk(), decompress.getWUv()});
        auto k = resultView(decompress.getK());
        auto v = resultView(decompress.getV());
        if (failed(in) || failed(k) || failed(v))
          return failure();
        auto wUkType = cast<RankedTensorType>(decompress.getWUk().getType());
        int64_t heads = wUkType.getDimSize(0), nope = wUkType.getDimSize(1),
                latent = wUkType.getDimSize(2);
        int64_t tokens =
            cast<RankedTensorType>(decompress.getKvC().getType()).getDimSize(0);
        int64_t rope =
            cast<RankedTensorType>(decompress.getKPe().getType()).getDimSize(1);
        // v[t, h] = kv_c[t] @ w_uv[h]: the V up-projection of a latent
        // broadcast over heads.
        unsigned latents = broadcastRows((*in)[0], heads);
        addInst({latents, (*in)[3], *v}, [this, loc](ArrayRef<uint32_t> ids) {
          writer.vUp(ids[0], ids[1], ids[2], loc);
        });
        // k[t, h, :N] = kv_c[t] @ w_uk[h]^T: one projection per head.
        for (int64_t h = 0; h < heads; ++h) {
          unsigned weight = subview((*in)[2], {h, 0, 0}, {1, nope, latent},
                                    {1, 1, 1});
          PendingView w = views[weight];
          w.decl.rank = 2;
          w.decl.sizes[0] = nope;
          w.decl.sizes[1] = latent;
          w.decl.strides[0] = w.decl.strides[1];
          w.decl.strides[1] = w.decl.strides[2];
          weight = addView(w);
          unsigned dst = subview(*k, {0, h, 0}, {tokens, 1, nope}, {1, 1, 1});
          PendingView d = views[dst];
          d.decl.rank = 2;
          d.decl.sizes[1] = nope;
          d.decl.strides[1] = d.decl.strides[2];
          dst = addView(d);
          addInst({(*in)[0], weight, dst}, [this, loc](ArrayRef<uint32_t> ids) {
            writer.linear(ids[0], ids[1], ids[2], loc);
          });
        }
        // k[t, h, N:] = k_pe[t] for every head.
        unsigned kTail =
            subview(*k, {0, 0, nope}, {tokens, heads, rope}, {1, 1, 1});
        copy(broadcastRows((*in)[1], heads), kTail);
        return success();
      })
      .Case([&](tensor::ConcatOp concat) -> LogicalResult {
        // A concat of weights (mla-fuse-projections' fused weight) is filled
        // once per weight binding by the prepare program, not every step.
        const bool prepared = llvm::all_of(concat.getInputs(), [&](Value v) {
          return isWeightDerived(v);
        });
        FailureOr<unsigned> out = failure();
        if (prepared) {
          outputViews.erase(concat.getResult()); // returned: copied per step
          out = preparedAllocation(concat);
        } else {
          out = resultView(concat.getResult());
        }
        if (failed(out))
          return failure();
        int64_t dim = int64_t(concat.getDim()), offset = 0;
        auto type = concat.getResultType();
        for (Value input : concat.getInputs()) {
          auto src = viewOf(op, input);
          if (failed(src))
            return failure();
          auto inType = cast<RankedTensorType>(input.getType());
          SmallVector<int64_t> offsets(type.getRank(), 0);
          offsets[dim] = offset;
          SmallVector<int64_t> steps(type.getRank(), 1);
          unsigned dst = subview(*out, offsets, inType.getShape(), steps);
          if (prepared)
            addInst({*src, dst}, [this, loc](ArrayRef<uint32_t> v) {
              writer.prepareCopy(v[0], v[1], loc);
            });
          else
            copy(*src, dst);
          offset += inType.getDimSize(dim);
        }
        return success();
      })
      .Case([&](AttentionOp attention) -> LogicalResult {
        return attention.emitError()
               << "monolithic mla.attention must be split first (run "
                  "mla-decode-pipeline or mla-prefill-pipeline)";
      })
      .Case([&](func::ReturnOp ret) -> LogicalResult {
        for (auto [i, value] : llvm::enumerate(ret.getOperands())) {
          if (outputViews.count(value))
            continue;
          auto src = viewOf(op, value);
          if (failed(src))
            return failure();
          copy(*src, resultViews[i]);
        }
        return success();
      })
      .Default([&](Operation *other) -> LogicalResult {
        return other->emitError()
               << "'" << other->getName()
               << "' has no lowering to the runtime's kernels";
      });
}

FailureOr<std::vector<uint8_t>> Translator::run() {
  if (!func.getBody().hasOneBlock())
    return func.emitError() << "the step function must have a single block";
  if (failed(declareArguments()) || failed(declareResults()) ||
      failed(planQueryAssembly()))
    return failure();
  for (Operation &op : func.getBody().front()) {
    for (auto [i, result] : llvm::enumerate(op.getResults()))
      if (auto type = dyn_cast<RankedTensorType>(result.getType()))
        if (failed(checkRepresentable(&op, type, "result #" + Twine(i))))
          return failure();
    if (failed(translate(&op)))
      return failure();
  }

  // Liveness of each arena allocation over instruction indices.
  std::vector<ArenaInterval> intervals(allocBytes.size());
  std::vector<bool> used(allocBytes.size(), false);
  for (size_t i = 0; i < allocBytes.size(); ++i)
    intervals[i].bytes = allocBytes[i];
  for (auto [index, inst] : llvm::enumerate(insts)) {
    for (unsigned id : inst.views) {
      if (id == kAbsent || views[id].allocId < 0)
        continue;
      size_t a = size_t(views[id].allocId);
      if (!used[a]) {
        intervals[a].firstUse = int64_t(index);
        used[a] = true;
      }
      intervals[a].lastUse = int64_t(index);
    }
  }
  ArenaPlan plan = planArena(intervals);
  writer.setArenaBytes(plan.totalBytes);

  // Materialise the views that instructions use, then the instructions.
  DenseMap<unsigned, uint32_t> finalIds;
  for (PendingInst &inst : insts) {
    SmallVector<uint32_t> ids;
    for (unsigned id : inst.views) {
      if (id == kAbsent) {
        ids.push_back(mlart::kNoIndex);
        continue;
      }
      auto it = finalIds.find(id);
      if (it == finalIds.end()) {
        mlart::ViewDecl decl = views[id].decl;
        if (views[id].allocId >= 0)
          decl.byteOffset += plan.offsets[size_t(views[id].allocId)];
        it = finalIds.insert({id, writer.addView(decl)}).first;
      }
      ids.push_back(it->second);
    }
    inst.emit(ids);
  }
  mlart::StatusOr<std::vector<uint8_t>> bytes = writer.finish();
  if (!bytes.ok()) {
    // An operand type no kernel takes (e.g. an fp8 query, issue 29) is an
    // unsupported form of valid IR, reported by the contract's table; any
    // other refusal means the lowering broke the format.
    const std::string &message = bytes.status().message();
    if (llvm::StringRef(message).contains("which the kernel does not accept"))
      return func.emitError()
             << "no runtime kernel runs this step: " << message;
    return func.emitError() << "internal error: the artifact does not "
                               "validate: "
                            << message;
  }
  return std::move(bytes).value();
}

} // namespace

FailureOr<std::vector<uint8_t>>
mlir::mla::translateToArtifact(ModuleOp module, StringRef functionName) {
  func::FuncOp step;
  for (auto func : module.getOps<func::FuncOp>()) {
    if (func.isDeclaration())
      continue;
    if (!functionName.empty() ? func.getSymName() == functionName
                              : func.isPublic()) {
      if (step)
        return module.emitError()
               << "several public functions: name the step to translate";
      step = func;
    }
  }
  if (!step)
    return module.emitError() << "no step function to translate";
  return Translator(step).run();
}
