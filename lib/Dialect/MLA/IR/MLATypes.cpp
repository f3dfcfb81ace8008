//===- MLATypes.cpp - The !mla.kv_cache type: syntax and verification -----===//
#include "mla/Dialect/MLA/IR/MLATypes.h"
#include "mla/Dialect/MLA/IR/MLADialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::mla;

#include "mla/Dialect/MLA/IR/MLAEnums.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "mla/Dialect/MLA/IR/MLATypes.cpp.inc"

void MLADialect::registerTypes() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "mla/Dialect/MLA/IR/MLATypes.cpp.inc"
      >();
}

int64_t KVCacheType::getRowBytes() const {
  switch (getLayout()) {
  case CacheLayout::plain:
    return getRowValues() * getElementType().getIntOrFloatBitWidth() / 8;
  case CacheLayout::per_tensor:
    return getRowValues();
  case CacheLayout::fp8_ds_mla:
    // fp8 latent, one f32 scale a tile, bf16 rope.
    return getLatentRank() + 4 * (getLatentRank() / kDsMlaTile) +
           2 * getRopeDim();
  }
  llvm_unreachable("unknown cache layout");
}

LogicalResult
KVCacheType::verify(function_ref<InFlightDiagnostic()> emitError,
                    int64_t numBlocks, int64_t blockSize, int64_t latentRank,
                    int64_t ropeDim, Type elementType, CacheLayout layout) {
  if (!ShapedType::isDynamic(numBlocks) && numBlocks <= 0)
    return emitError() << "expected a positive number of blocks or '?', got "
                       << numBlocks;
  if (blockSize <= 0)
    return emitError() << "expected a positive static block size, got "
                       << blockSize;
  if (latentRank <= 0)
    return emitError() << "expected a positive latent rank, got " << latentRank;
  if (ropeDim <= 0 || ropeDim % 2 != 0)
    return emitError() << "expected a positive even rope dim, got " << ropeDim;
  switch (layout) {
  case CacheLayout::plain:
    if (!elementType.isBF16() && !elementType.isF16() && !elementType.isF32())
      return emitError() << "a plain cache holds bf16, f16 or f32 values, got "
                         << elementType
                         << " (fp8 caches need the 'per_tensor' or "
                            "'fp8_ds_mla' layout)";
    break;
  case CacheLayout::per_tensor:
    if (!isFp8Type(elementType))
      return emitError() << "the 'per_tensor' layout stores f8E4M3FN or "
                            "f8E5M2 values, got "
                         << elementType;
    break;
  case CacheLayout::fp8_ds_mla:
    if (!isa<Float8E4M3FNType>(elementType))
      return emitError() << "the 'fp8_ds_mla' layout stores f8E4M3FN values, "
                            "got "
                         << elementType;
    if (latentRank % kDsMlaTile != 0)
      return emitError() << "the 'fp8_ds_mla' layout needs a latent rank "
                            "divisible by "
                         << kDsMlaTile << ", got " << latentRank;
    break;
  }
  return success();
}

// !mla.kv_cache<NBxBSxT (, latent = L)? (, rope = P)? (, layout)?>
Type KVCacheType::parse(AsmParser &parser) {
  SmallVector<int64_t, 2> dims;
  Type elementType;
  SMLoc loc = parser.getCurrentLocation();
  if (parser.parseLess() ||
      parser.parseDimensionList(dims, /*allowDynamic=*/true,
                                /*withTrailingX=*/true) ||
      parser.parseType(elementType))
    return {};
  if (dims.size() != 2) {
    parser.emitError(loc) << "expected 'num_blocks x block_size x type', got "
                          << dims.size() << " dimensions";
    return {};
  }
  if (ShapedType::isDynamic(dims[1])) {
    parser.emitError(loc) << "the block size must be static";
    return {};
  }
  int64_t latentRank = kDefaultLatentRank, ropeDim = kDefaultRopeDim;
  CacheLayout layout = CacheLayout::plain;
  while (succeeded(parser.parseOptionalComma())) {
    StringRef keyword;
    SMLoc kwLoc = parser.getCurrentLocation();
    if (parser.parseKeyword(&keyword))
      return {};
    if (keyword == "latent" || keyword == "rope") {
      int64_t value;
      if (parser.parseEqual() || parser.parseInteger(value))
        return {};
      (keyword == "latent" ? latentRank : ropeDim) = value;
      continue;
    }
    std::optional<CacheLayout> parsed = symbolizeCacheLayout(keyword);
    if (!parsed) {
      parser.emitError(kwLoc)
          << "expected 'latent', 'rope' or a layout (plain, per_tensor, "
             "fp8_ds_mla), got '"
          << keyword << "'";
      return {};
    }
    layout = *parsed;
  }
  if (parser.parseGreater())
    return {};
  return getChecked([&] { return parser.emitError(loc); },
                    parser.getContext(), dims[0], dims[1], latentRank, ropeDim,
                    elementType, layout);
}

void KVCacheType::print(AsmPrinter &printer) const {
  printer << "<";
  if (hasStaticNumBlocks())
    printer << getNumBlocks();
  else
    printer << "?";
  printer << "x" << getBlockSize() << "x" << getElementType();
  if (getLatentRank() != kDefaultLatentRank)
    printer << ", latent = " << getLatentRank();
  if (getRopeDim() != kDefaultRopeDim)
    printer << ", rope = " << getRopeDim();
  if (getLayout() != CacheLayout::plain)
    printer << ", " << stringifyCacheLayout(getLayout());
  printer << ">";
}
