//===- DType.cpp - Scalar conversions for bf16, f16 and fp8 e4m3fn --------===//
#include "mlart/DType.h"

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
  }
  return "unknown";
}

bool parseDType(const char *name, DType &out) {
  static const DType all[] = {DType::F32, DType::F16, DType::BF16,
                              DType::F8E4M3FN, DType::I32, DType::I64,
                              DType::F64};
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

float fp8e4m3ToFloat(uint8_t v) {
  uint32_t sign = v & 0x80u;
  uint32_t exp = (v >> 3) & 0xfu;
  uint32_t mant = v & 0x7u;
  float r;
  if (exp == 0xf && mant == 0x7)
    r = std::nanf("");
  else if (exp == 0)
    r = std::ldexp(float(mant), -9); // subnormal: mant/8 * 2^-6
  else
    r = std::ldexp(1.0f + float(mant) / 8.0f, int(exp) - 7);
  return sign ? -r : r;
}

uint8_t floatToFp8e4m3(float f) {
  if (std::isnan(f))
    return 0x7f;
  uint8_t sign = std::signbit(f) ? 0x80 : 0x00;
  float a = std::fabs(f);
  if (a >= kFp8E4M3Max)
    return uint8_t(sign | 0x7e); // saturate to 448
  if (a < std::ldexp(1.0f, -6)) {
    // Subnormal range: multiples of 2^-9, round to nearest even.
    float m = std::nearbyint(std::ldexp(a, 9));
    return uint8_t(sign | uint8_t(m)); // m == 8 encodes the smallest normal
  }
  int e;
  float frac = std::frexp(a, &e); // a = frac * 2^e, frac in [0.5, 1)
  int exp = e - 1;                // a = (2*frac) * 2^exp, 2*frac in [1, 2)
  float m = std::nearbyint((2.0f * frac - 1.0f) * 8.0f);
  if (m >= 8.0f) { // mantissa overflowed into the exponent
    m = 0.0f;
    ++exp;
  }
  int biased = exp + 7;
  uint8_t bits = uint8_t((biased << 3) | int(m));
  if (bits > 0x7e)
    bits = 0x7e;
  return uint8_t(sign | bits);
}

} // namespace mlart
