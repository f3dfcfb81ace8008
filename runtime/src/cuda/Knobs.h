//===- Knobs.h - The CUDA backend's environment knobs (pure C++) ----------===//
//
// Every MLART_* environment variable the CUDA backend reads is one row of
// the table in Knobs.cpp (name, default, accepted spellings) and is parsed
// by parseKnob; docs/cuda.md ("Environment knobs") lists the same table.
// The environment is read once per process, at the first knobValue():
// launches ask on every call, so the answer must be a load, not a getenv.
// Host-only, no CUDA dependency: the CPU unit tests check the parser.
//
//===----------------------------------------------------------------------===//
#ifndef MLART_CUDA_KNOBS_H
#define MLART_CUDA_KNOBS_H

#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace mlart::cuda {

enum class Knob : int {
  Pdl,               ///< MLART_PDL: programmatic dependent launch
  DecodeCluster,     ///< MLART_DECODE_CLUSTER: splits merged in a cluster
  DecodeVariant,     ///< MLART_DECODE_VARIANT: the 16-head kernel's S split
  DecodeMany,        ///< MLART_DECODE_MANY: the many-heads kernel
  DecodeManyVariant, ///< MLART_DECODE_MANY_VARIANT: its TMA variants
  SkinnyGemm,        ///< MLART_SKINNY_GEMM: the M <= 64 GEMM
  SkinnyVariant,     ///< MLART_SKINNY_VARIANT: its A/B variants
  GemmLt,            ///< MLART_GEMM_LT: plain linears through cuBLASLt
  GemmAutotune,      ///< MLART_GEMM_AUTOTUNE: time cuBLASLt's algorithms
  UpdateKernel,      ///< MLART_UPDATE_KERNEL: large-update kernel 0/1/2
  UpdateUnroll,      ///< MLART_UPDATE_UNROLL: its 16-byte loads a thread
  UpdateCtasPerSm,   ///< MLART_UPDATE_CTAS_PER_SM: 0 = a tile a CTA
  UpdateEarly,       ///< MLART_UPDATE_EARLY: first tile before the wait
  UpdateHints,       ///< MLART_UPDATE_HINTS: cache hints 0 / 1 / 2
  UpdateStages,      ///< MLART_UPDATE_STAGES: the bulk kernel's ring
  DecodeBarrier,     ///< MLART_DECODE_BARRIER: the cluster merge's barriers
  DecodeBalance,     ///< MLART_DECODE_BALANCE: the balanced decode schedule
  PrefillFlash,      ///< MLART_PREFILL_FLASH: the tensor-core prefill kernel
  DecodeStepWrite,   ///< MLART_DECODE_STEP_WRITE: the update in the decode
};
constexpr int kKnobCount = 19;

/// MLART_DECODE_MANY's value for "force"; 0 is off, 1 on (by shape), 2..6
/// on with that timing variant of the cp.async kernel.
constexpr int kDecodeManyForce = 7;

/// One accepted spelling of a knob and the value it stands for.
struct KnobChoice {
  const char *text;
  int value;
};

struct KnobSpec {
  Knob knob;
  const char *name; ///< the environment variable
  int defaultValue; ///< unset, empty or not a choice
  const KnobChoice *choices;
  int numChoices;
};

/// The row of `knob`.
const KnobSpec &knobSpec(Knob knob);
/// The knob called `name` (an environment variable), if any.
std::optional<Knob> knobByName(std::string_view name);
/// The accepted spellings, e.g. "0, 1 or force".
std::string knobChoicesText(Knob knob);

/// What one knob's text means.
struct KnobParse {
  int value;    ///< the choice's value, else the default
  bool invalid; ///< text was set, non-empty and not a choice
};
/// Pure. nullptr or "" (unset): the default. A choice, spelled exactly:
/// its value. Anything else: the default, flagged invalid.
KnobParse parseKnob(Knob knob, const char *text);

using KnobValues = std::array<int, kKnobCount>;
/// Every knob through `lookup` (std::getenv in the process); for each
/// invalid one, a line saying it is ignored is appended to `warnings`.
KnobValues readKnobs(const char *(*lookup)(const char *name),
                     std::string *warnings);

/// The knob's value: a test override if one is set, else the environment,
/// read (and each invalid value warned about on stderr) once per process.
int knobValue(Knob knob);
/// Tests and benchmarks: forces the knob to `value` (one of its choices'
/// values) for the calls that follow; nullopt goes back to the environment.
void setKnobOverride(Knob knob, std::optional<int> value);

} // namespace mlart::cuda

#endif // MLART_CUDA_KNOBS_H
