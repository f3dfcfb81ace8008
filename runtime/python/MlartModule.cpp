//===- MlartModule.cpp - mla.runtime: the runtime for Python callers ------===//
//
// The extension behind `mla.runtime` (docs/python.md). MLIR-free like the
// rest of runtime/: it builds on a machine with CUDA and no MLIR and runs
// artifacts compiled elsewhere. The caller's tensors are bound where they
// are (DLPackTensor.h); every runtime Status that is not OK becomes an
// mla.runtime.Error whose message starts with the status code.
//
//===----------------------------------------------------------------------===//
#include "CacheTensor.h"
#include "DLPackTensor.h"
#include "PyRuntime.h"

#include "mlart/Artifact.h"
#include "mlart/CudaDevice.h"
#include "mlart/Executor.h"
#include "mlart/KVCacheLayout.h"
#include "mlart/Opcode.h"
#include "mlart/Version.h"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>
#include <memory>
#include <optional>
#include <string>

namespace py = pybind11;
using namespace mlart;
using mlart::python::check;
using mlart::python::ImportedTensor;
using mlart::python::PyDevice;
using mlart::python::value;

namespace {

py::tuple shapeOf(int rank, const int64_t *sizes) {
  py::tuple t(rank);
  for (int d = 0; d < rank; ++d)
    t[size_t(d)] = sizes[d];
  return t;
}

/// One artifact bound to one device, and the caller's tensors it uses.
class PyExecutor {
public:
  PyExecutor(const Artifact &artifact, py::object device)
      : deviceObject_(std::move(device)),
        device_(deviceObject_.cast<PyDevice &>()) {
    executor_ = std::make_unique<Executor>(
        value(Executor::create(artifact, device_.device())));
  }

  void bind(const std::string &name, py::handle tensor, py::handle stream) {
    const std::string what = "buffer '" + name + "'";
    ImportedTensor t =
        value(python::importTensor(tensor, streamArgument(stream), what));
    check(python::checkDevice(t, device_.device(), what));
    if (int index = executor_->artifact().findBuffer(name); index >= 0)
      python::adoptFp8Encoding(
          t, executor_->artifact().buffers()[size_t(index)].dtype);
    check(executor_->bind(name, t.ref));
    bound_[name] = std::move(t.owner);
  }

  void bindCache(const std::string &name, py::handle tensor, py::handle scale,
                 py::handle stream) {
    const std::string what = "cache '" + name + "'";
    const int index = executor_->artifact().findCache(name);
    if (index < 0)
      check(invalidArgument("bind_cache: the artifact declares no cache '" +
                            name + "'"));
    ImportedTensor t =
        value(python::importTensor(tensor, streamArgument(stream), what));
    check(python::checkDevice(t, device_.device(), what));
    python::CacheScale cacheScale = value(python::importCacheScale(
        scale, device_.device(), streamArgument(stream), what + " scale"));
    KVCacheRef cache = value(python::cacheFromTensor(
        t, executor_->artifact().caches()[size_t(index)].desc, cacheScale,
        "bind_cache: " + what));
    check(executor_->bindCache(name, cache));
    bound_[name] = std::move(t.owner);
    // The kernels read a scale tensor at every run: keep it alive too.
    if (cacheScale.tensor)
      bound_[name + " scale"] = std::move(cacheScale.tensor->owner);
    else
      bound_.erase(name + " scale");
  }

  void unbindAll() {
    executor_->unbindAll();
    bound_.clear();
  }

  void run(py::handle stream) {
    StreamHandle h = device_.stream(stream);
    Status s;
    {
      py::gil_scoped_release release;
      s = executor_->run(h);
    }
    check(s);
  }

  void prepare(py::handle stream) {
    StreamHandle h = device_.stream(stream);
    Status s;
    {
      py::gil_scoped_release release;
      s = executor_->prepare(h);
    }
    check(s);
  }

  void captureGraph(py::handle stream) {
    StreamHandle h = device_.stream(stream);
    Status s;
    {
      py::gil_scoped_release release;
      s = executor_->captureGraph(h);
    }
    check(s);
  }

  void replay(py::handle stream, bool wait) {
    StreamHandle h = device_.stream(stream);
    Status s;
    {
      py::gil_scoped_release release;
      s = executor_->runGraph(h, wait);
    }
    check(s);
  }

  Executor &executor() { return *executor_; }
  bool isBound(const std::string &name) const { return bound_.count(name); }

private:
  /// What a CUDA producer is told about the stream that uses its tensor.
  std::optional<intptr_t> streamArgument(py::handle stream) const {
    return python::dlpackStream(device_.device(), device_.stream(stream));
  }

  py::object deviceObject_; ///< keeps the device alive
  PyDevice &device_;
  std::unique_ptr<Executor> executor_;
  /// The DLPack capsule of every bound tensor: it keeps the memory alive.
  std::map<std::string, py::object> bound_;
};

/// RopeTableParams as the keyword arguments of rope_cos_sin_table.
py::dict ropeParamsDict(const RopeTableParams &p) {
  py::dict d;
  d["theta"] = p.theta;
  d["factor"] = p.factor;
  d["original_max_position"] = p.originalMaxPosition;
  d["beta_fast"] = p.betaFast;
  d["beta_slow"] = p.betaSlow;
  d["mscale"] = p.mscale;
  d["mscale_all_dim"] = p.mscaleAllDim;
  return d;
}

Artifact loadArtifact(py::handle source) {
  if (py::isinstance<py::bytes>(source) ||
      py::isinstance<py::bytearray>(source) ||
      py::isinstance<py::memoryview>(source)) {
    py::buffer_info info = py::reinterpret_borrow<py::buffer>(source).request();
    return value(Artifact::load(info.ptr, size_t(info.size * info.itemsize)));
  }
  py::module_ os = py::module_::import("os");
  if (py::isinstance<py::str>(source) ||
      py::isinstance(source, os.attr("PathLike")))
    return value(
        Artifact::loadFile(os.attr("fspath")(source).cast<std::string>()));
  throw py::type_error("Artifact.load: expected bytes or a path");
}

} // namespace

PYBIND11_MODULE(_mlart, m) {
  m.doc() = "The MLA runtime (MLIR-free): devices, artifacts, executors.";
  m.attr("__version__") = MLART_VERSION_STRING;
  python::defineErrorType(m);

  py::class_<PyDevice>(m, "Device", "A compute device: 'cpu' or 'cuda:N'.")
      .def(py::init<const std::string &>(), py::arg("spec") = "cpu")
      .def_property_readonly("name", &PyDevice::name)
      .def_property(
          "memory_limit", [](PyDevice &d) { return d.device().memoryLimit(); },
          [](PyDevice &d, uint64_t bytes) { d.device().setMemoryLimit(bytes); },
          "Bytes the device's live allocations may hold together (0 "
          "restores the default: what the device has).")
      .def_property_readonly(
          "bytes_allocated",
          [](PyDevice &d) { return d.device().bytesAllocated(); })
      .def_property(
          "synchronous_checks",
          [](PyDevice &d) { return d.synchronousChecks(); },
          [](PyDevice &d, bool on) { check(d.setSynchronousChecks(on)); },
          "True (the default): every checked kernel call waits for its "
          "device-side checks (a bad slot, a protected block) and returns "
          "their verdict. False (CUDA): calls only enqueue, so they can run "
          "on the caller's stream and inside the caller's CUDA graph "
          "capture; check_errors() reports what the checks recorded.")
      .def(
          "check_errors",
          [](PyDevice &d, py::handle stream) {
            StreamHandle h = d.stream(stream);
            Status s;
            {
              py::gil_scoped_release release;
              s = d.device().checkErrors(h);
            }
            check(s);
          },
          py::arg("stream") = py::none(),
          "Synchronises `stream` and raises Error for what asynchronous "
          "device-side checks recorded since the last check (on any "
          "stream of the device: there is one record a device), clearing "
          "it.")
      .def(
          "synchronize",
          [](PyDevice &d, py::handle stream) {
            StreamHandle h = d.stream(stream);
            Status s;
            {
              py::gil_scoped_release release;
              s = d.device().synchronize(h);
            }
            check(s);
          },
          py::arg("stream") = py::none())
      .def("__repr__", [](PyDevice &d) {
        return "mla.runtime.Device('" + d.name() + "')";
      });

  py::class_<BufferDecl>(m, "BufferInfo", "A buffer the artifact declares.")
      .def_readonly("name", &BufferDecl::name)
      .def_property_readonly(
          "role", [](const BufferDecl &b) { return bufferRoleName(b.role); })
      .def_property_readonly(
          "dtype", [](const BufferDecl &b) { return dtypeName(b.dtype); })
      .def_property_readonly(
          "shape", [](const BufferDecl &b) { return shapeOf(b.rank, b.sizes); })
      .def("__repr__", [](const BufferDecl &b) {
        return "BufferInfo('" + b.name + "', " + bufferRoleName(b.role) + ", " +
               dtypeName(b.dtype) + ", " +
               std::string(py::str(shapeOf(b.rank, b.sizes))) + ")";
      });

  py::class_<CacheDecl>(m, "CacheInfo",
                        "A paged KV cache the artifact "
                        "declares.")
      .def_readonly("name", &CacheDecl::name)
      .def_property_readonly(
          "layout",
          [](const CacheDecl &c) { return cacheLayoutName(c.desc.layout); })
      .def_property_readonly(
          "dtype", [](const CacheDecl &c) { return dtypeName(c.desc.dtype); })
      .def_property_readonly("num_blocks",
                             [](const CacheDecl &c) -> py::object {
                               if (c.desc.numBlocks == 0)
                                 return py::none();
                               return py::int_(c.desc.numBlocks);
                             })
      .def_property_readonly(
          "block_size", [](const CacheDecl &c) { return c.desc.blockSize; })
      .def_property_readonly(
          "latent_rank", [](const CacheDecl &c) { return c.desc.latentRank; })
      .def_property_readonly("rope_dim",
                             [](const CacheDecl &c) { return c.desc.ropeDim; })
      .def_property_readonly(
          "row_bytes", [](const CacheDecl &c) { return c.desc.rowBytes(); })
      .def_property_readonly(
          "scale_buffer",
          [](const CacheDecl &c) -> py::object {
            if (c.scaleBuffer == kNoIndex)
              return py::none();
            return py::int_(c.scaleBuffer);
          },
          "Index into Artifact.buffers of the 0-d f32 buffer holding a "
          "per-tensor fp8 cache's scale (the kernels read it when they "
          "run), or None: the bound cache's own scale.")
      .def(
          "shape",
          [](const CacheDecl &c, std::optional<int64_t> numBlocks) {
            int64_t blocks = numBlocks.value_or(c.desc.numBlocks);
            if (blocks <= 0)
              throw py::value_error("shape: the artifact leaves the block "
                                    "count to the caller; pass num_blocks");
            return py::make_tuple(blocks, c.desc.blockSize,
                                  python::cacheRowElements(c.desc));
          },
          py::arg("num_blocks") = py::none(),
          "The shape of the tensor bind_cache takes; its element type is "
          "`dtype` (f8E4M3FN: uint8 bytes).")
      .def("__repr__", [](const CacheDecl &c) {
        return "CacheInfo('" + c.name + "', " + cacheLayoutName(c.desc.layout) +
               ", " + dtypeName(c.desc.dtype) +
               ", block_size=" + std::to_string(c.desc.blockSize) + ")";
      });

  py::class_<Instruction>(m, "InstructionInfo",
                          "One instruction of the artifact's step.")
      .def_property_readonly(
          "opcode", [](const Instruction &i) { return opcodeName(i.opcode); })
      .def_readonly("location", &Instruction::location)
      .def("__repr__", [](const Instruction &i) {
        return std::string("InstructionInfo(") + opcodeName(i.opcode) + ", '" +
               i.location + "')";
      });

  py::class_<Artifact>(m, "Artifact", "A compiled step (docs/artifact.md).")
      .def_static("load", &loadArtifact, py::arg("source"),
                  "Loads and validates an artifact from bytes or a path.")
      .def_property_readonly("function_name", &Artifact::functionName)
      .def_property_readonly("buffers", &Artifact::buffers)
      .def_property_readonly("caches", &Artifact::caches)
      .def_property_readonly("instructions", &Artifact::instructions)
      .def_property_readonly("prepare_instructions",
                             &Artifact::prepareInstructions)
      .def_property_readonly(
          "rope_tables",
          [](const Artifact &a) {
            py::dict tables;
            for (const RopeTableDecl &t : a.ropeTables())
              tables[py::str(a.buffers()[t.buffer].name)] =
                  ropeParamsDict(t.params);
            return tables;
          },
          "How each rope table buffer is computed: buffer name -> the "
          "keyword arguments of rope_cos_sin_table.");

  m.def(
      "_rope_cos_sin_table",
      [](int64_t maxPosition, int64_t ropeDim, double theta, double factor,
         int64_t originalMaxPosition, double betaFast, double betaSlow,
         double mscale, double mscaleAllDim) {
        RopeTableParams p;
        p.theta = theta;
        p.factor = factor;
        p.originalMaxPosition = originalMaxPosition;
        p.betaFast = betaFast;
        p.betaSlow = betaSlow;
        p.mscale = mscale;
        p.mscaleAllDim = mscaleAllDim;
        std::vector<float> table =
            value(ropeCosSinTable(maxPosition, ropeDim, p));
        return py::bytes(reinterpret_cast<const char *>(table.data()),
                         table.size() * sizeof(float));
      },
      py::arg("max_position"), py::arg("rope_dim"), py::arg("theta"),
      py::arg("factor"), py::arg("original_max_position"), py::arg("beta_fast"),
      py::arg("beta_slow"), py::arg("mscale"), py::arg("mscale_all_dim"),
      "The f32 bytes of mlart::ropeCosSinTable (mla.runtime wraps it).");

  py::class_<PyExecutor>(m, "Executor",
                         "Runs one artifact on one device over the caller's "
                         "tensors.")
      .def(py::init<const Artifact &, py::object>(), py::arg("artifact"),
           py::arg("device"))
      .def("bind", &PyExecutor::bind, py::arg("name"), py::arg("tensor"),
           py::arg("stream") = py::none(),
           "Binds buffer `name` to `tensor` (anything with __dlpack__) "
           "without copying it.")
      .def("bind_cache", &PyExecutor::bindCache, py::arg("name"),
           py::arg("tensor"), py::arg("scale") = 1.0f,
           py::arg("stream") = py::none(),
           "Binds cache `name` to the caller's cache tensor "
           "(CacheInfo.shape()), without copying it. `scale`, the fp8 "
           "per-tensor scale, is a number or a one-element float32 tensor "
           "that every run reads (vLLM's k_scale).")
      .def("unbind_all", &PyExecutor::unbindAll)
      .def_property_readonly(
          "fully_bound",
          [](PyExecutor &e) { return e.executor().fullyBound(); })
      .def("is_bound", &PyExecutor::isBound, py::arg("name"))
      .def("prepare", &PyExecutor::prepare, py::arg("stream") = py::none())
      .def("run", &PyExecutor::run, py::arg("stream") = py::none(),
           "Runs one step on `stream`.")
      .def("capture_graph", &PyExecutor::captureGraph,
           py::arg("stream") = py::none())
      .def("replay", &PyExecutor::replay, py::arg("stream") = py::none(),
           py::arg("wait") = true)
      .def_property_readonly(
          "artifact",
          [](PyExecutor &e) -> const Artifact & {
            return e.executor().artifact();
          },
          py::return_value_policy::reference_internal);

  // After the classes, so that the ops' signatures name their types.
  python::defineOps(m);
}
