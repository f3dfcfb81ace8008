//===- CodegenTest.cpp - Contract of compiler-generated kernels -----------===//
//
// codegenEntryParams reads the parameter count of a PTX entry; the launcher
// refuses a generated kernel whose count is not kCodegenParams (or the
// binding before the latent norm, kCodegenParamsBeforeNorm), so a kernel
// of another argument binding (an old artifact) never runs.
// codegenEntryWaitsForGrids decides whether a generated kernel may be
// launched with programmatic dependent launch: only when its body waits
// for the previous grid before any access that may reach global memory.
//
//===----------------------------------------------------------------------===//
#include "mlart/Codegen.h"

#include <gtest/gtest.h>

namespace mlart {
namespace {

/// A PTX module defining `.entry name` with `n` u64 parameters, in the form
/// MLIR's NVPTX backend prints.
std::string entry(const std::string &name, int n) {
  std::string s = ".visible .entry " + name + "(\n";
  for (int i = 0; i < n; ++i)
    s += "\t.param .u64 .ptr .global .align 1 " + name + "_param_" +
         std::to_string(i) + (i + 1 < n ? ",\n" : "\n");
  return s + ")\n.maxntid 576, 1, 1\n{\n\tret;\n}\n";
}

TEST(CodegenContract, EntryParams) {
  // 11 memrefs of 5 parameters, 15 scalars, then the latent norm's weight
  // memref and epsilon (70 before the norm, which the launcher still runs;
  // 63 before q_pe_in, 57 before that).
  EXPECT_EQ(kCodegenParams, 76);
  EXPECT_EQ(kCodegenParamsBeforeNorm, 70);
  const std::string ptx = "//\n.version 8.0\n.target sm_90a\n" +
                          entry("k_old", 57) + entry("k_63", 63) +
                          entry("k", kCodegenParams) + entry("k_none", 0);
  EXPECT_EQ(codegenEntryParams(ptx, "k"), kCodegenParams);
  EXPECT_EQ(codegenEntryParams(ptx, "k_old"), 57);
  EXPECT_EQ(codegenEntryParams(ptx, "k_63"), 63);
  EXPECT_EQ(codegenEntryParams(ptx, "k_none"), 0);
  // Names are matched whole: "k_" is no entry, and the parameters of the
  // next entry are never counted.
  EXPECT_EQ(codegenEntryParams(ptx, "k_"), -1);
  EXPECT_EQ(codegenEntryParams(ptx, "missing"), -1);
  EXPECT_EQ(codegenEntryParams("", "k"), -1);
  // A cut-off parameter list is no entry.
  EXPECT_EQ(codegenEntryParams(".entry k(\n\t.param .u64 k_param_0", "k"), -1);
}

// The latent norm and its weight type are part of a kernel's name, so a
// kernel never runs with or without a norm it was not generated for.
TEST(CodegenContract, NamesCarryTheLatentNorm) {
  CodegenSignature s;
  s.op = Opcode::RopeCacheUpdate;
  s.latentRank = 512;
  s.ropeDim = 64;
  const std::string plain = codegenKernelName(s);
  EXPECT_EQ(plain, "mla_rope_cache_update_plain_bf16_l512_p64_in_bf16_slot_i64"
                   "_neox_pos_i64");
  s.latentNorm = true;
  EXPECT_EQ(codegenKernelName(s), plain + "_norm_bf16");
  s.normWeight = DType::F32;
  EXPECT_EQ(codegenKernelName(s), plain + "_norm_f32");
  // cache_update has no norm: the flag does not reach its name.
  s.op = Opcode::CacheUpdate;
  EXPECT_EQ(codegenKernelName(s).find("norm"), std::string::npos);
}

/// `.entry name` with one parameter and the given body lines.
std::string body(const std::string &name, const std::string &lines) {
  return ".visible .entry " + name + "(\n\t.param .u64 " + name +
         "_param_0\n)\n.maxntid 544, 1, 1\n{\n\t.reg .b64 %rd<4>;\n" + lines +
         "\tret;\n}\n";
}

TEST(CodegenContract, EntryWaitsForGrids) {
  const std::string params = "\tld.param.b64 %rd1, [k_param_0];\n";
  const std::string wait = "\tgriddepcontrol.wait;\n"
                           "\tgriddepcontrol.launch_dependents;\n";
  const std::string load = "\tld.global.v4.b32 {%r1, %r2, %r3, %r4}, [%rd1];\n";
  auto waits = [](const std::string &name, const std::string &lines) {
    return codegenEntryWaitsForGrids(body(name, lines), name);
  };
  // What the compiler emits: parameter loads, the wait, then the work.
  EXPECT_TRUE(waits("k", params + wait + load));
  // Shared and local memory and scoped blocks before the wait are fine.
  EXPECT_TRUE(waits("k", params + "\tst.shared.b32 [%r1], %r2;\n"
                                  "\t{\n\t.reg .pred %p9;\n\t}\n"
                                  "\tld.local.b32 %r3, [%rd2];\n" +
                             wait + load));
  // No wait (an artifact from before), or a wait after global accesses:
  // loads, stores, atomics, reductions, generic loads, cp.async, also
  // predicated or after a label.
  EXPECT_FALSE(waits("k", params + load));
  for (const char *access :
       {"\tld.global.b32 %r1, [%rd1];\n", "\tst.global.b32 [%rd1], %r1;\n",
        "\tatom.global.min.s32 %r1, [%rd1], %r2;\n",
        "\tred.global.add.u32 [%rd1], %r2;\n", "\tld.b32 %r1, [%rd1];\n",
        "\tcp.async.ca.shared.global [%r1], [%rd1], 16;\n",
        "\t@%p1 ld.global.b32 %r1, [%rd1];\n",
        "$L__BB0_1:\n\tld.global.b32 %r1, [%rd1];\n"})
    EXPECT_FALSE(waits("k", params + access + wait)) << access;
  // A barrier reduction is no global access; a comment naming the wait is
  // no wait.
  EXPECT_TRUE(waits("k", "\tbar.red.or.pred %p1, 0, %p2;\n" + wait + load));
  EXPECT_FALSE(waits("k", "\t// griddepcontrol.wait;\n" + load + wait));
  // The wait of another entry does not count; names are matched whole.
  const std::string two =
      body("k_plain", params + load) + body("k", wait + load);
  EXPECT_TRUE(codegenEntryWaitsForGrids(two, "k"));
  EXPECT_FALSE(codegenEntryWaitsForGrids(two, "k_plain"));
  EXPECT_FALSE(codegenEntryWaitsForGrids(two, "k_"));
  EXPECT_FALSE(codegenEntryWaitsForGrids("", "k"));
  // A cut-off body is no entry.
  EXPECT_FALSE(codegenEntryWaitsForGrids(
      ".entry k(\n)\n{\n\tgriddepcontrol.wait;\n", "k"));
}

} // namespace
} // namespace mlart
