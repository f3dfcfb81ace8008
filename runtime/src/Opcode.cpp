//===- Opcode.cpp - The opcode table, expanded from Opcodes.def -----------===//
#include "mlart/Opcode.h"

#include <iterator>

namespace mlart {
namespace {

// One operand array per opcode: k<Enum>Operands.
#define MLART_OPERAND(name, member, ranks, dtypes, use)                        \
  OperandSpec{#name,                                                           \
              uint8_t(ranks),                                                  \
              uint8_t(dtypes),                                                 \
              isOptional(OperandUse::use),                                     \
              isWritten(OperandUse::use),                                      \
              isRead(OperandUse::use)},
#define MLART_CACHE(use)
#define MLART_FLOAT_ATTR(name, member, check)
#define MLART_INT_ATTR(name, member, check)
#define MLART_OPCODE(Enum, Value, name, ArgsType, Flags, Fields)               \
  constexpr OperandSpec k##Enum##Operands[] = {Fields};
#define MLART_KERNEL_OPCODE(Enum, Value, name, ArgsType, Flags, Fields,        \
                            method)                                            \
  constexpr OperandSpec k##Enum##Operands[] = {Fields};
#include "mlart/Opcodes.def"
#undef MLART_OPERAND
#undef MLART_CACHE
#undef MLART_FLOAT_ATTR
#undef MLART_INT_ATTR

/// Builds an OpcodeInfo from the Fields of one entry.
struct InfoBuilder {
  OpcodeInfo info;
  constexpr InfoBuilder cache(CacheUse use) const {
    InfoBuilder b = *this;
    b.info.cache = use;
    return b;
  }
  constexpr InfoBuilder floatAttr(const char *name, FloatAttrCheck c) const {
    InfoBuilder b = *this;
    b.info.floatAttr = c;
    b.info.floatAttrName = name;
    return b;
  }
  constexpr InfoBuilder intAttr(const char *name, IntAttrCheck c) const {
    InfoBuilder b = *this;
    b.info.intAttr = c;
    b.info.intAttrName = name;
    return b;
  }
};

#define MLART_OPERAND(name, member, ranks, dtypes, use)
#define MLART_CACHE(use) .cache(CacheUse::use)
#define MLART_FLOAT_ATTR(name, member, check)                                  \
  .floatAttr(#name, FloatAttrCheck::check)
#define MLART_INT_ATTR(name, member, check) .intAttr(#name, IntAttrCheck::check)
#define MLART_ENTRY(Enum, name, Flags, Fields, kernel)                         \
  InfoBuilder {                                                                \
    OpcodeInfo {                                                               \
      Opcode::Enum, #name, k##Enum##Operands,                                  \
          int(std::size(k##Enum##Operands)), CacheUse::None,                   \
          FloatAttrCheck::None, "", IntAttrCheck::None, "",                    \
          ((Flags) & MLART_FLAG_ERROR_RECORD) != 0, kernel                     \
    }                                                                          \
  }                                                                            \
  Fields.info,
#define MLART_OPCODE(Enum, Value, name, ArgsType, Flags, Fields)               \
  MLART_ENTRY(Enum, name, Flags, Fields, false)
#define MLART_KERNEL_OPCODE(Enum, Value, name, ArgsType, Flags, Fields,        \
                            method)                                            \
  MLART_ENTRY(Enum, name, Flags, Fields, true)
constexpr OpcodeInfo kOpcodes[] = {
#include "mlart/Opcodes.def"
};
#undef MLART_ENTRY

} // namespace

const OpcodeInfo *opcodeTable(int &count) {
  count = int(std::size(kOpcodes));
  return kOpcodes;
}

const OpcodeInfo *opcodeInfo(Opcode op) {
  for (const OpcodeInfo &info : kOpcodes)
    if (info.opcode == op)
      return &info;
  return nullptr;
}

const char *opcodeName(Opcode op) {
  const OpcodeInfo *info = opcodeInfo(op);
  return info ? info->name : "unknown";
}

const OperandSpec *operandSpecs(Opcode op, int &count) {
  const OpcodeInfo *info = opcodeInfo(op);
  count = info ? info->numOperands : 0;
  return info ? info->operands : nullptr;
}

} // namespace mlart
