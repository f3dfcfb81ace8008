//===- Artifact.h - A loaded, fully validated MLAA step program -----------===//
//
// An artifact is the program of one step with static shapes, produced by the
// compiler (mla-translate) through ArtifactWriter and run by the Executor:
// buffer declarations bound by name, KV-cache declarations, one scratch
// arena, strided views of those, and a list of kernel instructions. The byte
// format ("MLAA", docs/artifact.md) is decoded and validated completely by
// Artifact::load; a loaded Artifact is known to be internally consistent
// (every index in range, every view inside its base, every instruction with
// the operands its kernel needs), so the executor only checks bindings.
//
//===----------------------------------------------------------------------===//
#ifndef MLART_ARTIFACT_H
#define MLART_ARTIFACT_H

#include "mlart/DType.h"
#include "mlart/KVCacheLayout.h"
#include "mlart/Kernels.h"
#include "mlart/Opcode.h"
#include "mlart/RopeTable.h"
#include "mlart/StatusOr.h"
#include "mlart/TensorRef.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace mlart {

/// Version of the MLAA format this runtime reads and writes.
constexpr uint32_t kArtifactVersion = 4;
/// Marks an absent index (optional operand, no cache, no string).
constexpr uint32_t kNoIndex = 0xFFFFFFFFu;
/// Operand slots of one instruction.
constexpr int kMaxOperands = 10;

/// What a function argument is; the executor treats them alike except that
/// no instruction may write a Weight buffer (checked at load).
enum class BufferRole : uint8_t {
  Input = 0,
  Output = 1,
  Weight = 2,
  StepMetadata = 3, ///< slot mapping, positions, block table, sequence lengths
};
/// Stable name: "input", "output", "weight", "step_metadata".
const char *bufferRoleName(BufferRole role);

/// A function argument: bound by name to caller memory of exactly this
/// dtype and (contiguous, row-major) shape.
struct BufferDecl {
  std::string name;
  BufferRole role = BufferRole::Input;
  DType dtype = DType::F32;
  int rank = 0;
  int64_t sizes[kMaxRank] = {0, 0, 0, 0};

  int64_t numElements() const;
  /// numElements() * dtypeSize(dtype).
  int64_t sizeBytes() const;
  /// The packed row-major view of this declaration at `data` (how the
  /// executor expects a bound buffer).
  TensorRef view(void *data) const;
};

/// A paged KV cache argument: bound by name to a cache of exactly this desc.
struct CacheDecl {
  std::string name;
  KVCacheDesc desc;
  /// An Fp8PerTensor cache's scale: the index of a rank-0 f32 weight or
  /// input buffer whose value every instruction on this cache uses (vLLM's
  /// k_scale; the kernels read it when they run, so a recalibrated scale
  /// needs neither a recompile nor a rebind). kNoIndex: the bound cache's
  /// own scale (KVCacheRef::scale or scaleTensor).
  uint32_t scaleBuffer = kNoIndex;
};

/// How a rope table argument's values are computed (the compiler's
/// `#mla.rope_table`): what a runner fills when the caller gives no table.
struct RopeTableDecl {
  /// Index of a [max_position, rope] f32 input or weight buffer.
  uint32_t buffer = kNoIndex;
  RopeTableParams params;
};

/// What a view reads or writes: a declared buffer, the scratch arena, or
/// the prepared arena (bytes the prepare program derives from the weights
/// once per binding, e.g. two projections' weights concatenated; read-only
/// to the step).
enum class ViewBase : uint8_t { Buffer = 0, Arena = 1, Prepared = 2 };

/// A strided window of a buffer or of the arena; what a kernel operand is.
struct ViewDecl {
  ViewBase base = ViewBase::Arena;
  /// Buffer index for ViewBase::Buffer, 0 for either arena.
  uint32_t baseIndex = 0;
  int64_t byteOffset = 0;
  DType dtype = DType::F32;
  int rank = 0;
  int64_t sizes[kMaxRank] = {0, 0, 0, 0};
  /// In elements, >= 0.
  int64_t strides[kMaxRank] = {0, 0, 0, 0};

  /// The TensorRef of this view when its base starts at `baseAddress`.
  TensorRef resolve(void *baseAddress) const;
  /// The bytes [first, end) of its base the view spans (from the first to
  /// past the last element it reaches); empty when a size is 0.
  std::pair<int64_t, int64_t> byteExtent() const;
};

/// One step of the program. Operand slots hold view indices (kNoIndex for
/// an absent optional operand) in the order mlart/Opcodes.def lists for the
/// opcode; the two scalar attributes, and whether there is a cache, are
/// declared there too (zero where an opcode has none).
struct Instruction {
  Opcode opcode = Opcode::Copy;
  std::array<uint32_t, kMaxOperands> operands;
  /// Cache index, or kNoIndex.
  uint32_t cache = kNoIndex;
  float floatAttr = 0.0f;
  int32_t intAttr = 0;
  /// Source location for diagnostics and timing tables; may be empty.
  std::string location;
  /// Compiler-generated kernel (index into Artifact::kernels()) that
  /// implements this instruction, or kNoIndex for the library kernel. Only
  /// cache_update and rope_cache_update may name one (docs/codegen.md).
  uint32_t kernel = kNoIndex;

  Instruction() { operands.fill(kNoIndex); }
};

/// A PTX module produced by the compiler (mla-outline-cache-kernels +
/// MLIR's NVVM pipeline), shared by the kernels it defines.
struct CodegenModule {
  std::string ptx;
  /// fnv1a64 of the text: the key under which devices cache the loaded
  /// module.
  uint64_t hash = 0;
};

/// A compiler-generated kernel: an entry of a CodegenModule implementing
/// one opcode with the argument binding and launch geometry of
/// docs/codegen.md. Grid: ceil(tokens / tokensPerBlock) blocks of
/// blockThreads threads.
struct CodegenKernel {
  std::string name;
  Opcode op = Opcode::CacheUpdate;
  uint32_t blockThreads = 0;
  uint32_t tokensPerBlock = 0;
  /// Index into Artifact::modules().
  uint32_t module = 0;
};

/// A validated MLAA program. Cheap to copy (a few small vectors).
class Artifact {
public:
  /// Decodes and validates `size` bytes. Truncated or corrupted input
  /// (bad magic, length, checksum, section framing) is DataLoss; an
  /// unsupported version or an inconsistent program is InvalidArgument.
  /// Never reads outside [data, data + size).
  static StatusOr<Artifact> load(const void *data, size_t size);
  /// Artifacts hold a program, not weights: far below this.
  static constexpr uint64_t kDefaultMaxFileBytes = uint64_t(1) << 30;
  /// Reads a whole regular file of at most `maxBytes` and loads it
  /// (readRegularFile's errors: a directory, FIFO or device is refused).
  static StatusOr<Artifact> loadFile(const std::string &path,
                                     uint64_t maxBytes = kDefaultMaxFileBytes);

  const std::string &functionName() const { return functionName_; }
  int64_t arenaBytes() const { return arenaBytes_; }
  /// Size of the prepared arena (0: the artifact has no prepare program).
  int64_t preparedBytes() const { return preparedBytes_; }
  const std::vector<BufferDecl> &buffers() const { return buffers_; }
  const std::vector<CacheDecl> &caches() const { return caches_; }
  const std::vector<ViewDecl> &views() const { return views_; }
  const std::vector<Instruction> &instructions() const { return instructions_; }
  /// The prepare program: copies that fill the prepared arena from weight
  /// buffers. The executor runs it before the first step after weights are
  /// bound (Executor::prepare); the step only reads what it wrote.
  const std::vector<Instruction> &prepareInstructions() const {
    return prepareInstructions_;
  }
  /// Compiler-generated kernels and their PTX modules (both empty when every
  /// instruction uses the kernel library).
  const std::vector<CodegenModule> &modules() const { return modules_; }
  const std::vector<CodegenKernel> &kernels() const { return kernels_; }
  /// How the rope table arguments are computed, at most one record per
  /// buffer (empty for artifacts whose compiler recorded none).
  const std::vector<RopeTableDecl> &ropeTables() const { return ropeTables_; }
  /// The parameters of buffer `buffer`'s rope table, or null.
  const RopeTableParams *ropeTableOf(uint32_t buffer) const;

  /// Index of the buffer / cache called `name`, or -1.
  int findBuffer(const std::string &name) const;
  int findCache(const std::string &name) const;

  /// "#3 decode_attention (layer0.attn)": how diagnostics name instruction i.
  std::string describeInstruction(size_t i) const;

private:
  friend class ArtifactParser;
  std::string functionName_;
  int64_t arenaBytes_ = 0;
  int64_t preparedBytes_ = 0;
  std::vector<BufferDecl> buffers_;
  std::vector<CacheDecl> caches_;
  std::vector<ViewDecl> views_;
  std::vector<Instruction> instructions_;
  std::vector<Instruction> prepareInstructions_;
  std::vector<CodegenModule> modules_;
  std::vector<CodegenKernel> kernels_;
  std::vector<RopeTableDecl> ropeTables_;
};

/// FNV-1a 64 of `size` bytes: the MLAA checksum.
uint64_t fnv1a64(const void *data, size_t size);

} // namespace mlart

#endif // MLART_ARTIFACT_H
