"""The installed Python package: compiles a step in process and runs it
through the installed runtime (CI: .ci/run, with PYTHONPATH at the prefix's
site-packages). Exits non-zero on any mismatch."""

import os
import sys

import numpy as np

import mla.compiler as mc
import mla.runtime as rt

prefix = os.environ["MLA_INSTALL_PREFIX"]
for module in (mc, rt):
    assert os.path.realpath(module.__file__).startswith(
        os.path.realpath(prefix)), f"{module.__name__} is not the installed one"

SOURCE = """
func.func @norm(%x: tensor<2x8xf32> {mla.name = "hidden_states"},
                %w: tensor<8xf32> {mla.name = "w"}) -> tensor<2x8xf32> {
  %0 = mla.rms_norm %x, %w {epsilon = 1.0e-6 : f32} : tensor<2x8xf32>, tensor<8xf32>
  return %0 : tensor<2x8xf32>
}
"""
executor = rt.Executor(rt.Artifact.load(mc.compile(SOURCE, optimize=False)),
                       rt.Device("cpu"))
x = np.random.default_rng().standard_normal((2, 8), dtype=np.float32)
out = np.zeros_like(x)
executor.bind("hidden_states", x)
executor.bind("w", np.ones(8, np.float32))
executor.bind("result0", out)
executor.run()
want = x / np.sqrt((x.astype(np.float64) ** 2).mean(-1, keepdims=True) + 1e-6)
error = np.abs(out - want).max()
print(f"installed mla package: rms_norm error {error:.1e}")
sys.exit(0 if error < 1e-5 else 1)
