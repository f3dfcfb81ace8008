"""Shared fixtures of the mla Python package tests (docs/python.md).

CTest runs this suite with PYTHONPATH at the build tree's python_packages
and MLA_TOOLS_DIR at its bin/ (mla-gen, mla-opt, mla-translate), so that
the in-process compiler can be compared with the command-line tools.
"""

import os

import numpy as np
import pytest

# A step of one RMSNorm: small enough to check by hand, with an input, a
# weight and an output buffer.
RMS_NORM_STEP = """
func.func @norm(%x: tensor<4x32xf32> {mla.name = "hidden_states"},
                %w: tensor<32xf32> {mla.name = "norm.weight"})
    -> (tensor<4x32xf32> {mla.name = "hidden_states_out"}) {
  %0 = mla.rms_norm %x, %w {epsilon = 1.0e-6 : f32} : tensor<4x32xf32>, tensor<32xf32>
  return %0 : tensor<4x32xf32>
}
"""


def rms_norm_reference(x, w, eps=1e-6):
    x = x.astype(np.float64)
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def bf16_bits(x):
    """Round-to-nearest-even bf16 bits of float32 values, as uint16 (NumPy
    has no bfloat16; mla.runtime reads uint16 arrays as bf16)."""
    bits = x.astype(np.float32).view(np.uint32)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_float(bits):
    """The float32 values of bf16 bits."""
    return (bits.astype(np.uint32) << 16).view(np.float32)


@pytest.fixture
def rng():
    # Fresh inputs every run; the seed is printed on failure.
    seed = int.from_bytes(os.urandom(4), "little")
    print(f"seed {seed}")
    return np.random.default_rng(seed)


@pytest.fixture(scope="session")
def tools_dir():
    path = os.environ.get("MLA_TOOLS_DIR")
    if not path:
        pytest.skip("MLA_TOOLS_DIR is not set (run through ctest)")
    return path


def e4m3fn_values():
    """The value of every f8E4M3FN byte (NaN for 0x7f and 0xff)."""
    values = np.empty(256)
    for byte in range(256):
        sign = -1.0 if byte & 0x80 else 1.0
        exponent, mantissa = (byte >> 3) & 0xF, byte & 0x7
        if exponent == 0xF and mantissa == 0x7:
            values[byte] = np.nan
        elif exponent == 0:
            values[byte] = sign * mantissa / 8 * 2.0 ** -6
        else:
            values[byte] = sign * (1 + mantissa / 8) * 2.0 ** (exponent - 7)
    return values


def e5m2_values():
    """The value of every f8E5M2 byte (NaN where the exponent is all ones:
    infinities are never stored, the conversion saturates)."""
    values = np.empty(256)
    for byte in range(256):
        sign = -1.0 if byte & 0x80 else 1.0
        exponent, mantissa = (byte >> 2) & 0x1F, byte & 0x3
        if exponent == 0x1F:
            values[byte] = np.nan
        elif exponent == 0:
            values[byte] = sign * mantissa / 4 * 2.0 ** -14
        else:
            values[byte] = sign * (1 + mantissa / 4) * 2.0 ** (exponent - 15)
    return values


FP8_TABLES = {"fp8": e4m3fn_values, "fp8_e5m2": e5m2_values}
