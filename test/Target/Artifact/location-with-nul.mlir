// A NUL byte in a location's file name (mla-ir-fuzzer's campaign) is
// dropped from the instruction's location string, which the format keeps
// NUL-free. mla-translate loads what it wrote before it exits 0.
// RUN: mla-translate %s --mla-to-artifact -o %t.mlaa
// RUN: grep -a -c "mla.rms_norm (ab.mlir:3)" %t.mlaa

func.func @layer(%x: tensor<2x32xf32> {mla.name = "hidden_states"}, %w: tensor<32xf32>) -> tensor<2x32xf32> {
  %0 = mla.rms_norm %x, %w {epsilon = 1.0e-6 : f32} : tensor<2x32xf32>, tensor<32xf32> loc("dir/a\00b.mlir":3:4)
  return %0 : tensor<2x32xf32>
}
