//===- NaiveReference.cpp - Float64 non-absorbed DeepSeek attention step --===//
#include "NaiveReference.h"

#include "mlart/KVCacheLayout.h"

#include <algorithm>
#include <cmath>

using namespace mlart;

namespace mlarun {
namespace {

using Matrix = std::vector<double>; // row-major

/// out[T, N] = x[T, K] @ w[N, K]^T. Eight output columns at a time, their
/// weights transposed to [K, 8], so the eight sums (each still in order of
/// K) run side by side in vector lanes.
Matrix linear(const Matrix &x, int64_t tokens, const HostTensorView &w) {
  constexpr int64_t kCols = 8;
  const int64_t n = w.sizes[0], k = w.sizes[1];
  Matrix out(size_t(tokens * n), 0.0);
  std::vector<double> block(size_t(k * kCols));
  for (int64_t o0 = 0; o0 < n; o0 += kCols) {
    const int64_t cols = std::min(kCols, n - o0);
    std::fill(block.begin(), block.end(), 0.0);
    for (int64_t c = 0; c < cols; ++c)
      for (int64_t i = 0; i < k; ++i)
        block[size_t(i * kCols + c)] = w.at((o0 + c) * k + i);
    for (int64_t t = 0; t < tokens; ++t) {
      double acc[kCols] = {};
      const double *xt = &x[size_t(t * k)];
      for (int64_t i = 0; i < k; ++i)
        for (int64_t c = 0; c < kCols; ++c)
          acc[c] += xt[i] * block[size_t(i * kCols + c)];
      for (int64_t c = 0; c < cols; ++c)
        out[size_t(t * n + o0 + c)] = acc[c];
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

bool hasShape(const HostTensorView *t, std::vector<int64_t> sizes) {
  return t && t->sizes == sizes;
}

/// The step-wide tensors every layer reads, checked once a layer (the
/// reference indexes them without bounds checks).
struct StepTensors {
  const HostTensorView *x0, *positions, *blockTable, *seqLens, *cosSin;
  int64_t tokens, hidden, requests, maxBlocks;
  /// Request r's new tokens are rows starts[r] .. starts[r + 1] - 1.
  std::vector<int64_t> starts;
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
  if (t.x0->sizes.size() != 2 || t.blockTable->sizes.size() != 2 ||
      t.cosSin->sizes.size() != 2)
    return invalidArgument("naive reference: hidden_states, block_table and "
                           "cos_sin_cache must be 2-D");
  t.tokens = t.x0->sizes[0];
  t.hidden = t.x0->sizes[1];
  t.requests = t.blockTable->sizes[0];
  t.maxBlocks = t.blockTable->sizes[1];
  if (t.positions->numElements() != t.tokens ||
      t.seqLens->numElements() != t.requests)
    return invalidArgument("naive reference: positions must have one entry a "
                           "token and seq_lens one a request");
  if (const HostTensorView *qsl = find(step, "query_start_loc")) {
    if (qsl->numElements() != t.requests + 1)
      return invalidArgument("naive reference: query_start_loc must have "
                             "requests + 1 entries");
    for (int64_t r = 0; r <= t.requests; ++r)
      t.starts.push_back(int64_t(qsl->at(r)));
    for (int64_t r = 0; r < t.requests; ++r)
      if (t.starts[size_t(r + 1)] < t.starts[size_t(r)])
        return invalidArgument("naive reference: query_start_loc decreases");
    if (t.starts.front() != 0 || t.starts.back() != t.tokens)
      return invalidArgument("naive reference: query_start_loc must run from "
                             "0 to the token count");
  } else {
    if (t.requests != t.tokens)
      return invalidArgument("naive reference: a decode step (no "
                             "query_start_loc) has one token a request");
    for (int64_t r = 0; r <= t.requests; ++r)
      t.starts.push_back(r);
  }
  return t;
}

/// One layer's weights, shapes checked against each other and the cache.
struct LayerWeights {
  const HostTensorView *inNorm, *kvA, *kvNorm, *wUK, *wUV, *oProj;
  const HostTensorView *qProj, *qA, *qANorm, *qB; ///< qProj or the q LoRA
  int64_t heads, nope, latent, vDim, rope;
};

StatusOr<LayerWeights> layerWeights(const NaiveStep &step, size_t layer,
                                    const StepTensors &st) {
  const std::string p = "model.layers." + std::to_string(layer) + ".";
  auto w = [&](const std::string &name) { return find(step, p + name); };
  LayerWeights lw;
  lw.inNorm = w("input_layernorm.weight");
  lw.kvA = w("self_attn.kv_a_proj_with_mqa.weight");
  lw.kvNorm = w("self_attn.kv_a_layernorm.weight");
  lw.wUK = w("self_attn.w_uk");
  lw.wUV = w("self_attn.w_uv");
  lw.oProj = w("self_attn.o_proj.weight");
  lw.qProj = w("self_attn.q_proj.weight");
  lw.qA = w("self_attn.q_a_proj.weight");
  lw.qANorm = w("self_attn.q_a_layernorm.weight");
  lw.qB = w("self_attn.q_b_proj.weight");
  const std::string where = "layer " + std::to_string(layer) + ": ";
  if (!lw.inNorm || !lw.kvA || !lw.kvNorm || !lw.wUK || !lw.wUV || !lw.oProj ||
      !(lw.qProj || (lw.qA && lw.qANorm && lw.qB)))
    return invalidArgument(where + "missing weights for the naive reference");
  if (lw.wUK->sizes.size() != 3 || lw.wUV->sizes.size() != 3)
    return invalidArgument(where + "w_uk and w_uv must be 3-D");
  const KVCacheDesc &desc = step.caches[layer].desc;
  lw.heads = lw.wUK->sizes[0];
  lw.nope = lw.wUK->sizes[1];
  lw.latent = lw.wUK->sizes[2];
  lw.vDim = lw.wUV->sizes[2];
  lw.rope = desc.ropeDim;
  const int64_t qOut = lw.heads * (lw.nope + lw.rope), h = st.hidden;
  bool q = lw.qProj ? hasShape(lw.qProj, {qOut, h})
                    : lw.qA->sizes.size() == 2 &&
                          hasShape(lw.qA, {lw.qA->sizes[0], h}) &&
                          hasShape(lw.qANorm, {lw.qA->sizes[0]}) &&
                          hasShape(lw.qB, {qOut, lw.qA->sizes[0]});
  if (!q || desc.latentRank != lw.latent || lw.rope % 2 != 0 ||
      st.cosSin->sizes[1] != lw.rope || !hasShape(lw.inNorm, {h}) ||
      !hasShape(lw.kvA, {lw.latent + lw.rope, h}) ||
      !hasShape(lw.kvNorm, {lw.latent}) ||
      !hasShape(lw.wUV, {lw.heads, lw.latent, lw.vDim}) ||
      !hasShape(lw.oProj, {h, lw.heads * lw.vDim}))
    return invalidArgument(where + "weight shapes do not fit together for "
                           "the naive reference");
  if (int64_t(step.caches[layer].bytes.size()) != desc.totalBytes())
    return invalidArgument(where + "cache snapshot has the wrong size");
  return lw;
}

/// The latents and rope keys a request's new tokens attend to: `context`
/// earlier rows from the cache snapshot, then the step's own new rows.
struct RequestKeys {
  int64_t first = 0, count = 0, context = 0;
  Matrix lat, pe;
};

StatusOr<RequestKeys> requestKeys(const StepTensors &st,
                                  const CacheSnapshot &cache, int64_t r,
                                  const Matrix &c, const Matrix &kPe,
                                  int64_t latent, int64_t rope) {
  const KVCacheDesc &desc = cache.desc;
  RequestKeys k;
  k.first = st.starts[size_t(r)];
  k.count = st.starts[size_t(r + 1)] - k.first;
  const int64_t len = int64_t(st.seqLens->at(r));
  k.context = len - k.count;
  if (k.context < 0 || len > st.maxBlocks * desc.blockSize)
    return outOfRange("naive reference: seq_lens of request " +
                      std::to_string(r) + " out of range");
  k.lat.resize(size_t(len * latent));
  k.pe.resize(size_t(len * rope));
  std::vector<float> row(static_cast<size_t>(desc.rowValues()));
  for (int64_t j = 0; j < k.context; ++j) {
    int64_t block =
        int64_t(st.blockTable->at(r * st.maxBlocks + j / desc.blockSize));
    if (block < 0 || block >= desc.numBlocks)
      return outOfRange("naive reference: block_table entry out of range");
    int64_t slot = block * desc.blockSize + j % desc.blockSize;
    decodeCacheRow(desc, cache.bytes.data() + slot * desc.rowBytes(),
                   cache.scale, row.data());
    for (int64_t i = 0; i < latent; ++i)
      k.lat[size_t(j * latent + i)] = row[size_t(i)];
    for (int64_t i = 0; i < rope; ++i)
      k.pe[size_t(j * rope + i)] = row[size_t(latent + i)];
  }
  for (int64_t n = 0; n < k.count; ++n) {
    const int64_t j = k.context + n, t = k.first + n;
    for (int64_t i = 0; i < latent; ++i)
      k.lat[size_t(j * latent + i)] = c[size_t(t * latent + i)];
    for (int64_t i = 0; i < rope; ++i)
      k.pe[size_t(j * rope + i)] = kPe[size_t(t * rope + i)];
  }
  return k;
}

} // namespace

Status runNaiveLayer(const NaiveStep &step, size_t layer,
                     std::vector<double> &x, NaiveCacheRows *rows) {
  MLART_ASSIGN_OR_RETURN(StepTensors st, stepTensors(step));
  const int64_t tokens = st.tokens, hidden = st.hidden;
  if (layer >= step.caches.size())
    return outOfRange("the naive reference has no layer " +
                      std::to_string(layer));
  if (x.size() != size_t(tokens * hidden))
    return invalidArgument("naive reference: layer input has the wrong size");
  MLART_ASSIGN_OR_RETURN(LayerWeights lw, layerWeights(step, layer, st));
  const int64_t heads = lw.heads, nope = lw.nope, latent = lw.latent,
                vDim = lw.vDim, rope = lw.rope, qk = nope + rope;

  Matrix h = rmsNorm(x, tokens, hidden, 0, hidden, *lw.inNorm, step.epsilon);
  Matrix q;
  if (lw.qProj) {
    q = linear(h, tokens, *lw.qProj);
  } else {
    Matrix a = linear(h, tokens, *lw.qA);
    Matrix an = rmsNorm(a, tokens, lw.qA->sizes[0], 0, lw.qA->sizes[0],
                        *lw.qANorm, step.epsilon);
    q = linear(an, tokens, *lw.qB);
  }
  Matrix kv = linear(h, tokens, *lw.kvA);
  Matrix c = rmsNorm(kv, tokens, latent + rope, 0, latent, *lw.kvNorm,
                     step.epsilon);
  Matrix kPe(size_t(tokens * rope));
  for (int64_t t = 0; t < tokens; ++t) {
    int64_t pos = int64_t(st.positions->at(t));
    if (pos < 0 || pos >= st.cosSin->sizes[0])
      return outOfRange("naive reference: position out of cos_sin_cache");
    for (int64_t i = 0; i < rope; ++i)
      kPe[size_t(t * rope + i)] = kv[size_t(t * (latent + rope) + latent + i)];
    rotate(&kPe[size_t(t * rope)], rope, pos, *st.cosSin, step.style);
    for (int64_t hh = 0; hh < heads; ++hh)
      rotate(&q[size_t((t * heads + hh) * qk + nope)], rope, pos, *st.cosSin,
             step.style);
  }

  if (rows) {
    rows->latent = c;
    rows->ropeKey = kPe;
  }

  std::vector<RequestKeys> requests;
  for (int64_t r = 0; r < st.requests; ++r) {
    MLART_ASSIGN_OR_RETURN(RequestKeys k, requestKeys(st, step.caches[layer],
                                                      r, c, kPe, latent, rope));
    requests.push_back(std::move(k));
  }

  // Attention in the MHA form: decompress every key and value, head by head
  // (each head's W_UK, transposed, and W_UV converted once), causal within a
  // request.
  Matrix attn(size_t(tokens * heads * vDim), 0.0);
  std::vector<double> wUKT(size_t(latent * nope)), wUV(size_t(latent * vDim));
  for (int64_t hh = 0; hh < heads; ++hh) {
    for (int64_t n = 0; n < nope; ++n)
      for (int64_t i = 0; i < latent; ++i)
        wUKT[size_t(i * nope + n)] = lw.wUK->at((hh * nope + n) * latent + i);
    for (size_t i = 0; i < wUV.size(); ++i)
      wUV[i] = lw.wUV->at(hh * latent * vDim + int64_t(i));
    for (const RequestKeys &k : requests) {
      if (k.count == 0)
        continue;
      const int64_t len = k.context + k.count;
      Matrix keys(size_t(len * qk), 0.0), values(size_t(len * vDim), 0.0);
      for (int64_t j = 0; j < len; ++j) {
        const double *lat = &k.lat[size_t(j * latent)];
        double *key = &keys[size_t(j * qk)], *val = &values[size_t(j * vDim)];
        for (int64_t i = 0; i < latent; ++i) {
          for (int64_t n = 0; n < nope; ++n)
            key[n] += lat[i] * wUKT[size_t(i * nope + n)];
          for (int64_t v = 0; v < vDim; ++v)
            val[v] += lat[i] * wUV[size_t(i * vDim + v)];
        }
        for (int64_t i = 0; i < rope; ++i)
          key[nope + i] = k.pe[size_t(j * rope + i)];
      }
      std::vector<double> scores(static_cast<size_t>(len));
      for (int64_t n = 0; n < k.count; ++n) {
        const int64_t t = k.first + n, visible = k.context + n + 1;
        const double *qh = &q[size_t((t * heads + hh) * qk)];
        double maxScore = -INFINITY;
        for (int64_t j = 0; j < visible; ++j) {
          double s = 0.0;
          for (int64_t i = 0; i < qk; ++i)
            s += qh[i] * keys[size_t(j * qk + i)];
          scores[size_t(j)] = s * step.softmaxScale;
          maxScore = std::max(maxScore, scores[size_t(j)]);
        }
        double sum = 0.0;
        for (int64_t j = 0; j < visible; ++j)
          sum += (scores[size_t(j)] = std::exp(scores[size_t(j)] - maxScore));
        double *out = &attn[size_t((t * heads + hh) * vDim)];
        for (int64_t j = 0; j < visible; ++j)
          for (int64_t v = 0; v < vDim; ++v)
            out[v] += scores[size_t(j)] / sum * values[size_t(j * vDim + v)];
      }
    }
  }
  Matrix o = linear(attn, tokens, *lw.oProj);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] += o[i];
  return Status();
}

StatusOr<std::vector<double>> runNaiveStep(const NaiveStep &step,
                                           Residual residual,
                                           std::vector<NaiveCacheRows> *rows) {
  MLART_ASSIGN_OR_RETURN(StepTensors st, stepTensors(step));
  std::vector<double> x(size_t(st.tokens * st.hidden));
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = st.x0->at(int64_t(i));
  if (rows)
    rows->assign(step.caches.size(), NaiveCacheRows());
  for (size_t layer = 0; layer < step.caches.size(); ++layer) {
    MLART_RETURN_IF_ERROR(
        runNaiveLayer(step, layer, x, rows ? &(*rows)[layer] : nullptr));
    if (residual == Residual::RoundedToBF16)
      for (double &v : x)
        v = double(bf16ToFloat(floatToBf16(float(v))));
  }
  return x;
}

} // namespace mlarun
