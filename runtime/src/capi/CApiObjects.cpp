//===- CApiObjects.cpp - C API: status, devices, buffers, caches, blocks --===//
#include "CApiInternal.h"

using namespace mlart;
using mlart::capi::guarded;
using mlart::capi::toStreamHandle;

// mlart_dtype mirrors DType value for value; the last ones pin the numbering.
static_assert(int(MLART_DTYPE_F64) == int(DType::F64) &&
                  int(MLART_DTYPE_F8E5M2) == int(DType::F8E5M2) &&
                  DType::F8E5M2 == kLastDType,
              "mlart_dtype and mlart::DType disagree");

namespace {
/// Returned when even allocating an error status fails; never freed.
mlart_status_s oomStatus{MLART_STATUS_RESOURCE_EXHAUSTED,
                         "out of memory while reporting an error"};

Status nullArg(const char *what) {
  return invalidArgument(std::string(what) + " must not be NULL");
}

// The C copies are blocking: a CUDA host-to-device copy from pageable memory
// may return before the bytes land, so wait for the stream.
Status writeBlocking(Buffer &buffer, size_t offset, const void *src,
                     size_t bytes, const mlart_stream *stream) {
  if (buffer.empty())
    return bytes ? outOfRange("write into an empty buffer") : Status::success();
  Device &device = *buffer.device();
  StreamHandle h;
  MLART_RETURN_IF_ERROR(toStreamHandle(device, stream, "buffer write", h));
  MLART_RETURN_IF_ERROR(device.writeBuffer(buffer, offset, src, bytes, h));
  return device.synchronize(h);
}

// Device-to-host copies already wait for their stream (Device contract).
Status readBlocking(const Buffer &buffer, size_t offset, void *dst,
                    size_t bytes, const mlart_stream *stream) {
  if (buffer.empty())
    return bytes ? outOfRange("read from an empty buffer") : Status::success();
  Device &device = *buffer.device();
  StreamHandle h;
  MLART_RETURN_IF_ERROR(toStreamHandle(device, stream, "buffer read", h));
  return device.readBuffer(buffer, offset, dst, bytes, h);
}

Status writeCacheBlocking(KVCache &cache, size_t offset, const void *src,
                          size_t bytes, const mlart_stream *stream) {
  StreamHandle h;
  MLART_RETURN_IF_ERROR(
      toStreamHandle(cache.device(), stream, "cache write", h));
  MLART_RETURN_IF_ERROR(cache.writeBytes(offset, src, bytes, h));
  return cache.device().synchronize(h);
}

StatusOr<KVCacheDesc> toCacheDesc(const mlart_kv_cache_desc *desc) {
  if (!desc)
    return nullArg("desc");
  if (!isValidDType(int64_t(desc->dtype)) || int(desc->layout) < 0 ||
      int(desc->layout) > int(CacheLayout::Fp8DsMla))
    return invalidArgument("cache desc has an unknown dtype or layout");
  KVCacheDesc d;
  d.numBlocks = desc->num_blocks;
  d.blockSize = desc->block_size;
  d.latentRank = desc->latent_rank;
  d.ropeDim = desc->rope_dim;
  d.dtype = static_cast<DType>(desc->dtype);
  d.layout = static_cast<CacheLayout>(desc->layout);
  return d;
}

Status readCacheBlocking(const KVCache &cache, size_t offset, void *dst,
                         size_t bytes, const mlart_stream *stream) {
  StreamHandle h;
  MLART_RETURN_IF_ERROR(
      toStreamHandle(cache.device(), stream, "cache read", h));
  return cache.readBytes(offset, dst, bytes, h);
}
} // namespace

namespace mlart::capi {

mlart_status toC(const Status &status) {
  if (status.ok())
    return nullptr;
  auto *s = new (std::nothrow)
      mlart_status_s{static_cast<mlart_status_code>(status.code()), ""};
  if (!s)
    return &oomStatus;
  try {
    s->message = status.message();
  } catch (...) {
  }
  return s;
}

Status toTensorRef(const mlart_tensor &t, const char *name, TensorRef &out) {
  if (t.rank < 0 || t.rank > MLART_MAX_RANK)
    return invalidArgument(std::string(name) + ": rank " +
                           std::to_string(t.rank) + " is not in [0, 4]");
  if (!isValidDType(int64_t(t.dtype)))
    return invalidArgument(std::string(name) + ": unknown dtype " +
                           std::to_string(int(t.dtype)));
  out = TensorRef();
  out.data = t.data;
  out.dtype = static_cast<DType>(t.dtype);
  out.rank = t.rank;
  for (int d = 0; d < t.rank; ++d) {
    out.sizes[d] = t.sizes[d];
    out.strides[d] = t.strides[d];
  }
  return Status::success();
}

Status toCacheRef(const mlart_kv_cache *cache, KVCacheRef &out) {
  if (!cache)
    return nullArg("cache");
  KVCacheRef ref = cache->cache.ref();
  if (cache->guard) {
    MLART_ASSIGN_OR_RETURN(ref, cache->guard->manager.guard(ref));
  }
  out = ref;
  return Status::success();
}

Status checkCudaDeviceArgs(int ordinal, mlart_device **out) {
  if (!out)
    return nullArg("out_device");
  *out = nullptr;
  if (ordinal < 0)
    return invalidArgument("CUDA device ordinal " + std::to_string(ordinal) +
                           " is negative");
  return Status::success();
}

Status storeDevice(StatusOr<std::unique_ptr<Device>> created,
                   mlart_device **out) {
  if (!created.ok())
    return created.status();
  *out = new mlart_device_s{std::move(created).value()};
  return Status::success();
}

} // namespace mlart::capi

extern "C" {

int32_t mlart_version(void) { return MLART_VERSION; }

const char *mlart_version_string(void) { return MLART_VERSION_STRING; }

mlart_status_code mlart_status_get_code(mlart_status status) {
  return status ? status->code : MLART_STATUS_OK;
}

const char *mlart_status_message(mlart_status status) {
  return status ? status->message.c_str() : "";
}

void mlart_status_free(mlart_status status) {
  if (status != &oomStatus)
    delete status;
}

mlart_tensor mlart_tensor_contiguous(void *data, mlart_dtype dtype,
                                     int32_t rank, const int64_t *sizes) {
  mlart_tensor t = {};
  t.data = data;
  t.dtype = dtype;
  // An out-of-range rank is kept so that the kernel call reports it.
  t.rank = rank;
  if (rank < 0 || rank > MLART_MAX_RANK || (rank > 0 && !sizes))
    return t;
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    t.sizes[d] = sizes[d];
    t.strides[d] = stride;
    stride *= sizes[d];
  }
  return t;
}

mlart_status mlart_device_create_cpu(mlart_device **out_device) {
  return guarded([&]() -> Status {
    if (!out_device)
      return nullArg("out_device");
    *out_device = nullptr;
    return capi::storeDevice(createCpuDevice(), out_device);
  });
}

void mlart_device_destroy(mlart_device *device) { delete device; }

const char *mlart_device_kind_name(const mlart_device *device) {
  return device ? device->device->kindName() : "";
}

mlart_status mlart_device_synchronize(mlart_device *device,
                                      mlart_stream *stream) {
  return guarded([&]() -> Status {
    if (!device)
      return nullArg("device");
    StreamHandle h;
    MLART_RETURN_IF_ERROR(
        toStreamHandle(*device->device, stream, "mlart_device_synchronize", h));
    return device->device->synchronize(h);
  });
}

mlart_status mlart_buffer_allocate(mlart_device *device, size_t bytes,
                                   mlart_buffer **out_buffer) {
  return guarded([&]() -> Status {
    if (!device || !out_buffer)
      return nullArg("device and out_buffer");
    MLART_ASSIGN_OR_RETURN(Buffer buffer, device->device->allocate(bytes));
    *out_buffer = new mlart_buffer_s{std::move(buffer)};
    return Status::success();
  });
}

void mlart_buffer_free(mlart_buffer *buffer) { delete buffer; }

void *mlart_buffer_data(const mlart_buffer *buffer) {
  return buffer ? buffer->buffer.data() : nullptr;
}

size_t mlart_buffer_size(const mlart_buffer *buffer) {
  return buffer ? buffer->buffer.size() : 0;
}

mlart_status mlart_buffer_write(mlart_buffer *buffer, size_t offset,
                                const void *src, size_t bytes) {
  return mlart_buffer_write_on(buffer, offset, src, bytes, nullptr);
}

mlart_status mlart_buffer_read(const mlart_buffer *buffer, size_t offset,
                               void *dst, size_t bytes) {
  return mlart_buffer_read_on(buffer, offset, dst, bytes, nullptr);
}

mlart_status mlart_buffer_write_on(mlart_buffer *buffer, size_t offset,
                                   const void *src, size_t bytes,
                                   mlart_stream *stream) {
  return guarded([&]() -> Status {
    if (!buffer)
      return nullArg("buffer");
    if (bytes && !src)
      return nullArg("src");
    return writeBlocking(buffer->buffer, offset, src, bytes, stream);
  });
}

mlart_status mlart_buffer_read_on(const mlart_buffer *buffer, size_t offset,
                                  void *dst, size_t bytes,
                                  mlart_stream *stream) {
  return guarded([&]() -> Status {
    if (!buffer)
      return nullArg("buffer");
    if (bytes && !dst)
      return nullArg("dst");
    return readBlocking(buffer->buffer, offset, dst, bytes, stream);
  });
}

mlart_status mlart_kv_cache_create(mlart_device *device,
                                   const mlart_kv_cache_desc *desc, float scale,
                                   mlart_kv_cache **out_cache) {
  return guarded([&]() -> Status {
    if (!device || !out_cache)
      return nullArg("device and out_cache");
    MLART_ASSIGN_OR_RETURN(const KVCacheDesc d, toCacheDesc(desc));
    MLART_ASSIGN_OR_RETURN(KVCache cache,
                           KVCache::create(*device->device, d, scale));
    *out_cache = new mlart_kv_cache_s{std::move(cache), nullptr};
    return Status::success();
  });
}

mlart_status mlart_kv_cache_wrap(mlart_device *device,
                                 const mlart_kv_cache_desc *desc, void *data,
                                 int64_t block_stride_bytes, float scale,
                                 mlart_kv_cache **out_cache) {
  return guarded([&]() -> Status {
    if (!device || !out_cache)
      return nullArg("device and out_cache");
    MLART_ASSIGN_OR_RETURN(const KVCacheDesc d, toCacheDesc(desc));
    MLART_ASSIGN_OR_RETURN(
        KVCache cache,
        KVCache::wrap(*device->device, d, data, block_stride_bytes, scale));
    *out_cache = new mlart_kv_cache_s{std::move(cache), nullptr};
    return Status::success();
  });
}

void mlart_kv_cache_destroy(mlart_kv_cache *cache) { delete cache; }

size_t mlart_kv_cache_size_bytes(const mlart_kv_cache *cache) {
  return cache ? cache->cache.sizeBytes() : 0;
}

int64_t mlart_kv_cache_row_bytes(const mlart_kv_cache *cache) {
  return cache ? cache->cache.desc().rowBytes() : 0;
}

mlart_status mlart_kv_cache_set_scale_tensor(mlart_kv_cache *cache,
                                             const float *device_scale) {
  return guarded([&]() -> Status {
    if (!cache)
      return nullArg("cache");
    cache->cache.setScaleTensor(device_scale);
    return Status::success();
  });
}

int64_t mlart_kv_cache_block_stride(const mlart_kv_cache *cache) {
  return cache ? cache->cache.blockStride() : 0;
}

mlart_status mlart_kv_cache_write_bytes(mlart_kv_cache *cache, size_t offset,
                                        const void *src, size_t bytes) {
  return mlart_kv_cache_write_bytes_on(cache, offset, src, bytes, nullptr);
}

mlart_status mlart_kv_cache_read_bytes(const mlart_kv_cache *cache,
                                       size_t offset, void *dst, size_t bytes) {
  return mlart_kv_cache_read_bytes_on(cache, offset, dst, bytes, nullptr);
}

mlart_status mlart_kv_cache_write_bytes_on(mlart_kv_cache *cache, size_t offset,
                                           const void *src, size_t bytes,
                                           mlart_stream *stream) {
  return guarded([&]() -> Status {
    if (!cache)
      return nullArg("cache");
    if (bytes && !src)
      return nullArg("src");
    return writeCacheBlocking(cache->cache, offset, src, bytes, stream);
  });
}

mlart_status mlart_kv_cache_read_bytes_on(const mlart_kv_cache *cache,
                                          size_t offset, void *dst,
                                          size_t bytes, mlart_stream *stream) {
  return guarded([&]() -> Status {
    if (!cache)
      return nullArg("cache");
    if (bytes && !dst)
      return nullArg("dst");
    return readCacheBlocking(cache->cache, offset, dst, bytes, stream);
  });
}

mlart_status mlart_kv_cache_set_guard(mlart_kv_cache *cache,
                                      mlart_block_manager *manager) {
  return guarded([&]() -> Status {
    if (!cache)
      return nullArg("cache");
    if (manager) {
      // Check the shapes now rather than at every kernel call.
      MLART_RETURN_IF_ERROR(manager->manager.guard(cache->cache.ref()).status());
    }
    cache->guard = manager;
    return Status::success();
  });
}

mlart_status mlart_block_manager_create(int64_t num_blocks, int64_t block_size,
                                        int enable_prefix_caching,
                                        mlart_block_manager **out_manager) {
  return guarded([&]() -> Status {
    if (!out_manager)
      return nullArg("out_manager");
    BlockManagerConfig config;
    config.numBlocks = num_blocks;
    config.blockSize = block_size;
    config.enablePrefixCaching = enable_prefix_caching != 0;
    MLART_ASSIGN_OR_RETURN(BlockManager manager, BlockManager::create(config));
    *out_manager = new mlart_block_manager_s{std::move(manager)};
    return Status::success();
  });
}

void mlart_block_manager_destroy(mlart_block_manager *manager) {
  delete manager;
}

mlart_status mlart_block_manager_add_request(mlart_block_manager *manager,
                                             int64_t request,
                                             const int32_t *tokens,
                                             int64_t num_tokens,
                                             int64_t *out_num_cached_tokens) {
  return guarded([&]() -> Status {
    if (!manager)
      return nullArg("manager");
    MLART_ASSIGN_OR_RETURN(
        int64_t cached, manager->manager.addRequest(request, tokens, num_tokens));
    if (out_num_cached_tokens)
      *out_num_cached_tokens = cached;
    return Status::success();
  });
}

mlart_status mlart_block_manager_append_tokens(mlart_block_manager *manager,
                                               int64_t request,
                                               const int32_t *tokens,
                                               int64_t num_tokens) {
  return guarded([&]() -> Status {
    if (!manager)
      return nullArg("manager");
    return manager->manager.appendTokens(request, tokens, num_tokens);
  });
}

mlart_status mlart_block_manager_commit_computed(mlart_block_manager *manager,
                                                 int64_t request,
                                                 int64_t num_computed) {
  return guarded([&]() -> Status {
    if (!manager)
      return nullArg("manager");
    return manager->manager.commitComputed(request, num_computed);
  });
}

mlart_status mlart_block_manager_free_request(mlart_block_manager *manager,
                                              int64_t request) {
  return guarded([&]() -> Status {
    if (!manager)
      return nullArg("manager");
    return manager->manager.freeRequest(request);
  });
}

mlart_status mlart_block_manager_get_block_table(
    const mlart_block_manager *manager, int64_t request, int32_t *out,
    int64_t capacity, int64_t *out_num_blocks) {
  return guarded([&]() -> Status {
    if (!manager || !out_num_blocks)
      return nullArg("manager and out_num_blocks");
    MLART_ASSIGN_OR_RETURN(std::vector<int32_t> table,
                           manager->manager.blockTable(request));
    *out_num_blocks = int64_t(table.size());
    if (int64_t(table.size()) > capacity)
      return outOfRange("block table has " + std::to_string(table.size()) +
                        " entries, capacity is " + std::to_string(capacity));
    if (!table.empty() && !out)
      return nullArg("out");
    for (size_t i = 0; i < table.size(); ++i)
      out[i] = table[i];
    return Status::success();
  });
}

mlart_status mlart_block_manager_build_block_table(
    const mlart_block_manager *manager, const int64_t *requests,
    int64_t num_requests, int64_t max_blocks, int32_t *out) {
  return guarded([&]() -> Status {
    if (!manager)
      return nullArg("manager");
    return manager->manager.buildBlockTable(requests, num_requests, max_blocks,
                                            out);
  });
}

mlart_status mlart_block_manager_build_slot_mapping(
    const mlart_block_manager *manager, const mlart_scheduled_chunk *chunks,
    int64_t num_chunks, int64_t padded_length, int64_t *out) {
  return guarded([&]() -> Status {
    if (!manager)
      return nullArg("manager");
    if (num_chunks < 0 || (num_chunks > 0 && !chunks))
      return invalidArgument("bad chunk array");
    std::vector<ScheduledChunk> cs(static_cast<size_t>(num_chunks));
    for (int64_t i = 0; i < num_chunks; ++i)
      cs[size_t(i)] = {chunks[i].request, chunks[i].start, chunks[i].count};
    return manager->manager.buildSlotMapping(cs.data(), num_chunks,
                                             padded_length, out);
  });
}

mlart_status mlart_block_manager_get_stats(const mlart_block_manager *manager,
                                           mlart_prefix_cache_stats *out) {
  return guarded([&]() -> Status {
    if (!manager || !out)
      return nullArg("manager and out");
    PrefixCacheStats s = manager->manager.stats();
    out->queried_tokens = s.queriedTokens;
    out->hit_tokens = s.hitTokens;
    out->cached_blocks = s.cachedBlocks;
    out->evictions = s.evictions;
    out->free_blocks = s.freeBlocks;
    out->refused_writes = s.refusedWrites;
    return Status::success();
  });
}

int64_t mlart_block_manager_num_free_blocks(const mlart_block_manager *manager) {
  return manager ? manager->manager.numFreeBlocks() : 0;
}

void mlart_block_manager_set_checked_mode(mlart_block_manager *manager,
                                          int enabled) {
  if (manager)
    manager->manager.setCheckedMode(enabled != 0);
}

uint64_t mlart_block_manager_refused_writes(const mlart_block_manager *manager) {
  return manager ? manager->manager.refusedWrites() : 0;
}

} // extern "C"
