//===- CApiKernels.cpp - C API: kernel entry points over KernelLibrary ----===//
#include "CApiInternal.h"

#include "mlart/Opcode.h"

using namespace mlart;
using mlart::capi::guarded;
using mlart::capi::toCacheRef;
using mlart::capi::toTensorRef;

namespace {
/// Checks the handles of a kernel call and resolves its stream.
Status checkCall(const mlart_device *device, const void *args,
                 const mlart_stream *stream, StreamHandle &handle) {
  if (!device || !args)
    return invalidArgument("device and args must not be NULL");
  return capi::toStreamHandle(*device->device, stream, "kernel call", handle);
}

const KernelLibrary &kernelsOf(const mlart_device *device) {
  return device->device->kernels();
}

void setIntAttr(RopeStyle &m, int v) { m = static_cast<RopeStyle>(v); }
void setIntAttr(int &m, int v) { m = v; }
[[maybe_unused]] void setIntAttr(bool &m, int v) { m = v != 0; }

// fromC(c, a): the fields of a C argument struct, named as in Opcodes.def,
// into the kernel's Args. A template so that only the entry points below
// instantiate it: an opcode whose C struct lacks some of its fields (one
// that was grown later through a _full or _addend struct) converts by hand.
#define MLART_OPERAND(name, member, ranks, dtypes, use)                        \
  MLART_RETURN_IF_ERROR(toTensorRef(c.name, #name, a.member));
// A NULL optional cache means "no cache": a.cache stays empty.
#define MLART_CACHE(use)                                                       \
  if (CacheUse::use != CacheUse::OptRead || c.cache)                           \
    MLART_RETURN_IF_ERROR(toCacheRef(c.cache, a.cache));
#define MLART_FLOAT_ATTR(name, member, check) a.member = c.name;
#define MLART_INT_ATTR(name, member, check) setIntAttr(a.member, c.name);
#define MLART_KERNEL_OPCODE(Enum, Value, name, ArgsType, Flags, Fields,        \
                            method)                                            \
  template <typename C> Status fromC(const C &c, ArgsType &a) {                \
    Fields return Status::success();                                           \
  }
#include "mlart/Opcodes.def"
#undef MLART_OPERAND
#undef MLART_CACHE
#undef MLART_FLOAT_ATTR
#undef MLART_INT_ATTR

/// A kernel entry point whose C struct holds exactly its opcode's fields.
template <typename Args, typename C>
mlart_status callKernel(mlart_device *device, const C *args,
                        mlart_stream *stream) {
  return guarded([&]() -> Status {
    StreamHandle h;
    MLART_RETURN_IF_ERROR(checkCall(device, args, stream, h));
    Args a;
    MLART_RETURN_IF_ERROR(fromC(*args, a));
    return runKernel(kernelsOf(device), a, h);
  });
}

/// The operands both prefill entry points have.
Status toPrefillAttentionArgs(const mlart_prefill_attention_args *args,
                              PrefillAttentionArgs &a) {
  MLART_RETURN_IF_ERROR(toTensorRef(args->q, "q", a.q));
  MLART_RETURN_IF_ERROR(toTensorRef(args->k, "k", a.k));
  MLART_RETURN_IF_ERROR(toTensorRef(args->v, "v", a.v));
  MLART_RETURN_IF_ERROR(toTensorRef(args->query_start_loc,
                                    "query_start_loc", a.queryStartLoc));
  a.softmaxScale = args->softmax_scale;
  MLART_RETURN_IF_ERROR(toTensorRef(args->out, "out", a.out));
  MLART_RETURN_IF_ERROR(toTensorRef(args->lse, "lse", a.lse));
  // A NULL cache means "no cached context": leave a.cache empty.
  if (args->cache)
    MLART_RETURN_IF_ERROR(toCacheRef(args->cache, a.cache));
  MLART_RETURN_IF_ERROR(
      toTensorRef(args->block_table, "block_table", a.blockTable));
  MLART_RETURN_IF_ERROR(
      toTensorRef(args->context_lens, "context_lens", a.contextLens));
  MLART_RETURN_IF_ERROR(toTensorRef(args->w_uk, "w_uk", a.wUK));
  MLART_RETURN_IF_ERROR(toTensorRef(args->w_uv, "w_uv", a.wUV));
  return Status::success();
}

} // namespace

extern "C" {

// The entry points whose C structs hold exactly their opcode's fields.
#define MLART_C_ENTRY(name, ArgsType)                                          \
  mlart_status mlart_##name(mlart_device *device,                              \
                            const mlart_##name##_args *args,                   \
                            mlart_stream *stream) {                            \
    return callKernel<ArgsType>(device, args, stream);                         \
  }
MLART_C_ENTRY(cache_update, CacheUpdateArgs)
MLART_C_ENTRY(rope, RopeArgs)
MLART_C_ENTRY(decode_attention, DecodeAttentionArgs)
MLART_C_ENTRY(decode_attention_with_update, DecodeAttentionWithUpdateArgs)
MLART_C_ENTRY(q_absorb, QAbsorbArgs)
MLART_C_ENTRY(v_up, VUpArgs)
MLART_C_ENTRY(q_concat, QConcatArgs)
MLART_C_ENTRY(quantize, QuantizeArgs)
MLART_C_ENTRY(rms_norm, RmsNormArgs)
MLART_C_ENTRY(add, AddArgs)
#undef MLART_C_ENTRY

} // extern "C"

// The rope + cache update, prefill and linear entry points convert by
// hand: their first C structs are frozen (docs/runtime.md, "C API"), and the
// fields added later live in a second struct.
namespace {

/// The operands both rope + cache update entry points have.
Status toRopeCacheUpdateArgs(const mlart_rope_cache_update_args *args,
                             RopeCacheUpdateArgs &a) {
  MLART_RETURN_IF_ERROR(toTensorRef(args->kv_c, "kv_c", a.kvC));
  MLART_RETURN_IF_ERROR(toTensorRef(args->k_pe, "k_pe", a.kPe));
  MLART_RETURN_IF_ERROR(
      toTensorRef(args->slot_mapping, "slot_mapping", a.slotMapping));
  MLART_RETURN_IF_ERROR(toCacheRef(args->cache, a.cache));
  MLART_RETURN_IF_ERROR(toTensorRef(args->positions, "positions",
                                    a.positions));
  MLART_RETURN_IF_ERROR(toTensorRef(args->cos_sin, "cos_sin", a.cosSin));
  a.style = static_cast<RopeStyle>(args->style);
  MLART_RETURN_IF_ERROR(toTensorRef(args->q_pe, "q_pe", a.qPe));
  return toTensorRef(args->k_pe_out, "k_pe_out", a.kPeOut);
}

} // namespace

extern "C" {

mlart_status mlart_rope_cache_update(mlart_device *device,
                                     const mlart_rope_cache_update_args *args,
                                     mlart_stream *stream) {
  return guarded([&]() -> Status {
    StreamHandle h;
    MLART_RETURN_IF_ERROR(checkCall(device, args, stream, h));
    RopeCacheUpdateArgs a;
    MLART_RETURN_IF_ERROR(toRopeCacheUpdateArgs(args, a));
    return kernelsOf(device).ropeCacheUpdate(a, h);
  });
}

mlart_status
mlart_rope_cache_update_full(mlart_device *device,
                             const mlart_rope_cache_update_full_args *args,
                             mlart_stream *stream) {
  return guarded([&]() -> Status {
    StreamHandle h;
    MLART_RETURN_IF_ERROR(checkCall(device, args, stream, h));
    RopeCacheUpdateArgs a;
    MLART_RETURN_IF_ERROR(toRopeCacheUpdateArgs(&args->base, a));
    MLART_RETURN_IF_ERROR(toTensorRef(args->q_pe_in, "q_pe_in", a.qPeIn));
    MLART_RETURN_IF_ERROR(toTensorRef(args->latent_norm_weight,
                                      "latent_norm_weight",
                                      a.latentNormWeight));
    a.latentNormEpsilon = args->latent_norm_epsilon;
    return kernelsOf(device).ropeCacheUpdate(a, h);
  });
}

mlart_status mlart_prefill_attention(mlart_device *device,
                                     const mlart_prefill_attention_args *args,
                                     mlart_stream *stream) {
  return guarded([&]() -> Status {
    StreamHandle h;
    MLART_RETURN_IF_ERROR(checkCall(device, args, stream, h));
    PrefillAttentionArgs a;
    MLART_RETURN_IF_ERROR(toPrefillAttentionArgs(args, a));
    return kernelsOf(device).prefillAttention(a, h);
  });
}

mlart_status
mlart_prefill_attention_full(mlart_device *device,
                             const mlart_prefill_attention_full_args *args,
                             mlart_stream *stream) {
  return guarded([&]() -> Status {
    StreamHandle h;
    MLART_RETURN_IF_ERROR(checkCall(device, args, stream, h));
    PrefillAttentionArgs a;
    MLART_RETURN_IF_ERROR(toPrefillAttentionArgs(&args->base, a));
    a.lensIncludeNewTokens = args->lens_include_new_tokens != 0;
    a.contextLenBound = args->context_len_bound;
    return kernelsOf(device).prefillAttention(a, h);
  });
}

} // extern "C": C++ helpers below have C++ linkage

namespace {

/// x, weight and out, the operands both linear entry points have.
Status toLinearArgs(const mlart_tensor &x, const mlart_tensor &weight,
                    const mlart_tensor &out, LinearArgs &a) {
  MLART_RETURN_IF_ERROR(toTensorRef(x, "x", a.x));
  MLART_RETURN_IF_ERROR(toTensorRef(weight, "weight", a.weight));
  return toTensorRef(out, "out", a.out);
}

} // namespace

extern "C" {

mlart_status mlart_linear(mlart_device *device, const mlart_linear_args *args,
                          mlart_stream *stream) {
  return guarded([&]() -> Status {
    StreamHandle h;
    MLART_RETURN_IF_ERROR(checkCall(device, args, stream, h));
    LinearArgs a;
    MLART_RETURN_IF_ERROR(toLinearArgs(args->x, args->weight, args->out, a));
    return kernelsOf(device).linear(a, h);
  });
}

mlart_status mlart_linear_addend(mlart_device *device,
                                 const mlart_linear_addend_args *args,
                                 mlart_stream *stream) {
  return guarded([&]() -> Status {
    StreamHandle h;
    MLART_RETURN_IF_ERROR(checkCall(device, args, stream, h));
    LinearArgs a;
    MLART_RETURN_IF_ERROR(toLinearArgs(args->x, args->weight, args->out, a));
    MLART_RETURN_IF_ERROR(toTensorRef(args->addend, "addend", a.addend));
    return kernelsOf(device).linear(a, h);
  });
}

} // extern "C"
