//===- ArtifactWriter.h - Builds the bytes of an MLAA step program --------===//
//
// The compiler's serializer (mla-translate) declares buffers, caches and
// views and appends instructions through this builder, then calls finish().
// No MLIR types appear here: the translation walks its IR and calls these
// methods. Indices returned by the add* methods are what later calls take.
//
//   ArtifactWriter w("decode_layer");
//   uint32_t x = w.addBuffer("hidden", BufferRole::Input, DType::BF16,
//                            {2, 64});
//   uint32_t xv = w.bufferView(x);
//   int64_t off = w.allocateArena(2 * 64 * 2);
//   uint32_t tmp = w.arenaView(off, DType::BF16, {2, 64});
//   w.rmsNorm(xv, weightView, tmp, 1e-6f, "layer0.norm");
//   StatusOr<std::vector<uint8_t>> bytes = w.finish();
//
//===----------------------------------------------------------------------===//
#ifndef MLART_ARTIFACTWRITER_H
#define MLART_ARTIFACTWRITER_H

#include "mlart/Artifact.h"
#include "mlart/Kernels.h"

#include <initializer_list>
#include <string>
#include <vector>

namespace mlart {

/// Accumulates a program and serializes it as MLAA version kArtifactVersion.
class ArtifactWriter {
public:
  explicit ArtifactWriter(std::string functionName = "step")
      : functionName_(std::move(functionName)) {}

  /// Declares a function argument; returns its buffer index.
  uint32_t addBuffer(const std::string &name, BufferRole role, DType dtype,
                     std::initializer_list<int64_t> sizes);
  uint32_t addBuffer(const BufferDecl &decl);
  /// Declares a KV cache argument; returns its cache index.
  uint32_t addCache(const std::string &name, const KVCacheDesc &desc);
  /// Makes buffer `buffer` the scale of per-tensor fp8 cache `cache`
  /// (CacheDecl::scaleBuffer).
  void setCacheScale(uint32_t cache, uint32_t buffer) {
    caches_[cache].scaleBuffer = buffer;
  }

  /// Records how buffer `buffer`'s rope table is computed
  /// (Artifact::ropeTables); a later call for the same buffer replaces it.
  void setRopeTable(uint32_t buffer, const RopeTableParams &params);

  /// Reserves `bytes` of the scratch arena at an `alignment`-aligned offset
  /// (a bump allocator for compilers without their own planner); returns the
  /// offset. setArenaBytes overrides the total for planned layouts.
  int64_t allocateArena(int64_t bytes, int64_t alignment = 64);
  void setArenaBytes(int64_t bytes) { arenaBytes_ = bytes; }
  int64_t arenaBytes() const { return arenaBytes_; }

  /// Reserves `bytes` of the prepared arena (what the prepare program fills
  /// from the weights once per binding); returns the offset.
  int64_t allocatePrepared(int64_t bytes, int64_t alignment = 256);
  int64_t preparedBytes() const { return preparedBytes_; }

  /// Adds a view; returns its index. `strides` empty means row-major.
  uint32_t addView(const ViewDecl &view);
  uint32_t bufferView(uint32_t buffer, int64_t byteOffset, DType dtype,
                      std::initializer_list<int64_t> sizes,
                      std::initializer_list<int64_t> strides = {});
  /// The whole buffer as declared (its dtype, shape, contiguous).
  uint32_t bufferView(uint32_t buffer);
  uint32_t arenaView(int64_t byteOffset, DType dtype,
                     std::initializer_list<int64_t> sizes,
                     std::initializer_list<int64_t> strides = {});
  uint32_t preparedView(int64_t byteOffset, DType dtype,
                        std::initializer_list<int64_t> sizes,
                        std::initializer_list<int64_t> strides = {});

  /// Appends an instruction; returns its index.
  uint32_t addInstruction(const Instruction &inst);
  /// Appends a copy to the prepare program (weight or prepared-arena view
  /// `src` into prepared-arena view `dst`); returns its index there.
  uint32_t prepareCopy(uint32_t src, uint32_t dst, const std::string &loc = {});
  /// Appends any instruction to the prepare program (tests write invalid
  /// ones with it; the loader accepts copies only).
  uint32_t addPrepareInstruction(const Instruction &inst);

  /// Declares a compiler-generated kernel `name` defined by the PTX text
  /// `ptx` (kernels of one module share the text, stored once) that
  /// implements `op`; returns its kernel index.
  uint32_t addCodegenKernel(const std::string &name, const std::string &ptx,
                            Opcode op, uint32_t blockThreads,
                            uint32_t tokensPerBlock);
  /// Makes instruction `inst` run generated kernel `kernel` instead of the
  /// library kernel.
  void setInstructionKernel(uint32_t inst, uint32_t kernel) {
    instructions_[inst].kernel = kernel;
  }

  // One helper per opcode; operands are view indices (kNoIndex: absent).
  uint32_t copy(uint32_t src, uint32_t dst, const std::string &loc = {});
  uint32_t cacheUpdate(uint32_t cache, uint32_t kvC, uint32_t kPe,
                       uint32_t slotMapping, const std::string &loc = {});
  uint32_t rope(uint32_t x, uint32_t positions, uint32_t cosSin,
                RopeStyle style, const std::string &loc = {});
  uint32_t ropeCacheUpdate(uint32_t cache, uint32_t kvC, uint32_t kPe,
                           uint32_t slotMapping, uint32_t positions,
                           uint32_t cosSin, RopeStyle style,
                           uint32_t qPe = kNoIndex, uint32_t kPeOut = kNoIndex,
                           const std::string &loc = {},
                           uint32_t qPeIn = kNoIndex,
                           uint32_t latentNormWeight = kNoIndex,
                           float latentNormEpsilon = 0.0f);
  uint32_t decodeAttention(uint32_t cache, uint32_t q, uint32_t blockTable,
                           uint32_t seqLens, uint32_t out, float softmaxScale,
                           uint32_t lse = kNoIndex, int numSplits = 0,
                           const std::string &loc = {});
  /// cacheUpdate(cache, kvC, kPe, slotMapping) and decodeAttention(cache,
  /// q, ...) over the rows it wrote, as one instruction.
  uint32_t decodeAttentionWithUpdate(uint32_t cache, uint32_t kvC, uint32_t kPe,
                                     uint32_t slotMapping, uint32_t q,
                                     uint32_t blockTable, uint32_t seqLens,
                                     uint32_t out, float softmaxScale,
                                     uint32_t lse = kNoIndex, int numSplits = 0,
                                     const std::string &loc = {});
  /// Without cached context pass cache = kNoIndex and leave the last four
  /// operands absent.
  uint32_t prefillAttention(uint32_t q, uint32_t k, uint32_t v,
                            uint32_t queryStartLoc, uint32_t out,
                            float softmaxScale, uint32_t lse = kNoIndex,
                            uint32_t cache = kNoIndex,
                            uint32_t blockTable = kNoIndex,
                            uint32_t contextLens = kNoIndex,
                            uint32_t wUK = kNoIndex, uint32_t wUV = kNoIndex,
                            const std::string &loc = {});
  /// Like prefillAttention, but `seqLens` holds each request's total length
  /// after the step (context + new tokens), as the compiler's IR does; the
  /// executor passes it with PrefillAttentionArgs::lensIncludeNewTokens.
  uint32_t prefillAttentionTotalLens(uint32_t q, uint32_t k, uint32_t v,
                                     uint32_t queryStartLoc, uint32_t out,
                                     float softmaxScale, uint32_t lse,
                                     uint32_t cache, uint32_t blockTable,
                                     uint32_t seqLens, uint32_t wUK,
                                     uint32_t wUV, const std::string &loc = {});
  uint32_t qAbsorb(uint32_t qNope, uint32_t wUK, uint32_t out,
                   const std::string &loc = {});
  uint32_t vUp(uint32_t oLatent, uint32_t wUV, uint32_t out,
               const std::string &loc = {});
  uint32_t qConcat(uint32_t qLatent, uint32_t qPe, uint32_t out,
                   const std::string &loc = {});
  uint32_t quantize(uint32_t x, uint32_t scale, uint32_t out,
                    const std::string &loc = {});
  uint32_t rmsNorm(uint32_t x, uint32_t weight, uint32_t out, float epsilon,
                   const std::string &loc = {});
  uint32_t linear(uint32_t x, uint32_t weight, uint32_t out,
                  const std::string &loc = {});
  /// out = x @ weight^T + addend (addend: out's shape and dtype).
  uint32_t linear(uint32_t x, uint32_t weight, uint32_t out, uint32_t addend,
                  const std::string &loc = {});
  uint32_t add(uint32_t a, uint32_t b, uint32_t out,
               const std::string &loc = {});

  /// The bytes, validated by Artifact::load: an inconsistent program is
  /// reported here, at compile time, with the loader's message.
  StatusOr<std::vector<uint8_t>> finish() const;
  /// The bytes without validation (tests build invalid artifacts with it).
  std::vector<uint8_t> serialize() const;

  const std::vector<BufferDecl> &buffers() const { return buffers_; }
  const std::vector<ViewDecl> &views() const { return views_; }

private:
  std::string functionName_;
  int64_t arenaBytes_ = 0;
  int64_t preparedBytes_ = 0;
  std::vector<BufferDecl> buffers_;
  std::vector<CacheDecl> caches_;
  std::vector<ViewDecl> views_;
  std::vector<Instruction> instructions_;
  std::vector<Instruction> prepareInstructions_;
  struct KernelDecl {
    std::string name, ptx;
    Opcode op;
    uint32_t blockThreads, tokensPerBlock;
  };
  std::vector<KernelDecl> kernels_;
  std::vector<RopeTableDecl> ropeTables_;
};

/// Writes `bytes` to `path` (for tools and tests).
Status writeArtifactFile(const std::string &path,
                         const std::vector<uint8_t> &bytes);

} // namespace mlart

#endif // MLART_ARTIFACTWRITER_H
