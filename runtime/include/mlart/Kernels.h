//===- Kernels.h - The kernel library interface every device implements ---===//
//
// One argument struct per kernel and one abstract KernelLibrary. The CPU
// reference library is always built; the CUDA library implements the same
// interface, so the executor and the tests dispatch through one table.
// Every kernel validates its arguments first and returns an error status
// without touching any output when they are inconsistent.
//
//===----------------------------------------------------------------------===//
#ifndef MLART_KERNELS_H
#define MLART_KERNELS_H

#include "mlart/KVCacheLayout.h"
#include "mlart/RopeTable.h"
#include "mlart/Status.h"
#include "mlart/TensorRef.h"

#include <vector>

namespace mlart {

/// Opaque per-device stream (cudaStream_t on CUDA, ignored on the CPU).
using StreamHandle = void *;

/// A paged cache as the kernels see it.
struct KVCacheRef {
  KVCacheDesc desc;
  /// Block 0, slot 0 of [numBlocks, blockSize, rowBytes] bytes whose rows
  /// within a block are dense and whose blocks are blockStride bytes apart.
  void *data = nullptr;
  /// Bytes from one block to the next; 0 means dense (blockSize * rowBytes).
  /// An engine's per-layer view into a larger allocation (vLLM's
  /// [num_blocks, block_size, 576] with the layers interleaved) is larger.
  int64_t blockStride = 0;
  /// Per-tensor scale of an Fp8PerTensor cache (stored = value / scale).
  float scale = 1.0f;
  /// When non-null, the scale is this f32 scalar in device memory instead
  /// (vLLM's k_scale tensor), read by the kernels when they run: a
  /// recalibrated scale needs no rebind and no new graph capture. The CPU
  /// refuses a value that is not finite and > 0; a GPU kernel uses it as
  /// it is.
  const float *scaleTensor = nullptr;
  /// Checked mode: when non-null, numBlocks flags; a write into a block whose
  /// flag is non-zero is refused (PermissionDenied) and nothing is written.
  /// The block manager flags the null block and every hashed block.
  const uint8_t *writeProtect = nullptr;
  /// Checked mode: when non-null, a refused write adds the number of refused
  /// rows to this counter (atomically), so the owner can report it.
  uint64_t *refusedWrites = nullptr;

  /// The effective block stride in bytes.
  int64_t blockBytes() const {
    return blockStride != 0 ? blockStride : desc.blockSize * desc.rowBytes();
  }
  /// Blocks follow each other without gaps (slot * rowBytes addressing).
  bool isDense() const {
    return blockBytes() == desc.blockSize * desc.rowBytes();
  }
  /// Byte offset of `slot` (block slot / blockSize, row slot % blockSize).
  int64_t slotOffset(int64_t slot) const {
    return (slot / desc.blockSize) * blockBytes() +
           (slot % desc.blockSize) * desc.rowBytes();
  }
  /// Bytes from `data` to the end of the last row: what the view may touch.
  int64_t spanBytes() const {
    return (desc.numBlocks - 1) * blockBytes() +
           desc.blockSize * desc.rowBytes();
  }
  /// The desc, the memory and the stride are consistent: data present,
  /// blockStride 0 or at least one block's rows (blocks never overlap).
  Status validate() const;
};

/// Rotary style: GPT-J rotates interleaved pairs (2i, 2i+1); NeoX rotates
/// halves (i, i + rope/2).
enum class RopeStyle : int { GptJ = 0, NeoX = 1 };

/// cache[slot[t]] = concat(kvC[t], kPe[t]) for t < slotMapping.size with
/// slot >= 0. kvC [T, latent], kPe [T, rope]; slotMapping [N] i64 or i32 with
/// N <= T. Any slot >= numSlots is an error and nothing is written.
struct CacheUpdateArgs {
  TensorRef kvC;
  TensorRef kPe;
  TensorRef slotMapping;
  KVCacheRef cache;
};

/// Rotates x [T, H, rope] (or [T, rope]) in place. cosSin [maxPos, rope] f32:
/// the first rope/2 columns are cos, the last rope/2 are sin.
struct RopeArgs {
  TensorRef x;
  TensorRef positions; ///< [T] i64 or i32
  TensorRef cosSin;
  RopeStyle style = RopeStyle::NeoX;
};

/// Fused rope + cache update: rotates kPe (and qPe if present) by positions,
/// then writes concat(kvC, rotated kPe) like CacheUpdateArgs. qPe [T, Hq, rope]
/// is rotated in place, or, when qPeIn is present, receives the rotation of
/// qPeIn (same shape and dtype, any strides; qPeIn is only read). qPeIn must
/// be qPe itself or share no byte with it (partial overlap: InvalidArgument).
/// Rotated k_pe is written to kPeOut when present.
/// With latentNormWeight [latent] (bf16, f16 or f32) each written row's
/// latent is RMS-normalised first, exactly like rmsNorm(kvC, weight,
/// latentNormEpsilon) into kvC's dtype followed by the write (kvC itself is
/// only read; kvC must then be bf16, f16 or f32).
struct RopeCacheUpdateArgs {
  TensorRef kvC;
  TensorRef kPe;
  TensorRef slotMapping;
  KVCacheRef cache;
  TensorRef positions;
  TensorRef cosSin;
  RopeStyle style = RopeStyle::NeoX;
  TensorRef qPe;    ///< optional, rotated in place (or from qPeIn)
  TensorRef kPeOut; ///< optional [T, rope]
  TensorRef qPeIn;  ///< optional source of qPe; absent: in place
  TensorRef latentNormWeight;     ///< optional [latent]
  float latentNormEpsilon = 0.0f; ///< > 0 with latentNormWeight
};

/// How a device spreads one decode call over its processors (the result is
/// the same up to rounding). The lengths are device data, so the host cannot
/// choose from them; the caller can, from what it serves.
enum class DecodeSchedule : int {
  /// The device's default (CUDA: per-sequence splits, unless the
  /// MLART_DECODE_BALANCE environment knob says balanced).
  Default = 0,
  /// Every sequence gets the same number of splits, chosen from the block
  /// table's width: best when the lengths are alike (CUDA: the splits of a
  /// sequence merge inside a thread-block cluster).
  PerSequence = 1,
  /// The tiles of all sequences are cut evenly over the processors, read
  /// from the lengths on the device: best for mixed lengths (CUDA:
  /// 1.5-2.8x faster there on the H200, slower for alike lengths;
  /// docs/cuda.md).
  Balanced = 2,
};

/// Absorbed decode attention over the paged cache.
/// q [B, H, latent + rope]; blockTable [B, maxBlocks] i32; seqLens [B] i32;
/// out [B, H, latent]; lse [B, H] f32 (optional, natural log). Rows at or past
/// seqLens[b] are never read. numSplits 0 picks a split-KV heuristic;
/// numSplits > 0 forces per-sequence splits whatever `schedule` says.
inline bool isDecodeSchedule(int v) {
  return v >= int(DecodeSchedule::Default) &&
         v <= int(DecodeSchedule::Balanced);
}

struct DecodeAttentionArgs {
  TensorRef q;
  KVCacheRef cache;
  TensorRef blockTable;
  TensorRef seqLens;
  float softmaxScale = 1.0f;
  TensorRef out;
  TensorRef lse;
  int numSplits = 0;
  DecodeSchedule schedule = DecodeSchedule::Default;
};

/// cacheUpdate({kvC, kPe, slotMapping, cache}) followed by
/// decodeAttention({q, cache, blockTable, seqLens, ...}) over the rows it
/// wrote, as one call: the shapes of both halves are checked before any
/// row is written, so a call refused on its arguments changes nothing.
struct DecodeAttentionWithUpdateArgs {
  TensorRef kvC;
  TensorRef kPe;
  TensorRef slotMapping;
  TensorRef q;
  KVCacheRef cache;
  TensorRef blockTable;
  TensorRef seqLens;
  float softmaxScale = 1.0f;
  TensorRef out;
  TensorRef lse;
  int numSplits = 0;
  DecodeSchedule schedule = DecodeSchedule::Default;

  CacheUpdateArgs update() const { return {kvC, kPe, slotMapping, cache}; }
  DecodeAttentionArgs attention() const {
    return {q,   cache, blockTable, seqLens, softmaxScale,
            out, lse,   numSplits,  schedule};
  }
};

/// Causal MHA prefill for new tokens with optional cached context
/// (chunked prefill). Requests are packed: queryStartLoc [R + 1] i32.
/// q, k [T, H, nope + rope]; v [T, H, vDim]; out [T, H, vDim]; lse [T, H].
/// Context (all optional together): request r first attends to
/// contextLens[r] cached tokens through blockTable [R, maxBlocks]; their keys
/// are concat(c @ wUK[h]^T, k_pe) and values c @ wUV[h], with
/// wUK [H, nope, latent] and wUV [H, latent, vDim]. New token i of a request
/// sees all its context and new tokens 0..i.
struct PrefillAttentionArgs {
  TensorRef q;
  TensorRef k;
  TensorRef v;
  TensorRef queryStartLoc;
  float softmaxScale = 1.0f;
  TensorRef out;
  TensorRef lse;
  KVCacheRef cache; ///< data == nullptr: no context
  TensorRef blockTable;
  TensorRef contextLens;
  TensorRef wUK;
  TensorRef wUV;
  /// When true, contextLens holds each request's total length after this
  /// step (the compiler's seq_lens) and the context is that minus the
  /// request's new tokens.
  bool lensIncludeNewTokens = false;
  /// An upper bound, known on the host, on every request's cached context
  /// in tokens; 0: none (the block table's capacity bounds it). Serving
  /// engines size block tables for the longest sequence they admit, so
  /// work sized by the capacity is mostly padding: the CUDA tensor-core
  /// route expands min(bound, capacity) context rows per request instead
  /// (vLLM sizes its chunked-prefill workspace from host-side lengths the
  /// same way). A request whose context exceeds the bound is an error
  /// (OutOfRange) on every device, so results never depend on the device.
  int64_t contextLenBound = 0;
};

/// out[b, h, :] = qNope[b, h, :] @ wUK[h]   (wUK [H, nope, latent]).
/// out may be a strided view into the assembled [B, H, latent + rope] query.
struct QAbsorbArgs {
  TensorRef qNope;
  TensorRef wUK;
  TensorRef out;
  /// True when no kernel launched just before this one on the stream
  /// writes wUK (model weights inside a step). A GPU kernel may then
  /// read it before waiting for that kernel (dependent launch). False is
  /// always correct.
  bool staticWeight = false;
};

/// out[b, h, :] = oLatent[b, h, :] @ wUV[h]   (wUV [H, latent, vDim]).
struct VUpArgs {
  TensorRef oLatent;
  TensorRef wUV;
  TensorRef out;
  /// True when no kernel launched just before this one on the stream
  /// writes wUV (model weights inside a step). A GPU kernel may then
  /// read it before waiting for that kernel (dependent launch). False is
  /// always correct.
  bool staticWeight = false;
};

/// The product q_absorb and v_up both compute, out[b, h, :] = x[b, h, :] @
/// w[h]: what Device::perHeadAlgorithmCount and choosePerHeadAlgorithm key
/// their choice on.
struct PerHeadGemmArgs {
  TensorRef x;
  TensorRef w;
  TensorRef out;
};

/// out [B, H, latent + rope] = concat(qLatent, qPe) along the last axis.
struct QConcatArgs {
  TensorRef qLatent;
  TensorRef qPe;
  TensorRef out;
};

/// out = saturate(x / scale) in fp8 e4m3fn; scale is a [] or [1] f32 tensor.
struct QuantizeArgs {
  TensorRef x;
  TensorRef scale;
  TensorRef out;
};

/// out[t] = x[t] / rms(x[t]) * weight;  x, out [T, D], weight [D].
struct RmsNormArgs {
  TensorRef x;
  TensorRef weight;
  float epsilon = 1e-6f;
  TensorRef out;
};

/// out [T, N] = x [T, K] @ weight^T (+ addend), weight [N, K] (PyTorch
/// Linear layout). The optional addend [T, N] has out's dtype and is added
/// before the one rounding to out's dtype (the residual in the GEMM
/// epilogue); it is only read and must not overlap out.
struct LinearArgs {
  TensorRef x;
  TensorRef weight;
  TensorRef out;
  TensorRef addend;
  /// True when no kernel launched just before this one on the stream
  /// writes the weight (model weights inside a step). A GPU kernel may then
  /// read it before waiting for that kernel (dependent launch). False is
  /// always correct.
  bool staticWeight = false;
};

/// out = a + b elementwise; a, b, out [T, D] (the residual connection).
struct AddArgs {
  TensorRef a;
  TensorRef b;
  TensorRef out;
};

/// dst = src elementwise, any strides, same shape and dtype (the
/// instruction copy; a device runs it itself, Device::copyView).
struct CopyArgs {
  TensorRef src;
  TensorRef dst;
};

/// The kernels of one device, one per kernel opcode of mlart/Opcodes.def
/// (KernelLibrary::<method>(const <ArgsType> &, StreamHandle)).
/// Implementations are stateless and thread-safe.
class KernelLibrary {
public:
  virtual ~KernelLibrary() = default;
  virtual const char *name() const = 0;

#define MLART_KERNEL_OPCODE(Enum, Value, name, ArgsType, Flags, Fields,        \
                            method)                                            \
  virtual Status method(const ArgsType &args, StreamHandle stream) const = 0;
#include "mlart/Opcodes.def"
};

/// KernelMethod<Args>::value is the KernelLibrary member that takes Args.
template <typename Args> struct KernelMethod;
#define MLART_KERNEL_OPCODE(Enum, Value, name, ArgsType, Flags, Fields,        \
                            method)                                            \
  template <> struct KernelMethod<ArgsType> {                                  \
    static constexpr auto value = &KernelLibrary::method;                      \
  };
#include "mlart/Opcodes.def"

/// Runs the kernel that takes `args`.
template <typename Args>
Status runKernel(const KernelLibrary &kernels, const Args &args,
                 StreamHandle stream) {
  return (kernels.*KernelMethod<Args>::value)(args, stream);
}

/// The CPU reference kernels (always available).
const KernelLibrary &cpuKernelLibrary();

} // namespace mlart

#endif // MLART_KERNELS_H
