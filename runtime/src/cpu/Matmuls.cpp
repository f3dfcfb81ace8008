//===- Matmuls.cpp - qAbsorb, vUp and Linear on the CPU ------------------===//
//
// All three are float-accumulated matrix products over bf16/f16/f32 storage,
// rounded once on store (Linear adds its optional addend before that).
// Operand tiles are converted to float once and reused across a block of rows
// so the inner loops run over contiguous floats.
//
//===----------------------------------------------------------------------===//
#include "cpu/CpuKernels.h"
#include "cpu/LinearCheck.h"
#include "cpu/TensorAccess.h"

#include <algorithm>
#include <vector>

namespace mlart::cpu {
namespace {

/// Checks out[b, h, :] = x[b, h, :] @ w[h] shapes: x [B, H, K], w [H, K, N],
/// out [B, H, N].
Status validatePerHead(const TensorRef &x, const char *xName,
                       const TensorRef &w, const char *wName,
                       const TensorRef &out) {
  MLART_RETURN_IF_ERROR(checkFloatTensor(x, xName, 3));
  MLART_RETURN_IF_ERROR(checkFloatTensor(w, wName, 3));
  MLART_RETURN_IF_ERROR(checkFloatTensor(out, "out", 3));
  MLART_RETURN_IF_ERROR(checkDim(w, wName, 0, x.sizes[1]));
  MLART_RETURN_IF_ERROR(checkDim(w, wName, 1, x.sizes[2]));
  MLART_RETURN_IF_ERROR(checkDim(out, "out", 0, x.sizes[0]));
  MLART_RETURN_IF_ERROR(checkDim(out, "out", 1, x.sizes[1]));
  return checkDim(out, "out", 2, w.sizes[2]);
}

/// out[b, h, :] = x[b, h, :] @ w[h]. The head loop is outermost so each
/// head's [K, N] weight is converted once and shared by the whole batch; the
/// product is a sum of scaled weight rows, which vectorises along N.
void perHeadMatmul(const TensorRef &x, const TensorRef &w,
                   const TensorRef &out) {
  const int64_t batch = x.sizes[0], heads = x.sizes[1];
  const int64_t k = x.sizes[2], n = w.sizes[2];
  std::vector<float> weight(static_cast<size_t>(k * n)),
      xRow(static_cast<size_t>(k)), acc(static_cast<size_t>(n));
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t i = 0; i < k; ++i)
      loadRow(w, w.offset({h, i, 0}), n, weight.data() + i * n);
    for (int64_t b = 0; b < batch; ++b) {
      loadRow(x, x.offset({b, h, 0}), k, xRow.data());
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t i = 0; i < k; ++i)
        axpy(xRow[i], weight.data() + i * n, acc.data(), n);
      storeRow(out, out.offset({b, h, 0}), n, acc.data());
    }
  }
}

/// Tokens and weight rows per Linear tile: a 16 x 64 tile of dot products
/// reuses each converted x row 64 times and each weight row 16 times.
constexpr int64_t kTokenTile = 16;
constexpr int64_t kOutputTile = 64;

} // namespace

Status qAbsorb(const QAbsorbArgs &args) {
  MLART_RETURN_IF_ERROR(
      validatePerHead(args.qNope, "qNope", args.wUK, "wUK", args.out));
  perHeadMatmul(args.qNope, args.wUK, args.out);
  return Status::success();
}

Status vUp(const VUpArgs &args) {
  MLART_RETURN_IF_ERROR(
      validatePerHead(args.oLatent, "oLatent", args.wUV, "wUV", args.out));
  perHeadMatmul(args.oLatent, args.wUV, args.out);
  return Status::success();
}

Status linear(const LinearArgs &args) {
  MLART_RETURN_IF_ERROR(validateLinear(args));
  const int64_t tokens = args.x.sizes[0], k = args.x.sizes[1];
  const int64_t n = args.weight.sizes[0];
  const bool withAddend = args.addend.present();

  std::vector<float> xTile(static_cast<size_t>(kTokenTile * k));
  std::vector<float> wTile(static_cast<size_t>(kOutputTile * k));
  std::vector<float> outTile(static_cast<size_t>(kTokenTile * kOutputTile));
  std::vector<float> addendRow(static_cast<size_t>(kOutputTile));
  for (int64_t t0 = 0; t0 < tokens; t0 += kTokenTile) {
    const int64_t tn = std::min(kTokenTile, tokens - t0);
    for (int64_t t = 0; t < tn; ++t)
      loadRow(args.x, args.x.offset({t0 + t, 0}), k, xTile.data() + t * k);
    for (int64_t n0 = 0; n0 < n; n0 += kOutputTile) {
      const int64_t nn = std::min(kOutputTile, n - n0);
      for (int64_t j = 0; j < nn; ++j)
        loadRow(args.weight, args.weight.offset({n0 + j, 0}), k,
                wTile.data() + j * k);
      for (int64_t t = 0; t < tn; ++t)
        for (int64_t j = 0; j < nn; ++j)
          outTile[t * nn + j] =
              dot(xTile.data() + t * k, wTile.data() + j * k, k);
      for (int64_t t = 0; t < tn; ++t) {
        float *row = outTile.data() + t * nn;
        // The residual joins the float sum: one rounding on store.
        if (withAddend) {
          loadRow(args.addend, args.addend.offset({t0 + t, n0}), nn,
                  addendRow.data());
          for (int64_t j = 0; j < nn; ++j)
            row[j] += addendRow[j];
        }
        storeRow(args.out, args.out.offset({t0 + t, n0}), nn, row);
      }
    }
  }
  return Status::success();
}

} // namespace mlart::cpu
