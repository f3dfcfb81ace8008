//===- OutlineCacheKernels.cpp - GPU kernels for cache writes -------------===//
//
// Builds one gpu.func per distinct cache-write specialisation and marks the
// ops that use it (docs/codegen.md). The kernel's name comes from the
// runtime's codegenKernelName, so the runtime can check that a kernel runs
// only on operands it was generated for.
//
//===----------------------------------------------------------------------===//
#include "mla/IR/MLAOps.h"
#include "mla/Transforms/Passes.h"

#include "mlart/Codegen.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "llvm/ADT/StringMap.h"

#include <cfloat>

namespace mlir::mla {
#define GEN_PASS_DEF_MLAOUTLINECACHEKERNELS
#include "mla/Transforms/Passes.h.inc"
} // namespace mlir::mla

using namespace mlir;
using namespace mlir::mla;

namespace {

constexpr StringLiteral kModuleName = "mla_kernels";
/// Global memory on NVVM.
constexpr unsigned kGlobal = 1;

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
  int64_t blockThreads() const { return threadsPerToken * tokensPerBlock; }
};

std::optional<mlart::DType> toDType(Type t) {
  if (t.isBF16())
    return mlart::DType::BF16;
  if (t.isF16())
    return mlart::DType::F16;
  if (t.isF32())
    return mlart::DType::F32;
  if (isa<Float8E4M3FNType>(t))
    return mlart::DType::F8E4M3FN;
  if (t.isSignlessInteger(32))
    return mlart::DType::I32;
  if (t.isSignlessInteger(64))
    return mlart::DType::I64;
  return std::nullopt;
}

Type elementOf(Value v) { return cast<ShapedType>(v.getType()).getElementType(); }

/// The plan for `op`, or the reason it stays on the library kernel.
FailureOr<KernelPlan> planFor(Operation *op, unsigned tokensPerBlock,
                              std::string &why) {
  auto fail = [&](const Twine &reason) -> FailureOr<KernelPlan> {
    why = reason.str();
    return failure();
  };
  KernelPlan p;
  Value kvC, kPe, slots, cacheValue, qPe, positions;
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
  p.slotType = elementOf(slots);
  p.posType = positions ? elementOf(positions)
                        : IntegerType::get(op->getContext(), 64);
  // fp8_ds_mla reduces a tile over 16 aligned lanes of a warp.
  p.threadsPerToken = p.latThreads + p.ropeThreads;
  if (p.dsMla)
    p.threadsPerToken = llvm::alignTo(p.threadsPerToken, 16);
  p.tokensPerBlock = tokensPerBlock;
  while (p.blockThreads() % 32 != 0)
    ++p.threadsPerToken; // whole warps: shuffles need full masks
  if (p.blockThreads() > 1024)
    return fail("a row needs " + Twine(p.threadsPerToken) +
                " threads: too wide for blocks of " + Twine(tokensPerBlock) +
                " tokens");

  p.sig.op = p.rope ? mlart::Opcode::RopeCacheUpdate : mlart::Opcode::CacheUpdate;
  p.sig.layout = p.dsMla ? mlart::CacheLayout::Fp8DsMla : mlart::CacheLayout::Plain;
  p.sig.cacheDType = *toDType(cache.getElementType());
  p.sig.latentRank = L;
  p.sig.ropeDim = P;
  p.sig.input = *toDType(p.input);
  p.sig.slots = *toDType(p.slotType);
  p.sig.positions = *toDType(p.posType);
  p.sig.rotatesQ = p.q;
  p.name = mlart::codegenKernelName(p.sig);
  return p;
}

/// Emits the body of one kernel.
class KernelEmitter {
public:
  KernelEmitter(ImplicitLocOpBuilder &b, const KernelPlan &p,
                gpu::GPUFuncOp func)
      : b(b), p(p), func(func) {}

  void emit();

private:
  Value cst(int64_t v) { return arith::ConstantIndexOp::create(b, v); }
  Value arg(int i) { return func.getArgument(unsigned(i)); }
  Value scalar(int i) {
    return arith::IndexCastOp::create(b, b.getIndexType(),
                                      arg(mlart::kCodegenMemrefArgs + i));
  }
  Value mul(Value a, Value c) { return arith::MulIOp::create(b, a, c); }
  Value add(Value a, Value c) { return arith::AddIOp::create(b, a, c); }
  Value lt(Value a, Value c) {
    return arith::CmpIOp::create(b, arith::CmpIPredicate::slt, a, c);
  }
  Value andI(Value a, Value c) { return arith::AndIOp::create(b, a, c); }
  /// `memref[index]` of an index tensor as `index`, or -1 when !valid.
  Value loadIndex(Value memref, Value index, Value valid);
  /// Records `t` into the error cell `memref` (atomic min).
  void record(Value memref, Value t);
  VectorType vec(int64_t n, Type t) { return VectorType::get({n}, t); }
  Value load16(Value memref, Value index, VectorType type) {
    return vector::LoadOp::create(b, type, memref, index, false,
                                  llvm::MaybeAlign(16));
  }
  void storeBytes(Value v, Value byteIndex, int64_t align) {
    auto type = cast<VectorType>(v.getType());
    int64_t bytes = type.getNumElements() *
                    type.getElementType().getIntOrFloatBitWidth() / 8;
    Value raw = vector::BitCastOp::create(b, vec(bytes, b.getI8Type()), v);
    vector::StoreOp::create(b, raw, arg(3), byteIndex, false,
                            llvm::MaybeAlign(align));
  }
  /// Rotates 8 pairs (see docs/codegen.md): returns the new A and B vectors.
  std::pair<Value, Value> rotate(Value a, Value bv, Value pos, Value g);
  /// Rotates the item `g` of the rope row starting at element `rowStart` of
  /// `memref` in place, and optionally stores it into the cache row.
  void ropeItem(Value memref, Value rowStart, Value pos, Value g,
                Value cacheRow, Value write);

  ImplicitLocOpBuilder &b;
  const KernelPlan &p;
  gpu::GPUFuncOp func;
  Value T, N, kvStride, kpStride, slotStride, numSlots, posStride, csStride,
      maxPos, qS0, qS1, hq;
};

Value KernelEmitter::loadIndex(Value memref, Value index, Value valid) {
  Type type = cast<MemRefType>(memref.getType()).getElementType();
  auto ifOp = scf::IfOp::create(b, b.getIndexType(), valid, true);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&ifOp.getThenRegion().front());
    Value v = memref::LoadOp::create(b, memref, index);
    if (type.isInteger(32))
      v = arith::ExtSIOp::create(b, b.getI64Type(), v);
    scf::YieldOp::create(b, arith::IndexCastOp::create(b, b.getIndexType(), v)
                                .getResult());
    b.setInsertionPointToStart(&ifOp.getElseRegion().front());
    scf::YieldOp::create(b, cst(-1));
  }
  return ifOp.getResult(0);
}

void KernelEmitter::record(Value memref, Value t) {
  Value t32 = arith::IndexCastOp::create(b, b.getI32Type(), t);
  memref::AtomicRMWOp::create(b, arith::AtomicRMWKind::mins, t32, memref,
                              ValueRange{cst(0)});
}

std::pair<Value, Value> KernelEmitter::rotate(Value a, Value bv, Value pos,
                                              Value g) {
  const int64_t half = p.sig.ropeDim / 2;
  VectorType f32x8 = vec(8, b.getF32Type());
  // cos/sin of pairs 8g .. 8g+7 (both styles number pairs that way).
  Value csRow = add(mul(pos, csStride), mul(g, cst(8)));
  Value c = vector::LoadOp::create(b, f32x8, arg(5), csRow);
  Value s = vector::LoadOp::create(b, f32x8, arg(5), add(csRow, cst(half)));
  Value x0 = a, x1 = bv;
  const bool gptj = p.sig.style == mlart::RopeStyle::GptJ;
  if (gptj) { // deinterleave the 16 elements of A, B into the pair halves
    x0 = vector::ShuffleOp::create(b, a, bv,
                                   ArrayRef<int64_t>{0, 2, 4, 6, 8, 10, 12, 14});
    x1 = vector::ShuffleOp::create(b, a, bv,
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

void KernelEmitter::ropeItem(Value memref, Value rowStart, Value pos, Value g,
                             Value cacheRow, Value write) {
  const int64_t half = p.sig.ropeDim / 2;
  const bool gptj = p.sig.style == mlart::RopeStyle::GptJ;
  // NeoX: elements 8g.. and half+8g..; GPT-J: 16g.. and 16g+8...
  Value a0 = gptj ? mul(g, cst(16)) : mul(g, cst(8));
  Value b0 = gptj ? add(a0, cst(8)) : add(a0, cst(half));
  VectorType bf16x8 = vec(8, p.input);
  Value a = load16(memref, add(rowStart, a0), bf16x8);
  Value bv = load16(memref, add(rowStart, b0), bf16x8);
  auto [ra, rb] = rotate(a, bv, pos, g);
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

  Value tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  Value bid = gpu::BlockIdOp::create(b, gpu::Dimension::x);
  Value tpt = cst(p.threadsPerToken);
  Value y = arith::DivUIOp::create(b, tid, tpt);
  Value x = arith::RemUIOp::create(b, tid, tpt);
  Value t = add(mul(bid, cst(p.tokensPerBlock)), y);
  Value zero = cst(0);
  Value isLeader = arith::CmpIOp::create(b, arith::CmpIPredicate::eq, x, zero);

  // Slot guard: negative skipped, >= num_slots skipped and recorded.
  Value hasSlot = lt(t, N);
  Value slot = loadIndex(arg(2), mul(t, slotStride), hasSlot);
  Value slotOk = andI(arith::CmpIOp::create(b, arith::CmpIPredicate::sge, slot,
                                            zero),
                      lt(slot, numSlots));
  Value badSlot = andI(andI(hasSlot, isLeader),
                       arith::CmpIOp::create(b, arith::CmpIPredicate::sge,
                                             slot, numSlots));
  {
    auto ifBad = scf::IfOp::create(b, badSlot, false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&ifBad.getThenRegion().front());
    record(arg(7), t);
  }
  Value write = slotOk;
  Value inT = lt(t, T);
  Value pos, posOk;
  if (p.rope) {
    pos = loadIndex(arg(4), mul(t, posStride), inT);
    posOk = andI(arith::CmpIOp::create(b, arith::CmpIPredicate::sge, pos, zero),
                 lt(pos, maxPos));
    Value badPos = andI(andI(inT, isLeader),
                        arith::XOrIOp::create(b, posOk,
                                              arith::ConstantIntOp::create(
                                                  b, 1, 1)));
    auto ifBad = scf::IfOp::create(b, badPos, false);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(&ifBad.getThenRegion().front());
      record(arg(8), t);
    }
    write = andI(write, posOk);
  }
  Value row = mul(arith::MaxSIOp::create(b, slot, zero), cst(p.rowBytes));
  Value isLatent = lt(x, cst(p.latThreads));
  Value kvRow = mul(t, kvStride);
  Value kpRow = mul(t, kpStride);

  // Latent part.
  if (!p.dsMla) {
    const int64_t chunk = 16 / p.elemBytes;
    auto ifLat = scf::IfOp::create(b, andI(write, isLatent), false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&ifLat.getThenRegion().front());
    Value v = load16(arg(0), add(kvRow, mul(x, cst(chunk))), vec(chunk, p.input));
    storeBytes(v, add(row, mul(x, cst(16))), 16);
  } else {
    // 8 values per thread, 16 threads per 128-value tile. Every thread of
    // the warp takes part in the shuffles (zeros where it has no values).
    VectorType f32x8 = vec(8, b.getF32Type());
    auto ifLoad = scf::IfOp::create(b, TypeRange{f32x8},
                                    andI(hasSlot, isLatent), true);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(&ifLoad.getThenRegion().front());
      Value v = load16(arg(0), add(kvRow, mul(x, cst(8))), vec(8, p.input));
      scf::YieldOp::create(b, arith::ExtFOp::create(b, f32x8, v).getResult());
      b.setInsertionPointToStart(&ifLoad.getElseRegion().front());
      scf::YieldOp::create(
          b, arith::ConstantOp::create(
                 b, DenseElementsAttr::get(f32x8, b.getF32FloatAttr(0.0f)))
                 .getResult());
    }
    Value vals = ifLoad.getResult(0);
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
    for (int64_t k = 0; k < 4; ++k) {
      // The first operand lands in the high byte of the i16.
      packed.push_back(NVVM::ConvertF32x2ToF8x2Op::create(
          b, b.getI16Type(), vector::ExtractOp::create(b, scaled, 2 * k + 1),
          vector::ExtractOp::create(b, scaled, 2 * k),
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
  Value k = arith::SubIOp::create(b, x, cst(p.latThreads));
  Value isRope = andI(arith::CmpIOp::create(b, arith::CmpIPredicate::sge, x,
                                            cst(p.latThreads)),
                      lt(x, cst(p.latThreads + p.ropeThreads)));
  if (!p.rope) {
    const int64_t chunk = 16 / p.elemBytes;
    auto ifRope = scf::IfOp::create(b, andI(write, isRope), false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&ifRope.getThenRegion().front());
    Value v = load16(arg(1), add(kpRow, mul(k, cst(chunk))), vec(chunk, p.input));
    storeBytes(v, add(row, add(cst(ropeBase), mul(k, cst(16)))), 16);
  } else {
    // k_pe is rotated in place for every token < T whatever its slot.
    auto ifRope = scf::IfOp::create(b, andI(andI(inT, posOk), isRope), false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&ifRope.getThenRegion().front());
    ropeItem(arg(1), kpRow, pos, k, add(row, cst(ropeBase)), write);
  }

  // q_pe: every (token, head, item) of the call, strided over the whole
  // grid (the runtime launches enough blocks for T x Hq x rope/16 items).
  if (p.q) {
    const int64_t items = p.sig.ropeDim / 16;
    Value perToken = mul(hq, cst(items));
    Value total = mul(perToken, T);
    Value grid = gpu::GridDimOp::create(b, gpu::Dimension::x);
    Value first = add(mul(bid, cst(p.blockThreads())), tid);
    auto loop = scf::ForOp::create(b, first, total,
                                   mul(grid, cst(p.blockThreads())));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value it = loop.getInductionVar();
    Value tq = arith::DivUIOp::create(b, it, perToken);
    Value rem = arith::RemUIOp::create(b, it, perToken);
    Value h = arith::DivUIOp::create(b, rem, cst(items));
    Value g = arith::RemUIOp::create(b, rem, cst(items));
    Value inTq = lt(tq, T);
    Value posQ = loadIndex(arg(4), mul(tq, posStride), inTq);
    Value ok = andI(inTq, andI(arith::CmpIOp::create(
                                   b, arith::CmpIPredicate::sge, posQ, zero),
                               lt(posQ, maxPos)));
    auto ifQ = scf::IfOp::create(b, ok, false);
    b.setInsertionPointToStart(&ifQ.getThenRegion().front());
    ropeItem(arg(6), add(mul(tq, qS0), mul(h, qS1)), posQ, g, Value(), Value());
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
                              mem(p.input),   mem(i32),       mem(i32)};
    args.append(mlart::kCodegenScalarArgs, i64);
    ImplicitLocOpBuilder b(loc, ctx);
    b.setInsertionPointToEnd(gpuModule.getBody());
    auto func = gpu::GPUFuncOp::create(b, p.name,
                                       FunctionType::get(ctx, args, {}));
    func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
    func.setKnownBlockSizeAttr(
        b.getDenseI32ArrayAttr({int32_t(p.blockThreads()), 1, 1}));
    b.setInsertionPointToStart(&func.getBody().front());
    KernelEmitter(b, p, func).emit();
  }
};

} // namespace
