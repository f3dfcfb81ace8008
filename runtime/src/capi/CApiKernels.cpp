//===- CApiKernels.cpp - C API: kernel entry points over KernelLibrary ----===//
#include "CApiInternal.h"

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

mlart_status mlart_cache_update(mlart_device *device,
                                const mlart_cache_update_args *args,
                                mlart_stream *stream) {
  return guarded([&]() -> Status {
    StreamHandle h;
    MLART_RETURN_IF_ERROR(checkCall(device, args, stream, h));
    CacheUpdateArgs a;
    MLART_RETURN_IF_ERROR(toTensorRef(args->kv_c, "kv_c", a.kvC));
    MLART_RETURN_IF_ERROR(toTensorRef(args->k_pe, "k_pe", a.kPe));
    MLART_RETURN_IF_ERROR(
        toTensorRef(args->slot_mapping, "slot_mapping", a.slotMapping));
    MLART_RETURN_IF_ERROR(toCacheRef(args->cache, a.cache));
    return kernelsOf(device).cacheUpdate(a, h);
  });
}

mlart_status mlart_rope(mlart_device *device, const mlart_rope_args *args,
                        mlart_stream *stream) {
  return guarded([&]() -> Status {
    StreamHandle h;
    MLART_RETURN_IF_ERROR(checkCall(device, args, stream, h));
    RopeArgs a;
    MLART_RETURN_IF_ERROR(toTensorRef(args->x, "x", a.x));
    MLART_RETURN_IF_ERROR(toTensorRef(args->positions, "positions",
                                      a.positions));
    MLART_RETURN_IF_ERROR(toTensorRef(args->cos_sin, "cos_sin", a.cosSin));
    a.style = static_cast<RopeStyle>(args->style);
    return kernelsOf(device).rope(a, h);
  });
}

} // extern "C": C++ helpers below have C++ linkage

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

mlart_status mlart_decode_attention(mlart_device *device,
                                    const mlart_decode_attention_args *args,
                                    mlart_stream *stream) {
  return guarded([&]() -> Status {
    StreamHandle h;
    MLART_RETURN_IF_ERROR(checkCall(device, args, stream, h));
    DecodeAttentionArgs a;
    MLART_RETURN_IF_ERROR(toTensorRef(args->q, "q", a.q));
    MLART_RETURN_IF_ERROR(toCacheRef(args->cache, a.cache));
    MLART_RETURN_IF_ERROR(
        toTensorRef(args->block_table, "block_table", a.blockTable));
    MLART_RETURN_IF_ERROR(toTensorRef(args->seq_lens, "seq_lens", a.seqLens));
    a.softmaxScale = args->softmax_scale;
    MLART_RETURN_IF_ERROR(toTensorRef(args->out, "out", a.out));
    MLART_RETURN_IF_ERROR(toTensorRef(args->lse, "lse", a.lse));
    a.numSplits = args->num_splits;
    return kernelsOf(device).decodeAttention(a, h);
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

mlart_status mlart_q_absorb(mlart_device *device,
                            const mlart_q_absorb_args *args,
                            mlart_stream *stream) {
  return guarded([&]() -> Status {
    StreamHandle h;
    MLART_RETURN_IF_ERROR(checkCall(device, args, stream, h));
    QAbsorbArgs a;
    MLART_RETURN_IF_ERROR(toTensorRef(args->q_nope, "q_nope", a.qNope));
    MLART_RETURN_IF_ERROR(toTensorRef(args->w_uk, "w_uk", a.wUK));
    MLART_RETURN_IF_ERROR(toTensorRef(args->out, "out", a.out));
    return kernelsOf(device).qAbsorb(a, h);
  });
}

mlart_status mlart_v_up(mlart_device *device, const mlart_v_up_args *args,
                        mlart_stream *stream) {
  return guarded([&]() -> Status {
    StreamHandle h;
    MLART_RETURN_IF_ERROR(checkCall(device, args, stream, h));
    VUpArgs a;
    MLART_RETURN_IF_ERROR(toTensorRef(args->o_latent, "o_latent", a.oLatent));
    MLART_RETURN_IF_ERROR(toTensorRef(args->w_uv, "w_uv", a.wUV));
    MLART_RETURN_IF_ERROR(toTensorRef(args->out, "out", a.out));
    return kernelsOf(device).vUp(a, h);
  });
}

mlart_status mlart_q_concat(mlart_device *device,
                            const mlart_q_concat_args *args,
                            mlart_stream *stream) {
  return guarded([&]() -> Status {
    StreamHandle h;
    MLART_RETURN_IF_ERROR(checkCall(device, args, stream, h));
    QConcatArgs a;
    MLART_RETURN_IF_ERROR(toTensorRef(args->q_latent, "q_latent", a.qLatent));
    MLART_RETURN_IF_ERROR(toTensorRef(args->q_pe, "q_pe", a.qPe));
    MLART_RETURN_IF_ERROR(toTensorRef(args->out, "out", a.out));
    return kernelsOf(device).qConcat(a, h);
  });
}

mlart_status mlart_quantize(mlart_device *device,
                            const mlart_quantize_args *args,
                            mlart_stream *stream) {
  return guarded([&]() -> Status {
    StreamHandle h;
    MLART_RETURN_IF_ERROR(checkCall(device, args, stream, h));
    QuantizeArgs a;
    MLART_RETURN_IF_ERROR(toTensorRef(args->x, "x", a.x));
    MLART_RETURN_IF_ERROR(toTensorRef(args->scale, "scale", a.scale));
    MLART_RETURN_IF_ERROR(toTensorRef(args->out, "out", a.out));
    return kernelsOf(device).quantize(a, h);
  });
}

mlart_status mlart_rms_norm(mlart_device *device,
                            const mlart_rms_norm_args *args,
                            mlart_stream *stream) {
  return guarded([&]() -> Status {
    StreamHandle h;
    MLART_RETURN_IF_ERROR(checkCall(device, args, stream, h));
    RmsNormArgs a;
    MLART_RETURN_IF_ERROR(toTensorRef(args->x, "x", a.x));
    MLART_RETURN_IF_ERROR(toTensorRef(args->weight, "weight", a.weight));
    a.epsilon = args->epsilon;
    MLART_RETURN_IF_ERROR(toTensorRef(args->out, "out", a.out));
    return kernelsOf(device).rmsNorm(a, h);
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

mlart_status mlart_add(mlart_device *device, const mlart_add_args *args,
                       mlart_stream *stream) {
  return guarded([&]() -> Status {
    StreamHandle h;
    MLART_RETURN_IF_ERROR(checkCall(device, args, stream, h));
    AddArgs a;
    MLART_RETURN_IF_ERROR(toTensorRef(args->a, "a", a.a));
    MLART_RETURN_IF_ERROR(toTensorRef(args->b, "b", a.b));
    MLART_RETURN_IF_ERROR(toTensorRef(args->out, "out", a.out));
    return kernelsOf(device).add(a, h);
  });
}

} // extern "C"
