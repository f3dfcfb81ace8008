//===- Ops.cpp - The runtime's kernels on the caller's tensors ------------===//
//
// What mla.ops (vLLM- and FlashMLA-shaped calls) runs: one kernel of the
// device's library over tensors the caller owns, found through DLPack.
// The Python side gives them the library's shapes; every argument is
// checked here or by the kernel before anything is written.
//
//===----------------------------------------------------------------------===//
#include "CacheTensor.h"
#include "DLPackTensor.h"
#include "PyRuntime.h"

#include "mlart/Kernels.h"

#include <pybind11/pybind11.h>

#include <optional>
#include <string>

namespace py = pybind11;

namespace mlart::python {
namespace {

/// The tensors of one call, imported and checked against the device.
class CallTensors {
public:
  CallTensors(PyDevice &device, py::handle stream)
      : device_(device), stream_(device.stream(stream)) {}

  /// The tensor `object` holds, checked against the device.
  ImportedTensor import(py::handle object, const char *name) {
    ImportedTensor t = value(importTensor(object, streamArgument(), name));
    check(checkDevice(t, device_.device(), name));
    keep_.push_back(t.owner);
    return t;
  }
  TensorRef get(py::handle object, const char *name) {
    return import(object, name).ref;
  }
  /// A `scale` argument (importCacheScale), kept alive for the call.
  CacheScale scale(py::handle object) {
    CacheScale s = value(
        importCacheScale(object, device_.device(), streamArgument(), "scale"));
    if (s.tensor)
      keep_.push_back(s.tensor->owner);
    return s;
  }
  std::optional<TensorRef> optional(py::handle object, const char *name) {
    if (object.is_none())
      return std::nullopt;
    return get(object, name);
  }

  /// Runs `args`' kernel on the call's stream, the GIL released.
  template <typename Args> void run(const Args &args) {
    Status s;
    {
      py::gil_scoped_release release;
      s = runKernel(device_.device().kernels(), args, stream_);
    }
    check(s);
  }

private:
  std::optional<intptr_t> streamArgument() const {
    return dlpackStream(device_.device(), stream_);
  }

  PyDevice &device_;
  StreamHandle stream_;
  std::vector<py::object> keep_;
};

/// The cache layout a vLLM kv_cache_dtype names, over rows of `latent` +
/// `rope` values of `plainDType` when the cache is not fp8.
KVCacheDesc cacheDesc(const std::string &layout, int64_t blockSize,
                      int64_t latent, int64_t rope, DType plainDType) {
  KVCacheDesc d;
  d.blockSize = blockSize;
  d.latentRank = latent;
  d.ropeDim = rope;
  if (layout == "plain") {
    d.layout = CacheLayout::Plain;
    d.dtype = plainDType;
  } else if (layout == "fp8_per_tensor") {
    d.layout = CacheLayout::Fp8PerTensor;
    d.dtype = DType::F8E4M3FN;
  } else if (layout == "fp8_e5m2_per_tensor") {
    d.layout = CacheLayout::Fp8PerTensor;
    d.dtype = DType::F8E5M2;
  } else if (layout == "fp8_ds_mla") {
    d.layout = CacheLayout::Fp8DsMla;
    d.dtype = DType::F8E4M3FN;
  } else {
    throw py::value_error("cache layout: expected 'plain', 'fp8_per_tensor', "
                          "'fp8_e5m2_per_tensor' or 'fp8_ds_mla', got '" +
                          layout + "'");
  }
  return d;
}

/// Block size of a cache tensor, read before the layout is known (the
/// shape check proper is cacheFromTensor's).
int64_t blockSizeOf(const TensorRef &cache) {
  if (cache.rank < 2)
    check(invalidArgument("kv_cache: expected [num_blocks, block_size, "
                          "row], got rank " +
                          std::to_string(cache.rank)));
  return cache.sizes[1];
}

/// The last dimension (0 for a scalar): the latent or rope width a cache
/// row is made of.
int64_t lastDim(const TensorRef &t) {
  return t.rank > 0 ? t.sizes[t.rank - 1] : 0;
}

} // namespace

void defineOps(py::module_ &m) {
  m.def(
      "_cache_update",
      [](PyDevice &device, py::handle kvC, py::handle kPe,
         py::handle slotMapping, py::handle kvCache, const std::string &layout,
         py::handle scale, py::handle stream) {
        CallTensors t(device, stream);
        CacheUpdateArgs a;
        a.kvC = t.get(kvC, "kv_c");
        a.kPe = t.get(kPe, "k_pe");
        a.slotMapping = t.get(slotMapping, "slot_mapping");
        const ImportedTensor cache = t.import(kvCache, "kv_cache");
        a.cache = value(cacheFromTensor(
            cache,
            cacheDesc(layout, blockSizeOf(cache.ref), lastDim(a.kvC),
                      lastDim(a.kPe), cache.ref.dtype),
            t.scale(scale), "kv_cache"));
        t.run(a);
      },
      py::arg("device"), py::arg("kv_c"), py::arg("k_pe"),
      py::arg("slot_mapping"), py::arg("kv_cache"), py::arg("layout"),
      py::arg("scale"), py::arg("stream"));

  m.def(
      "_decode_attention",
      [](PyDevice &device, py::handle q, py::handle kvCache,
         const std::string &layout, py::handle scale, py::handle blockTable,
         py::handle seqLens, float softmaxScale, py::handle out, py::handle lse,
         int64_t latent, int numSplits, py::handle stream) {
        CallTensors t(device, stream);
        DecodeAttentionArgs a;
        a.q = t.get(q, "q");
        const ImportedTensor cache = t.import(kvCache, "kv_cache");
        const int64_t row = lastDim(a.q);
        if (latent <= 0 || latent >= row)
          check(invalidArgument("head_dim_v " + std::to_string(latent) +
                                " must be positive and below q's last "
                                "dimension " +
                                std::to_string(row)));
        a.cache = value(
            cacheFromTensor(cache,
                            cacheDesc(layout, blockSizeOf(cache.ref), latent,
                                      row - latent, cache.ref.dtype),
                            t.scale(scale), "kv_cache"));
        a.blockTable = t.get(blockTable, "block_table");
        a.seqLens = t.get(seqLens, "cache_seqlens");
        a.softmaxScale = softmaxScale;
        a.out = t.get(out, "out");
        if (std::optional<TensorRef> l = t.optional(lse, "lse"))
          a.lse = *l;
        a.numSplits = numSplits;
        t.run(a);
      },
      py::arg("device"), py::arg("q"), py::arg("kv_cache"), py::arg("layout"),
      py::arg("scale"), py::arg("block_table"), py::arg("seq_lens"),
      py::arg("softmax_scale"), py::arg("out"), py::arg("lse"),
      py::arg("latent"), py::arg("num_splits"), py::arg("stream"));
}

} // namespace mlart::python
