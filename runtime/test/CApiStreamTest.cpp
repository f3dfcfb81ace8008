//===- CApiStreamTest.cpp - C API streams, and CUDA devices without CUDA --===//
//
// Through mlart.h only. This binary links mlart_capi_nocuda, so
// mlart_device_create_cuda must answer Unavailable here on any machine.
//
//===----------------------------------------------------------------------===//
#include "CApiTestUtil.h"
#include "mlart/mlart.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

namespace {

using mlart::capitest::CStatus;

TEST(CApiCudaProvider, UnavailableWithoutTheCudaBackend) {
  // A stale pointer must be cleared, not left for the caller to destroy.
  mlart_device *dev = reinterpret_cast<mlart_device *>(uintptr_t(0x10));
  {
    CStatus st(mlart_device_create_cuda(0, &dev));
    EXPECT_EQ(st.code(), MLART_STATUS_UNAVAILABLE) << st.message();
    EXPECT_TRUE(st.mentions("linked without the CUDA backend")) << st.message();
    EXPECT_TRUE(st.mentions("mlart_capi_cuda")) << st.message();
  }
  EXPECT_EQ(dev, nullptr);
  {
    CStatus st(mlart_device_create_cuda(99, &dev));
    EXPECT_EQ(st.code(), MLART_STATUS_UNAVAILABLE) << st.message();
    EXPECT_TRUE(st.mentions("CUDA device 99")) << st.message();
  }
  EXPECT_EQ(dev, nullptr);
}

TEST(CApiCudaProvider, BadArgumentsAreInvalid) {
  {
    CStatus st(mlart_device_create_cuda(0, nullptr));
    EXPECT_EQ(st.code(), MLART_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(st.message(), "out_device must not be NULL");
  }
  mlart_device *dev = nullptr;
  CStatus st(mlart_device_create_cuda(-1, &dev));
  EXPECT_EQ(st.code(), MLART_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(st.mentions("ordinal -1 is negative")) << st.message();
  EXPECT_EQ(dev, nullptr);
}

/// A CPU device with one buffer-backed f32 [rows, cols] tensor per call.
struct CpuFixture {
  mlart_device *dev = nullptr;
  std::vector<mlart_buffer *> buffers;
  CpuFixture() { EXPECT_EQ(mlart_device_create_cpu(&dev), nullptr); }
  ~CpuFixture() {
    for (mlart_buffer *b : buffers)
      mlart_buffer_free(b);
    mlart_device_destroy(dev);
  }
  mlart_tensor tensor(int64_t rows, int64_t cols) {
    mlart_buffer *b = nullptr;
    EXPECT_EQ(mlart_buffer_allocate(dev, size_t(rows * cols) * 4, &b), nullptr);
    buffers.push_back(b);
    const int64_t sizes[2] = {rows, cols};
    return mlart_tensor_contiguous(mlart_buffer_data(b), MLART_DTYPE_F32, 2,
                                   sizes);
  }
};

TEST(CApiStream, CpuStreamOrdersKernelsAndCopies) {
  CpuFixture f;
  mlart_stream *stream = nullptr;
  ASSERT_EQ(mlart_stream_create(f.dev, &stream), nullptr);
  ASSERT_NE(stream, nullptr);
  EXPECT_EQ(mlart_stream_native_handle(stream), nullptr);

  mlart_add_args add = {f.tensor(2, 3), f.tensor(2, 3), f.tensor(2, 3)};
  const float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {10, 20, 30, 40, 50, 60};
  const float poison[6] = {NAN, NAN, NAN, NAN, NAN, NAN};
  ASSERT_EQ(mlart_buffer_write_on(f.buffers[0], 0, a, sizeof a, stream),
            nullptr);
  ASSERT_EQ(mlart_buffer_write_on(f.buffers[1], 0, b, sizeof b, stream),
            nullptr);
  ASSERT_EQ(mlart_buffer_write(f.buffers[2], 0, poison, sizeof poison),
            nullptr);
  ASSERT_EQ(mlart_add(f.dev, &add, stream), nullptr);
  ASSERT_EQ(mlart_stream_synchronize(stream), nullptr);
  ASSERT_EQ(mlart_device_synchronize(f.dev, stream), nullptr);
  float out[6] = {};
  // An offset read on the stream: elements 2..5.
  ASSERT_EQ(mlart_buffer_read_on(f.buffers[2], 8, out, 16, stream), nullptr);
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(out[i], a[i + 2] + b[i + 2]) << i;
  {
    CStatus st(mlart_buffer_read_on(f.buffers[2], 8, out, 24, stream));
    EXPECT_EQ(st.code(), MLART_STATUS_OUT_OF_RANGE) << st.message();
  }
  mlart_stream_destroy(stream);
}

TEST(CApiStream, CacheBytesOnAStream) {
  CpuFixture f;
  mlart_stream *stream = nullptr;
  ASSERT_EQ(mlart_stream_create(f.dev, &stream), nullptr);
  mlart_kv_cache_desc desc = {2, 4, 8, 4, MLART_DTYPE_F32, MLART_CACHE_PLAIN};
  mlart_kv_cache *cache = nullptr;
  ASSERT_EQ(mlart_kv_cache_create(f.dev, &desc, 1.0f, &cache), nullptr);
  const unsigned char bytes[5] = {1, 2, 3, 4, 5};
  ASSERT_EQ(mlart_kv_cache_write_bytes_on(cache, 100, bytes, 5, stream),
            nullptr);
  unsigned char back[7] = {};
  ASSERT_EQ(mlart_kv_cache_read_bytes_on(cache, 99, back, 7, stream), nullptr);
  const unsigned char want[7] = {0, 1, 2, 3, 4, 5, 0};
  EXPECT_EQ(std::memcmp(back, want, 7), 0);
  const size_t size = mlart_kv_cache_size_bytes(cache);
  {
    CStatus st(
        mlart_kv_cache_write_bytes_on(cache, size - 2, bytes, 5, stream));
    EXPECT_EQ(st.code(), MLART_STATUS_OUT_OF_RANGE) << st.message();
  }
  mlart_kv_cache_destroy(cache);
  mlart_stream_destroy(stream);
}

TEST(CApiStream, StreamOfAnotherDeviceIsRefused) {
  CpuFixture f;
  mlart_device *other = nullptr;
  ASSERT_EQ(mlart_device_create_cpu(&other), nullptr);
  mlart_stream *foreign = nullptr;
  ASSERT_EQ(mlart_stream_create(other, &foreign), nullptr);

  mlart_add_args add = {f.tensor(1, 4), f.tensor(1, 4), f.tensor(1, 4)};
  const float poison[4] = {NAN, NAN, NAN, NAN};
  ASSERT_EQ(mlart_buffer_write(f.buffers[2], 0, poison, sizeof poison),
            nullptr);
  {
    CStatus st(mlart_add(f.dev, &add, foreign));
    EXPECT_EQ(st.code(), MLART_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(st.message(),
              "kernel call: the stream belongs to another device");
  }
  // Nothing ran.
  float out[4] = {};
  ASSERT_EQ(mlart_buffer_read(f.buffers[2], 0, out, sizeof out), nullptr);
  for (float v : out)
    EXPECT_TRUE(std::isnan(v));

  const float x[4] = {1, 2, 3, 4};
  {
    CStatus st(mlart_buffer_write_on(f.buffers[0], 0, x, sizeof x, foreign));
    EXPECT_EQ(st.code(), MLART_STATUS_INVALID_ARGUMENT);
    EXPECT_TRUE(st.mentions("buffer write")) << st.message();
  }
  {
    CStatus st(mlart_buffer_read_on(f.buffers[0], 0, out, sizeof out, foreign));
    EXPECT_EQ(st.code(), MLART_STATUS_INVALID_ARGUMENT);
  }
  {
    CStatus st(mlart_device_synchronize(f.dev, foreign));
    EXPECT_EQ(st.code(), MLART_STATUS_INVALID_ARGUMENT);
  }
  mlart_kv_cache_desc desc = {1, 4, 8, 4, MLART_DTYPE_F32, MLART_CACHE_PLAIN};
  mlart_kv_cache *cache = nullptr;
  ASSERT_EQ(mlart_kv_cache_create(f.dev, &desc, 1.0f, &cache), nullptr);
  {
    CStatus st(mlart_kv_cache_write_bytes_on(cache, 0, x, 4, foreign));
    EXPECT_EQ(st.code(), MLART_STATUS_INVALID_ARGUMENT);
    EXPECT_TRUE(st.mentions("cache write")) << st.message();
  }
  {
    CStatus st(mlart_kv_cache_read_bytes_on(cache, 0, out, 4, foreign));
    EXPECT_EQ(st.code(), MLART_STATUS_INVALID_ARGUMENT);
  }
  mlart_kv_cache_destroy(cache);
  mlart_stream_destroy(foreign);
  mlart_device_destroy(other);
}

TEST(CApiStream, NullArgumentsAreStatuses) {
  CpuFixture f;
  mlart_stream *stream = nullptr;
  {
    CStatus st(mlart_stream_create(nullptr, &stream));
    EXPECT_EQ(st.code(), MLART_STATUS_INVALID_ARGUMENT);
  }
  {
    CStatus st(mlart_stream_create(f.dev, nullptr));
    EXPECT_EQ(st.code(), MLART_STATUS_INVALID_ARGUMENT);
  }
  {
    CStatus st(mlart_stream_synchronize(nullptr));
    EXPECT_EQ(st.code(), MLART_STATUS_INVALID_ARGUMENT);
  }
  mlart_stream_destroy(nullptr);
  EXPECT_EQ(mlart_stream_native_handle(nullptr), nullptr);

  f.tensor(1, 4);
  {
    CStatus st(mlart_buffer_write_on(f.buffers[0], 0, nullptr, 4, nullptr));
    EXPECT_EQ(st.code(), MLART_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(st.message(), "src must not be NULL");
  }
  {
    CStatus st(mlart_buffer_read_on(f.buffers[0], 0, nullptr, 4, nullptr));
    EXPECT_EQ(st.code(), MLART_STATUS_INVALID_ARGUMENT);
  }
  {
    CStatus st(mlart_buffer_write_on(nullptr, 0, nullptr, 0, nullptr));
    EXPECT_EQ(st.code(), MLART_STATUS_INVALID_ARGUMENT);
  }
  // Zero bytes need no pointer.
  EXPECT_EQ(mlart_buffer_write_on(f.buffers[0], 4, nullptr, 0, nullptr),
            nullptr);
}

} // namespace
