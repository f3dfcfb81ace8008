//===- NaiveReference.cpp - Float64 non-absorbed DeepSeek attention step --===//
#include "NaiveReference.h"

#include "mlart/KVCacheLayout.h"

#include <cmath>

using namespace mlart;

namespace mlarun {
namespace {

using Matrix = std::vector<double>; // row-major

/// out[T, N] = x[T, K] @ w[N, K]^T.
Matrix linear(const Matrix &x, int64_t tokens, const HostTensorView &w) {
  const int64_t n = w.sizes[0], k = w.sizes[1];
  Matrix out(size_t(tokens * n), 0.0);
  std::vector<double> row(static_cast<size_t>(k));
  for (int64_t o = 0; o < n; ++o) {
    for (int64_t i = 0; i < k; ++i)
      row[size_t(i)] = w.at(o * k + i);
    for (int64_t t = 0; t < tokens; ++t) {
      double acc = 0.0;
      for (int64_t i = 0; i < k; ++i)
        acc += x[size_t(t * k + i)] * row[size_t(i)];
      out[size_t(t * n + o)] = acc;
    }
  }
  return out;
}

/// RMSNorm of `width` columns starting at `col` of rows of `stride`.
Matrix rmsNorm(const Matrix &x, int64_t tokens, int64_t stride, int64_t col,
               int64_t width, const HostTensorView &w, double eps) {
  Matrix out(size_t(tokens * width));
  for (int64_t t = 0; t < tokens; ++t) {
    double ms = 0.0;
    for (int64_t i = 0; i < width; ++i) {
      double v = x[size_t(t * stride + col + i)];
      ms += v * v;
    }
    double inv = 1.0 / std::sqrt(ms / double(width) + eps);
    for (int64_t i = 0; i < width; ++i)
      out[size_t(t * width + i)] =
          x[size_t(t * stride + col + i)] * inv * w.at(i);
  }
  return out;
}

/// Rotates `rope` values at `v` for position `pos`.
void rotate(double *v, int64_t rope, int64_t pos, const HostTensorView &cosSin,
            RopeStyle style) {
  std::vector<double> in(v, v + rope);
  for (int64_t i = 0; i < rope / 2; ++i) {
    double c = cosSin.at(pos * rope + i), s = cosSin.at(pos * rope + rope / 2 + i);
    int64_t a = style == RopeStyle::GptJ ? 2 * i : i;
    int64_t b = style == RopeStyle::GptJ ? 2 * i + 1 : i + rope / 2;
    v[a] = in[size_t(a)] * c - in[size_t(b)] * s;
    v[b] = in[size_t(b)] * c + in[size_t(a)] * s;
  }
}

const HostTensorView *find(const NaiveStep &step, const std::string &name) {
  auto it = step.tensors.find(name);
  return it == step.tensors.end() ? nullptr : &it->second;
}

} // namespace

namespace {
/// The step-wide tensors every layer reads, checked once.
struct StepTensors {
  const HostTensorView *x0, *positions, *blockTable, *seqLens, *cosSin;
  int64_t tokens, hidden;
};

StatusOr<StepTensors> stepTensors(const NaiveStep &step) {
  StepTensors t;
  t.x0 = find(step, "hidden_states");
  t.positions = find(step, "positions");
  t.blockTable = find(step, "block_table");
  t.seqLens = find(step, "seq_lens");
  t.cosSin = find(step, "cos_sin_cache");
  if (!t.x0 || !t.positions || !t.blockTable || !t.seqLens || !t.cosSin)
    return invalidArgument("the naive reference needs mla-gen's argument "
                           "names (hidden_states, positions, block_table, "
                           "seq_lens, cos_sin_cache)");
  t.tokens = t.x0->sizes[0];
  t.hidden = t.x0->sizes[1];
  if (t.seqLens->sizes[0] != t.tokens)
    return invalidArgument("the naive reference covers decode steps only");
  return t;
}
} // namespace

Status naiveDecodeLayer(const NaiveStep &step, size_t layer,
                        std::vector<double> &x) {
  StatusOr<StepTensors> checked = stepTensors(step);
  if (!checked.ok())
    return checked.status();
  const StepTensors &st = checked.value();
  const HostTensorView *positions = st.positions, *blockTable = st.blockTable,
                       *seqLens = st.seqLens, *cosSin = st.cosSin;
  const int64_t tokens = st.tokens, hidden = st.hidden;
  if (layer >= step.caches.size())
    return outOfRange("the naive reference has no layer " +
                      std::to_string(layer));
  if (x.size() != size_t(tokens * hidden))
    return invalidArgument("naive reference: layer input has the wrong size");
  {
    const std::string p = "model.layers." + std::to_string(layer) + ".";
    auto w = [&](const std::string &name) { return find(step, p + name); };
    const HostTensorView *inNorm = w("input_layernorm.weight");
    const HostTensorView *kvA = w("self_attn.kv_a_proj_with_mqa.weight");
    const HostTensorView *kvNorm = w("self_attn.kv_a_layernorm.weight");
    const HostTensorView *wUK = w("self_attn.w_uk");
    const HostTensorView *wUV = w("self_attn.w_uv");
    const HostTensorView *oProj = w("self_attn.o_proj.weight");
    const HostTensorView *qProj = w("self_attn.q_proj.weight");
    const HostTensorView *qA = w("self_attn.q_a_proj.weight");
    const HostTensorView *qANorm = w("self_attn.q_a_layernorm.weight");
    const HostTensorView *qB = w("self_attn.q_b_proj.weight");
    if (!inNorm || !kvA || !kvNorm || !wUK || !wUV || !oProj ||
        !(qProj || (qA && qANorm && qB)))
      return invalidArgument("layer " + std::to_string(layer) +
                             ": missing weights for the naive reference");
    const CacheSnapshot &cache = step.caches[layer];
    const int64_t heads = wUK->sizes[0], nope = wUK->sizes[1],
                  latent = wUK->sizes[2], vDim = wUV->sizes[2];
    const int64_t rope = cache.desc.ropeDim, qk = nope + rope;

    Matrix h = rmsNorm(x, tokens, hidden, 0, hidden, *inNorm, step.epsilon);
    Matrix q;
    if (qProj) {
      q = linear(h, tokens, *qProj);
    } else {
      Matrix a = linear(h, tokens, *qA);
      Matrix an = rmsNorm(a, tokens, qA->sizes[0], 0, qA->sizes[0], *qANorm,
                          step.epsilon);
      q = linear(an, tokens, *qB);
    }
    Matrix kv = linear(h, tokens, *kvA);
    Matrix c = rmsNorm(kv, tokens, latent + rope, 0, latent, *kvNorm,
                       step.epsilon);
    Matrix kPe(size_t(tokens * rope));
    for (int64_t t = 0; t < tokens; ++t) {
      int64_t pos = int64_t(positions->at(t));
      for (int64_t i = 0; i < rope; ++i)
        kPe[size_t(t * rope + i)] = kv[size_t(t * (latent + rope) + latent + i)];
      rotate(&kPe[size_t(t * rope)], rope, pos, *cosSin, step.style);
      for (int64_t hh = 0; hh < heads; ++hh)
        rotate(&q[size_t((t * heads + hh) * qk + nope)], rope, pos, *cosSin,
               step.style);
    }

    // Attention in the MHA form: decompress every key and value.
    Matrix attn(size_t(tokens * heads * vDim), 0.0);
    std::vector<float> row(static_cast<size_t>(cache.desc.rowValues()));
    const int64_t maxBlocks = blockTable->sizes[1];
    for (int64_t b = 0; b < tokens; ++b) {
      const int64_t len = int64_t(seqLens->at(b));
      if (len < 1 || len > maxBlocks * cache.desc.blockSize)
        return outOfRange("seq_lens out of range for the naive reference");
      // Latents and rope keys: earlier rows from the cache, the new row
      // (position len - 1) from this step's values.
      Matrix lat(size_t(len * latent)), pe(size_t(len * rope));
      for (int64_t j = 0; j < len - 1; ++j) {
        int64_t block =
            int64_t(blockTable->at(b * maxBlocks + j / cache.desc.blockSize));
        int64_t slot = block * cache.desc.blockSize + j % cache.desc.blockSize;
        decodeCacheRow(cache.desc,
                       cache.bytes.data() + slot * cache.desc.rowBytes(),
                       cache.scale, row.data());
        for (int64_t i = 0; i < latent; ++i)
          lat[size_t(j * latent + i)] = row[size_t(i)];
        for (int64_t i = 0; i < rope; ++i)
          pe[size_t(j * rope + i)] = row[size_t(latent + i)];
      }
      for (int64_t i = 0; i < latent; ++i)
        lat[size_t((len - 1) * latent + i)] = c[size_t(b * latent + i)];
      for (int64_t i = 0; i < rope; ++i)
        pe[size_t((len - 1) * rope + i)] = kPe[size_t(b * rope + i)];

      std::vector<double> key(static_cast<size_t>(qk)),
          scores(static_cast<size_t>(len));
      Matrix values(size_t(len * vDim));
      for (int64_t hh = 0; hh < heads; ++hh) {
        const double *qh = &q[size_t((b * heads + hh) * qk)];
        double maxScore = -INFINITY;
        for (int64_t j = 0; j < len; ++j) {
          for (int64_t n = 0; n < nope; ++n) {
            double acc = 0.0;
            for (int64_t i = 0; i < latent; ++i)
              acc += lat[size_t(j * latent + i)] *
                     wUK->at((hh * nope + n) * latent + i);
            key[size_t(n)] = acc;
          }
          for (int64_t i = 0; i < rope; ++i)
            key[size_t(nope + i)] = pe[size_t(j * rope + i)];
          double s = 0.0;
          for (int64_t i = 0; i < qk; ++i)
            s += qh[i] * key[size_t(i)];
          scores[size_t(j)] = s * step.softmaxScale;
          maxScore = std::max(maxScore, scores[size_t(j)]);
          for (int64_t v = 0; v < vDim; ++v) {
            double acc = 0.0;
            for (int64_t i = 0; i < latent; ++i)
              acc += lat[size_t(j * latent + i)] *
                     wUV->at((hh * latent + i) * vDim + v);
            values[size_t(j * vDim + v)] = acc;
          }
        }
        double sum = 0.0;
        for (int64_t j = 0; j < len; ++j)
          sum += (scores[size_t(j)] = std::exp(scores[size_t(j)] - maxScore));
        double *out = &attn[size_t((b * heads + hh) * vDim)];
        for (int64_t j = 0; j < len; ++j)
          for (int64_t v = 0; v < vDim; ++v)
            out[v] += scores[size_t(j)] / sum * values[size_t(j * vDim + v)];
      }
    }
    Matrix o = linear(attn, tokens, *oProj);
    for (size_t i = 0; i < x.size(); ++i)
      x[i] += o[i];
  }
  return Status();
}

StatusOr<std::vector<double>> naiveDecodeStep(const NaiveStep &step,
                                              Residual residual) {
  StatusOr<StepTensors> checked = stepTensors(step);
  if (!checked.ok())
    return checked.status();
  const HostTensorView &x0 = *checked.value().x0;
  std::vector<double> x(size_t(x0.sizes[0] * x0.sizes[1]));
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = x0.at(int64_t(i));
  for (size_t layer = 0; layer < step.caches.size(); ++layer) {
    if (Status s = naiveDecodeLayer(step, layer, x); !s.ok())
      return s;
    if (residual == Residual::RoundedToBF16)
      for (double &v : x)
        v = double(bf16ToFloat(floatToBf16(float(v))));
  }
  return x;
}

} // namespace mlarun
