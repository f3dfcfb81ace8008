//===- OutlineCacheKernels.cpp - GPU kernels for cache writes -------------===//
//
// Builds one gpu.func per distinct cache-write specialisation and marks the
// ops that use it (docs/codegen.md). The kernel's name comes from the
// runtime's codegenKernelName, so the runtime can check that a kernel runs
// only on operands it was generated for.
//
//===----------------------------------------------------------------------===//
#include "mla/Conversion/Passes.h"
#include "mla/Dialect/MLA/IR/MLAOps.h"
#include "mla/Target/RuntimeTypes.h"

#include "mlart/Codegen.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "llvm/ADT/StringMap.h"

#include <algorithm>
#include <cfloat>

namespace mlir::mla {
#define GEN_PASS_DEF_MLAOUTLINECACHEKERNELS
#include "mla/Conversion/Passes.h.inc"
} // namespace mlir::mla

using namespace mlir;
using namespace mlir::mla;

namespace {

constexpr StringLiteral kModuleName = "mla_kernels";
/// Global memory on NVVM.
constexpr unsigned kGlobal = 1;
/// Resident threads and blocks of one sm_90 SM.
constexpr int64_t kMaxThreadsPerSM = 2048, kMaxBlocksPerSM = 32;

/// What the kernel of one op looks like.
struct KernelPlan {
  mlart::CodegenSignature sig;
  std::string name;
  Type input;     ///< element type of kv_c / k_pe / q_pe
  Type slotType;  ///< i32 or i64
  Type posType;   ///< i32 or i64 (i64 when unused)
  int64_t elemBytes = 2;
  int64_t rowBytes = 0;
  int64_t latThreads = 0;  ///< threads of a token that write the latent part
  int64_t ropeThreads = 0; ///< threads that write (or rotate) the rope part
  int64_t threadsPerToken = 0;
  int64_t tokensPerBlock = 0;
  bool rope = false, dsMla = false, q = false;
  bool norm = false;      ///< latent RMSNorm before the write
  int64_t normGroups = 0; ///< 8-lane groups of a token's latent threads
  int64_t blockThreads() const { return threadsPerToken * tokensPerBlock; }
};

Type elementOf(Value v) { return cast<ShapedType>(v.getType()).getElementType(); }

/// The plan for `op`, or the reason it stays on the library kernel.
FailureOr<KernelPlan> planFor(Operation *op, unsigned tokensPerBlock,
                              std::string &why) {
  auto fail = [&](const Twine &reason) -> FailureOr<KernelPlan> {
    why = reason.str();
    return failure();
  };
  KernelPlan p;
  Value kvC, kPe, slots, cacheValue, qPe, positions, normWeight;
  if (auto u = dyn_cast<KVCacheUpdateOp>(op)) {
    kvC = u.getKvC();
    kPe = u.getKPe();
    slots = u.getSlotMapping();
    cacheValue = u.getCache();
  } else {
    auto r = cast<RopeKVCacheUpdateOp>(op);
    kvC = r.getKvC();
    kPe = r.getKPe();
    slots = r.getSlotMapping();
    cacheValue = r.getCache();
    qPe = r.getQPe();
    positions = r.getPositions();
    normWeight = r.getLatentNormWeight();
    p.rope = true;
    p.sig.style = r.getStyle() == RopeStyle::neox ? mlart::RopeStyle::NeoX
                                                  : mlart::RopeStyle::GptJ;
  }
  auto cache = cast<KVCacheType>(cacheValue.getType());
  if (cache.getLayout() == CacheLayout::per_tensor)
    return fail("per-tensor fp8 caches have no generated kernel");
  p.dsMla = cache.getLayout() == CacheLayout::fp8_ds_mla;
  p.input = elementOf(kvC);
  if (elementOf(kPe) != p.input)
    return fail("kv_c and k_pe have different element types");
  if (cast<ShapedType>(kPe.getType()).getRank() != 2)
    return fail("k_pe must be rank 2");
  const int64_t L = cache.getLatentRank(), P = cache.getRopeDim();
  p.elemBytes = p.input.getIntOrFloatBitWidth() / 8;
  if (p.dsMla || p.rope) {
    if (!p.input.isBF16())
      return fail("quantising or rotating kernels take bf16 inputs only");
  } else if (p.input != cache.getElementType()) {
    return fail("a plain cache copies rows of its own element type");
  }
  if (!p.dsMla && !cache.getElementType().isBF16() &&
      !cache.getElementType().isF16() && !cache.getElementType().isF32())
    return fail("unsupported cache element type");
  const int64_t chunk = 16 / p.elemBytes; // elements per 16-byte vector
  if (p.dsMla) {
    if (L % 128 != 0 || P % 8 != 0)
      return fail("fp8_ds_mla needs latent % 128 == 0 and rope % 8 == 0");
    p.latThreads = L / 8;
    p.ropeThreads = P / 8;
    p.rowBytes = L + 4 * (L / 128) + 2 * P;
  } else {
    if (L % chunk != 0 || P % chunk != 0)
      return fail("rows must be whole 16-byte chunks");
    p.latThreads = L / chunk;
    p.ropeThreads = P / chunk;
    p.rowBytes = (L + P) * p.elemBytes;
  }
  if (p.rope) {
    if (P % 16 != 0)
      return fail("rope dims must be a multiple of 16");
    p.ropeThreads = P / 16;
    if (qPe) {
      auto qType = cast<ShapedType>(qPe.getType());
      if (qType.getRank() != 3 || qType.getElementType() != p.input)
        return fail("q_pe must be [T, Hq, rope] of the input type");
      p.q = true;
    }
  }
  if (normWeight) {
    if (p.dsMla)
      return fail("a latent norm into an fp8_ds_mla cache has no generated "
                  "kernel");
    if (elementOf(normWeight) != p.input)
      return fail("a latent norm weight of another type than kv_c");
    // Partial sums are combined over aligned groups of 8 lanes.
    if (p.latThreads % 8 != 0)
      return fail("a latent norm needs the latent in multiples of 8 chunks");
    p.norm = true;
    p.normGroups = p.latThreads / 8;
  }
  p.slotType = elementOf(slots);
  p.posType = positions ? elementOf(positions)
                        : IntegerType::get(op->getContext(), 64);
  // fp8_ds_mla reduces a tile over 16 aligned lanes of a warp.
  p.threadsPerToken = p.latThreads + p.ropeThreads;
  if (p.dsMla)
    p.threadsPerToken = llvm::alignTo(p.threadsPerToken, 16);
  // A token's 8-lane groups must be 8-lane groups of its warp: tid % 8 ==
  // x % 8 when the token width is a multiple of 8.
  if (p.norm)
    p.threadsPerToken = llvm::alignTo(p.threadsPerToken, 8);
  p.tokensPerBlock = tokensPerBlock;
  while (p.blockThreads() % 32 != 0)
    ++p.threadsPerToken; // whole warps: shuffles need full masks
  if (p.blockThreads() > 1024)
    return fail("a row needs " + Twine(p.threadsPerToken) +
                " threads: too wide for blocks of " + Twine(tokensPerBlock) +
                " tokens");

  p.sig.op = p.rope ? mlart::Opcode::RopeCacheUpdate : mlart::Opcode::CacheUpdate;
  p.sig.layout = p.dsMla ? mlart::CacheLayout::Fp8DsMla : mlart::CacheLayout::Plain;
  p.sig.cacheDType = *toRuntimeDType(cache.getElementType());
  p.sig.latentRank = L;
  p.sig.ropeDim = P;
  p.sig.input = *toRuntimeDType(p.input);
  p.sig.slots = *toRuntimeDType(p.slotType);
  p.sig.positions = *toRuntimeDType(p.posType);
  p.sig.rotatesQ = p.q;
  p.sig.latentNorm = p.norm;
  if (p.norm)
    p.sig.normWeight = *toRuntimeDType(p.input);
  p.name = mlart::codegenKernelName(p.sig);
  return p;
}

/// Emits the body of one kernel in three phases (docs/codegen.md): loads,
/// the all-or-nothing vote, writes. Nothing is stored before the vote, so a
/// bad slot or position anywhere in the call leaves every byte unchanged.
class KernelEmitter {
public:
  KernelEmitter(ImplicitLocOpBuilder &b, const KernelPlan &p,
                gpu::GPUFuncOp func)
      : b(b), p(p), func(func) {}

  void emit();

private:
  /// Memref arguments (the order of mlart/Codegen.h).
  enum Mem { KvC, KPe, Slots, Cache, Positions, CosSin, QPe, BadSlot, BadPos,
             CallFailed, QPeIn };
  /// The two bf16 vectors of a k_pe or q_pe rope item.
  struct RopeItem {
    Value a, b;
  };

  Value cst(int64_t v) { return arith::ConstantIndexOp::create(b, v); }
  Value arg(int i) { return func.getArgument(unsigned(i)); }
  /// The latent norm's arguments, after the scalars (mlart/Codegen.h).
  Value normArg(int i) {
    return arg(mlart::kCodegenMemrefArgs + mlart::kCodegenScalarArgs + i);
  }
  Value scalar(int i) {
    return arith::IndexCastOp::create(b, b.getIndexType(),
                                      arg(mlart::kCodegenMemrefArgs + i));
  }
  Value mul(Value a, Value c) { return arith::MulIOp::create(b, a, c); }
  Value add(Value a, Value c) { return arith::AddIOp::create(b, a, c); }
  Value lt(Value a, Value c) {
    return arith::CmpIOp::create(b, arith::CmpIPredicate::slt, a, c);
  }
  Value ge(Value a, Value c) {
    return arith::CmpIOp::create(b, arith::CmpIPredicate::sge, a, c);
  }
  Value andI(Value a, Value c) { return arith::AndIOp::create(b, a, c); }
  Value orI(Value a, Value c) { return arith::OrIOp::create(b, a, c); }
  /// lo <= v < hi.
  Value inRange(Value v, Value hi) { return andI(ge(v, cst(0)), lt(v, hi)); }
  Value zeros(VectorType type) {
    return arith::ConstantOp::create(
        b, DenseElementsAttr::get(type, b.getZeroAttr(type.getElementType())));
  }
  /// `memref[index]` of an index tensor as `index`; -1 when `valid` (if
  /// given) is false.
  Value loadIndex(Value memref, Value index, Value valid);
  /// Records `t` into the error cell `memref` (atomic min).
  void record(Value memref, Value t);
  VectorType vec(int64_t n, Type t) { return VectorType::get({n}, t); }
  Value load16(Value memref, Value index, VectorType type) {
    return vector::LoadOp::create(b, type, memref, index, false,
                                  llvm::MaybeAlign(16));
  }
  /// `then()`'s vector values when `cond`, zeros otherwise.
  SmallVector<Value> loadIf(Value cond, ArrayRef<VectorType> types,
                            function_ref<SmallVector<Value>()> then);
  void storeBytes(Value v, Value byteIndex, int64_t align) {
    auto type = cast<VectorType>(v.getType());
    int64_t bytes = type.getNumElements() *
                    type.getElementType().getIntOrFloatBitWidth() / 8;
    Value raw = vector::BitCastOp::create(b, vec(bytes, b.getI8Type()), v);
    vector::StoreOp::create(b, raw, arg(Cache), byteIndex, false,
                            llvm::MaybeAlign(align));
  }
  /// Element offsets (A, B) of rope item `g` in its row.
  std::pair<Value, Value> ropeOffsets(Value g);
  /// Loads rope item `g` of the row at `rowStart` of `memref`; zeros when
  /// `valid` (if given) is false.
  RopeItem loadRope(Value memref, Value rowStart, Value g, Value valid);
  /// Rotates 8 pairs by the cos/sin of `pos` (see docs/codegen.md):
  /// returns the new A and B vectors.
  std::pair<Value, Value> rotate(const RopeItem &r, Value pos, Value g);
  /// Rotates item `g` by `pos` (in range), stores it at `rowStart` of
  /// `memref` (where it was loaded from, or q_pe's destination) and,
  /// when `cacheRow` is given and `write` holds, into the cache row.
  void storeRope(Value memref, Value rowStart, Value g, Value pos,
                 const RopeItem &r, Value cacheRow, Value write);
  /// The latent chunk `latent` of token `y` (lane `x` of it) RMS-normalised
  /// with weight chunk `w`, rounded once to the input type. Every thread of
  /// the block must call it (shuffles and a barrier); see docs/codegen.md.
  Value normalize(Value latent, Value w, Value x, Value y);
  /// True in every thread of the block when the call must write nothing:
  /// the separate validation's verdict (prevalidated calls) or this
  /// block's own scan of every slot and position, combined by a barrier.
  Value vote(Value tid, Value bid);

  ImplicitLocOpBuilder &b;
  const KernelPlan &p;
  gpu::GPUFuncOp func;
  Value T, N, kvStride, kpStride, slotStride, numSlots, posStride, csStride,
      maxPos, qS0, qS1, hq, prevalidated, qInS0, qInS1;
};

Value KernelEmitter::loadIndex(Value memref, Value index, Value valid) {
  Type type = cast<MemRefType>(memref.getType()).getElementType();
  auto load = [&] {
    Value v = memref::LoadOp::create(b, memref, index);
    if (type.isInteger(32))
      v = arith::ExtSIOp::create(b, b.getI64Type(), v);
    return arith::IndexCastOp::create(b, b.getIndexType(), v).getResult();
  };
  if (!valid)
    return load();
  auto ifOp = scf::IfOp::create(b, b.getIndexType(), valid, true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&ifOp.getThenRegion().front());
  scf::YieldOp::create(b, load());
  b.setInsertionPointToStart(&ifOp.getElseRegion().front());
  scf::YieldOp::create(b, cst(-1));
  return ifOp.getResult(0);
}

void KernelEmitter::record(Value memref, Value t) {
  Value t32 = arith::IndexCastOp::create(b, b.getI32Type(), t);
  memref::AtomicRMWOp::create(b, arith::AtomicRMWKind::mins, t32, memref,
                              ValueRange{cst(0)});
}

SmallVector<Value>
KernelEmitter::loadIf(Value cond, ArrayRef<VectorType> types,
                      function_ref<SmallVector<Value>()> then) {
  SmallVector<Type> resultTypes(types.begin(), types.end());
  auto ifOp = scf::IfOp::create(b, resultTypes, cond, true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&ifOp.getThenRegion().front());
  scf::YieldOp::create(b, then());
  b.setInsertionPointToStart(&ifOp.getElseRegion().front());
  SmallVector<Value> z;
  for (VectorType t : types)
    z.push_back(zeros(t));
  scf::YieldOp::create(b, z);
  return SmallVector<Value>(ifOp.getResults());
}

std::pair<Value, Value> KernelEmitter::ropeOffsets(Value g) {
  const int64_t half = p.sig.ropeDim / 2;
  // NeoX: elements 8g.. and half+8g..; GPT-J: 16g.. and 16g+8...
  if (p.sig.style == mlart::RopeStyle::GptJ) {
    Value a0 = mul(g, cst(16));
    return {a0, add(a0, cst(8))};
  }
  Value a0 = mul(g, cst(8));
  return {a0, add(a0, cst(half))};
}

KernelEmitter::RopeItem KernelEmitter::loadRope(Value memref,
                                                Value rowStart, Value g,
                                                Value valid) {
  VectorType bf16x8 = vec(8, p.input);
  auto load = [&]() -> SmallVector<Value> {
    auto [a0, b0] = ropeOffsets(g);
    return {load16(memref, add(rowStart, a0), bf16x8),
            load16(memref, add(rowStart, b0), bf16x8)};
  };
  SmallVector<Value> v = valid ? loadIf(valid, {bf16x8, bf16x8}, load) : load();
  return {v[0], v[1]};
}

std::pair<Value, Value> KernelEmitter::rotate(const RopeItem &r, Value pos,
                                              Value g) {
  const int64_t half = p.sig.ropeDim / 2;
  VectorType f32x8 = vec(8, b.getF32Type());
  // cos/sin of pairs 8g .. 8g+7 (both styles number pairs that way).
  Value csRow = add(mul(pos, csStride), mul(g, cst(8)));
  // 16-byte aligned (the runtime launches the kernel only for a 16-byte
  // aligned table with a row stride of a multiple of 4): two v4 loads each.
  Value c = load16(arg(CosSin), csRow, f32x8);
  Value s = load16(arg(CosSin), add(csRow, cst(half)), f32x8);
  Value x0 = r.a, x1 = r.b;
  const bool gptj = p.sig.style == mlart::RopeStyle::GptJ;
  if (gptj) { // deinterleave the 16 elements of A, B into the pair halves
    x0 = vector::ShuffleOp::create(b, r.a, r.b,
                                   ArrayRef<int64_t>{0, 2, 4, 6, 8, 10, 12, 14});
    x1 = vector::ShuffleOp::create(b, r.a, r.b,
                                   ArrayRef<int64_t>{1, 3, 5, 7, 9, 11, 13, 15});
  }
  x0 = arith::ExtFOp::create(b, f32x8, x0);
  x1 = arith::ExtFOp::create(b, f32x8, x1);
  // Each product rounded on its own (no contraction), like the library.
  Value r0 = arith::SubFOp::create(b, arith::MulFOp::create(b, x0, c),
                                   arith::MulFOp::create(b, x1, s));
  Value r1 = arith::AddFOp::create(b, arith::MulFOp::create(b, x1, c),
                                   arith::MulFOp::create(b, x0, s));
  VectorType bf16x8 = vec(8, p.input);
  r0 = arith::TruncFOp::create(b, bf16x8, r0);
  r1 = arith::TruncFOp::create(b, bf16x8, r1);
  if (!gptj)
    return {r0, r1};
  return {vector::ShuffleOp::create(b, r0, r1,
                                    ArrayRef<int64_t>{0, 8, 1, 9, 2, 10, 3, 11}),
          vector::ShuffleOp::create(
              b, r0, r1, ArrayRef<int64_t>{4, 12, 5, 13, 6, 14, 7, 15})};
}

void KernelEmitter::storeRope(Value memref, Value rowStart, Value g, Value pos,
                              const RopeItem &r, Value cacheRow, Value write) {
  auto [a0, b0] = ropeOffsets(g);
  auto [ra, rb] = rotate(r, pos, g);
  vector::StoreOp::create(b, ra, memref, add(rowStart, a0), false,
                          llvm::MaybeAlign(16));
  vector::StoreOp::create(b, rb, memref, add(rowStart, b0), false,
                          llvm::MaybeAlign(16));
  if (!cacheRow)
    return;
  auto ifWrite = scf::IfOp::create(b, write, false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&ifWrite.getThenRegion().front());
  storeBytes(ra, add(cacheRow, mul(a0, cst(2))), 16);
  storeBytes(rb, add(cacheRow, mul(b0, cst(2))), 16);
}

Value KernelEmitter::normalize(Value latent, Value w, Value x, Value y) {
  auto chunkType = cast<VectorType>(latent.getType());
  VectorType f32v = vec(chunkType.getNumElements(), b.getF32Type());
  Value vals = arith::ExtFOp::create(b, f32v, latent);
  // Sum of squares: this thread's chunk (zeros outside the latent), then
  // its 8-lane group by shuffles, then the token's groups through shared
  // memory. A group is 8 lanes of one token: tid % 8 == x % 8 (planFor).
  Value squares = arith::MulFOp::create(b, vals, vals);
  Value partial = vector::ExtractOp::create(b, squares, 0);
  for (int64_t i = 1; i < chunkType.getNumElements(); ++i)
    partial = arith::AddFOp::create(b, partial,
                                    vector::ExtractOp::create(b, squares, i));
  for (int32_t offset : {4, 2, 1}) {
    auto shuffle =
        gpu::ShuffleOp::create(b, partial, offset, 32, gpu::ShuffleMode::XOR);
    partial = arith::AddFOp::create(b, partial, shuffle.getShuffleResult());
  }
  Value sums = func.getWorkgroupAttributions().front();
  Value group = arith::DivUIOp::create(b, x, cst(8));
  Value leader =
      andI(lt(x, cst(p.latThreads)),
           arith::CmpIOp::create(b, arith::CmpIPredicate::eq,
                                 arith::RemUIOp::create(b, x, cst(8)), cst(0)));
  Value tokenBase = mul(y, cst(p.normGroups));
  {
    auto ifLeader = scf::IfOp::create(b, leader, false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&ifLeader.getThenRegion().front());
    memref::StoreOp::create(b, partial, sums,
                            ValueRange{add(tokenBase, group)});
  }
  gpu::BarrierOp::create(b);
  Value sum = memref::LoadOp::create(b, sums, ValueRange{tokenBase});
  for (int64_t g = 1; g < p.normGroups; ++g)
    sum = arith::AddFOp::create(
        b, sum,
        memref::LoadOp::create(b, sums, ValueRange{add(tokenBase, cst(g))}));
  auto f32 = [&](double v) {
    return arith::ConstantOp::create(b, b.getF32FloatAttr(float(v)));
  };
  // 1 / sqrt(mean + eps), each step correctly rounded as in the CPU
  // reference. PTX sqrt.rn directly: convert-gpu-to-nvvm turns math.sqrt
  // into a libdevice call (not linked here) and rejects llvm.intr.sqrt.
  Value mean = arith::DivFOp::create(b, sum, f32(double(p.sig.latentRank)));
  Value root =
      LLVM::InlineAsmOp::create(
          b, b.getF32Type(),
          ValueRange{arith::AddFOp::create(b, mean, normArg(1))},
          "sqrt.rn.f32 $0, $1;", "=f,f", /*has_side_effects=*/false,
          /*is_align_stack=*/false, LLVM::tailcallkind::TailCallKind::None,
          LLVM::AsmDialectAttr(), ArrayAttr())
          .getResult(0);
  Value inv = arith::DivFOp::create(b, f32(1.0), root);
  Value scaled =
      arith::MulFOp::create(b, vals, vector::BroadcastOp::create(b, f32v, inv));
  scaled = arith::MulFOp::create(b, scaled, arith::ExtFOp::create(b, f32v, w));
  return arith::TruncFOp::create(b, chunkType, scaled);
}

Value KernelEmitter::vote(Value tid, Value bid) {
  auto ifPre = scf::IfOp::create(b, b.getI1Type(), prevalidated, true);
  OpBuilder::InsertionGuard guard(b);
  // Large call: the runtime ran the library's validation kernel first; it
  // recorded the errors and set call_failed.
  b.setInsertionPointToStart(&ifPre.getThenRegion().front());
  Value failed = memref::LoadOp::create(b, arg(CallFailed), ValueRange{cst(0)});
  scf::YieldOp::create(
      b, arith::CmpIOp::create(b, arith::CmpIPredicate::ne, failed,
                               arith::ConstantIntOp::create(b, 0, 32))
             .getResult());

  // Small call: the block's threads scan every slot (and position); block
  // 0 records the smallest bad index, as the library does.
  b.setInsertionPointToStart(&ifPre.getElseRegion().front());
  Value isBlock0 =
      arith::CmpIOp::create(b, arith::CmpIPredicate::eq, bid, cst(0));
  Value end = p.rope ? T : N; // N <= T
  Value falseV = arith::ConstantIntOp::create(b, 0, 1);
  auto scan = scf::ForOp::create(b, tid, end, cst(p.blockThreads()),
                                 ValueRange{falseV});
  {
    OpBuilder::InsertionGuard loopGuard(b);
    b.setInsertionPointToStart(scan.getBody());
    Value i = scan.getInductionVar();
    // Both loads before any compare: one memory round trip an iteration.
    Value s = loadIndex(arg(Slots), mul(i, slotStride),
                        p.rope ? lt(i, N) : Value());
    Value x = p.rope ? loadIndex(arg(Positions), mul(i, posStride), Value())
                     : Value();
    Value badSlot = ge(s, numSlots);
    auto ifSlot = scf::IfOp::create(b, andI(badSlot, isBlock0), false);
    b.setInsertionPointToStart(&ifSlot.getThenRegion().front());
    record(arg(BadSlot), i);
    b.setInsertionPointAfter(ifSlot);
    Value bad = orI(scan.getRegionIterArgs()[0], badSlot);
    if (p.rope) {
      Value badPos = arith::XOrIOp::create(
          b, inRange(x, maxPos), arith::ConstantIntOp::create(b, 1, 1));
      auto ifPos = scf::IfOp::create(b, andI(badPos, isBlock0), false);
      b.setInsertionPointToStart(&ifPos.getThenRegion().front());
      record(arg(BadPos), i);
      b.setInsertionPointAfter(ifPos);
      bad = orI(bad, badPos);
    }
    scf::YieldOp::create(b, bad);
  }
  // bar.red.or.pred: one barrier combines the block's verdicts.
  Value pred = arith::ExtUIOp::create(b, b.getI32Type(), scan.getResult(0));
  auto barrier = NVVM::BarrierOp::create(
      b, b.getI32Type(), Value(), Value(),
      NVVM::BarrierReductionAttr::get(b.getContext(),
                                      NVVM::BarrierReduction::OR),
      pred);
  scf::YieldOp::create(
      b, arith::CmpIOp::create(b, arith::CmpIPredicate::ne, barrier.getRes(),
                               arith::ConstantIntOp::create(b, 0, 32))
             .getResult());
  return ifPre.getResult(0);
}

void KernelEmitter::emit() {
  const int64_t L = p.sig.latentRank;
  T = scalar(0);
  N = scalar(1);
  kvStride = scalar(2);
  kpStride = scalar(3);
  slotStride = scalar(4);
  numSlots = scalar(5);
  posStride = scalar(6);
  csStride = scalar(7);
  maxPos = scalar(8);
  qS0 = scalar(9);
  qS1 = scalar(10);
  hq = scalar(11);
  prevalidated = arith::CmpIOp::create(
      b, arith::CmpIPredicate::ne, arg(mlart::kCodegenMemrefArgs + 12),
      arith::ConstantIntOp::create(b, 0, 64));
  qInS0 = scalar(13);
  qInS1 = scalar(14);

  Value tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  Value bid = gpu::BlockIdOp::create(b, gpu::Dimension::x);
  Value tpt = cst(p.threadsPerToken);
  Value y = arith::DivUIOp::create(b, tid, tpt);
  Value x = arith::RemUIOp::create(b, tid, tpt);
  Value t = add(mul(bid, cst(p.tokensPerBlock)), y);
  Value zero = cst(0);

  // --- Phase 1: loads that need no vote, nothing stored. ---
  // The token's slot and position and the row data a thread copies or
  // quantises depend on the token index only: they are in flight during
  // the vote's scan, so copies store right after it. Rope items (k_pe, and
  // q_pe past its first position) load their data with cos/sin after the
  // vote: cos/sin need the position anyway, so their chain (scan |
  // position, then data) is as long as without the vote, and fewer values
  // stay live across the barrier (registers, see minctasm).
  Value hasSlot = lt(t, N);
  Value slot = loadIndex(arg(Slots), mul(t, slotStride), hasSlot);
  Value write = inRange(slot, numSlots); // negative slots: skipped
  Value inT = lt(t, T);
  Value pos, posOk;
  if (p.rope) {
    pos = loadIndex(arg(Positions), mul(t, posStride), inT);
    posOk = inRange(pos, maxPos);
    write = andI(write, posOk);
  }
  Value isLatent = lt(x, cst(p.latThreads));
  Value isRope = andI(ge(x, cst(p.latThreads)),
                      lt(x, cst(p.latThreads + p.ropeThreads)));
  Value k = arith::SubIOp::create(b, x, cst(p.latThreads));
  Value kvRow = mul(t, kvStride);
  Value kpRow = mul(t, kpStride);
  // Elements per thread: a 16-byte vector, or 8 values for fp8_ds_mla.
  const int64_t chunk = p.dsMla ? 8 : 16 / p.elemBytes;
  VectorType chunkType = vec(chunk, p.input);
  Value latent =
      loadIf(andI(hasSlot, isLatent), {chunkType}, [&]() -> SmallVector<Value> {
        return {load16(arg(KvC), add(kvRow, mul(x, cst(chunk))), chunkType)};
      })[0];
  Value ropeCopy;
  if (!p.rope)
    ropeCopy =
        loadIf(andI(hasSlot, isRope), {chunkType}, [&]() -> SmallVector<Value> {
          return {load16(arg(KPe), add(kpRow, mul(k, cst(chunk))), chunkType)};
        })[0];
  // q_pe: (token, head, item) triples strided over the latent threads of
  // the whole grid (the runtime launches enough blocks for T x Hq x
  // rope/16 items; any grid is correct, the loop takes the rest). Not the
  // rope threads: their k_pe item already costs a memory round trip after
  // the vote (cos/sin), and a q item behind it would add a second one to
  // the kernel's critical path; a latent thread's own data was loaded
  // before the vote, so its q item is its only round trip after it. The
  // position of the thread's first item is loaded before the vote.
  const int64_t qItems = p.sig.ropeDim / 16;
  Value perToken, qTotal, qFirst, qStep, q0Pos;
  if (p.q) {
    const int64_t perBlock = p.tokensPerBlock * p.latThreads;
    perToken = mul(hq, cst(qItems));
    qTotal = mul(perToken, T);
    qStep = mul(gpu::GridDimOp::create(b, gpu::Dimension::x), cst(perBlock));
    qFirst = arith::SelectOp::create(
        b, isLatent, add(mul(bid, cst(perBlock)), add(mul(y, cst(p.latThreads)), x)),
        qTotal);
    Value tq = arith::DivUIOp::create(
        b, qFirst, arith::MaxUIOp::create(b, perToken, cst(1)));
    q0Pos = loadIndex(arg(Positions), mul(tq, posStride), lt(qFirst, qTotal));
  }

  // --- Phase 2: the vote; a failed call returns before any store. ---
  // The latent norm's weight chunk, like the latent itself.
  Value normW;
  if (p.norm)
    normW = loadIf(isLatent, {chunkType}, [&]() -> SmallVector<Value> {
      return {load16(normArg(0), mul(x, cst(chunk)), chunkType)};
    })[0];

  Value bad = vote(tid, bid);
  Region &body = func.getBody();
  Block *exit = new Block(), *writes = new Block();
  body.push_back(exit);
  body.push_back(writes);
  cf::CondBranchOp::create(b, bad, exit, writes);
  b.setInsertionPointToStart(exit);
  gpu::ReturnOp::create(b);
  b.setInsertionPointToStart(writes);

  // --- Phase 3: writes. Row writes stay bounds-checked. ---
  Value row = mul(arith::MaxSIOp::create(b, slot, zero), cst(p.rowBytes));
  if (p.norm)
    latent = normalize(latent, normW, x, y);
  if (!p.dsMla) {
    auto ifLat = scf::IfOp::create(b, andI(write, isLatent), false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&ifLat.getThenRegion().front());
    storeBytes(latent, add(row, mul(x, cst(16))), 16);
  } else {
    // 16 threads per 128-value tile. Every thread of the warp takes part
    // in the shuffles (zeros where it has no values); the vote is uniform
    // over the block, so the warps are still full here.
    VectorType f32x8 = vec(8, b.getF32Type());
    Value vals = arith::ExtFOp::create(b, f32x8, latent);
    Value amax = arith::ConstantOp::create(b, b.getF32FloatAttr(0.0f));
    for (int64_t i = 0; i < 8; ++i)
      amax = arith::MaxNumFOp::create(
          b, amax,
          math::AbsFOp::create(b, vector::ExtractOp::create(b, vals, i)));
    for (int32_t offset : {8, 4, 2, 1}) {
      auto shuffle =
          gpu::ShuffleOp::create(b, amax, offset, 32, gpu::ShuffleMode::XOR);
      amax = arith::MaxNumFOp::create(b, amax, shuffle.getShuffleResult());
    }
    Value scale = arith::MaxNumFOp::create(
        b,
        arith::DivFOp::create(
            b, amax, arith::ConstantOp::create(b, b.getF32FloatAttr(448.0f))),
        arith::ConstantOp::create(b, b.getF32FloatAttr(FLT_MIN)));
    auto ifLat = scf::IfOp::create(b, andI(write, isLatent), false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&ifLat.getThenRegion().front());
    Value scaled = arith::DivFOp::create(
        b, vals, vector::BroadcastOp::create(b, f32x8, scale));
    SmallVector<Value> packed;
    auto fp8 = Float8E4M3FNType::get(b.getContext());
    for (int64_t i = 0; i < 4; ++i) {
      // The first operand lands in the high byte of the i16.
      packed.push_back(NVVM::ConvertF32x2ToF8x2Op::create(
          b, b.getI16Type(), vector::ExtractOp::create(b, scaled, 2 * i + 1),
          vector::ExtractOp::create(b, scaled, 2 * i),
          NVVM::FPRoundingModeAttr::get(b.getContext(),
                                        NVVM::FPRoundingMode::RN),
          NVVM::SaturationModeAttr::get(b.getContext(),
                                        NVVM::SaturationMode::SATFINITE),
          b.getBoolAttr(false), TypeAttr::get(fp8)));
    }
    Value bytes = vector::FromElementsOp::create(b, vec(4, b.getI16Type()),
                                                 packed);
    storeBytes(bytes, add(row, mul(x, cst(8))), 8);
    Value first = arith::CmpIOp::create(
        b, arith::CmpIPredicate::eq, arith::RemUIOp::create(b, x, cst(16)),
        zero);
    auto ifScale = scf::IfOp::create(b, first, false);
    b.setInsertionPointToStart(&ifScale.getThenRegion().front());
    Value scaleVec = vector::FromElementsOp::create(b, vec(1, b.getF32Type()),
                                                    ValueRange{scale});
    storeBytes(scaleVec,
               add(row, add(cst(L), mul(arith::DivUIOp::create(b, x, cst(16)),
                                        cst(4)))),
               4);
  }

  // Rope part: a copy (converted to bf16 rows for fp8_ds_mla), or rotation.
  const int64_t ropeBase = p.dsMla ? L + 4 * (L / 128) : L * p.elemBytes;
  if (!p.rope) {
    auto ifRope = scf::IfOp::create(b, andI(write, isRope), false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&ifRope.getThenRegion().front());
    storeBytes(ropeCopy, add(row, add(cst(ropeBase), mul(k, cst(16)))), 16);
  } else {
    // k_pe is rotated in place for every token < T whatever its slot.
    auto ifRope = scf::IfOp::create(b, andI(andI(inT, posOk), isRope), false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&ifRope.getThenRegion().front());
    storeRope(arg(KPe), kpRow, k, pos, loadRope(arg(KPe), kpRow, k, Value()),
              add(row, cst(ropeBase)), write);
  }

  if (p.q) {
    // Item `it` with its position `posQ` (any value; out of range: skipped).
    auto qItem = [&](Value it, Value posQ) {
      Value tq = arith::DivUIOp::create(b, it, perToken);
      Value rem = arith::RemUIOp::create(b, it, perToken);
      Value h = arith::DivUIOp::create(b, rem, cst(qItems));
      Value g = arith::RemUIOp::create(b, rem, cst(qItems));
      if (!posQ)
        posQ = loadIndex(arg(Positions), mul(tq, posStride), Value());
      auto ifQ = scf::IfOp::create(b, inRange(posQ, maxPos), false);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(&ifQ.getThenRegion().front());
      // Read from q_pe_in (q_pe itself when in place), write q_pe.
      Value qRow = add(mul(tq, qS0), mul(h, qS1));
      Value qInRow = add(mul(tq, qInS0), mul(h, qInS1));
      storeRope(arg(QPe), qRow, g, posQ,
                loadRope(arg(QPeIn), qInRow, g, Value()), Value(), Value());
    };
    {
      auto ifFirst = scf::IfOp::create(b, lt(qFirst, qTotal), false);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(&ifFirst.getThenRegion().front());
      qItem(qFirst, q0Pos);
    }
    auto loop = scf::ForOp::create(b, add(qFirst, qStep), qTotal, qStep);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    qItem(loop.getInductionVar(), Value());
  }
  gpu::ReturnOp::create(b);
}

struct MLAOutlineCacheKernelsPass
    : public mla::impl::MLAOutlineCacheKernelsBase<MLAOutlineCacheKernelsPass> {
  using MLAOutlineCacheKernelsBase::MLAOutlineCacheKernelsBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (tokensPerBlock < 1 || tokensPerBlock > 32) {
      module.emitError() << "mla-outline-cache-kernels: tokens-per-block must "
                            "be in [1, 32], got "
                         << tokensPerBlock;
      return signalPassFailure();
    }
    if (minBlocksPerSM > kMaxBlocksPerSM) {
      module.emitError() << "mla-outline-cache-kernels: min-blocks-per-sm "
                            "must be in [0, "
                         << kMaxBlocksPerSM << "], got "
                         << static_cast<int64_t>(minBlocksPerSM);
      return signalPassFailure();
    }
    SmallVector<Operation *> writes;
    module.walk([&](Operation *op) {
      if (isa<KVCacheUpdateOp, RopeKVCacheUpdateOp>(op) &&
          !op->hasAttr(MLADialect::getKernelAttrName()))
        writes.push_back(op);
    });
    if (writes.empty())
      return;

    MLIRContext *ctx = &getContext();
    auto gpuModule = module.lookupSymbol<gpu::GPUModuleOp>(kModuleName);
    for (Operation *op : writes) {
      std::string why;
      FailureOr<KernelPlan> plan = planFor(op, tokensPerBlock, why);
      if (failed(plan)) {
        op->emitRemark() << "kept on the library kernel: " << why;
        continue;
      }
      if (!gpuModule) {
        OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
        gpuModule = gpu::GPUModuleOp::create(b, module.getLoc(), kModuleName);
        module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                        UnitAttr::get(ctx));
      }
      if (!gpuModule.lookupSymbol(plan->name)) {
        buildKernel(gpuModule, *plan, op->getLoc());
        ++numKernels;
      }
      auto symbol = SymbolRefAttr::get(
          StringAttr::get(ctx, kModuleName),
          {FlatSymbolRefAttr::get(ctx, plan->name)});
      Builder b(ctx);
      op->setAttr(MLADialect::getKernelAttrName(),
                  b.getDictionaryAttr(
                      {b.getNamedAttr("symbol", symbol),
                       b.getNamedAttr("block_threads",
                                      b.getI32IntegerAttr(
                                          int32_t(plan->blockThreads()))),
                       b.getNamedAttr("tokens_per_block",
                                      b.getI32IntegerAttr(
                                          int32_t(plan->tokensPerBlock)))}));
      ++numOutlined;
    }
  }

  void buildKernel(gpu::GPUModuleOp gpuModule, const KernelPlan &p,
                   Location loc) {
    MLIRContext *ctx = &getContext();
    auto global = IntegerAttr::get(IntegerType::get(ctx, 64), kGlobal);
    auto mem = [&](Type element) {
      return MemRefType::get({ShapedType::kDynamic}, element,
                             MemRefLayoutAttrInterface(), global);
    };
    Type i8 = IntegerType::get(ctx, 8), i32 = IntegerType::get(ctx, 32),
         i64 = IntegerType::get(ctx, 64), f32 = Float32Type::get(ctx);
    // The binding of docs/codegen.md; unused operands are still passed.
    SmallVector<Type> args = {mem(p.input),   mem(p.input),   mem(p.slotType),
                              mem(i8),        mem(p.posType), mem(f32),
                              mem(p.input),   mem(i32),       mem(i32),
                              mem(i32),       mem(p.input)};
    args.append(mlart::kCodegenScalarArgs, i64);
    args.push_back(mem(p.input)); // latent norm weight (unused: null)
    args.push_back(f32);          // its epsilon
    ImplicitLocOpBuilder b(loc, ctx);
    b.setInsertionPointToEnd(gpuModule.getBody());
    auto func = gpu::GPUFuncOp::create(b, p.name,
                                       FunctionType::get(ctx, args, {}));
    func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
    if (p.norm) // per-token partial sums of the latent norm
      func.addWorkgroupAttribution(
          MemRefType::get(
              {p.tokensPerBlock * p.normGroups}, f32,
              MemRefLayoutAttrInterface(),
              gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup)),
          loc);
    func.setKnownBlockSizeAttr(
        b.getDenseI32ArrayAttr({int32_t(p.blockThreads()), 1, 1}));
    // As many blocks per SM as its threads allow (.minnctapersm): the vote
    // keeps a few values live across the barrier, and without the hint
    // ptxas spends registers on them that cost a block per SM on large,
    // bandwidth-bound calls.
    const int64_t minBlocks =
        minBlocksPerSM ? int64_t(minBlocksPerSM)
                       : kMaxThreadsPerSM / p.blockThreads();
    func->setAttr(NVVM::NVVMDialect::getMinctasmAttrName(),
                  b.getI32IntegerAttr(int32_t(
                      std::clamp<int64_t>(minBlocks, 1, kMaxBlocksPerSM))));
    b.setInsertionPointToStart(&func.getBody().front());
    // The runtime launches the kernel with programmatic dependent launch
    // (docs/cuda.md): it may start while the previous kernel still runs, so
    // it waits for that grid before its first load or store, then lets the
    // next kernel launch.
    NVVM::GriddepcontrolOp::create(b, NVVM::GridDepActionKind::wait);
    NVVM::GriddepcontrolOp::create(b,
                                   NVVM::GridDepActionKind::launch_dependents);
    KernelEmitter(b, p, func).emit();
  }
};

} // namespace
