//===- DType.cpp - Scalar conversions for bf16, f16 and fp8 ---------------===//
#include "mlart/DType.h"

#include "Fp8Codec.h"

#include <cmath>
#include <cstring>

namespace mlart {

const char *dtypeName(DType t) {
  switch (t) {
  case DType::F32:
    return "f32";
  case DType::F16:
    return "f16";
  case DType::BF16:
    return "bf16";
  case DType::F8E4M3FN:
    return "f8e4m3fn";
  case DType::I32:
    return "i32";
  case DType::I64:
    return "i64";
  case DType::F64:
    return "f64";
  case DType::F8E5M2:
    return "f8e5m2";
  }
  return "unknown";
}

bool parseDType(const char *name, DType &out) {
  static const DType all[] = {DType::F32,      DType::F16,   DType::BF16,
                              DType::F8E4M3FN, DType::I32,   DType::I64,
                              DType::F64,      DType::F8E5M2};
  for (DType t : all) {
    if (std::strcmp(name, dtypeName(t)) == 0) {
      out = t;
      return true;
    }
  }
  return false;
}

float f16ToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) // inf / nan
    return bitsToFloat(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    if (mant == 0)
      return bitsToFloat(sign);
    // Subnormal: value = mant * 2^-24.
    float v = std::ldexp(float(mant), -24);
    return sign ? -v : v;
  }
  return bitsToFloat(sign | ((exp + 112) << 23) | (mant << 13));
}

uint16_t floatToF16(float f) {
  uint32_t u = floatBits(f);
  uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  uint32_t absBits = u & 0x7fffffffu;
  if (absBits > 0x7f800000u)
    return uint16_t(sign | 0x7e00u); // NaN
  if (absBits >= 0x477ff000u)        // rounds to >= 65520: inf
    return uint16_t(sign | 0x7c00u);
  if (absBits < 0x38800000u) { // below the smallest normal: subnormal
    float a = bitsToFloat(absBits);
    // nearbyint rounds to nearest even under the default rounding mode.
    float m = std::nearbyint(std::ldexp(a, 24));
    return uint16_t(sign | uint16_t(m));
  }
  uint32_t rounded = absBits + 0xfffu + ((absBits >> 13) & 1u);
  return uint16_t(sign | uint16_t((rounded - 0x38000000u) >> 13));
}

float fp8e4m3ToFloat(uint8_t v) { return fp8::decode(v, fp8::e4m3()); }
uint8_t floatToFp8e4m3(float f) { return fp8::encode(f, fp8::e4m3()); }
float fp8e5m2ToFloat(uint8_t v) { return fp8::decode(v, fp8::e5m2()); }
uint8_t floatToFp8e5m2(float f) { return fp8::encode(f, fp8::e5m2()); }

} // namespace mlart
