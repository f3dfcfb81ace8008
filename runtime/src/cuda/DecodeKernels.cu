//===- DecodeKernels.cu - Paged MLA decode (split-KV) ---------------------===//
//
// decodeAttention, fast path (bf16 q and bf16 plain cache, latent 512, rope
// 64, heads a multiple of 16): one CTA of 4 warps per (split, sequence,
// 16-head group). KV tiles of 64 tokens stream through shared memory with
// cp.async (double-buffered, 16-byte copies, rows past seq_len zero-filled
// and never read from global memory). Scores S = Q K^T and the update
// O += P V run on the tensor cores (mma.sync m16n8k16 bf16, f32 accumulate);
// warp w owns tokens 16w..16w+15 of S and latent channels 128w..128w+127 of
// O, so the 16x576 query is read from shared memory and each KV tile is read
// from HBM exactly once per head group. Online softmax in the log2 domain.
// Splits cover whole tiles. With 2..8 splits the CTAs of one (sequence,
// head group) form a thread-block cluster and merge their partial outputs
// through distributed shared memory at the end of the kernel; with more (or
// MLART_DECODE_CLUSTER=0) the partials go to a workspace and a combine
// kernel merges them with their LSEs (nothing to merge with one split).
//
// Every other dtype/layout/head count takes a simple CUDA-core fallback (one
// CTA per (sequence, head)). Prefill lives in PrefillKernels.cu.
//
//===----------------------------------------------------------------------===//
#include "cpu/CpuKernels.h"
#include "cpu/TensorAccess.h"
#include "cuda/CudaCommon.h"
#include "cuda/DecodeCommon.h"
#include "cuda/Knobs.h"
#include "cuda/Launch.h"
#include "cuda/Scratch.h"

#include <cooperative_groups.h>

#include <atomic>
#include <cmath>
#include <string>

namespace mlart::cuda {
namespace {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// --- Fast path: tensor-core split-KV decode. ---------------------------------
constexpr int kHeads = 16, kThreadsTc = 128;
constexpr int kRowEl = kD + 8; // padded smem row (1168 bytes): no bank conflicts
constexpr int kPRow = kTile + 8;
constexpr int kChunksPerRow = kD * 2 / 16; // 72
constexpr int kKSteps = kD / 16 / 4;        // 9 k-steps of S per warp
constexpr int kSRow = kTile + 8;            // padded f32 row of partial S
/// The fused write's bookkeeping (DecodeStepWrite.h), per KV buffer: the
/// slot of each tile row (-1: none), the last token writing it (-1: none),
/// the number of hits.
struct StepRowsSmem {
  int64_t rowSlot[2][kTile];
  int hitToken[2][kTile];
  int hits[2];
};
constexpr size_t kSmemTcBase =
    size_t(kHeads * kRowEl + 2 * kTile * kRowEl + kHeads * kPRow) * 2 +
    2 * 4 * kHeads * sizeof(float) + size_t(4 * kHeads * kSRow) * sizeof(float);
static_assert(kSmemTcBase % alignof(StepRowsSmem) == 0);
constexpr size_t kSmemTc = kSmemTcBase + sizeof(StepRowsSmem);

__device__ __forceinline__ uint32_t smemAddr(const void *p) {
  return uint32_t(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void cpAsync16(void *dst, const void *src,
                                          bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(
                   smemAddr(dst)),
               "l"(src), "r"(valid ? 16 : 0));
}
/// cpAsync16 with an L2 cache policy (createpolicy), for data read once.
__device__ __forceinline__ void cpAsync16Hinted(void *dst, const void *src,
                                                bool valid, uint64_t policy) {
  asm volatile(
      "cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;\n" ::"r"(
          smemAddr(dst)),
      "l"(src), "r"(valid ? 16 : 0), "l"(policy));
}
__device__ __forceinline__ void cpCommit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int N> __device__ __forceinline__ void cpWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}
__device__ __forceinline__ void ldsm4(uint32_t (&r)[4], const void *p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smemAddr(p)));
}
__device__ __forceinline__ void ldsm4t(uint32_t (&r)[4], const void *p) {
  asm volatile(
      "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
      : "r"(smemAddr(p)));
}
__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4],
                                         uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
               "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ int seqLenChecked(const DecodeParams &p, int b) {
  const int len = p.seqLens[b * p.seqStride];
  if (len < 0 || int64_t(len) > p.c.maxBlocks * p.c.blockSize) {
    if (threadIdx.x == 0 && blockIdx.x == 0 && blockIdx.z == 0)
      atomicMin(&p.rec->badSeqIndex, b);
    return -1;
  }
  return len;
}

// Cluster merge: each CTA's normalised partial (16 heads x 512 f32, rows
// padded so the epilogue's float2 stores are conflict-free) and its 16 LSEs
// go to its KV staging buffers, free once the tile loop is done.
constexpr int kPartRow = kDv + 8;
static_assert(size_t(kHeads * kPartRow + kHeads) * sizeof(float) <=
                  size_t(2 * kTile * kRowEl) * 2,
              "the partial fits in the KV staging buffers");
static_assert(size_t(2 * kMaxClusterSplits * kHeads + kHeads) <=
                  size_t(4 * kHeads * kSRow),
              "the merge weights fit in the partial-score buffer");

__device__ __forceinline__ unsigned long long globalTimerNs() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

/// Field `k` of this CTA's trace record (thread 0 only; no-op untraced);
/// the entry mark also records the SM.
__device__ __forceinline__ void traceMark(const DecodeParams &p,
                                          DecodeTraceField k) {
  if (!p.trace || threadIdx.x != 0)
    return;
  const int64_t cta =
      blockIdx.x + int64_t(gridDim.x) * (blockIdx.y + int64_t(gridDim.y) * blockIdx.z);
  unsigned long long *rec = p.trace + cta * kDecodeTraceFields;
  if (k == kTraceEntry) {
    unsigned sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    rec[kTraceSm] = sm;
  }
  rec[k] = globalTimerNs();
}

/// This thread's share of a normalised f32 partial of 16 heads: row h of
/// `po` (rowStride floats apart) gets head h's 512 channels, pl[h] its LSE.
/// For the combine kernels (global) and the cluster merge (shared memory).
__device__ __forceinline__ void storePartial(float *po, int rowStride,
                                             float *pl,
                                             const float (&o)[16][4],
                                             const float (&inv)[2],
                                             const float (&lseV)[2]) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, q4 = lane & 3;
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    const int col = warp * 128 + i * 8 + q4 * 2;
#pragma unroll
    for (int r = 0; r < 2; ++r)
      *reinterpret_cast<float2 *>(po + (g + 8 * r) * rowStride + col) =
          make_float2(o[i][2 * r] * inv[r], o[i][2 * r + 1] * inv[r]);
  }
  if (q4 == 0 && warp == 0) {
    pl[g] = lseV[0];
    pl[g + 8] = lseV[1];
  }
}

/// Writes this CTA's partial into its shared memory, waits for the whole
/// cluster, then merges channel slice `rank` of all 16 heads from every
/// rank's shared memory with combineKernel's weights and order (split
/// order), and writes the output (rank 0 also the LSE). Every thread of
/// every CTA must call it: it holds two cluster barriers, the last one so no
/// CTA exits while another still reads its shared memory.
__device__ __forceinline__ void
clusterMergeEpilogue(const DecodeParams &p, const float (&o)[16][4],
                     const float (&inv)[2], const float (&lseV)[2], float *part,
                     float *scratch, int b, int h0) {
  namespace cg = cooperative_groups;
  const cg::cluster_group cluster = cg::this_cluster();
  const int tid = threadIdx.x;
  float *partLse = part + kHeads * kPartRow;
  storePartial(part, kPartRow, partLse, o, inv, lseV);
  traceMark(p, kTraceStored);
  // Release/acquire: every rank's partial is visible. cluster.sync() is
  // lowered by ptxas to a GPU-scope MEMBAR before the barrier (docs/cuda.md,
  // "The 16-head kernel"); the relaxed form fences at cluster scope only.
  if (p.relaxedBarrier)
    asm volatile("fence.acq_rel.cluster;\n"
                 "barrier.cluster.arrive.relaxed.aligned;\n"
                 "barrier.cluster.wait.aligned;\n" ::: "memory");
  else
    cluster.sync();
  traceMark(p, kTraceSynced);

  const int S = p.splits, rank = int(cluster.block_rank());
  float *lseAll = scratch;                          // [S][16]
  float *wgt = lseAll + kMaxClusterSplits * kHeads; // [S][16], -1: empty
  float *invH = wgt + kMaxClusterSplits * kHeads;   // [16]
  if (tid < S * kHeads)
    lseAll[tid] = cluster.map_shared_rank(partLse, tid / kHeads)[tid % kHeads];
  __syncthreads();
  if (tid < kHeads) {
    float mx = -INFINITY;
    for (int s = 0; s < S; ++s)
      mx = fmaxf(mx, lseAll[s * kHeads + tid]);
    float total = 0.0f; // in split order, as combineKernel
    for (int s = 0; s < S; ++s) {
      const float lse = lseAll[s * kHeads + tid];
      const float w = lse == -INFINITY ? -1.0f : expf(lse - mx);
      wgt[s * kHeads + tid] = w;
      total += mx == -INFINITY ? 0.0f : fmaxf(w, 0.0f);
    }
    invH[tid] = total > 0.0f ? 1.0f / total : 0.0f;
    if (p.lse && rank == 0)
      p.lse[b * p.lS0 + (h0 + tid) * p.lS1] =
          total > 0.0f ? mx + logf(total) : -INFINITY;
  }
  __syncthreads();

  // Rank r owns float4 columns [c0, c1) of every head; four items a thread
  // a round, so each rank's loads of the round are in flight together.
  constexpr int kCols4 = kDv / 4, kPerRound = 4;
  const int c0 = rank * kCols4 / S, c1 = (rank + 1) * kCols4 / S;
  const int n4 = c1 - c0, items = kHeads * n4;
  for (int base = 0; base < items; base += kPerRound * kThreadsTc) {
    float4 acc[kPerRound];
    int hh[kPerRound], cc[kPerRound];
#pragma unroll
    for (int j = 0; j < kPerRound; ++j) {
      const int it = base + j * kThreadsTc + tid;
      hh[j] = it < items ? it / n4 : -1;
      cc[j] = it < items ? c0 + it % n4 : 0;
      acc[j] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
    for (int s = 0; s < S; ++s) {
      const float *src = cluster.map_shared_rank(part, s);
#pragma unroll
      for (int j = 0; j < kPerRound; ++j) {
        const float w = hh[j] < 0 ? -1.0f : wgt[s * kHeads + hh[j]];
        if (w >= 0.0f) {
          const float4 v = *reinterpret_cast<const float4 *>(
              src + hh[j] * kPartRow + 4 * cc[j]);
          acc[j].x += w * v.x;
          acc[j].y += w * v.y;
          acc[j].z += w * v.z;
          acc[j].w += w * v.w;
        }
      }
    }
    withOutputType(p, [&](auto bf16) {
      constexpr bool kBf16 = decltype(bf16)::value;
#pragma unroll
      for (int j = 0; j < kPerRound; ++j) {
        if (hh[j] < 0)
          continue;
        const float iv = invH[hh[j]];
        // Strides are even: two pair stores (8-byte ones would need % 4).
        const int64_t off = b * p.oS0 + (h0 + hh[j]) * p.oS1 + 4 * cc[j];
        storeOutPair<kBf16>(p, off, acc[j].x * iv, acc[j].y * iv);
        storeOutPair<kBf16>(p, off + 2, acc[j].z * iv, acc[j].w * iv);
      }
    });
  }
  // No CTA exits while another reads its shared memory: every rank's remote
  // loads have returned (their values are stored above), so the barrier
  // orders nothing else and needs no fence.
  if (p.relaxedBarrier)
    asm volatile("barrier.cluster.arrive.relaxed.aligned;\n"
                 "barrier.cluster.wait.aligned;\n" ::: "memory");
  else
    cluster.sync();
}

/// Shared memory of the 16-head kernel (kSmemTc bytes), carved once.
struct TcSmem {
  uint16_t *Qs, *Ks, *Ps;
  float *redMax, *redSum, *Sred; // Sred: [4 warps][16][kSRow] partial scores
  StepRowsSmem *step;
  __device__ __forceinline__ explicit TcSmem(uint8_t *smem) {
    Qs = reinterpret_cast<uint16_t *>(smem);
    Ks = Qs + kHeads * kRowEl;
    Ps = Ks + 2 * kTile * kRowEl;
    redMax = reinterpret_cast<float *>(Ps + kHeads * kPRow);
    redSum = redMax + 4 * kHeads;
    Sred = redSum + 4 * kHeads;
    step = reinterpret_cast<StepRowsSmem *>(smem + kSmemTcBase);
  }
};

/// A CTA's part in the fused write (DecodeStepWrite.h): whether it
/// substitutes the step's rows (there are rows and every slot is good),
/// its share of the stores (done once, while its first tile loads) and the
/// slot of token threadIdx.x, kept in a register for the per-tile test.
struct StepJob {
  bool substitute = false, storePending = false;
  int64_t cta = 0, ctas = 1;
  int64_t mySlot = -1;

  __device__ __forceinline__ void store(const DecodeParams &p) {
    if (!storePending)
      return;
    storeStepRows(p.w, p.c.blockSize, p.c.blockStride, p.c.rowBytes, cta, ctas,
                  kThreadsTc / 32);
    storePending = false;
  }
};

/// The job of CTA `cta` of `ctas`. Every thread calls it (a barrier).
__device__ __forceinline__ StepJob stepJobOf(const DecodeParams &p, int64_t cta,
                                             int64_t ctas) {
  StepJob job;
  job.cta = cta;
  job.ctas = ctas;
  if (p.w.tokens == 0 || !stepSlotsValid(p.w, p.rec, cta == 0))
    return job;
  job.substitute = job.storePending = true;
  if (int(threadIdx.x) < p.w.tokens)
    job.mySlot = stepSlot(p.w, int(threadIdx.x));
  return job;
}

/// Records in the hit lists of buffer `buf` every token that writes one of
/// its tile rows (rowSlot, already visible to all threads). A tile's rows
/// are runs of consecutive slots, one run a page (block sizes are powers
/// of two, so runs start at multiples of min(blockSize, kTile)).
__device__ __forceinline__ void findStepRows(const DecodeParams &p,
                                             const StepJob &job,
                                             StepRowsSmem *st, int buf) {
  const int64_t *rowSlot = st->rowSlot[buf];
  const int run = min(p.c.blockSize, kTile);
  auto test = [&](int t, int64_t s) {
    for (int k = 0; k < kTile; k += run) {
      const int64_t first = rowSlot[k];
      if (first < 0 || s < first || s >= first + run)
        continue;
      const int r = k + int(s - first);
      if (rowSlot[r] == s) {
        atomicMax(&st->hitToken[buf][r], t);
        atomicAdd(&st->hits[buf], 1);
      }
    }
  };
  if (job.mySlot >= 0)
    test(int(threadIdx.x), job.mySlot);
  for (int t = int(threadIdx.x) + kThreadsTc; t < p.w.tokens; t += kThreadsTc) {
    const int64_t s = stepSlot(p.w, t);
    if (s >= 0)
      test(t, s);
  }
}

/// Overwrites the rows of tile buffer `K` that this step writes with the
/// input rows, then clears the buffer's hit lists. Every thread calls it
/// (two barriers), only for a buffer with hits.
__device__ __forceinline__ void substituteStepRows(const DecodeParams &p,
                                                   StepRowsSmem *st, int buf,
                                                   uint16_t *K) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int r = warp; r < kTile; r += kThreadsTc / 32) {
    const int t = st->hitToken[buf][r];
    if (t >= 0)
      copyStepRow(p.w, t, reinterpret_cast<uint8_t *>(K + r * kRowEl), lane);
  }
  __syncthreads();
  if (threadIdx.x < kTile)
    st->hitToken[buf][threadIdx.x] = -1;
  if (threadIdx.x == 0)
    st->hits[buf] = 0;
}

/// The running softmax state of one (sequence, 16 heads) piece: this
/// thread's O fragments (warp w owns channels 128w..128w+127), the row
/// maxima and sums (rows g and g + 8) in the log2 domain.
struct TcAccum {
  float o[16][4];
  float m[2], l[2];
};

/// KV tiles [t0, t1) of the 16 heads at h0 of sequence b (len tokens).
struct TilePiece {
  int b, h0, len, t0, t1;
};

/// Attends `cur`: loads Q and streams the tiles through the double buffer,
/// leaving the unnormalised result in `acc`. Every thread calls it; it ends
/// with no copy in flight and shared memory free for the caller. (Issuing
/// the balanced kernel's next piece during the last tile was measured
/// slower: docs/cuda.md, "Designs measured and not kept".)
///
/// `job`: the fused write (DecodeStepWrite.h); rows the step writes are
/// taken from the inputs, and a pending store runs once the first tile's
/// copies are issued.
template <bool kSplitK>
__device__ __forceinline__ void
attendTiles(const DecodeParams &p, const TcSmem &sm, const TilePiece &cur,
            TcAccum &acc, StepJob &job) {
  const bool substitute = job.substitute;
  const int b = cur.b, h0 = cur.h0, len = cur.len, t0 = cur.t0, t1 = cur.t1;
  uint16_t *const Qs = sm.Qs, *const Ks = sm.Ks, *const Ps = sm.Ps;
  float *const redMax = sm.redMax, *const redSum = sm.redSum,
               *const Sred = sm.Sred;
  float(&o)[16][4] = acc.o;
  float(&m)[2] = acc.m;
  float(&l)[2] = acc.l;
  uint32_t qf[kKSteps][4]; // this warp's Q fragments
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

  // Warp w copies rows 16w..16w+15 of a tile: lane (l & 15) resolves the
  // page of one row (block sizes are powers of two: shifts, no division),
  // the row pointers are then broadcast and each row is copied as 72
  // 16-byte chunks by the 32 lanes (coalesced, 512 contiguous bytes a step).
  // The KV stream is read once: evict it first, so that it does not push
  // out of L2 what is read again (the query, the block table, the code).
  // H200, step shape alone: 86.6 -> 85.5 us; H=16 B=128 L=8192 314.4 ->
  // 310.2 us.
  uint64_t evictFirst;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;"
               : "=l"(evictFirst));
  auto loadTile = [&](int seq, int seqLen, int tile, int buf) {
    uint16_t *dst = Ks + buf * kTile * kRowEl + warp * 16 * kRowEl;
    const int pos = tile * kTile + warp * 16 + (lane & 15);
    const uint8_t *myRow = nullptr;
    int64_t mySlot = -1; // for the fused write's substitution
    if (pos < seqLen) {
      const int64_t id = p.c.table[seq * p.c.tableS0 + int64_t(pos >> p.bsLog2) * p.c.tableS1];
      if (id >= 0 && id < p.c.numBlocks) {
        myRow = blockRow(p.c, id, pos & (p.c.blockSize - 1));
        mySlot = (id << p.bsLog2) + (pos & (p.c.blockSize - 1));
      } else if (lane < 16) {
        atomicMin(&p.rec->badSeqIndex, seq);
      }
    }
    if (substitute && lane < 16)
      sm.step->rowSlot[buf][warp * 16 + lane] = mySlot;
#pragma unroll 4
    for (int rr = 0; rr < 16; ++rr) {
      const uint8_t *row = reinterpret_cast<const uint8_t *>(
          __shfl_sync(0xffffffffu, reinterpret_cast<unsigned long long>(myRow), rr));
      uint16_t *d = dst + rr * kRowEl;
#pragma unroll
      for (int k = 0; k < 3; ++k) {
        const int ch = lane + 32 * k;
        if (ch < kChunksPerRow)
          cpAsync16Hinted(d + ch * 8, row ? row + ch * 16 : p.c.data,
                          row != nullptr, evictFirst);
      }
    }
  };

  // Q (16 heads x 576) joins the first tile's copy group.
  auto loadQ = [&](int seq, int head0) {
    for (int c = tid; c < kHeads * kChunksPerRow; c += kThreadsTc) {
      const int h = c / kChunksPerRow, ch = c % kChunksPerRow;
      cpAsync16(Qs + h * kRowEl + ch * 8,
                p.q + seq * p.qS0 + (head0 + h) * p.qS1 + ch * 8, true);
    }
  };
  if (substitute) {
    if (tid < 2 * kTile)
      sm.step->hitToken[tid / kTile][tid % kTile] = -1;
    if (tid < 2)
      sm.step->hits[tid] = 0;
  }
  if (t0 < t1) {
    loadQ(b, h0);
    loadTile(b, len, t0, 0);
  }
  cpCommit();
  job.store(p);
  if (substitute && t0 < t1) { // the first tile's hits; later ones pipelined
    __syncthreads();
    findStepRows(p, job, sm.step, 0);
  }

#pragma unroll
  for (int i = 0; i < 16; ++i)
    o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
  m[0] = m[1] = -INFINITY;
  l[0] = l[1] = 0.0f;
  const int g = lane >> 2, q4 = lane & 3;

  for (int tile = t0; tile < t1; ++tile) {
    const int buf = (tile - t0) & 1;
    if (tile + 1 < t1)
      loadTile(b, len, tile + 1, buf ^ 1);
    cpCommit();
    cpWait<1>();
    __syncthreads();
    if (substitute) {
      // The next tile's rowSlot was written before the barrier; its hits
      // are read after the next one. This tile's hits are final.
      if (tile + 1 < t1)
        findStepRows(p, job, sm.step, buf ^ 1);
      if (sm.step->hits[buf] > 0)
        substituteStepRows(p, sm.step, buf, Ks + buf * kTile * kRowEl);
    }
    if (tile == t0)
      traceMark(p, kTraceFirstTile);
    const uint16_t *K = Ks + buf * kTile * kRowEl;

    float s[2][4] = {{0, 0, 0, 0}, {0, 0, 0, 0}};
    if constexpr (kSplitK) {
    // S = Q K^T, split over the 576-wide reduction: warp w multiplies its
    // 144 dims (Q fragments held in registers for the whole kernel) for all
    // 64 tokens; partial sums meet in shared memory.
    if (tile == t0) {
#pragma unroll
      for (int k = 0; k < kKSteps; ++k)
        ldsm4(qf[k], Qs + (lane & 15) * kRowEl + (warp * kKSteps + k) * 16 +
                         (lane >> 4) * 8);
    }
    {
      float acc[4][2][4];
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int n = 0; n < 2; ++n)
          acc[j][n][0] = acc[j][n][1] = acc[j][n][2] = acc[j][n][3] = 0.0f;
      const uint16_t *kBase = K + ((lane & 7) + (lane >> 4) * 8) * kRowEl +
                              warp * kKSteps * 16 + ((lane >> 3) & 1) * 8;
#pragma unroll
      for (int k = 0; k < kKSteps; ++k)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          uint32_t bb[4];
          ldsm4(bb, kBase + j * 16 * kRowEl + k * 16);
          mma16816(acc[j][0], qf[k], bb[0], bb[1]);
          mma16816(acc[j][1], qf[k], bb[2], bb[3]);
        }
      float *mine = Sred + warp * kHeads * kSRow;
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int n = 0; n < 2; ++n) {
          const int col = j * 16 + n * 8 + q4 * 2;
          *reinterpret_cast<float2 *>(mine + g * kSRow + col) =
              make_float2(acc[j][n][0], acc[j][n][1]);
          *reinterpret_cast<float2 *>(mine + (g + 8) * kSRow + col) =
              make_float2(acc[j][n][2], acc[j][n][3]);
        }
    }
    __syncthreads();
#pragma unroll
    for (int n = 0; n < 2; ++n) {
      const int col = warp * 16 + n * 8 + q4 * 2;
      float2 lo = make_float2(0.0f, 0.0f), hi = make_float2(0.0f, 0.0f);
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        const float *part = Sred + w * kHeads * kSRow;
        const float2 a = *reinterpret_cast<const float2 *>(part + g * kSRow + col);
        const float2 c = *reinterpret_cast<const float2 *>(part + (g + 8) * kSRow + col);
        lo.x += a.x;
        lo.y += a.y;
        hi.x += c.x;
        hi.y += c.y;
      }
      s[n][0] = lo.x;
      s[n][1] = lo.y;
      s[n][2] = hi.x;
      s[n][3] = hi.y;
    }
    } else {
      // Variant 0: warp w computes all 576 dims for tokens 16w..16w+15,
      // reading Q from shared memory every tile.
      float s2[2][4] = {{0, 0, 0, 0}, {0, 0, 0, 0}};
      const uint16_t *qBase = Qs + (lane & 15) * kRowEl + (lane >> 4) * 8;
      const uint16_t *kBase = K + (warp * 16 + (lane & 7) + (lane >> 4) * 8) * kRowEl +
                              ((lane >> 3) & 1) * 8;
#pragma unroll 6
      for (int kk = 0; kk < kD / 16; kk += 2) {
        uint32_t a[4], bb[4], a2[4], bb2[4];
        ldsm4(a, qBase + kk * 16);
        ldsm4(bb, kBase + kk * 16);
        ldsm4(a2, qBase + kk * 16 + 16);
        ldsm4(bb2, kBase + kk * 16 + 16);
        mma16816(s[0], a, bb[0], bb[1]);
        mma16816(s[1], a, bb[2], bb[3]);
        mma16816(s2[0], a2, bb2[0], bb2[1]);
        mma16816(s2[1], a2, bb2[2], bb2[3]);
      }
#pragma unroll
      for (int n = 0; n < 2; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          s[n][e] += s2[n][e];
    }
    // Mask, scale, row max.
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < 2; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = warp * 16 + n * 8 + q4 * 2 + (e & 1);
        const int64_t pos = int64_t(tile) * kTile + col;
        float v = pos < len ? s[n][e] * p.scaleLog2 : -INFINITY;
        s[n][e] = v;
        mx[e >> 1] = fmaxf(mx[e >> 1], v);
      }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
    }
    if (q4 == 0) {
      redMax[warp * kHeads + g] = mx[0];
      redMax[warp * kHeads + g + 8] = mx[1];
    }
    __syncthreads();
    float mNew[2], alpha[2], base[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float t = -INFINITY;
#pragma unroll
      for (int w = 0; w < 4; ++w)
        t = fmaxf(t, redMax[w * kHeads + g + 8 * r]);
      mNew[r] = fmaxf(m[r], t);
      base[r] = mNew[r] == -INFINITY ? 0.0f : mNew[r];
      alpha[r] = m[r] == -INFINITY ? 0.0f : exp2f(m[r] - mNew[r]);
    }
    float sum[2] = {0.0f, 0.0f};
#pragma unroll
    for (int n = 0; n < 2; ++n) {
      const float p0 = exp2f(s[n][0] - base[0]), p1 = exp2f(s[n][1] - base[0]);
      const float p2 = exp2f(s[n][2] - base[1]), p3 = exp2f(s[n][3] - base[1]);
      sum[0] += p0 + p1;
      sum[1] += p2 + p3;
      const int col = warp * 16 + n * 8 + q4 * 2;
      *reinterpret_cast<uint32_t *>(Ps + g * kPRow + col) = packBf16(p0, p1);
      *reinterpret_cast<uint32_t *>(Ps + (g + 8) * kPRow + col) =
          packBf16(p2, p3);
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      sum[r] += __shfl_xor_sync(0xffffffffu, sum[r], 1);
      sum[r] += __shfl_xor_sync(0xffffffffu, sum[r], 2);
    }
    if (q4 == 0) {
      redSum[warp * kHeads + g] = sum[0];
      redSum[warp * kHeads + g + 8] = sum[1];
    }
    __syncthreads();
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float t = 0.0f;
#pragma unroll
      for (int w = 0; w < 4; ++w)
        t += redSum[w * kHeads + g + 8 * r];
      l[r] = l[r] * alpha[r] + t;
      m[r] = mNew[r];
    }
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      o[i][0] *= alpha[0];
      o[i][1] *= alpha[0];
      o[i][2] *= alpha[1];
      o[i][3] *= alpha[1];
    }
    // O += P V for channels 128*warp .. +127.
#pragma unroll
    for (int kk = 0; kk < kTile / 16; ++kk) {
      uint32_t a[4];
      ldsm4(a, Ps + (lane & 15) * kPRow + kk * 16 + (lane >> 4) * 8);
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        uint32_t bb[4];
        ldsm4t(bb, K + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * kRowEl +
                       warp * 128 + j * 16 + (lane >> 4) * 8);
        mma16816(o[2 * j], a, bb[0], bb[1]);
        mma16816(o[2 * j + 1], a, bb[2], bb[3]);
      }
    }
    __syncthreads(); // the next iteration overwrites this buffer and P
  }
  cpWait<0>();
}

/// Normalises this thread's O fragments of heads h0..h0+15 and stores
/// them as the output of sequence b.
__device__ __forceinline__ void storeFinal(const DecodeParams &p,
                                           const float (&o)[16][4],
                                           const float (&inv)[2], int b,
                                           int h0) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, q4 = lane & 3;
  withOutputType(p, [&](auto bf16) {
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const int col = warp * 128 + i * 8 + q4 * 2;
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int h = h0 + g + 8 * r;
        storeOutPair<decltype(bf16)::value>(p, b * p.oS0 + h * p.oS1 + col,
                                            o[i][2 * r] * inv[r],
                                            o[i][2 * r + 1] * inv[r]);
      }
    }
  });
}

/// The LSEs of heads h0..h0+15 of sequence b (when asked for).
__device__ __forceinline__ void storeFinalLse(const DecodeParams &p,
                                              const float (&lseV)[2], int b,
                                              int h0) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, q4 = lane & 3;
  if (p.lse && q4 == 0 && warp == 0) {
    p.lse[b * p.lS0 + (h0 + g) * p.lS1] = lseV[0];
    p.lse[b * p.lS0 + (h0 + g + 8) * p.lS1] = lseV[1];
  }
}

/// 1 / l and the natural-log LSE of the rows this thread holds.
__device__ __forceinline__ void finishRows(const TcAccum &acc, float (&inv)[2],
                                           float (&lseV)[2]) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    inv[r] = acc.l[r] > 0.0f ? 1.0f / acc.l[r] : 0.0f;
    lseV[r] = acc.l[r] > 0.0f ? acc.m[r] * kLn2 + logf(acc.l[r]) : -INFINITY;
  }
}

/// The trace's "drained" mark: thread 0 reads its accumulators back, so its
/// last MMAs have completed.
__device__ __forceinline__ void traceDrained(const DecodeParams &p,
                                             const TcAccum &acc) {
  if (!p.trace || threadIdx.x != 0)
    return;
  float z = 0.0f;
#pragma unroll
  for (int i = 0; i < 16; ++i)
    z += acc.o[i][0] + acc.o[i][1] + acc.o[i][2] + acc.o[i][3];
  if (z == 1.5e38f) // never; keeps the sum
    p.trace[kDecodeTraceFields - 1] = 0;
  traceMark(p, kTraceDrained);
}

template <bool kSplitK>
__global__ void __launch_bounds__(kThreadsTc, 1)
    decodeTcKernel(DecodeParams p) {
  traceMark(p, kTraceEntry);
  pdlPrologue();
  traceMark(p, kTraceWaited);
  extern __shared__ __align__(16) uint8_t smem[];
  const TcSmem sm(smem);

  const int split = blockIdx.x, b = blockIdx.y, h0 = blockIdx.z * kHeads;
  StepJob job =
      stepJobOf(p,
                blockIdx.x + int64_t(gridDim.x) *
                                 (blockIdx.y + int64_t(gridDim.y) * blockIdx.z),
                int64_t(gridDim.x) * gridDim.y * gridDim.z);
  const int lenRaw = seqLenChecked(p, b);
  const int len = lenRaw < 0 ? 0 : lenRaw;
  const int tiles = (len + kTile - 1) / kTile;
  const int perSplit = (tiles + p.splits - 1) / p.splits;
  const int t0 = split * perSplit;
  const int t1 = min(tiles, t0 + perSplit);
  TcAccum acc;
  attendTiles<kSplitK>(p, sm, TilePiece{b, h0, len, t0, t1}, acc, job);
  const float(&o)[16][4] = acc.o;
  traceMark(p, kTraceLoopEnd);

  // Epilogue: normalised output (or partial) and LSE.
  float inv[2], lseV[2];
  finishRows(acc, inv, lseV);
  traceDrained(p, acc);
  const int H = p.heads;
  if (p.splits == 1) {
    storeFinal(p, o, inv, b, h0);
    traceMark(p, kTraceStored);
    traceMark(p, kTraceSynced);
    storeFinalLse(p, lseV, b, h0);
    traceMark(p, kTraceExit);
    return;
  }
  if (p.clusterMerge) {
    clusterMergeEpilogue(p, o, inv, lseV, reinterpret_cast<float *>(sm.Ks), sm.Sred,
                         b, h0);
    traceMark(p, kTraceExit);
    return;
  }
  const int64_t piece = (int64_t(b) * p.splits + split) * H + h0;
  storePartial(p.partOut + piece * kDv, kDv, p.partLse + piece, o, inv, lseV);
  traceMark(p, kTraceStored);
  traceMark(p, kTraceSynced);
  traceMark(p, kTraceExit);
}


// --- Balanced schedule (DecodeSchedule.h). -----------------------------------

/// KV tiles of work item s (16-head group s / B of sequence s % B); a bad
/// length counts as empty and is reported (by CTA 0, once per item).
__device__ __forceinline__ int64_t itemTiles(const DecodeParams &p, int s,
                                             int *lenOut = nullptr) {
  const int b = s % p.batch;
  const int len = p.seqLens[b * p.seqStride];
  const bool bad = len < 0 || int64_t(len) > p.c.maxBlocks * p.c.blockSize;
  if (bad && blockIdx.x == 0 && s < p.batch)
    atomicMin(&p.rec->badSeqIndex, b);
  if (lenOut)
    *lenOut = bad ? 0 : len;
  return bad ? 0 : (int64_t(len) + kTile - 1) / kTile;
}

/// Inclusive prefix sum over the CTA's 128 threads; *total gets the sum.
/// Every thread calls it (two barriers).
__device__ __forceinline__ int64_t blockInclusiveScan(int64_t v,
                                                      int64_t *warpSums,
                                                      int64_t *total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const int64_t u = __shfl_up_sync(0xffffffffu, v, d);
    if (lane >= d)
      v += u;
  }
  if (lane == 31)
    warpSums[warp] = v;
  __syncthreads();
  int64_t before = 0, all = 0;
#pragma unroll
  for (int w = 0; w < kThreadsTc / 32; ++w) {
    before += w < warp ? warpSums[w] : 0;
    all += warpSums[w];
  }
  __syncthreads(); // warpSums is reused by the next call
  *total = all;
  return before + v;
}

/// One CTA of the balanced schedule: the tiles [begin(c), begin(c + 1)) of
/// all items laid end to end, item by item (DecodeSchedule.h). The tile
/// loop is the per-sequence kernel's (attendTiles); a piece that is a
/// whole item is stored as the output, a cut one as a partial for
/// combineBalancedKernel.
template <bool kSplitK>
__global__ void __launch_bounds__(kThreadsTc, 1)
    decodeBalancedKernel(DecodeParams p) {
  traceMark(p, kTraceEntry);
  pdlPrologue();
  traceMark(p, kTraceWaited);
  extern __shared__ __align__(16) uint8_t smem[];
  const TcSmem sm(smem);
  __shared__ int64_t warpSums[kThreadsTc / 32];
  __shared__ int64_t startOff; // the first tile of the walk's first item
  const int tid = threadIdx.x;
  const int64_t C = gridDim.x, c = blockIdx.x;
  const int W = p.items;
  StepJob job = stepJobOf(p, c, C);

  // T: all tiles. The first chunk's counts stay in registers for the search.
  int64_t T = 0, firstChunkTiles = 0;
  for (int base = 0; base < W; base += kThreadsTc) {
    const int64_t n = base + tid < W ? itemTiles(p, base + tid) : 0;
    if (base == 0)
      firstChunkTiles = n;
    int64_t chunk;
    blockInclusiveScan(n, warpSums, &chunk);
    T += chunk;
  }
  const int64_t begin = balancedBegin(c, C, T);

  // The walk starts at the first item whose end (empty items: one tile
  // wide) lies past begin; those ends never decrease, so the hits of a
  // chunk are its last `hits` items.
  int s0 = W;
  int64_t before = 0;
  for (int base = 0; base < W; base += kThreadsTc) {
    const int s = base + tid;
    const int64_t n =
        base == 0 ? firstChunkTiles : (s < W ? itemTiles(p, s) : 0);
    int64_t chunk;
    const int64_t off = before + blockInclusiveScan(n, warpSums, &chunk) - n;
    const bool hit = s < W && walkStartsAt(off + max(n, int64_t(1)), begin);
    const int hits = __syncthreads_count(hit);
    if (hits > 0) {
      s0 = base + min(kThreadsTc, W - base) - hits;
      if (s == s0)
        startOff = off;
      __syncthreads();
      break;
    }
    before += chunk;
  }
  int64_t off = s0 < W ? startOff : 0;

  if (tid == 0)
    p.merges[c].item = -1; // overwritten below when this CTA owns a merge
  int len = 0; // of the item tilesOf saw last: the piece just found
  BalancedWalk walker(c, C, T, W, s0, off);
  auto tilesOf = [&](int64_t s) { return itemTiles(p, int(s), &len); };
  auto writeEmpty = [&](int64_t s, int64_t) {
    const int b = int(s % p.batch), h0 = int(s / p.batch) * kHeads;
    float zero[16][4];
#pragma unroll
    for (int i = 0; i < 16; ++i)
      zero[i][0] = zero[i][1] = zero[i][2] = zero[i][3] = 0.0f;
    const float inv[2] = {0.0f, 0.0f}, lseV[2] = {-INFINITY, -INFINITY};
    storeFinal(p, zero, inv, b, h0);
    storeFinalLse(p, lseV, b, h0);
  };
  BalancedPiece q;
  while (walker.next(tilesOf, writeEmpty, q)) {
    const int b = int(q.item % p.batch), h0 = int(q.item / p.batch) * kHeads;
    TcAccum acc;
    attendTiles<kSplitK>(
        p, sm,
        TilePiece{b, h0, len, int(q.a - q.itemOff), int(q.z - q.itemOff)}, acc,
        job);
    float inv[2], lseV[2];
    finishRows(acc, inv, lseV);
    if (q.a == q.itemOff && q.z == q.itemOff + q.n) { // the whole item
      storeFinal(p, acc.o, inv, b, h0);
      storeFinalLse(p, lseV, b, h0);
      continue;
    }
    const int64_t slot = partialSlot(c, q.itemOff, begin);
    storePartial(p.partOut + slot * kHeads * kDv, kDv, p.partLse + slot * kHeads,
                 acc.o, inv, lseV);
    if (q.z == q.itemOff + q.n && tid == 0) // its last tile: the merge owner
      p.merges[c] =
          BalancedMerge{q.item, balancedCtaOfTile(q.itemOff, C, T), T};
  }
  job.store(p); // a CTA without a piece still stores its share
  traceMark(p, kTraceLoopEnd);
  traceMark(p, kTraceExit);
}

/// Merges the pieces of the item that CTA blockIdx.x of the balanced kernel
/// owns, if any: warp w head w of its 16, lane l channels 16l..16l+15. It
/// runs after the decode, on the critical path, so it is built for latency:
/// lane j loads piece j's LSE (all at once, 32 pieces a round), the weights
/// come from warp reductions and the partial loads of four pieces are in
/// flight together. Pieces in CTA order, as combineKernel's split order.
constexpr int kCombineThreads = kHeads * 32;
__global__ void __launch_bounds__(kCombineThreads)
    combineBalancedKernel(DecodeParams p) {
  pdlPrologue();
  const int64_t c = blockIdx.x, C = gridDim.x;
  const BalancedMerge mg = p.merges[c];
  if (mg.item < 0)
    return;
  const int lane = threadIdx.x & 31, hl = threadIdx.x >> 5;
  const int b = int(mg.item % p.batch);
  const int h = int(mg.item / p.batch) * kHeads + hl;
  const int64_t count = c - mg.firstCta + 1; // CTAs, some maybe without a piece
  // Pass 1: the maximum LSE. The first round's slot and LSE stay in
  // registers for pass 2 (one load round trip fewer up to 32 pieces).
  auto pieceSlot = [&](int64_t j) {
    return j < count ? mergePieceSlot(mg, mg.firstCta + j, C) : int64_t(-1);
  };
  auto pieceLse = [&](int64_t slot) {
    return slot >= 0 ? p.partLse[slot * kHeads + hl] : -INFINITY;
  };
  const int64_t firstSlot = pieceSlot(lane);
  const float firstLse = pieceLse(firstSlot);
  float mx = firstLse;
  for (int64_t j0 = 32; j0 < count; j0 += 32)
    mx = fmaxf(mx, pieceLse(pieceSlot(j0 + lane)));
  mx = warpMax(mx);
  // Pass 2: weights (lane j of round j0: piece j0 + j) and the weighted sum.
  float4 acc[4];
#pragma unroll
  for (int v = 0; v < 4; ++v)
    acc[v] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  float total = 0.0f;
  for (int64_t j0 = 0; j0 < count; j0 += 32) {
    const int64_t slot = j0 == 0 ? firstSlot : pieceSlot(j0 + lane);
    const float lse = j0 == 0 ? firstLse : pieceLse(slot);
    const float w = lse == -INFINITY ? 0.0f : expf(lse - mx);
    total += warpSum(w);
    const int n = int(min(int64_t(32), count - j0));
    for (int j = 0; j < n; j += 4) {
      float4 v[4][4];
      float wj[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int64_t sj = __shfl_sync(0xffffffffu, slot, (j + u) & 31);
        wj[u] = __shfl_sync(0xffffffffu, w, (j + u) & 31);
        const bool use = j + u < n && sj >= 0 && wj[u] > 0.0f;
        const float4 *src = reinterpret_cast<const float4 *>(
            p.partOut + ((use ? sj : 0) * kHeads + hl) * kDv + 16 * lane);
#pragma unroll
        for (int q = 0; q < 4; ++q)
          v[u][q] = use ? src[q] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (!use)
          wj[u] = 0.0f;
      }
#pragma unroll
      for (int u = 0; u < 4; ++u)
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          acc[q].x += wj[u] * v[u][q].x;
          acc[q].y += wj[u] * v[u][q].y;
          acc[q].z += wj[u] * v[u][q].z;
          acc[q].w += wj[u] * v[u][q].w;
        }
    }
  }
  const float inv = total > 0.0f ? 1.0f / total : 0.0f;
  withOutputType(p, [&](auto bf16) {
    const int64_t o = b * p.oS0 + h * p.oS1 + 16 * lane;
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      storeOutPair<decltype(bf16)::value>(p, o + 4 * q, acc[q].x * inv,
                                          acc[q].y * inv);
      storeOutPair<decltype(bf16)::value>(p, o + 4 * q + 2, acc[q].z * inv,
                                          acc[q].w * inv);
    }
  });
  if (p.lse && lane == 0)
    p.lse[b * p.lS0 + h * p.lS1] = total > 0.0f ? mx + logf(total) : -INFINITY;
}

/// Merges the splits of one (sequence, head): weights exp(lse_s - max),
/// computed once per split into shared memory; each thread then combines 4
/// consecutive channels with 16-byte loads (dv % 4 == 0, the partials are
/// 16-byte aligned: scratch-pool blocks and dv = 512).
__global__ void combineKernel(DecodeParams p, int dv) {
  pdlPrologue();
  const int b = blockIdx.y, h = blockIdx.x, H = p.heads;
  const float *pl = p.partLse + int64_t(b) * p.splits * H + h;
  // [splits <= kMaxSplits]; -1: split empty (lse -inf). Padded: the
  // compiler may read a few entries ahead in the unrolled split loop.
  __shared__ float wS[kMaxSplits + 4];
  __shared__ float stat[2];
  if (threadIdx.x < 32) {
    float mx = -INFINITY;
    for (int s = threadIdx.x; s < p.splits; s += 32)
      mx = fmaxf(mx, pl[s * H]);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    for (int s = threadIdx.x; s < p.splits; s += 32) {
      const float lse = pl[s * H];
      wS[s] = lse == -INFINITY ? -1.0f : expf(lse - mx);
    }
    __syncwarp();
    if (threadIdx.x == 0) {
      float total = 0.0f; // in split order, as before
      for (int s = 0; s < p.splits; ++s)
        total += mx == -INFINITY ? 0.0f : fmaxf(wS[s], 0.0f);
      stat[0] = mx;
      stat[1] = total;
    }
  }
  __syncthreads();
  const float mx = stat[0], total = stat[1];
  const float inv = total > 0.0f ? 1.0f / total : 0.0f;
  const float4 *po = reinterpret_cast<const float4 *>(
      p.partOut + (int64_t(b) * p.splits * H + h) * dv);
  const int64_t sStride = int64_t(H) * dv / 4;
  for (int c4 = threadIdx.x; c4 < dv / 4; c4 += blockDim.x) {
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int s = 0; s < p.splits; ++s) {
      const float w = wS[s];
      if (w >= 0.0f) {
        const float4 v = po[s * sStride + c4];
        acc.x += w * v.x;
        acc.y += w * v.y;
        acc.z += w * v.z;
        acc.w += w * v.w;
      }
    }
    const int64_t o = b * p.oS0 + h * p.oS1 + 4 * c4;
    storeF(p.out, p.outType, o, acc.x * inv);
    storeF(p.out, p.outType, o + 1, acc.y * inv);
    storeF(p.out, p.outType, o + 2, acc.z * inv);
    storeF(p.out, p.outType, o + 3, acc.w * inv);
  }
  if (p.lse && threadIdx.x == 0)
    p.lse[b * p.lS0 + h * p.lS1] =
        total > 0.0f ? mx + logf(total) : -INFINITY;
}

// --- Fallback: any layout, dtype and head count. ----------------------------
struct GenericDecodeParams : DecodeIo {
  const void *q;
  int qType;
  float scale;
};

constexpr int kGenThreads = 128, kGenMaxPerThread = 8; // latent <= 1024

__global__ void decodeGenericKernel(GenericDecodeParams p) {
  pdlPrologue();
  const float kvScale = cacheTensorScale(p.c);
  const int b = blockIdx.y, h = blockIdx.x, tid = threadIdx.x;
  __shared__ float red[kGenThreads / 32];
  const int D = p.c.latent + p.c.rope;
  int len = p.seqLens[b * p.seqStride];
  if (len < 0 || int64_t(len) > p.c.maxBlocks * p.c.blockSize) {
    if (tid == 0)
      atomicMin(&p.rec->badSeqIndex, b);
    len = 0;
  }
  const char *qb = static_cast<const char *>(p.q);
  const int qes = int(p.qType == int(DType::F32) ? 4 : 2);
  const void *qrow = qb + (b * p.qS0 + h * p.qS1) * qes;
  float acc[kGenMaxPerThread];
  for (int k = 0; k < kGenMaxPerThread; ++k)
    acc[k] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  for (int64_t pos = 0; pos < len; ++pos) {
    const uint8_t *row = pagedRow(p.c, b, pos);
    if (!row) {
      if (tid == 0)
        atomicMin(&p.rec->badSeqIndex, b);
      break;
    }
    float part = 0.0f;
    for (int i = tid; i < D; i += kGenThreads)
      part += loadF(qrow, p.qType, i) * decodeVal(p.c, row, i, kvScale);
    part = warpSum(part);
    if ((tid & 31) == 0)
      red[tid >> 5] = part;
    __syncthreads();
    float sc = 0.0f;
    for (int w = 0; w < kGenThreads / 32; ++w)
      sc += red[w];
    __syncthreads();
    sc *= p.scale;
    const float mNew = fmaxf(m, sc);
    const float alpha = m == -INFINITY ? 0.0f : expf(m - mNew);
    const float pr = expf(sc - mNew);
    l = l * alpha + pr;
    m = mNew;
    for (int k = 0; k < kGenMaxPerThread; ++k) {
      const int c = tid + k * kGenThreads;
      if (c < p.c.latent)
        acc[k] = acc[k] * alpha + pr * decodeVal(p.c, row, c, kvScale);
    }
  }
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
  for (int k = 0; k < kGenMaxPerThread; ++k) {
    const int c = tid + k * kGenThreads;
    if (c < p.c.latent)
      storeF(p.out, p.outType, b * p.oS0 + h * p.oS1 + c, acc[k] * inv);
  }
  if (p.lse && tid == 0)
    p.lse[b * p.lS0 + h * p.lS1] = l > 0.0f ? m + logf(l) : -INFINITY;
}

} // namespace

CacheView makeView(const KVCacheRef &cache, const TensorRef &table) {
  CacheView v;
  v.data = static_cast<const uint8_t *>(cache.data);
  v.rowBytes = cache.desc.rowBytes();
  v.blockStride = cache.blockBytes();
  v.numBlocks = cache.desc.numBlocks;
  v.blockSize = int(cache.desc.blockSize);
  v.layout = int(cache.desc.layout);
  v.dtype = int(cache.desc.dtype);
  v.latent = int(cache.desc.latentRank);
  v.rope = int(cache.desc.ropeDim);
  v.scale = cache.scale;
  v.scalePtr = cache.scaleTensor;
  v.table = static_cast<const int32_t *>(table.data);
  v.tableS0 = table.strides[0];
  v.tableS1 = table.strides[1];
  v.maxBlocks = table.sizes[1];
  return v;
}

/// The decode kernels' common addressing, from the call's arguments.
static DecodeIo decodeIo(CudaContext &ctx,
                         const DecodeAttentionArgs &a) {
  DecodeIo io;
  io.c = makeView(a.cache, a.blockTable);
  io.qS0 = a.q.strides[0];
  io.qS1 = a.q.strides[1];
  io.out = a.out.data;
  io.outType = int(a.out.dtype);
  io.oS0 = a.out.strides[0];
  io.oS1 = a.out.strides[1];
  io.lse = static_cast<float *>(a.lse.data);
  io.lS0 = a.lse.present() ? a.lse.strides[0] : 0;
  io.lS1 = a.lse.present() ? a.lse.strides[1] : 0;
  io.seqLens = static_cast<const int32_t *>(a.seqLens.data);
  io.seqStride = a.seqLens.strides[0];
  io.rec = ctx.deviceRecord;
  return io;
}

namespace {

std::atomic<uint64_t> &clusterLaunches() {
  static std::atomic<uint64_t> n{0};
  return n;
}
std::atomic<uint64_t> &balancedLaunches() {
  static std::atomic<uint64_t> n{0};
  return n;
}
std::atomic<uint64_t> &stepWriteLaunches() {
  static std::atomic<uint64_t> n{0};
  return n;
}

using TcKernel = void (*)(DecodeParams);

/// The 16-head kernel in use: MLART_DECODE_VARIANT=0 selects the first
/// tensor-core variant (S split by tokens); the default splits S by the
/// reduction dimension.
bool tcSplitK() { return knobValue(Knob::DecodeVariant) != 0; }
TcKernel tcKernel(bool splitK) {
  return splitK ? decodeTcKernel<true> : decodeTcKernel<false>;
}
TcKernel balancedKernel(bool splitK) {
  return splitK ? decodeBalancedKernel<true> : decodeBalancedKernel<false>;
}

/// The balanced schedule (DecodeSchedule.h): one CTA an SM (fewer when the
/// block table bounds the tiles below that), pieces in a workspace, then
/// combineBalancedKernel over every CTA's merge record.
Status launchBalancedDecode(CudaContext &ctx, DecodeParams p, int64_t B,
                            int64_t groups, int64_t maxTiles, bool splitK,
                            cudaStream_t stream) {
  const int64_t ctas = std::max<int64_t>(
      1, std::min<int64_t>(ctx.smCount, groups * B * maxTiles));
  p.items = int(groups * B);
  const size_t outBytes = size_t(2 * ctas) * kHeads * kDv * sizeof(float);
  const size_t lseBytes = size_t(2 * ctas) * kHeads * sizeof(float);
  const size_t mergeBytes = size_t(ctas) * sizeof(BalancedMerge);
  StreamScratch work(ctx, stream);
  MLART_RETURN_IF_ERROR(work.allocate(outBytes + lseBytes + mergeBytes,
                                      "scratch (balanced decode workspace)"));
  uint8_t *w = work.get();
  p.partOut = reinterpret_cast<float *>(w);
  p.partLse = reinterpret_cast<float *>(w + outBytes);
  p.merges = reinterpret_cast<BalancedMerge *>(w + outBytes + lseBytes);
  const TcKernel kernel = balancedKernel(splitK);
  MLART_RETURN_IF_ERROR(
      allowDynamicSmem(kernel, kSmemTc, "decodeBalancedKernel"));
  MLART_RETURN_IF_ERROR(launchKernel(
      "decodeBalancedKernel", kernel,
      LaunchShape{dim3(unsigned(ctas)), dim3(kThreadsTc), kSmemTc, 0}, stream,
      p));
  MLART_RETURN_IF_ERROR(launchKernel("combineBalancedKernel",
                                     combineBalancedKernel,
                                     dim3(unsigned(ctas)), kCombineThreads, 0,
                                     stream, p));
  balancedLaunches().fetch_add(1, std::memory_order_relaxed);
  return Status::success();
}

/// Raises the kernel's shared-memory limit; the shape of a grid, without
/// a cluster.
StatusOr<LaunchShape> tcLaunchShape(TcKernel kernel, dim3 grid) {
  MLART_RETURN_IF_ERROR(allowDynamicSmem(kernel, kSmemTc, "decodeTcKernel"));
  return LaunchShape{grid, dim3(kThreadsTc), kSmemTc, 1};
}

/// cudaOccupancyMaxActiveClusters of `kernel` launched as `shape` on
/// `stream` with clusters of `size` CTAs along x (no PDL).
Status maxActiveClusters(TcKernel kernel, LaunchShape shape,
                         cudaStream_t stream, int size, int *clusters) {
  shape.clusterX = unsigned(size);
  const LaunchConfig cfg(shape, stream, /*pdl=*/false);
  *clusters = 0;
  MLART_CUDA_CHECK(cudaOccupancyMaxActiveClusters(clusters, kernel, cfg.get()),
                   "cudaOccupancyMaxActiveClusters(decodeTcKernel, " +
                       std::to_string(size) + ")");
  return Status::success();
}

/// How many clusters of `size` (2..kMaxClusterSplits) CTAs of the kernel,
/// launched as `shape`, the device holds at once; asked once per device (up
/// to kCachedDevices), kernel variant and size.
Status clusterCapacity(int ordinal, bool splitK, const LaunchShape &shape,
                       cudaStream_t stream, int size, int *capacity) {
  constexpr int kCachedDevices = 64;
  // capacity + 1; 0: not asked yet.
  static std::atomic<int> known[kCachedDevices][2][kMaxClusterSplits + 1];
  std::atomic<int> *slot = ordinal >= 0 && ordinal < kCachedDevices
                               ? &known[ordinal][splitK][size]
                               : nullptr;
  if (slot) {
    const int k = slot->load(std::memory_order_relaxed);
    if (k != 0) {
      *capacity = k - 1;
      return Status::success();
    }
  }
  MLART_RETURN_IF_ERROR(
      maxActiveClusters(tcKernel(splitK), shape, stream, size, capacity));
  if (slot)
    slot->store(*capacity + 1, std::memory_order_relaxed);
  return Status::success();
}

} // namespace

/// The split count the fast path uses for a launch: about two CTAs per SM,
/// at least two 64-token tiles per split.
int decodeSplitHeuristic(int smCount, int64_t batch, int64_t headGroups,
                         int64_t maxLen) {
  // One CTA per SM fits (188 KB of shared memory), so the time is about
  // waves * (tiles per split + ~2 tiles of fixed cost: Q load, pipeline
  // fill, epilogue), plus ~1 tile for the combine launch when split.
  // Minimising that avoids a last, mostly idle wave (B=64, H=16, L=4096
  // on 132 SMs: 5 splits = 320 CTAs = 2.4 waves; 2 splits = 1 wave).
  // With 2..8 splits the merge now runs inside a cluster (no combine launch)
  // and a wave holds clusters x size CTAs. The constants stay: in the
  // forced-split sweep at the step shape the heuristic's 2 splits are the
  // fastest (docs/results/*.md, "At the step shape, by split count").
  return chooseDecodeSplits(smCount, batch * headGroups, maxLen,
                            SplitCostModel{/*tileCost=*/1.0, /*ctaCost=*/2.0,
                                           /*combineCost=*/1.0});
}

namespace {
std::atomic<unsigned long long *> gDecodeTrace{nullptr};
} // namespace

void setDecodeTraceBuffer(unsigned long long *buffer) {
  gDecodeTrace.store(buffer, std::memory_order_relaxed);
}

bool setDecodeClusterMerge(bool on) {
  const bool previous = knobValue(Knob::DecodeCluster) != 0;
  setKnobOverride(Knob::DecodeCluster, on ? 1 : 0);
  return previous;
}

uint64_t decodeClusterLaunchCount() { return clusterLaunches().load(); }

uint64_t decodeBalancedLaunchCount() { return balancedLaunches().load(); }

StatusOr<int> decodeMaxActiveClusters(int size) {
  if (size < 1 || size > kMaxClusterSplits)
    return invalidArgument("cluster size must be 1.." +
                           std::to_string(kMaxClusterSplits));
  const TcKernel kernel = tcKernel(tcSplitK());
  MLART_ASSIGN_OR_RETURN(const LaunchShape shape,
                         tcLaunchShape(kernel, dim3(unsigned(size))));
  int clusters = 0;
  MLART_RETURN_IF_ERROR(
      maxActiveClusters(kernel, shape, nullptr, size, &clusters));
  return clusters;
}

Status checkDecodeAttention(const DecodeAttentionArgs &a) {
  MLART_RETURN_IF_ERROR(cpu::checkDecodeAttentionShapes(a));
  const int64_t B = a.q.sizes[0], H = a.q.sizes[1];
  if (a.cache.desc.latentRank > kGenThreads * kGenMaxPerThread)
    return unimplemented("CUDA decode supports latent rank <= 1024");
  if (B > 65535 || H / kHeads > 65535)
    return invalidArgument("decode batch too large for one launch");
  return Status::success();
}

namespace {
/// The rows of `u` as the 16-head kernel stores them in its own launch
/// (DecodeStepWrite.h), or std::nullopt where cacheUpdate must run first:
/// MLART_DECODE_STEP_WRITE=0, checked mode (validation before any write,
/// write protection), more than kMaxStepWriteTokens slots, or rows that are
/// not 16-byte aligned copies.
std::optional<StepWrite> stepWriteOf(const CudaContext &ctx,
                                     const CacheUpdateArgs &u) {
  const KVCacheDesc &desc = u.cache.desc;
  const int64_t es = int64_t(dtypeSize(desc.dtype));
  auto aligned = [](const TensorRef &t, int64_t es) {
    return reinterpret_cast<uintptr_t>(t.data) % 16 == 0 &&
           (t.strides[0] * es) % 16 == 0 && t.strides[1] == 1;
  };
  if (knobValue(Knob::DecodeStepWrite) == 0 || ctx.synchronousChecks ||
      u.cache.writeProtect || desc.layout != CacheLayout::Plain ||
      u.slotMapping.sizes[0] > kMaxStepWriteTokens ||
      (desc.latentRank * es) % 16 != 0 || (desc.ropeDim * es) % 16 != 0 ||
      !aligned(u.kvC, es) || !aligned(u.kPe, es))
    return std::nullopt;
  StepWrite w;
  w.kvC = static_cast<const uint8_t *>(u.kvC.data);
  w.kPe = static_cast<const uint8_t *>(u.kPe.data);
  w.kvStride = u.kvC.strides[0] * es;
  w.kpStride = u.kPe.strides[0] * es;
  w.latentChunks = int(desc.latentRank * es / 16);
  w.ropeChunks = int(desc.ropeDim * es / 16);
  w.slots = u.slotMapping.data;
  w.slot64 = u.slotMapping.dtype == DType::I64;
  w.slotStride = u.slotMapping.strides[0];
  w.tokens = int(u.slotMapping.sizes[0]);
  w.cache = static_cast<uint8_t *>(u.cache.data);
  w.numSlots = desc.numSlots();
  return w;
}

/// decodeAttention; with `update`, its rows are stored first, in the same
/// launch when the 16-head kernel runs and stepWriteOf allows it, else by
/// cacheUpdate's own launch before the decode.
Status decodeAttentionAfter(CudaContext &ctx, const DecodeAttentionArgs &a,
                            const CacheUpdateArgs *update,
                            cudaStream_t stream) {
  const KVCacheDesc &desc = a.cache.desc;
  const int64_t B = a.q.sizes[0], H = a.q.sizes[1];
  const int64_t qes = int64_t(dtypeSize(a.q.dtype));
  const bool fast =
      a.q.dtype == DType::BF16 && desc.layout == CacheLayout::Plain &&
      desc.dtype == DType::BF16 && desc.latentRank == kDv &&
      desc.ropeDim == kD - kDv && H % kHeads == 0 &&
      (desc.blockSize & (desc.blockSize - 1)) == 0 &&
      reinterpret_cast<uintptr_t>(a.q.data) % 16 == 0 &&
      (a.q.strides[0] * qes) % 16 == 0 && (a.q.strides[1] * qes) % 16 == 0 &&
      reinterpret_cast<uintptr_t>(a.cache.data) % 16 == 0 &&
      a.cache.blockBytes() % 16 == 0 && a.out.strides[2] == 1 &&
      a.out.strides[1] % 2 == 0 && a.out.strides[0] % 2 == 0 &&
      reinterpret_cast<uintptr_t>(a.out.data) % 8 == 0;
  const int64_t maxLen = a.blockTable.sizes[1] * desc.blockSize;
  const int64_t maxTiles = std::max<int64_t>(1, (maxLen + kTile - 1) / kTile);
  // H a multiple of 64: the many-heads kernel (DecodeManyHeads.cu, wgmma,
  // 64 heads per CTA); MLART_DECODE_MANY=0 keeps the 16-head kernel.
  // MLART_DECODE_MANY=force: whenever H allows (tests).
  const int manyKnob = knobValue(Knob::DecodeMany);
  // With few (sequence, 64-head) groups the 16-head kernel keeps more SMs
  // busy (measured thresholds: preferManyHeads in DecodeCommon.h).
  const bool many = manyKnob != 0 && H % kManyHeads == 0 &&
                    (manyKnob == kDecodeManyForce ||
                     preferManyHeads(B * (H / kManyHeads), maxTiles));
  std::optional<StepWrite> step;
  if (update && fast && !many && B > 0 && H > 0)
    step = stepWriteOf(ctx, *update);
  // Before the record lock: cacheUpdate takes it too in checked mode.
  if (update && !step)
    MLART_RETURN_IF_ERROR(cacheUpdate(ctx, *update, stream));
  if (B == 0 || H == 0)
    return Status::success();

  std::unique_lock<std::mutex> lock(ctx.recordMutex, std::defer_lock);
  if (ctx.synchronousChecks) {
    lock.lock();
    MLART_RETURN_IF_ERROR(resetRecord(ctx, stream));
  }
  if (!fast) {
    GenericDecodeParams p;
    static_cast<DecodeIo &>(p) = decodeIo(ctx, a);
    p.q = a.q.data;
    p.qType = int(a.q.dtype);
    p.scale = a.softmaxScale;
    MLART_RETURN_IF_ERROR(launchKernel("decodeGenericKernel",
                                       decodeGenericKernel,
                                       dim3(unsigned(H), unsigned(B)),
                                       kGenThreads, 0, stream, p));
    return finishChecked(ctx, stream, lock);
  }

  DecodeParams p;
  static_cast<DecodeIo &>(p) = decodeIo(ctx, a);
  p.q = static_cast<const uint16_t *>(a.q.data);
  p.scaleLog2 = a.softmaxScale * kLog2e;
  p.heads = int(H);
  p.bsLog2 = 0;
  while ((int64_t(1) << p.bsLog2) < desc.blockSize)
    ++p.bsLog2;
  if (step) {
    p.w = *step;
    stepWriteLaunches().fetch_add(1, std::memory_order_relaxed);
  }
  int splits = a.numSplits > 0
                   ? int(std::min<int64_t>(
                         std::min<int64_t>(a.numSplits, maxTiles), kMaxSplits))
               : many ? decodeSplitHeuristicMany(ctx.smCount, B,
                                                 H / kManyHeads, maxLen)
                      : decodeSplitHeuristic(ctx.smCount, B, H / kHeads,
                                             maxLen);
  p.splits = splits;
  p.trace = gDecodeTrace.load(std::memory_order_relaxed);
  p.relaxedBarrier = knobValue(Knob::DecodeBarrier);
  p.partOut = nullptr;
  p.partLse = nullptr;
  p.clusterMerge = 0;

  p.items = 0;
  p.batch = int(B);
  p.merges = nullptr;
  const bool balanced =
      a.schedule == DecodeSchedule::Balanced ||
      (a.schedule == DecodeSchedule::Default &&
       knobValue(Knob::DecodeBalance) != 0);
  if (!many && a.numSplits == 0 && balanced) {
    MLART_RETURN_IF_ERROR(launchBalancedDecode(ctx, p, B, H / kHeads, maxTiles,
                                               tcSplitK(), stream));
    return finishChecked(ctx, stream, lock);
  }

  // The 16-head kernel's launch: with 2..kMaxClusterSplits splits the CTAs
  // of a (sequence, head group) form one cluster along x (grid.x = splits)
  // and merge in the kernel, when the device can place such clusters.
  const bool splitK = tcSplitK();
  const TcKernel kernel = tcKernel(splitK);
  LaunchShape shape;
  if (!many) {
    MLART_ASSIGN_OR_RETURN(
        shape,
        tcLaunchShape(kernel, dim3(unsigned(splits), unsigned(B),
                                   unsigned(H / kHeads))));
    bool fits = false;
    if (splits >= 2 && splits <= kMaxClusterSplits &&
        knobValue(Knob::DecodeCluster) != 0) {
      int capacity = 0;
      MLART_RETURN_IF_ERROR(clusterCapacity(ctx.ordinal, splitK, shape,
                                            stream, splits, &capacity));
      fits = clusterMergeKeepsWaves(int64_t(splits) * B * (H / kHeads),
                                    splits, capacity, ctx.smCount);
    }
    if (fits) {
      shape.clusterX = unsigned(splits);
      p.clusterMerge = 1;
    }
  }

  StreamScratch work(ctx, stream);
  const bool combine = splits > 1 && !p.clusterMerge;
  if (combine) {
    const size_t outBytes = size_t(B) * splits * H * kDv * sizeof(float);
    const size_t lseBytes = size_t(B) * splits * H * sizeof(float);
    MLART_RETURN_IF_ERROR(work.allocate(outBytes + lseBytes,
                                        "scratch (decode split workspace)"));
    p.partOut = reinterpret_cast<float *>(work.get());
    p.partLse = reinterpret_cast<float *>(work.get() + outBytes);
  }
  if (many) {
    MLART_RETURN_IF_ERROR(launchDecodeManyHeads(p, B, stream));
  } else {
    // The kernel begins with pdlPrologue().
    MLART_RETURN_IF_ERROR(
        launchKernel("decodeTcKernel", kernel, shape, stream, p));
    if (p.clusterMerge)
      clusterLaunches().fetch_add(1, std::memory_order_relaxed);
  }
  if (combine) {
    MLART_RETURN_IF_ERROR(launchKernel("combineKernel", combineKernel,
                                       dim3(unsigned(H), unsigned(B)), 128, 0,
                                       stream, p, kDv));
  }
  return finishChecked(ctx, stream, lock);
}
} // namespace

Status decodeAttentionWithUpdate(CudaContext &ctx,
                                 const DecodeAttentionWithUpdateArgs &a,
                                 cudaStream_t stream) {
  const CacheUpdateArgs update = a.update();
  const DecodeAttentionArgs attention = a.attention();
  // Both halves' host checks come first: a call refused on its arguments
  // writes nothing.
  MLART_RETURN_IF_ERROR(checkCacheUpdate(update));
  MLART_RETURN_IF_ERROR(checkDecodeAttention(attention));
  return decodeAttentionAfter(ctx, attention, &update, stream);
}

Status decodeAttention(CudaContext &ctx, const DecodeAttentionArgs &a,
                       cudaStream_t stream) {
  MLART_RETURN_IF_ERROR(checkDecodeAttention(a));
  return decodeAttentionAfter(ctx, a, nullptr, stream);
}

uint64_t decodeStepWriteLaunchCount() { return stepWriteLaunches().load(); }

} // namespace mlart::cuda
