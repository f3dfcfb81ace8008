//===- StepBench.cpp - A compiled decode step, set up for timing ----------===//
#include "StepBench.h"

#include "mlart/DType.h"
#include "mlart/KVCache.h"

#include <algorithm>
#include <cstring>
#include <cmath>
#include <numeric>

namespace mlart::bench {
namespace {

bool nameHas(const std::string &name, const char *part) {
  return name.find(part) != std::string::npos;
}

/// Random values in [mean - scale, mean + scale) of the declared dtype.
std::vector<uint8_t> randomHost(const BufferDecl &d, float scale, float mean,
                                std::mt19937 &rng) {
  std::vector<uint8_t> host(size_t(d.sizeBytes()));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int64_t i = 0; i < d.numElements(); ++i)
    storeFromFloat(host.data(), d.dtype, size_t(i), mean + scale * u(rng));
  return host;
}

} // namespace

StatusOr<std::unique_ptr<CompiledStep>>
CompiledStep::load(Device &device, const std::string &path, int64_t context,
                   std::mt19937 &rng) {
  MLART_ASSIGN_OR_RETURN(Artifact artifact, Artifact::loadFile(path));
  std::unique_ptr<CompiledStep> step(new CompiledStep());
  step->context_ = context;
  MLART_ASSIGN_OR_RETURN(Executor executor,
                         Executor::create(std::move(artifact), device));
  step->executor_ = std::make_unique<Executor>(std::move(executor));
  MLART_RETURN_IF_ERROR(step->bindAll(device, rng));
  return step;
}

Status CompiledStep::bindAll(Device &device, std::mt19937 &rng) {
  const Artifact &a = executor_->artifact();
  const BufferDecl *table = nullptr;
  for (const BufferDecl &d : a.buffers())
    if (d.name == "block_table")
      table = &d;
  if (!table || table->rank != 2 || table->dtype != DType::I32 ||
      a.caches().empty())
    return invalidArgument("not an mla-gen decode step: needs an i32 "
                           "block_table [B, blocks] and a cache");
  batch_ = table->sizes[0];
  const int64_t maxBlocks = table->sizes[1];
  const int64_t bs = a.caches()[0].desc.blockSize;
  if (context_ + 1 > maxBlocks * bs)
    return invalidArgument("context " + std::to_string(context_) +
                           " + 1 exceeds the block table's " +
                           std::to_string(maxBlocks * bs) + " tokens");

  // Pages: a random permutation of 1..B*maxBlocks (block 0 is the null
  // block), so neighbouring sequences' pages interleave as in a server.
  std::vector<int32_t> pages(size_t(batch_ * maxBlocks));
  std::iota(pages.begin(), pages.end(), 1);
  std::shuffle(pages.begin(), pages.end(), rng);

  double weightElems = 0;
  for (const BufferDecl &d : a.buffers()) {
    std::vector<uint8_t> host;
    if (d.name == "block_table") {
      host.resize(pages.size() * 4);
      std::memcpy(host.data(), pages.data(), host.size());
    } else if (d.name == "slot_mapping" || d.name == "positions" ||
               d.name == "seq_lens") {
      if (d.rank != 1 || d.sizes[0] != batch_ ||
          (d.dtype != DType::I64 && d.dtype != DType::I32))
        return invalidArgument("'" + d.name + "' must be i32/i64 [" +
                               std::to_string(batch_) + "] (one token per "
                               "sequence: a decode step)");
      host.resize(size_t(d.sizeBytes()));
      for (int64_t b = 0; b < batch_; ++b) {
        int64_t v = d.name == "positions" ? context_
                    : d.name == "seq_lens"
                        ? context_ + 1
                        : int64_t(pages[size_t(b * maxBlocks + context_ / bs)]) * bs +
                              context_ % bs;
        if (d.dtype == DType::I64)
          reinterpret_cast<int64_t *>(host.data())[b] = v;
        else
          reinterpret_cast<int32_t *>(host.data())[b] = int32_t(v);
      }
    } else if (d.role == BufferRole::StepMetadata) {
      return invalidArgument("unknown step metadata '" + d.name + "'");
    } else if (nameHas(d.name, "cos_sin") && d.rank == 2) {
      host.resize(size_t(d.sizeBytes()));
      const std::vector<float> table = ropeCosSinTable(d.sizes[0], d.sizes[1]);
      for (size_t i = 0; i < table.size(); ++i)
        storeFromFloat(host.data(), d.dtype, i, table[i]);
    } else if (d.role == BufferRole::Weight) {
      weightElems += double(d.numElements());
      if (nameHas(d.name, "norm") || d.rank == 1)
        host = randomHost(d, 0.1f, 1.0f, rng);
      else
        host = randomHost(d, 1.0f / std::sqrt(float(d.sizes[d.rank == 3 ? 1 : d.rank - 1])),
                          0.0f, rng);
    } else {
      host = randomHost(d, 1.0f, 0.0f, rng); // activations, outputs (poison)
    }
    bytes_ += d.role == BufferRole::Weight || d.role == BufferRole::Input
                  ? double(d.sizeBytes())
                  : 0.0;
    MLART_ASSIGN_OR_RETURN(Buffer buf, device.allocate(host.size()));
    MLART_RETURN_IF_ERROR(
        device.copyHostToDevice(buf.data(), host.data(), host.size()));
    MLART_RETURN_IF_ERROR(executor_->bind(d.name, d.view(buf.data())));
    buffers_.push_back(std::move(buf));
  }

  // Caches: random rows (a 16 MiB random chunk copied over the cache).
  std::vector<uint8_t> chunk(size_t(16) << 20);
  for (size_t i = 0; i < chunk.size(); i += 2) { // bf16 in [-2, 2), no NaN
    const float v = std::uniform_real_distribution<float>(-2.0f, 2.0f)(rng);
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    chunk[i] = uint8_t(bits >> 16);
    chunk[i + 1] = uint8_t(bits >> 24);
  }
  MLART_ASSIGN_OR_RETURN(Buffer src, device.allocate(chunk.size()));
  MLART_RETURN_IF_ERROR(device.copyHostToDevice(src.data(), chunk.data(), chunk.size()));
  for (const CacheDecl &c : a.caches()) {
    KVCacheDesc desc = c.desc;
    if (desc.numBlocks == 0)
      desc.numBlocks = batch_ * maxBlocks + 1;
    MLART_ASSIGN_OR_RETURN(KVCache cache, KVCache::create(device, desc, 0.05f));
    const size_t total = size_t(desc.totalBytes());
    for (size_t off = 0; off < total; off += chunk.size())
      MLART_RETURN_IF_ERROR(device.copyDeviceToDevice(
          static_cast<uint8_t *>(cache.ref().data) + off, src.data(),
          std::min(chunk.size(), total - off), nullptr));
    MLART_RETURN_IF_ERROR(executor_->bindCache(c.name, cache));
    bytes_ += double(batch_) * double(context_ + 1) * double(desc.rowBytes());
    caches_.push_back(std::move(cache));
  }
  MLART_RETURN_IF_ERROR(device.synchronize(nullptr));

  // FLOPs: the projections, plus each attention's FlashMLA count.
  flops_ = 2.0 * double(batch_) * weightElems;
  for (const Instruction &inst : a.instructions())
    if (inst.opcode == Opcode::DecodeAttention) {
      const ViewDecl &q = a.views()[inst.operands[0]];
      flops_ += 2.0 * double(batch_) * double(q.sizes[1]) *
                double(context_ + 1) * (576.0 + 512.0);
    }
  return Status::success();
}

} // namespace mlart::bench
