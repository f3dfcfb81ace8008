//===- Fp8Codec.h - fp8 e4m3fn / e5m2 conversions for host and device -----===//
//
// One definition of the two fp8 encodings, compiled for the CPU kernels
// (through mlart/DType.h's wrappers) and for the CUDA kernels (nvcc), so
// that both backends quantise and dequantise bit-identically:
//   e4m3fn: bias 7, 3 mantissa bits, no infinities, max 448, 0x7f NaN;
//   e5m2:   bias 15, 2 mantissa bits, IEEE-like (0x7c inf), max 57344.
// Encoding rounds to nearest even and saturates to the largest finite value
// (CUDA's __NV_SATFINITE, as vLLM's cache kernels convert); NaN encodes as
// 0x7f in both.
//
//===----------------------------------------------------------------------===//
#ifndef MLART_SRC_FP8CODEC_H
#define MLART_SRC_FP8CODEC_H

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define MLART_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define MLART_HOST_DEVICE inline
#endif

namespace mlart::fp8 {

/// The parameters of one fp8 encoding.
struct Format {
  int mantissaBits;
  int bias;
  uint8_t maxFiniteBits; ///< the largest finite magnitude's code
  bool hasInfinity;      ///< e5m2: exponent all ones is inf / NaN
};
// Functions, not constants: device code cannot read a host constexpr object.
MLART_HOST_DEVICE constexpr Format e4m3() { return {3, 7, 0x7e, false}; }
MLART_HOST_DEVICE constexpr Format e5m2() { return {2, 15, 0x7b, true}; }

MLART_HOST_DEVICE uint32_t bitsOf(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}

MLART_HOST_DEVICE float floatOf(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

/// The value of code `v`.
MLART_HOST_DEVICE float decode(uint8_t v, Format fmt) {
  const uint32_t sign = uint32_t(v & 0x80u) << 24;
  const int expBits = 7 - fmt.mantissaBits;
  const uint32_t expMask = (1u << expBits) - 1;
  const uint32_t exp = (v >> fmt.mantissaBits) & expMask;
  const uint32_t mant = v & ((1u << fmt.mantissaBits) - 1);
  if (exp == expMask &&
      (fmt.hasInfinity || mant == (1u << fmt.mantissaBits) - 1))
    return floatOf(sign |
                   (fmt.hasInfinity && mant == 0 ? 0x7f800000u : 0x7fc00000u));
  if (exp == 0) // subnormal: mant * 2^(1 - bias - mantissaBits), exact
    return floatOf(
        sign |
        bitsOf(float(mant) *
               floatOf(uint32_t(128 - fmt.bias - fmt.mantissaBits) << 23)));
  return floatOf(sign | ((exp + 127 - uint32_t(fmt.bias)) << 23) |
                 (mant << (23 - fmt.mantissaBits)));
}

/// `f` rounded to nearest even, saturated to the largest finite code.
MLART_HOST_DEVICE uint8_t encode(float f, Format fmt) {
  const uint32_t u = bitsOf(f);
  const uint8_t sign = uint8_t((u >> 24) & 0x80u);
  const uint32_t mag = u & 0x7fffffffu;
  if (mag > 0x7f800000u)
    return 0x7f;
  const uint32_t maxFinite = bitsOf(decode(fmt.maxFiniteBits, fmt));
  if (mag >= maxFinite)
    return uint8_t(sign | fmt.maxFiniteBits);
  const int shift = 23 - fmt.mantissaBits;
  const uint32_t minNormalExp = uint32_t(128 - fmt.bias); // biased, float
  if ((mag >> 23) < minNormalExp) {
    // Subnormal codes are multiples of 2^(1 - bias - mantissaBits): scale
    // by its inverse (exact) and round to an integer, ties to even. The
    // integer (< 2^mantissaBits + 1) is the code; 2^mantissaBits is the
    // smallest normal.
    const float scaled =
        floatOf(mag) *
        floatOf(uint32_t(126 + fmt.bias + fmt.mantissaBits) << 23);
    const uint32_t whole = uint32_t(scaled);
    const float rest = scaled - float(whole);
    const uint32_t code =
        whole + ((rest > 0.5f || (rest == 0.5f && (whole & 1u))) ? 1u : 0u);
    return uint8_t(sign | code);
  }
  // Normal: round the float's mantissa to mantissaBits (a carry moves into
  // the exponent, as it should), then rebias.
  const uint32_t rounded =
      mag + ((1u << (shift - 1)) - 1) + ((mag >> shift) & 1u);
  uint32_t code =
      (rounded >> shift) - (uint32_t(127 - fmt.bias) << fmt.mantissaBits);
  if (code > fmt.maxFiniteBits)
    code = fmt.maxFiniteBits;
  return uint8_t(sign | code);
}

} // namespace mlart::fp8

#endif // MLART_SRC_FP8CODEC_H
