// RUN: mla-opt %s | mla-opt | FileCheck %s
// RUN: mla-opt %s -mlir-print-op-generic | mla-opt | FileCheck %s

// Every layout and parameter of !mla.kv_cache survives printing and parsing;
// defaults (latent 512, rope 64, plain) are elided.

// CHECK-LABEL: func.func private @plain_bf16(!mla.kv_cache<?x64xbf16>)
func.func private @plain_bf16(!mla.kv_cache<?x64xbf16, latent = 512, rope = 64, plain>)

// CHECK-LABEL: func.func private @static_f32(!mla.kv_cache<128x16xf32, latent = 256>)
func.func private @static_f32(!mla.kv_cache<128x16xf32, latent = 256>)

// CHECK-LABEL: func.func private @f16_rope128(!mla.kv_cache<8x64xf16, rope = 128>)
func.func private @f16_rope128(!mla.kv_cache<8x64xf16, rope = 128>)

// CHECK-LABEL: func.func private @fp8_per_tensor(!mla.kv_cache<?x64xf8E4M3FN, per_tensor>)
func.func private @fp8_per_tensor(!mla.kv_cache<?x64xf8E4M3FN, per_tensor>)

// CHECK-LABEL: func.func private @fp8_e5m2_per_tensor(!mla.kv_cache<?x64xf8E5M2, per_tensor>)
func.func private @fp8_e5m2_per_tensor(!mla.kv_cache<?x64xf8E5M2, per_tensor>)

// CHECK-LABEL: func.func private @fp8_ds_mla(!mla.kv_cache<4096x64xf8E4M3FN, fp8_ds_mla>)
func.func private @fp8_ds_mla(!mla.kv_cache<4096x64xf8E4M3FN, fp8_ds_mla>)

// The discardable attributes of the dialect.
// CHECK-LABEL: func.func private @marked(!mla.kv_cache<?x16xbf16> {mla.noalias}) attributes {mla.dummy_run}
func.func private @marked(!mla.kv_cache<?x16xbf16> {mla.noalias}) attributes {mla.dummy_run}

// CHECK-LABEL: func.func private @named(tensor<4xi64> {mla.name = "positions"}) -> (tensor<4x2048xbf16> {mla.name = "hidden_states"})
func.func private @named(tensor<4xi64> {mla.name = "positions"}) -> (tensor<4x2048xbf16> {mla.name = "hidden_states"})
