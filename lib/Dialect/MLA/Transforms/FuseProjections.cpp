//===- FuseProjections.cpp - One GEMM for projections of one input --------===//
#include "mla/Dialect/MLA/IR/MLAOps.h"
#include "mla/Dialect/MLA/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/TypeUtilities.h"

#include "llvm/ADT/MapVector.h"

#include <tuple>

namespace mlir::mla {
#define GEN_PASS_DEF_MLAFUSEPROJECTIONS
#include "mla/Dialect/MLA/Transforms/Passes.h.inc"
} // namespace mlir::mla

using namespace mlir;
using namespace mlir::mla;

namespace {

/// Linears that may share one GEMM: the same input, and the same weight and
/// result element types (the fused op has one of each).
using GroupKey = std::tuple<Value, Type, Type>;

bool isStatic(Value value) {
  return cast<RankedTensorType>(value.getType()).hasStaticShape();
}

/// The key of `linear`'s group, or nullopt if it may not be fused.
std::optional<GroupKey> groupKey(LinearOp linear, Block &entry) {
  // An addend is per projection; the fused GEMM's epilogue has none.
  if (linear.getAddend())
    return std::nullopt;
  // Only a caller-bound weight is constant across steps, so its concat can
  // be computed once when the weights are bound; a weight computed in the
  // function would be copied every step, costing more than fusion saves.
  auto weight = dyn_cast<BlockArgument>(linear.getWeight());
  if (!weight || weight.getOwner() != &entry)
    return std::nullopt;
  // Slice offsets and the fused width are static numbers.
  if (!isStatic(linear.getInput()) || !isStatic(weight) ||
      !isStatic(linear.getResult()))
    return std::nullopt;
  return GroupKey(linear.getInput(), getElementTypeOrSelf(weight.getType()),
                  getElementTypeOrSelf(linear.getResult().getType()));
}

/// Replaces `group` (in block order, >= 2 linears) by one linear over the
/// row-wise concat of their weights and one column slice per original.
void fuse(ArrayRef<LinearOp> group) {
  LinearOp first = group.front();
  // The input dominates the first linear and the weights are function
  // arguments, so everything the fused ops use is defined here.
  IRRewriter rewriter(first);
  SmallVector<Value> weights;
  SmallVector<Location> locs;
  int64_t width = 0;
  for (LinearOp linear : group) {
    weights.push_back(linear.getWeight());
    locs.push_back(linear.getLoc());
    width += cast<RankedTensorType>(linear.getWeight().getType()).getDimSize(0);
  }
  Location loc = rewriter.getFusedLoc(locs);
  Value weight = tensor::ConcatOp::create(rewriter, loc, /*dim=*/0, weights);
  auto firstType = cast<RankedTensorType>(first.getResult().getType());
  auto fusedType = firstType.clone({firstType.getDimSize(0), width});
  Value product =
      LinearOp::create(rewriter, loc, fusedType, first.getInput(), weight);

  // All slices come before any original is erased: the insertion point is
  // the first original.
  SmallVector<Value> slices;
  int64_t offset = 0;
  for (LinearOp linear : group) {
    auto type = cast<RankedTensorType>(linear.getResult().getType());
    slices.push_back(tensor::ExtractSliceOp::create(
        rewriter, linear.getLoc(), type, product,
        ArrayRef<OpFoldResult>{rewriter.getIndexAttr(0),
                               rewriter.getIndexAttr(offset)},
        getAsIndexOpFoldResult(rewriter.getContext(), type.getShape()),
        ArrayRef<OpFoldResult>{rewriter.getIndexAttr(1),
                               rewriter.getIndexAttr(1)}));
    offset += type.getDimSize(1);
  }
  for (auto [linear, slice] : llvm::zip_equal(group, slices))
    rewriter.replaceOp(linear, slice);
}

struct MLAFuseProjectionsPass
    : mla::impl::MLAFuseProjectionsBase<MLAFuseProjectionsPass> {
  void runOnOperation() override {
    // Groups are collected before any rewrite, so nothing is mutated while
    // it is walked.
    SmallVector<SmallVector<LinearOp>> groups;
    getOperation()->walk([&](func::FuncOp func) {
      if (func.isExternal())
        return;
      Block &entry = func.getBody().front();
      func.walk([&](Block *block) {
        // Per block: a GEMM is never moved into or out of a region.
        llvm::MapVector<GroupKey, SmallVector<LinearOp>> byKey;
        for (auto linear : block->getOps<LinearOp>())
          if (std::optional<GroupKey> key = groupKey(linear, entry))
            byKey[*key].push_back(linear);
        for (auto &[key, group] : byKey)
          if (group.size() >= 2)
            groups.push_back(std::move(group));
      });
    });
    for (ArrayRef<LinearOp> group : groups) {
      fuse(group);
      ++numGroups;
      numFused += group.size();
    }
  }
};

} // namespace
