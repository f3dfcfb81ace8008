//===- CodegenTest.cpp - Contract of compiler-generated kernels -----------===//
//
// codegenEntryParams reads the parameter count of a PTX entry; the launcher
// refuses a generated kernel whose count is not kCodegenParams, so a kernel
// of another argument binding (an old artifact) never runs.
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
  EXPECT_EQ(kCodegenParams, 63);
  const std::string ptx = "//\n.version 8.0\n.target sm_90a\n" +
                          entry("k_old", 57) + entry("k", kCodegenParams) +
                          entry("k_none", 0);
  EXPECT_EQ(codegenEntryParams(ptx, "k"), kCodegenParams);
  EXPECT_EQ(codegenEntryParams(ptx, "k_old"), 57);
  EXPECT_EQ(codegenEntryParams(ptx, "k_none"), 0);
  // Names are matched whole: "k_" is no entry, and the parameters of the
  // next entry are never counted.
  EXPECT_EQ(codegenEntryParams(ptx, "k_"), -1);
  EXPECT_EQ(codegenEntryParams(ptx, "missing"), -1);
  EXPECT_EQ(codegenEntryParams("", "k"), -1);
  // A cut-off parameter list is no entry.
  EXPECT_EQ(codegenEntryParams(".entry k(\n\t.param .u64 k_param_0", "k"), -1);
}

} // namespace
} // namespace mlart
