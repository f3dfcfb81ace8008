//===- Opcode.h - The instructions of the MLAA format, from Opcodes.def ---===//
//
// What each opcode is: its stored value and name, its operand slots (name,
// accepted ranks and dtypes, optional, written), its cache and its scalar
// attributes. All of it is expanded from mlart/Opcodes.def, the single
// declaration of the compiler/runtime contract.
//
//===----------------------------------------------------------------------===//
#ifndef MLART_OPCODE_H
#define MLART_OPCODE_H

#include "mlart/DType.h"

#include <cstdint>

// The vocabulary of Opcodes.def's entries.
#define MLART_R0 (1u << 0)
#define MLART_R1 (1u << 1)
#define MLART_R2 (1u << 2)
#define MLART_R3 (1u << 3)
#define MLART_R_ANY 0x1Fu
#define MLART_T_F32 (1u << int(::mlart::DType::F32))
#define MLART_T_FLOAT                                                          \
  (MLART_T_F32 | (1u << int(::mlart::DType::F16)) |                            \
   (1u << int(::mlart::DType::BF16)))
#define MLART_T_F8 (1u << int(::mlart::DType::F8E4M3FN))
#define MLART_T_I32 (1u << int(::mlart::DType::I32))
#define MLART_T_INDEX (MLART_T_I32 | (1u << int(::mlart::DType::I64)))
#define MLART_T_ANY ((1u << (int(::mlart::kLastDType) + 1)) - 1u)
#define MLART_NO_FLAGS 0u
#define MLART_FLAG_ERROR_RECORD 1u

namespace mlart {

/// One instruction kind. Values are stored in the artifact.
enum class Opcode : uint16_t {
#define MLART_OPCODE(Enum, Value, name, ArgsType, Flags, Fields) Enum = Value,
#include "mlart/Opcodes.def"
};
/// Stable name ("copy", "cache_update", ...); "unknown" for other values.
const char *opcodeName(Opcode op);

/// Operand slot numbers by name, per opcode: operand::Linear::addend is the
/// slot of linear's addend.
namespace operand {
#define MLART_OPERAND(name, member, ranks, dtypes, use) name,
#define MLART_CACHE(use)
#define MLART_FLOAT_ATTR(name, member, check)
#define MLART_INT_ATTR(name, member, check)
#define MLART_OPCODE(Enum, Value, name, ArgsType, Flags, Fields)               \
  namespace Enum {                                                             \
  enum : int { Fields };                                                       \
  }
#define MLART_KERNEL_OPCODE(Enum, Value, name, ArgsType, Flags, Fields,        \
                            method)                                            \
  namespace Enum {                                                             \
  enum : int { Fields };                                                       \
  }
#include "mlart/Opcodes.def"
#undef MLART_OPERAND
#undef MLART_CACHE
#undef MLART_FLOAT_ATTR
#undef MLART_INT_ATTR
} // namespace operand

/// How an instruction uses an operand slot.
enum class OperandUse : uint8_t { In, Out, InOut, OptIn, OptOut, OptInOut };
constexpr bool isOptional(OperandUse u) {
  return u == OperandUse::OptIn || u == OperandUse::OptOut ||
         u == OperandUse::OptInOut;
}
constexpr bool isWritten(OperandUse u) {
  return u != OperandUse::In && u != OperandUse::OptIn;
}
constexpr bool isRead(OperandUse u) {
  return u != OperandUse::Out && u != OperandUse::OptOut;
}

/// Operand table entry of one opcode (shared by the loader, the writer and
/// the docs): which slots exist, which ranks and dtypes they accept.
struct OperandSpec {
  const char *name;
  /// Bit r set: rank r accepted.
  uint8_t rankMask;
  /// Bit int(DType) set: dtype accepted.
  uint8_t dtypeMask;
  bool optional;
  /// The kernel writes this operand.
  bool written;
  /// The kernel reads this operand (In and InOut; the loader checks that
  /// something defined its bytes first).
  bool read;
};

/// How an instruction uses its cache.
enum class CacheUse : uint8_t { None, Read, Write, OptRead };
/// What Instruction::floatAttr must hold.
enum class FloatAttrCheck : uint8_t {
  None,        ///< unused: zero
  Finite,      ///< any finite value (a softmax scale)
  NonNegative, ///< finite and >= 0 (an epsilon)
  /// Present, finite and > 0 exactly when the opcode's last optional
  /// operand is; zero otherwise (the fused latent norm's epsilon).
  PositiveWithOperand,
};
/// What Instruction::intAttr must hold.
enum class IntAttrCheck : uint8_t {
  None,        ///< unused: zero
  RopeStyle,   ///< a RopeStyle value
  NonNegative, ///< >= 0 (a split count; 0: the kernel's choice)
  Flag,        ///< 0 or 1
};

/// Everything Opcodes.def says about one opcode.
struct OpcodeInfo {
  Opcode opcode;
  const char *name;
  const OperandSpec *operands;
  int numOperands;
  CacheUse cache;
  FloatAttrCheck floatAttr;
  /// The attribute's name where floatAttr != None ("softmax_scale"), else "".
  const char *floatAttrName;
  IntAttrCheck intAttr;
  const char *intAttrName;
  /// The kernels record bad slots, positions or lengths into the device's
  /// error record.
  bool usesErrorRecord;
  /// Run by a KernelLibrary kernel (not by the device, as copy is).
  bool isKernel;
};
/// The table entry of `op`; nullptr for a value no entry has.
const OpcodeInfo *opcodeInfo(Opcode op);
/// Every opcode, in value order.
const OpcodeInfo *opcodeTable(int &count);

/// Number of operand slots `op` uses (the rest must be kNoIndex) and their
/// specs; nullptr/0 for an unknown opcode.
const OperandSpec *operandSpecs(Opcode op, int &count);

} // namespace mlart

#endif // MLART_OPCODE_H
