//===- Knobs.cpp - The CUDA backend's environment knobs -------------------===//
#include "cuda/Knobs.h"
#include "cuda/SkinnyGemmPlan.h"

#include <atomic>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>

namespace mlart::cuda {
namespace {

constexpr KnobChoice kOffOn[] = {{"0", 0}, {"1", 1}};
constexpr KnobChoice kDecodeMany[] = {
    {"0", 0}, {"1", 1}, {"2", 2}, {"3", 3},
    {"4", 4}, {"5", 5}, {"6", 6}, {"force", kDecodeManyForce}};
constexpr KnobChoice kUpdateUnroll[] = {{"4", 4}, {"8", 8}, {"16", 16}};
constexpr KnobChoice kUpdateCtas[] = {
    {"0", 0}, {"1", 1}, {"2", 2}, {"4", 4}, {"8", 8}};
constexpr KnobChoice kUpdateHints[] = {{"0", 0}, {"1", 1}, {"2", 2}};
/// 0 the general kernel, 1 the streaming kernel, 2 the bulk-copy kernel.
constexpr KnobChoice kUpdateKernels[] = {{"0", 0}, {"1", 1}, {"2", 2}};
constexpr KnobChoice kUpdateStages[] = {
    {"1", 1}, {"2", 2}, {"3", 3}, {"4", 4}, {"6", 6}};
constexpr KnobChoice kManyVariant[] = {{"0", 0}, {"1", 1}, {"2", 2}};
constexpr KnobChoice kSkinnyVariantChoices[] = {
    {"0", 0}, {"1", 1}, {"2", 2}, {"3", 3}};
static_assert(std::size(kSkinnyVariantChoices) == kSkinnyVariants,
              "one MLART_SKINNY_VARIANT choice per variant");

template <size_t N>
constexpr KnobSpec spec(Knob k, const char *name, int def,
                        const KnobChoice (&choices)[N]) {
  return KnobSpec{k, name, def, choices, int(N)};
}

/// In Knob order; docs/cuda.md ("Environment knobs") mirrors it.
constexpr KnobSpec kKnobs[kKnobCount] = {
    spec(Knob::Pdl, "MLART_PDL", 1, kOffOn),
    spec(Knob::DecodeCluster, "MLART_DECODE_CLUSTER", 1, kOffOn),
    spec(Knob::DecodeVariant, "MLART_DECODE_VARIANT", 1, kOffOn),
    spec(Knob::DecodeMany, "MLART_DECODE_MANY", 1, kDecodeMany),
    spec(Knob::DecodeManyVariant, "MLART_DECODE_MANY_VARIANT", 1, kManyVariant),
    spec(Knob::SkinnyGemm, "MLART_SKINNY_GEMM", 0, kOffOn),
    spec(Knob::SkinnyVariant, "MLART_SKINNY_VARIANT", 0, kSkinnyVariantChoices),
    // On: with concurrent streams the tuned cuBLASLt GEMMs take the V2-Lite
    // step from 119.2-120.1 to 116.0-117.2 us on the H200.
    spec(Knob::GemmLt, "MLART_GEMM_LT", 1, kOffOn),
    spec(Knob::GemmAutotune, "MLART_GEMM_AUTOTUNE", 1, kOffOn),
    // The bulk-copy update kernel: the fastest in the H200 sweep
    // (CacheCopyKernel.h).
    spec(Knob::UpdateKernel, "MLART_UPDATE_KERNEL", 2, kUpdateKernels),
    spec(Knob::UpdateUnroll, "MLART_UPDATE_UNROLL", 8, kUpdateUnroll),
    spec(Knob::UpdateCtasPerSm, "MLART_UPDATE_CTAS_PER_SM", 0, kUpdateCtas),
    spec(Knob::UpdateEarly, "MLART_UPDATE_EARLY", 1, kOffOn),
    spec(Knob::UpdateHints, "MLART_UPDATE_HINTS", 1, kUpdateHints),
    spec(Knob::UpdateStages, "MLART_UPDATE_STAGES", 2, kUpdateStages),
    // 1: a cluster-scope fence and relaxed barriers; 0: cooperative_groups'
    // cluster.sync() (a GPU-scope fence, then the barrier). The merge after
    // the barrier takes 4.16 instead of 4.45 us on the H200.
    spec(Knob::DecodeBarrier, "MLART_DECODE_BARRIER", 1, kOffOn),
    // 1: the 16-head decode cuts the tiles of all sequences evenly over
    // the SMs (DecodeSchedule.h) instead of giving every sequence the same
    // split count; 0: the per-sequence splits and their cluster merge.
    spec(Knob::DecodeBalance, "MLART_DECODE_BALANCE", 0, kOffOn),
    // 1: prefill's new-token attention on the tensor cores where the head
    // shape allows it (PrefillFlash.h); 0: the CUDA-core kernel for all
    // (A/B). 94.7 ms -> 0.49 ms at H=16, T=4096 on an H100.
    spec(Knob::PrefillFlash, "MLART_PREFILL_FLASH", 1, kOffOn),
    // 1: decode_attention_with_update stores the step's rows inside the
    // 16-head decode launch (DecodeStepWrite.h); 0: cacheUpdate's own
    // launch first (A/B).
    spec(Knob::DecodeStepWrite, "MLART_DECODE_STEP_WRITE", 1, kOffOn),
};

constexpr bool inKnobOrder() {
  for (int i = 0; i < kKnobCount; ++i)
    if (int(kKnobs[i].knob) != i)
      return false;
  return true;
}
static_assert(inKnobOrder(), "kKnobs must list the knobs in Knob order");

constexpr int kNoOverride = INT_MIN;
// Constant-initialized (one kNoOverride per knob), so no static
// initialization order can see a zero.
std::atomic<int> overrides[kKnobCount] = {
    kNoOverride, kNoOverride, kNoOverride, kNoOverride, kNoOverride,
    kNoOverride, kNoOverride, kNoOverride, kNoOverride, kNoOverride,
    kNoOverride, kNoOverride, kNoOverride, kNoOverride, kNoOverride,
    kNoOverride, kNoOverride, kNoOverride, kNoOverride};

const KnobValues &environmentKnobs() {
  static const KnobValues values = [] {
    std::string warnings;
    KnobValues v = readKnobs(
        [](const char *name) -> const char * { return std::getenv(name); },
        &warnings);
    if (!warnings.empty())
      std::fputs(warnings.c_str(), stderr);
    return v;
  }();
  return values;
}

} // namespace

const KnobSpec &knobSpec(Knob knob) { return kKnobs[int(knob)]; }

std::optional<Knob> knobByName(std::string_view name) {
  for (const KnobSpec &s : kKnobs)
    if (name == s.name)
      return s.knob;
  return std::nullopt;
}

std::string knobChoicesText(Knob knob) {
  const KnobSpec &s = knobSpec(knob);
  std::string text;
  for (int i = 0; i < s.numChoices; ++i) {
    if (i > 0)
      text += i + 1 == s.numChoices ? " or " : ", ";
    text += s.choices[i].text;
  }
  return text;
}

KnobParse parseKnob(Knob knob, const char *text) {
  const KnobSpec &s = knobSpec(knob);
  if (!text || !*text)
    return {s.defaultValue, false};
  for (int i = 0; i < s.numChoices; ++i)
    if (std::strcmp(text, s.choices[i].text) == 0)
      return {s.choices[i].value, false};
  return {s.defaultValue, true};
}

KnobValues readKnobs(const char *(*lookup)(const char *name),
                     std::string *warnings) {
  KnobValues values{};
  for (const KnobSpec &s : kKnobs) {
    const char *text = lookup(s.name);
    const KnobParse p = parseKnob(s.knob, text);
    values[size_t(s.knob)] = p.value;
    if (p.invalid && warnings)
      *warnings += std::string("mlart: ignoring ") + s.name + "='" + text +
                   "' (expected " + knobChoicesText(s.knob) +
                   "); using the default " + std::to_string(s.defaultValue) +
                   "\n";
  }
  return values;
}

int knobValue(Knob knob) {
  const int o = overrides[int(knob)].load(std::memory_order_relaxed);
  return o != kNoOverride ? o : environmentKnobs()[size_t(knob)];
}

void setKnobOverride(Knob knob, std::optional<int> value) {
  overrides[int(knob)].store(value ? *value : kNoOverride,
                             std::memory_order_relaxed);
}

} // namespace mlart::cuda
