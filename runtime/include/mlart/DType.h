//===- DType.h - Element types and scalar conversions of the runtime ------===//
//
// The runtime stores bf16, f16 and fp8 (e4m3fn, e5m2) as raw bit patterns;
// these helpers convert them to and from float with the rounding the kernels
// use (round-to-nearest-even; fp8 saturates to its largest finite value).
//
//===----------------------------------------------------------------------===//
#ifndef MLART_DTYPE_H
#define MLART_DTYPE_H

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace mlart {

/// Element types; the numeric values are part of the C API (mlart_dtype).
enum class DType : int {
  F32 = 0,
  F16 = 1,
  BF16 = 2,
  F8E4M3FN = 3,
  I32 = 4,
  I64 = 5,
  F64 = 6,
  F8E5M2 = 7,
};
/// The largest DType value (the numbering has no gaps).
constexpr DType kLastDType = DType::F8E5M2;
/// Whether `v` is the numeric value of a DType (artifacts, the C API).
inline bool isValidDType(int64_t v) { return v >= 0 && v <= int(kLastDType); }
/// fp8 e4m3fn or e5m2.
inline bool isFp8(DType t) {
  return t == DType::F8E4M3FN || t == DType::F8E5M2;
}

/// Size of one element in bytes.
inline size_t dtypeSize(DType t) {
  switch (t) {
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::F16:
  case DType::BF16:
    return 2;
  case DType::F8E4M3FN:
  case DType::F8E5M2:
    return 1;
  case DType::I64:
  case DType::F64:
    return 8;
  }
  return 0;
}

/// Stable lower-case name ("bf16", "f8e4m3fn", ...).
const char *dtypeName(DType t);
/// Parses a name produced by dtypeName; returns false if unknown.
bool parseDType(const char *name, DType &out);

inline uint32_t floatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline float bf16ToFloat(uint16_t h) { return bitsToFloat(uint32_t(h) << 16); }

/// Round-to-nearest-even; NaN stays NaN.
inline uint16_t floatToBf16(float f) {
  uint32_t u = floatBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return uint16_t((u >> 16) | 0x40); // quiet NaN
  uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return uint16_t((u + rounding) >> 16);
}

float f16ToFloat(uint16_t h);
uint16_t floatToF16(float f);

/// fp8 e4m3fn: no infinities, max finite 448, 0x7f/0xff are NaN.
float fp8e4m3ToFloat(uint8_t v);
/// Round-to-nearest-even with saturation to +-448; NaN maps to 0x7f.
uint8_t floatToFp8e4m3(float f);
/// fp8 e5m2: 0x7c is inf, max finite 57344.
float fp8e5m2ToFloat(uint8_t v);
/// Round-to-nearest-even with saturation to +-57344 (infinities too); NaN
/// maps to 0x7f.
uint8_t floatToFp8e5m2(float f);

/// Largest finite fp8 e4m3fn and e5m2 values.
constexpr float kFp8E4M3Max = 448.0f;
constexpr float kFp8E5M2Max = 57344.0f;

/// Reads element `i` of a buffer of type `t` as float (floating types only).
inline float loadAsFloat(const void *base, DType t, size_t i) {
  switch (t) {
  case DType::F32:
    return static_cast<const float *>(base)[i];
  case DType::F16:
    return f16ToFloat(static_cast<const uint16_t *>(base)[i]);
  case DType::BF16:
    return bf16ToFloat(static_cast<const uint16_t *>(base)[i]);
  case DType::F8E4M3FN:
    return fp8e4m3ToFloat(static_cast<const uint8_t *>(base)[i]);
  case DType::F8E5M2:
    return fp8e5m2ToFloat(static_cast<const uint8_t *>(base)[i]);
  case DType::F64:
    return float(static_cast<const double *>(base)[i]);
  case DType::I32:
    return float(static_cast<const int32_t *>(base)[i]);
  case DType::I64:
    return float(static_cast<const int64_t *>(base)[i]);
  }
  return 0.0f;
}

/// Writes `v` as element `i` of a buffer of floating type `t` (rounded).
inline void storeFromFloat(void *base, DType t, size_t i, float v) {
  switch (t) {
  case DType::F32:
    static_cast<float *>(base)[i] = v;
    return;
  case DType::F16:
    static_cast<uint16_t *>(base)[i] = floatToF16(v);
    return;
  case DType::BF16:
    static_cast<uint16_t *>(base)[i] = floatToBf16(v);
    return;
  case DType::F8E4M3FN:
    static_cast<uint8_t *>(base)[i] = floatToFp8e4m3(v);
    return;
  case DType::F8E5M2:
    static_cast<uint8_t *>(base)[i] = floatToFp8e5m2(v);
    return;
  case DType::F64:
    static_cast<double *>(base)[i] = v;
    return;
  case DType::I32:
  case DType::I64:
    return;
  }
}

} // namespace mlart

#endif // MLART_DTYPE_H
