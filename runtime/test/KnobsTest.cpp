//===- KnobsTest.cpp - The CUDA backend's environment knobs (CPU) ---------===//
//
// The knob table and parser (cuda/Knobs.h) are host code: every knob's
// default, every accepted spelling, the spellings that must be refused
// (the default with a warning), the warnings of a whole environment, and
// test overrides. No GPU needed.
//
//===----------------------------------------------------------------------===//
#include "cuda/Knobs.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <iterator>
#include <map>
#include <string>

using namespace mlart::cuda;

namespace {

constexpr Knob kAll[] = {Knob::Pdl,
                         Knob::DecodeCluster,
                         Knob::DecodeVariant,
                         Knob::DecodeMany,
                         Knob::DecodeManyVariant,
                         Knob::SkinnyGemm,
                         Knob::SkinnyVariant,
                         Knob::GemmLt,
                         Knob::GemmAutotune,
                         Knob::UpdateKernel,
                         Knob::UpdateUnroll,
                         Knob::UpdateCtasPerSm,
                         Knob::UpdateEarly,
                         Knob::UpdateHints,
                         Knob::UpdateStages,
                         Knob::DecodeBarrier,
                         Knob::DecodeBalance,
                         Knob::PrefillFlash,
                         Knob::DecodeStepWrite};
static_assert(std::size(kAll) == kKnobCount);

/// The documented defaults (docs/cuda.md, "Environment knobs").
const std::map<std::string, int> kDefaults = {{"MLART_PDL", 1},
                                              {"MLART_DECODE_CLUSTER", 1},
                                              {"MLART_DECODE_VARIANT", 1},
                                              {"MLART_DECODE_MANY", 1},
                                              {"MLART_DECODE_MANY_VARIANT", 1},
                                              {"MLART_SKINNY_GEMM", 0},
                                              {"MLART_SKINNY_VARIANT", 0},
                                              {"MLART_GEMM_LT", 1},
                                              {"MLART_GEMM_AUTOTUNE", 1},
                                              {"MLART_UPDATE_KERNEL", 2},
                                              {"MLART_UPDATE_UNROLL", 8},
                                              {"MLART_UPDATE_CTAS_PER_SM", 0},
                                              {"MLART_UPDATE_EARLY", 1},
                                              {"MLART_UPDATE_HINTS", 1},
                                              {"MLART_UPDATE_STAGES", 2},
                                              {"MLART_DECODE_BARRIER", 1},
                                              {"MLART_DECODE_BALANCE", 0},
                                              {"MLART_PREFILL_FLASH", 1},
                                              {"MLART_DECODE_STEP_WRITE", 1}};

TEST(Knobs, TableNamesAndDefaults) {
  for (Knob k : kAll) {
    const KnobSpec &s = knobSpec(k);
    EXPECT_EQ(s.knob, k);
    ASSERT_TRUE(kDefaults.count(s.name)) << s.name;
    EXPECT_EQ(s.defaultValue, kDefaults.at(s.name)) << s.name;
    EXPECT_EQ(knobByName(s.name), std::optional<Knob>(k)) << s.name;
    // Unset and empty both mean the default, without a warning.
    for (const char *unset : {static_cast<const char *>(nullptr), ""}) {
      const KnobParse p = parseKnob(k, unset);
      EXPECT_EQ(p.value, s.defaultValue) << s.name;
      EXPECT_FALSE(p.invalid) << s.name;
    }
    // The default is one of the choices.
    bool found = false;
    for (int i = 0; i < s.numChoices; ++i)
      found |= s.choices[i].value == s.defaultValue;
    EXPECT_TRUE(found) << s.name;
  }
  EXPECT_EQ(knobByName("MLART_NOT_A_KNOB"), std::nullopt);
  // Removed after two H200 measurements without a gain.
  EXPECT_EQ(knobByName("MLART_DECODE_PREFETCH"), std::nullopt);
  EXPECT_EQ(knobByName("mlart_pdl"), std::nullopt);
  EXPECT_EQ(knobByName(""), std::nullopt);
}

TEST(Knobs, EveryChoiceParses) {
  for (Knob k : kAll) {
    const KnobSpec &s = knobSpec(k);
    for (int i = 0; i < s.numChoices; ++i) {
      const KnobParse p = parseKnob(k, s.choices[i].text);
      EXPECT_EQ(p.value, s.choices[i].value)
          << s.name << "=" << s.choices[i].text;
      EXPECT_FALSE(p.invalid) << s.name << "=" << s.choices[i].text;
    }
  }
}

void expectRefused(Knob k, const char *text) {
  const KnobParse p = parseKnob(k, text);
  EXPECT_TRUE(p.invalid) << knobSpec(k).name << "='" << text << "'";
  EXPECT_EQ(p.value, knobSpec(k).defaultValue)
      << knobSpec(k).name << "='" << text << "'";
}

TEST(Knobs, OnOffKnobs) {
  for (Knob k : {Knob::Pdl, Knob::DecodeCluster, Knob::DecodeVariant,
                 Knob::SkinnyGemm}) {
    EXPECT_EQ(parseKnob(k, "0").value, 0);
    EXPECT_EQ(parseKnob(k, "1").value, 1);
    for (const char *bad :
         {"2", "00", "01", "0 ", " 1", "on", "off", "true", "-1", "1\n"})
      expectRefused(k, bad);
  }
}

TEST(Knobs, DecodeMany) {
  EXPECT_EQ(parseKnob(Knob::DecodeMany, "0").value, 0);
  EXPECT_EQ(parseKnob(Knob::DecodeMany, "force").value, kDecodeManyForce);
  for (int v = 1; v <= 6; ++v)
    EXPECT_EQ(parseKnob(Knob::DecodeMany, std::to_string(v).c_str()).value,
              v);
  for (const char *bad : {"7", "Force", "FORCE", "forced", "force ", "2x",
                          "0x", "-1", "10"})
    expectRefused(Knob::DecodeMany, bad);
  // force is its own value, not a variant 2..6.
  EXPECT_FALSE(kDecodeManyForce >= 0 && kDecodeManyForce <= 6);
}

TEST(Knobs, Variants) {
  for (int v = 0; v <= 2; ++v)
    EXPECT_EQ(
        parseKnob(Knob::DecodeManyVariant, std::to_string(v).c_str()).value,
        v);
  for (const char *bad : {"3", "-1", "12", "1 ", "a"})
    expectRefused(Knob::DecodeManyVariant, bad);
  for (int v = 0; v <= 3; ++v)
    EXPECT_EQ(parseKnob(Knob::SkinnyVariant, std::to_string(v).c_str()).value,
              v);
  for (const char *bad : {"4", "9", "-1", "00", "2 "})
    expectRefused(Knob::SkinnyVariant, bad);
}

TEST(Knobs, ChoicesText) {
  EXPECT_EQ(knobChoicesText(Knob::Pdl), "0 or 1");
  EXPECT_EQ(knobChoicesText(Knob::DecodeManyVariant), "0, 1 or 2");
  EXPECT_EQ(knobChoicesText(Knob::DecodeMany), "0, 1, 2, 3, 4, 5, 6 or force");
}

/// A fake environment for readKnobs.
std::map<std::string, std::string> gFakeEnv;
const char *fakeLookup(const char *name) {
  auto it = gFakeEnv.find(name);
  return it == gFakeEnv.end() ? nullptr : it->second.c_str();
}

TEST(Knobs, ReadKnobsWarnsOncePerInvalidKnob) {
  gFakeEnv = {{"MLART_PDL", "0"},
              {"MLART_DECODE_CLUSTER", "yes"},
              {"MLART_DECODE_MANY", "force"},
              {"MLART_SKINNY_GEMM", ""},
              {"MLART_SKINNY_VARIANT", "7"},
              {"MLART_UNRELATED", "x"}};
  std::string warnings;
  const KnobValues v = readKnobs(fakeLookup, &warnings);
  EXPECT_EQ(v[size_t(Knob::Pdl)], 0);
  EXPECT_EQ(v[size_t(Knob::DecodeCluster)], 1); // refused: the default
  EXPECT_EQ(v[size_t(Knob::DecodeVariant)], 1);
  EXPECT_EQ(v[size_t(Knob::DecodeMany)], kDecodeManyForce);
  EXPECT_EQ(v[size_t(Knob::DecodeManyVariant)], 1);
  EXPECT_EQ(v[size_t(Knob::SkinnyGemm)], 0);
  EXPECT_EQ(v[size_t(Knob::SkinnyVariant)], 0);
  EXPECT_EQ(warnings,
            "mlart: ignoring MLART_DECODE_CLUSTER='yes' (expected 0 or 1); "
            "using the default 1\n"
            "mlart: ignoring MLART_SKINNY_VARIANT='7' (expected 0, 1, 2 or "
            "3); using the default 0\n");

  gFakeEnv.clear();
  warnings.clear();
  const KnobValues d = readKnobs(fakeLookup, &warnings);
  for (Knob k : kAll)
    EXPECT_EQ(d[size_t(k)], knobSpec(k).defaultValue) << knobSpec(k).name;
  EXPECT_EQ(warnings, "");
  // No sink: still parses.
  gFakeEnv = {{"MLART_PDL", "bad"}};
  EXPECT_EQ(readKnobs(fakeLookup, nullptr)[size_t(Knob::Pdl)], 1);
}

TEST(Knobs, OverrideThenEnvironment) {
  for (Knob k : kAll) {
    const int fromEnv = parseKnob(k, std::getenv(knobSpec(k).name)).value;
    EXPECT_EQ(knobValue(k), fromEnv) << knobSpec(k).name;
    const KnobSpec &s = knobSpec(k);
    for (int i = 0; i < s.numChoices; ++i) {
      setKnobOverride(k, s.choices[i].value);
      EXPECT_EQ(knobValue(k), s.choices[i].value) << s.name;
    }
    setKnobOverride(k, std::nullopt);
    EXPECT_EQ(knobValue(k), fromEnv) << knobSpec(k).name;
  }
}

} // namespace
