//===- MiscKernels.cu - add, rmsNorm, qConcat, quantize -------------------===//
#include "cuda/CudaCommon.h"
#include "cuda/Launch.h"
#include "cpu/CpuKernels.h"
#include "cpu/TensorAccess.h"

namespace mlart::cuda {
namespace {

struct T2 {
  void *p;
  int type;
  int64_t s0;
};
T2 t2(const TensorRef &t) { return {t.data, int(t.dtype), t.strides[0]}; }

__global__ void addKernel(T2 a, T2 b, T2 o, int64_t rows, int64_t cols) {
  pdlPrologue();
  const int64_t n = rows * cols;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / cols, c = i % cols;
    const float v = __fadd_rn(loadF(a.p, a.type, r * a.s0 + c),
                              loadF(b.p, b.type, r * b.s0 + c));
    storeF(o.p, o.type, r * o.s0 + c, v);
  }
}

__global__ void rmsNormKernel(T2 x, const void *w, int wType, int64_t wS,
                              T2 o, int64_t dim, float eps) {
  pdlPrologue();
  const int64_t r = blockIdx.x;
  __shared__ float red[32];
  float part = 0.0f;
  for (int64_t c = threadIdx.x; c < dim; c += blockDim.x) {
    const float v = loadF(x.p, x.type, r * x.s0 + c);
    part += v * v;
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1)
    part += __shfl_xor_sync(0xffffffffu, part, off);
  if ((threadIdx.x & 31) == 0)
    red[threadIdx.x >> 5] = part;
  __syncthreads();
  float total = 0.0f;
  for (int i = 0; i < int(blockDim.x / 32); ++i)
    total += red[i];
  const float ms = dim > 0 ? total / float(dim) : 0.0f;
  const float inv = 1.0f / sqrtf(ms + eps);
  for (int64_t c = threadIdx.x; c < dim; c += blockDim.x) {
    const float v = loadF(x.p, x.type, r * x.s0 + c);
    storeF(o.p, o.type, r * o.s0 + c,
           __fmul_rn(__fmul_rn(v, inv), loadF(w, wType, c * wS)));
  }
}

/// bf16 fast paths (rows 16-byte aligned, columns a multiple of 8): 16-byte
/// vectors, every load issued before the first use.
__device__ __forceinline__ void unpack8(const uint4 &v, float (&f)[8]) {
  const uint16_t *e = reinterpret_cast<const uint16_t *>(&v);
#pragma unroll
  for (int j = 0; j < 8; ++j)
    f[j] = bf16BitsToFloat(e[j]);
}

__global__ void addBf16Kernel(const uint16_t *a, int64_t as, const uint16_t *b,
                              int64_t bs, uint16_t *o, int64_t os, int64_t rows,
                              int64_t chunks) {
  pdlPrologue();
  const int64_t n = rows * chunks;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / chunks, c = i % chunks;
    const uint4 va = reinterpret_cast<const uint4 *>(a + r * as)[c];
    const uint4 vb = reinterpret_cast<const uint4 *>(b + r * bs)[c];
    float fa[8], fb[8];
    unpack8(va, fa);
    unpack8(vb, fb);
    uint4 vo;
    uint16_t *e = reinterpret_cast<uint16_t *>(&vo);
#pragma unroll
    for (int j = 0; j < 8; ++j)
      e[j] = floatToBf16Bits(__fadd_rn(fa[j], fb[j]));
    reinterpret_cast<uint4 *>(o + r * os)[c] = vo;
  }
}

/// One block per row, each thread keeps up to kNormChunks 16-byte chunks
/// of x and of the weight in registers (dim <= 256 * 8 * kNormChunks).
constexpr int kNormChunks = 4;
__global__ void rmsNormBf16Kernel(const uint16_t *x, int64_t xs,
                                  const uint16_t *w, uint16_t *o, int64_t os,
                                  int chunks, float eps) {
  pdlPrologue();
  const int64_t r = blockIdx.x;
  __shared__ float red[32];
  uint4 xv[kNormChunks], wv[kNormChunks];
#pragma unroll
  for (int k = 0; k < kNormChunks; ++k) {
    const int c = threadIdx.x + k * blockDim.x;
    if (c < chunks) {
      xv[k] = reinterpret_cast<const uint4 *>(x + r * xs)[c];
      wv[k] = reinterpret_cast<const uint4 *>(w)[c];
    }
  }
  float part = 0.0f;
#pragma unroll
  for (int k = 0; k < kNormChunks; ++k)
    if (threadIdx.x + k * blockDim.x < chunks) {
      float f[8];
      unpack8(xv[k], f);
#pragma unroll
      for (int j = 0; j < 8; ++j)
        part += f[j] * f[j];
    }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1)
    part += __shfl_xor_sync(0xffffffffu, part, off);
  if ((threadIdx.x & 31) == 0)
    red[threadIdx.x >> 5] = part;
  __syncthreads();
  float total = 0.0f;
  for (int i = 0; i < int(blockDim.x / 32); ++i)
    total += red[i];
  const float ms = total / float(chunks * 8);
  const float inv = 1.0f / sqrtf(ms + eps);
#pragma unroll
  for (int k = 0; k < kNormChunks; ++k) {
    const int c = threadIdx.x + k * blockDim.x;
    if (c < chunks) {
      float f[8], g[8];
      unpack8(xv[k], f);
      unpack8(wv[k], g);
      uint4 vo;
      uint16_t *e = reinterpret_cast<uint16_t *>(&vo);
#pragma unroll
      for (int j = 0; j < 8; ++j)
        e[j] = floatToBf16Bits(__fmul_rn(__fmul_rn(f[j], inv), g[j]));
      reinterpret_cast<uint4 *>(o + r * os)[c] = vo;
    }
  }
}

/// q_concat with one element type for a, b and out (a pure copy): 16-byte
/// units when every row offset and both widths allow.
__global__ void qConcatVecKernel(const uint4 *a, int64_t as0, int64_t as1,
                                 const uint4 *b, int64_t bs0, int64_t bs1,
                                 uint4 *o, int64_t os0, int64_t os1, int H,
                                 int ua, int ub, int64_t n) {
  pdlPrologue();
  const int u = ua + ub;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int c = int(i % u);
    const int64_t bh = i / u;
    const int h = int(bh % H);
    const int64_t bb = bh / H;
    const uint4 v = c < ua ? a[bb * as0 + h * as1 + c]
                           : b[bb * bs0 + h * bs1 + (c - ua)];
    o[bb * os0 + h * os1 + c] = v;
  }
}

bool al16(const void *p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

struct T3 {
  void *p;
  int type;
  int64_t s0, s1;
};
T3 t3(const TensorRef &t) {
  return {t.data, int(t.dtype), t.strides[0], t.strides[1]};
}

__global__ void qConcatKernel(T3 a, T3 b, T3 o, int64_t B, int64_t H,
                              int64_t La, int64_t Lb) {
  pdlPrologue();
  const int64_t L = La + Lb, n = B * H * L;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = i % L, bh = i / L, h = bh % H, bb = bh / H;
    const T3 &s = c < La ? a : b;
    const int64_t sc = c < La ? c : c - La;
    const int64_t si = bb * s.s0 + h * s.s1 + sc;
    const int64_t oi = bb * o.s0 + h * o.s1 + c;
    if (s.type == o.type) {
      if (o.type == int(DType::F32))
        static_cast<uint32_t *>(o.p)[oi] = static_cast<const uint32_t *>(s.p)[si];
      else
        static_cast<uint16_t *>(o.p)[oi] = static_cast<const uint16_t *>(s.p)[si];
    } else {
      storeF(o.p, o.type, oi, loadF(s.p, s.type, si));
    }
  }
}

struct T4 {
  void *p;
  int type;
  int64_t sizes[4], strides[4];
};
T4 t4(const TensorRef &t) {
  T4 r{t.data, int(t.dtype), {1, 1, 1, 1}, {0, 0, 0, 0}};
  for (int d = 0; d < t.rank; ++d) {
    r.sizes[4 - t.rank + d] = t.sizes[d];
    r.strides[4 - t.rank + d] = t.strides[d];
  }
  return r;
}
__device__ __forceinline__ int64_t offset4(const T4 &t, int64_t i) {
  int64_t off = 0;
  for (int d = 3; d >= 0; --d) {
    off += (i % t.sizes[d]) * t.strides[d];
    i /= t.sizes[d];
  }
  return off;
}

__global__ void quantizeKernel(T4 x, T4 o, const float *scale, int64_t n,
                               int *badScale) {
  pdlPrologue();
  const float s = *scale;
  if (!(isfinite(s) && s > 0.0f)) {
    if (blockIdx.x == 0 && threadIdx.x == 0)
      atomicExch(badScale, 1);
    return;
  }
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    static_cast<uint8_t *>(o.p)[offset4(o, i)] =
        floatToFp8Bits(__fdiv_rn(loadF(x.p, x.type, offset4(x, i)), s));
}

constexpr int kThreads = 256;

} // namespace

Status add(CudaContext &ctx, const AddArgs &a, cudaStream_t stream) {
  using namespace mlart::cpu;
  MLART_RETURN_IF_ERROR(checkFloatTensor(a.a, "a", 2));
  MLART_RETURN_IF_ERROR(checkFloatTensor(a.b, "b", 2));
  MLART_RETURN_IF_ERROR(checkFloatTensor(a.out, "out", 2));
  const int64_t rows = a.a.sizes[0], cols = a.a.sizes[1];
  for (const TensorRef *t : {&a.b, &a.out}) {
    MLART_RETURN_IF_ERROR(checkDim(*t, "operand", 0, rows));
    MLART_RETURN_IF_ERROR(checkDim(*t, "operand", 1, cols));
  }
  if (rows * cols == 0)
    return Status::success();
  if (a.a.dtype == DType::BF16 && a.b.dtype == DType::BF16 &&
      a.out.dtype == DType::BF16 && cols % 8 == 0 && a.a.strides[1] == 1 &&
      a.b.strides[1] == 1 && a.out.strides[1] == 1 && al16(a.a.data) &&
      al16(a.b.data) && al16(a.out.data) && a.a.strides[0] % 8 == 0 &&
      a.b.strides[0] % 8 == 0 && a.out.strides[0] % 8 == 0) {
    const int64_t chunks = cols / 8;
    return launchKernel(
        "addBf16Kernel", addBf16Kernel,
        gridFor(rows * chunks, kThreads, int64_t(ctx.smCount) * 16), kThreads,
        0, stream, static_cast<const uint16_t *>(a.a.data), a.a.strides[0],
        static_cast<const uint16_t *>(a.b.data), a.b.strides[0],
        static_cast<uint16_t *>(a.out.data), a.out.strides[0], rows, chunks);
  }
  return launchKernel("addKernel", addKernel,
                      gridFor(rows * cols, kThreads, int64_t(ctx.smCount) * 32),
                      kThreads, 0, stream, t2(a.a), t2(a.b), t2(a.out), rows,
                      cols);
}

Status rmsNorm(CudaContext &ctx, const RmsNormArgs &a, cudaStream_t stream) {
  using namespace mlart::cpu;
  (void)ctx;
  MLART_RETURN_IF_ERROR(checkFloatTensor(a.x, "x", 2));
  MLART_RETURN_IF_ERROR(checkFloatTensor(a.weight, "weight", 1));
  MLART_RETURN_IF_ERROR(checkFloatTensor(a.out, "out", 2));
  const int64_t tokens = a.x.sizes[0], dim = a.x.sizes[1];
  MLART_RETURN_IF_ERROR(checkDim(a.weight, "weight", 0, dim));
  MLART_RETURN_IF_ERROR(checkDim(a.out, "out", 0, tokens));
  MLART_RETURN_IF_ERROR(checkDim(a.out, "out", 1, dim));
  if (!(a.epsilon >= 0.0f))
    return invalidArgument("rmsNorm epsilon must be >= 0");
  if (tokens == 0)
    return Status::success();
  if (tokens > INT_MAX)
    return invalidArgument("rmsNorm: too many rows");
  if (a.x.dtype == DType::BF16 && a.weight.dtype == DType::BF16 &&
      a.out.dtype == DType::BF16 && dim % 8 == 0 && dim > 0 &&
      dim <= int64_t(kThreads) * 8 * kNormChunks && a.x.strides[1] == 1 &&
      a.out.strides[1] == 1 && a.weight.strides[0] == 1 && al16(a.x.data) &&
      al16(a.out.data) && al16(a.weight.data) && a.x.strides[0] % 8 == 0 &&
      a.out.strides[0] % 8 == 0) {
    const int chunks = int(dim / 8);
    // Fewer threads for short rows: at least one chunk per thread.
    const int threads = std::min(kThreads, std::max(32, (chunks + 31) / 32 * 32));
    return launchKernel(
        "rmsNormBf16Kernel", rmsNormBf16Kernel, unsigned(tokens), threads, 0,
        stream, static_cast<const uint16_t *>(a.x.data), a.x.strides[0],
        static_cast<const uint16_t *>(a.weight.data),
        static_cast<uint16_t *>(a.out.data), a.out.strides[0], chunks,
        a.epsilon);
  }
  return launchKernel("rmsNormKernel", rmsNormKernel, unsigned(tokens),
                      kThreads, 0, stream, t2(a.x), a.weight.data,
                      int(a.weight.dtype), a.weight.strides[0], t2(a.out), dim,
                      a.epsilon);
}

Status qConcat(CudaContext &ctx, const QConcatArgs &args, cudaStream_t stream) {
  MLART_RETURN_IF_ERROR(cpu::validateQConcat(args));
  const TensorRef &a = args.qLatent, &b = args.qPe, &o = args.out;
  const int64_t n = o.sizes[0] * o.sizes[1] * o.sizes[2];
  if (n == 0)
    return Status::success();
  const int es = int(dtypeSize(o.dtype));
  const int per = 16 / std::max(es, 1); // elements per 16-byte unit
  auto vecOk = [&](const TensorRef &t) {
    return t.dtype == o.dtype && al16(t.data) && t.strides[2] == 1 &&
           t.strides[0] % per == 0 && t.strides[1] % per == 0 &&
           t.sizes[2] % per == 0;
  };
  if ((es == 2 || es == 4) && vecOk(a) && vecOk(b) && vecOk(o) &&
      a.sizes[1] <= INT_MAX && a.sizes[2] / per + b.sizes[2] / per <= INT_MAX) {
    const int ua = int(a.sizes[2] / per), ub = int(b.sizes[2] / per);
    const int64_t units = o.sizes[0] * o.sizes[1] * (ua + ub);
    return launchKernel(
        "qConcatVecKernel", qConcatVecKernel,
        gridFor(units, kThreads, int64_t(ctx.smCount) * 16), kThreads, 0,
        stream, static_cast<const uint4 *>(a.data), a.strides[0] / per,
        a.strides[1] / per, static_cast<const uint4 *>(b.data),
        b.strides[0] / per, b.strides[1] / per, static_cast<uint4 *>(o.data),
        o.strides[0] / per, o.strides[1] / per, int(a.sizes[1]), ua, ub,
        units);
  }
  return launchKernel("qConcatKernel", qConcatKernel,
                      gridFor(n, kThreads, int64_t(ctx.smCount) * 32), kThreads,
                      0, stream, t3(a), t3(b), t3(o), a.sizes[0], a.sizes[1],
                      a.sizes[2], b.sizes[2]);
}

Status quantize(CudaContext &ctx, const QuantizeArgs &args,
                cudaStream_t stream) {
  const TensorRef &x = args.x, &out = args.out;
  if (!x.present() || !out.present() || !args.scale.present())
    return invalidArgument("quantize needs x, scale and out");
  if (x.rank < 0 || x.rank > kMaxRank)
    return invalidArgument("quantize: bad rank of x");
  if (!isFloatType(x.dtype))
    return invalidArgument("quantize: x must be f32, f16 or bf16, got " +
                           x.describe());
  if (out.dtype != DType::F8E4M3FN)
    return invalidArgument("quantize: out must be f8e4m3fn, got " +
                           out.describe());
  bool same = out.rank == x.rank;
  for (int d = 0; same && d < x.rank; ++d)
    same = out.sizes[d] == x.sizes[d] && x.sizes[d] >= 0;
  if (!same)
    return invalidArgument("quantize: out " + out.describe() +
                           " must have the shape of x " + x.describe());
  const TensorRef &s = args.scale;
  if (s.dtype != DType::F32 ||
      !(s.rank == 0 || (s.rank == 1 && s.sizes[0] == 1)))
    return invalidArgument(
        "quantize: scale must be a [] or [1] f32 tensor, got " + s.describe());
  const int64_t n = x.numElements();
  std::unique_lock<std::mutex> lock(ctx.recordMutex, std::defer_lock);
  if (ctx.synchronousChecks) {
    lock.lock();
    MLART_RETURN_IF_ERROR(resetRecord(ctx, stream));
  }
  MLART_RETURN_IF_ERROR(launchKernel(
      "quantizeKernel", quantizeKernel,
      gridFor(n, kThreads, int64_t(ctx.smCount) * 32), kThreads, 0, stream,
      t4(x), t4(out), static_cast<const float *>(s.data), n,
      &ctx.deviceRecord->badScale));
  return finishChecked(ctx, stream, lock);
}

} // namespace mlart::cuda

// --- copyView: one launch for any strided (or broadcast) copy. -------------
namespace mlart::cuda {
namespace {

struct CopyGeom {
  int64_t sizes[4];
  int64_t src[4];
  int64_t dst[4];
};

template <typename U>
__global__ void copyViewKernel(const U *__restrict__ src, U *__restrict__ dst,
                               CopyGeom g, int64_t n) {
  pdlPrologue();
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t r = i;
    const int64_t i3 = r % g.sizes[3];
    r /= g.sizes[3];
    const int64_t i2 = r % g.sizes[2];
    r /= g.sizes[2];
    const int64_t i1 = r % g.sizes[1];
    const int64_t i0 = r / g.sizes[1];
    dst[i0 * g.dst[0] + i1 * g.dst[1] + i2 * g.dst[2] + i3 * g.dst[3]] =
        src[i0 * g.src[0] + i1 * g.src[1] + i2 * g.src[2] + i3 * g.src[3]];
  }
}

template <typename U>
Status launchCopy(const void *src, void *dst, const CopyGeom &g, int64_t n,
                  cudaStream_t stream) {
  const int threads = 256;
  return launchKernel("copyView", copyViewKernel<U>,
                      gridFor(n, threads, 65535LL * 8), threads, 0, stream,
                      static_cast<const U *>(src), static_cast<U *>(dst), g, n);
}

} // namespace

Status copyView(CudaContext &ctx, const TensorRef &src, const TensorRef &dst,
                cudaStream_t stream) {
  MLART_RETURN_IF_ERROR(checkCopyView(src, dst));
  if (src.numElements() == 0)
    return Status::success();
  const int64_t elem = int64_t(dtypeSize(src.dtype));
  CopyGeom g;
  const int pad = 4 - src.rank;
  for (int d = 0; d < 4; ++d) {
    const bool real = d >= pad;
    g.sizes[d] = real ? src.sizes[d - pad] : 1;
    g.src[d] = real ? src.strides[d - pad] : 0;
    g.dst[d] = real ? dst.strides[d - pad] : 0;
  }
  // Widest unit W (bytes) such that the inner dimension, every outer stride
  // and both base addresses are whole units: copy W-byte vectors.
  int64_t w = elem;
  if (g.src[3] == 1 && g.dst[3] == 1) {
    for (int64_t cand : {16, 8, 4, 2}) {
      if (cand <= elem || cand % elem)
        continue;
      bool ok = (g.sizes[3] * elem) % cand == 0 &&
                uintptr_t(src.data) % uintptr_t(cand) == 0 &&
                uintptr_t(dst.data) % uintptr_t(cand) == 0;
      for (int d = 0; ok && d < 3; ++d)
        ok = (g.src[d] * elem) % cand == 0 && (g.dst[d] * elem) % cand == 0;
      if (ok) {
        w = cand;
        break;
      }
    }
  }
  if (w != elem) {
    g.sizes[3] = g.sizes[3] * elem / w;
    for (int d = 0; d < 3; ++d) {
      g.src[d] = g.src[d] * elem / w;
      g.dst[d] = g.dst[d] * elem / w;
    }
  }
  const int64_t n = g.sizes[0] * g.sizes[1] * g.sizes[2] * g.sizes[3];
  MLART_CUDA_CHECK(cudaSetDevice(ctx.ordinal), "cudaSetDevice");
  switch (w) {
  case 1:
    return launchCopy<uint8_t>(src.data, dst.data, g, n, stream);
  case 2:
    return launchCopy<uint16_t>(src.data, dst.data, g, n, stream);
  case 4:
    return launchCopy<uint32_t>(src.data, dst.data, g, n, stream);
  case 8:
    return launchCopy<uint2>(src.data, dst.data, g, n, stream);
  case 16:
    return launchCopy<uint4>(src.data, dst.data, g, n, stream);
  default:
    return invalidArgument("copyView: unsupported element size " +
                           std::to_string(elem));
  }
}

} // namespace mlart::cuda
