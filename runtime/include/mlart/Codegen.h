//===- Codegen.h - Contract of compiler-generated cache-write kernels -----===//
//
// The compiler (mla-outline-cache-kernels) generates GPU kernels for cache
// writes and names each after its specialisation; the runtime recomputes
// the name from the operands an instruction actually binds and refuses a
// kernel whose name differs, so a kernel never runs on operands it was not
// generated for. Both sides call codegenKernelName. The argument binding
// and launch geometry are specified in docs/codegen.md.
//
//===----------------------------------------------------------------------===//
#ifndef MLART_CODEGEN_H
#define MLART_CODEGEN_H

#include "mlart/Artifact.h"

#include <string>

namespace mlart {

/// What a generated cache-write kernel is specialised for.
struct CodegenSignature {
  Opcode op = Opcode::CacheUpdate; ///< cache_update or rope_cache_update
  CacheLayout layout = CacheLayout::Plain;
  DType cacheDType = DType::BF16;
  int64_t latentRank = 0;
  int64_t ropeDim = 0;
  DType input = DType::BF16; ///< kv_c and k_pe (and q_pe)
  DType slots = DType::I64;
  // rope_cache_update only:
  RopeStyle style = RopeStyle::NeoX;
  DType positions = DType::I64;
  bool rotatesQ = false;
  /// The latent is RMS-normalised before the write (weight of this dtype).
  bool latentNorm = false;
  DType normWeight = DType::BF16;
};

/// "mla_cache_update_plain_bf16_l512_p64_in_bf16_slot_i64",
/// "mla_rope_cache_update_fp8_ds_mla_f8e4m3fn_l512_p64_in_bf16_slot_i32_neox_pos_i64_q",
/// with a latent norm "..._neox_pos_i64_q_norm_bf16".
std::string codegenKernelName(const CodegenSignature &sig);

/// Parameters of every generated cache-write kernel, in order (MLIR's
/// default memref calling convention: each memref is five parameters,
/// allocated pointer, aligned pointer, offset, size, stride).
/// q_pe_in is the source q_pe is rotated from (q_pe itself when in place).
constexpr int kCodegenMemrefArgs = 11; ///< kv_c k_pe slots cache positions
                                       ///< cos_sin q_pe bad_slot bad_pos
                                       ///< call_failed q_pe_in
constexpr int kCodegenScalarArgs = 15; ///< T N kv_stride kp_stride
                                       ///< slot_stride num_slots pos_stride
                                       ///< cs_stride max_pos q_s0 q_s1 hq
                                       ///< prevalidated q_in_s0 q_in_s1
/// After the scalars: the latent norm's weight (a memref, absent: null) and
/// its epsilon (f32). Kernels generated before the norm existed end before
/// them; the launcher still runs those (they read the first
/// kCodegenParamsBeforeNorm parameters and never normalise).
constexpr int kCodegenNormArgs = 2; ///< latent_norm_weight epsilon
constexpr int kCodegenParamsBeforeNorm =
    kCodegenMemrefArgs * 5 + kCodegenScalarArgs;
/// PTX parameters of every generated kernel.
constexpr int kCodegenParams = kCodegenParamsBeforeNorm + 5 + 1;

/// Number of parameters of `.entry name(...)` in `ptx`, or -1 when the text
/// defines no such entry. The launcher compares it with kCodegenParams so a
/// kernel generated for another argument binding never runs.
int codegenEntryParams(const std::string &ptx, const std::string &name);

/// True when the body of `.entry name` in `ptx` executes
/// `griddepcontrol.wait` before any instruction that may touch global
/// memory (ld / st / atom / red / cp / prefetch outside the param, shared
/// and local spaces). Only such a kernel may be launched with programmatic
/// dependent launch (docs/cuda.md); older artifacts' kernels are not.
bool codegenEntryWaitsForGrids(const std::string &ptx, const std::string &name);

} // namespace mlart

#endif // MLART_CODEGEN_H
