// Bad options and bad kernel marks are located errors, never crashes.
//
// RUN: mla-opt %s -split-input-file -verify-diagnostics
// RUN: echo 'module {}' | not mla-opt -mla-outline-cache-kernels=tokens-per-block=0 2>&1 | FileCheck %s --check-prefix=OPT
// RUN: echo 'module {}' | not mla-opt -mla-outline-cache-kernels=tokens-per-block=64 2>&1 | FileCheck %s --check-prefix=OPT
// OPT: tokens-per-block must be in [1, 32]
// RUN: echo 'module {}' | not mla-opt -mla-outline-cache-kernels=min-blocks-per-sm=33 2>&1 | FileCheck %s --check-prefix=MINB
// MINB: min-blocks-per-sm must be in [0, 32], got 33

func.func @bad_geometry(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>, %cache: !mla.kv_cache<?x64xbf16>) {
  // expected-error @below {{'mla.kernel' has a bad launch geometry (100 threads, 8 tokens per block)}}
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache {mla.kernel = {symbol = @mla_kernels::@k, block_threads = 100 : i32, tokens_per_block = 8 : i32}} : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>
  return
}

// -----

func.func @not_a_dict(%kv_c: tensor<4x512xbf16>, %k_pe: tensor<4x64xbf16>, %slots: tensor<4xi64>, %cache: !mla.kv_cache<?x64xbf16>) {
  // expected-error @below {{'mla.kernel' must be {symbol = @module::@kernel, block_threads = N, tokens_per_block = M}}}
  mla.kv_cache_update %kv_c, %k_pe, %slots into %cache {mla.kernel = @k} : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi64> into !mla.kv_cache<?x64xbf16>
  return
}

// -----

// expected-error @below {{'mla.kernel' is only valid on cache-write ops}}
func.func @on_a_function() attributes {mla.kernel = {symbol = @m::@k, block_threads = 64 : i32, tokens_per_block = 1 : i32}} {
  return
}
