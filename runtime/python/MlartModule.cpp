//===- MlartModule.cpp - mla.runtime: the runtime for Python callers ------===//
//
// The extension behind `mla.runtime` (docs/python.md). MLIR-free like the
// rest of runtime/: it builds on a machine with CUDA and no MLIR and runs
// artifacts compiled elsewhere. The caller's tensors are bound where they
// are (DLPackTensor.h); every runtime Status that is not OK becomes an
// mla.runtime.Error whose message starts with the status code.
//
//===----------------------------------------------------------------------===//
#include "DLPackTensor.h"

#include "mlart/Artifact.h"
#include "mlart/CudaDevice.h"
#include "mlart/Executor.h"
#include "mlart/KVCacheLayout.h"
#include "mlart/Opcode.h"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>
#include <memory>
#include <optional>
#include <string>

namespace py = pybind11;
using namespace mlart;
using mlart::python::ImportedTensor;

namespace {

/// The C++ side of mla.runtime.Error (only its Python type is used).
struct RuntimeErrorTag {};
py::object errorType;

/// Raises mla.runtime.Error for a failed status.
void check(const Status &s) {
  if (s.ok())
    return;
  PyErr_SetString(errorType.ptr(), s.toString().c_str());
  throw py::error_already_set();
}

template <typename T> T value(StatusOr<T> s) {
  check(s.status());
  return std::move(*s);
}

/// A device and, for the CUDA device, the GPU it drives.
class PyDevice {
public:
  explicit PyDevice(const std::string &spec) {
    if (spec == "cpu") {
      device_ = createCpuDevice();
      return;
    }
    int ordinal = 0;
    if (spec != "cuda") {
      const std::string prefix = "cuda:";
      size_t used = 0;
      if (spec.rfind(prefix, 0) != 0 || spec.size() == prefix.size())
        throw py::value_error("Device: expected 'cpu', 'cuda' or 'cuda:N', "
                              "got '" +
                              spec + "'");
      try {
        ordinal = std::stoi(spec.substr(prefix.size()), &used);
      } catch (const std::exception &) {
        used = 0;
      }
      if (used != spec.size() - prefix.size() || ordinal < 0)
        throw py::value_error("Device: bad CUDA ordinal in '" + spec + "'");
    }
#ifdef MLART_PYTHON_HAVE_CUDA
    device_ = value(createCudaDevice(ordinal));
#else
    check(unavailable("Device('" + spec +
                      "'): this mla.runtime was built without the CUDA "
                      "backend"));
#endif
  }

  Device &device() { return *device_; }
  std::string name() const {
    if (device_->kind() == DeviceKind::Cpu)
      return "cpu";
    return "cuda:" +
           std::to_string(static_cast<CudaDevice &>(*device_).ordinal());
  }

  /// The stream handle a Python stream argument names: None (the default
  /// stream), an int (a cudaStream_t, e.g. torch.cuda.Stream.cuda_stream)
  /// or an object with a `cuda_stream` attribute (a torch.cuda.Stream).
  StreamHandle stream(py::handle s) const {
    if (s.is_none())
      return nullptr;
    py::object handle = py::reinterpret_borrow<py::object>(s);
    if (py::hasattr(s, "cuda_stream"))
      handle = s.attr("cuda_stream");
    if (!py::isinstance<py::int_>(handle))
      throw py::type_error("stream: expected None, an int (cudaStream_t) or "
                           "an object with .cuda_stream");
    const intptr_t raw = handle.cast<intptr_t>();
    if (raw != 0 && device_->kind() == DeviceKind::Cpu)
      throw py::value_error("stream: the cpu device has no streams");
    return reinterpret_cast<StreamHandle>(raw);
  }

private:
  std::unique_ptr<Device> device_;
};

py::tuple shapeOf(int rank, const int64_t *sizes) {
  py::tuple t(rank);
  for (int d = 0; d < rank; ++d)
    t[size_t(d)] = sizes[d];
  return t;
}

/// The element type and last dimension of a cache tensor: the row in
/// elements of the layout's storage type (bytes for the fp8 layouts).
int64_t cacheRowElements(const KVCacheDesc &desc) {
  return desc.rowBytes() / int64_t(dtypeSize(desc.dtype));
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
    ImportedTensor t = value(python::importTensor(
        tensor, streamArgument(stream), what));
    check(python::checkDevice(t, device_.device(), what));
    check(executor_->bind(name, t.ref));
    bound_[name] = std::move(t.owner);
  }

  void bindCache(const std::string &name, py::handle tensor, float scale,
                 py::handle stream) {
    const std::string what = "cache '" + name + "'";
    const int index = executor_->artifact().findCache(name);
    if (index < 0)
      check(invalidArgument("bind_cache: the artifact declares no cache '" +
                            name + "'"));
    const KVCacheDesc &decl =
        executor_->artifact().caches()[size_t(index)].desc;
    ImportedTensor t = value(python::importTensor(
        tensor, streamArgument(stream), what));
    check(python::checkDevice(t, device_.device(), what));
    const TensorRef &ref = t.ref;
    const int64_t row = cacheRowElements(decl);
    if (ref.dtype != decl.dtype || ref.rank != 3 ||
        ref.sizes[1] != decl.blockSize || ref.sizes[2] != row ||
        (decl.numBlocks != 0 && ref.sizes[0] != decl.numBlocks))
      check(invalidArgument(
          "bind_cache: " + what + " needs a [" +
          (decl.numBlocks ? std::to_string(decl.numBlocks) : "num_blocks") +
          ", " + std::to_string(decl.blockSize) + ", " + std::to_string(row) +
          "] " + dtypeName(decl.dtype) + " tensor (" +
          cacheLayoutName(decl.layout) + " layout)"));
    if (!ref.isContiguous())
      check(invalidArgument(
          "bind_cache: " + what +
          " must be contiguous; a strided block dimension is not supported "
          "yet"));
    KVCacheRef cache;
    cache.desc = decl;
    cache.desc.numBlocks = ref.sizes[0];
    cache.data = ref.data;
    cache.scale = scale;
    check(executor_->bindCache(name, cache));
    bound_[name] = std::move(t.owner);
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
    if (device_.device().kind() == DeviceKind::Cpu)
      return std::nullopt;
    return reinterpret_cast<intptr_t>(device_.stream(stream));
  }

  py::object deviceObject_; ///< keeps the device alive
  PyDevice &device_;
  std::unique_ptr<Executor> executor_;
  /// The DLPack capsule of every bound tensor: it keeps the memory alive.
  std::map<std::string, py::object> bound_;
};

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
    return value(Artifact::loadFile(os.attr("fspath")(source).cast<std::string>()));
  throw py::type_error("Artifact.load: expected bytes or a path");
}

} // namespace

PYBIND11_MODULE(_mlart, m) {
  m.doc() = "The MLA runtime (MLIR-free): devices, artifacts, executors.";
  errorType = py::exception<RuntimeErrorTag>(m, "Error", PyExc_RuntimeError);

  py::class_<PyDevice>(m, "Device", "A compute device: 'cpu' or 'cuda:N'.")
      .def(py::init<const std::string &>(), py::arg("spec") = "cpu")
      .def_property_readonly("name", &PyDevice::name)
      .def_property(
          "memory_limit",
          [](PyDevice &d) { return d.device().memoryLimit(); },
          [](PyDevice &d, uint64_t bytes) { d.device().setMemoryLimit(bytes); },
          "Bytes the device's live allocations may hold together (0 "
          "restores the default: what the device has).")
      .def_property_readonly(
          "bytes_allocated",
          [](PyDevice &d) { return d.device().bytesAllocated(); })
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
      .def("__repr__",
           [](PyDevice &d) { return "mla.runtime.Device('" + d.name() + "')"; });

  py::class_<BufferDecl>(m, "BufferInfo", "A buffer the artifact declares.")
      .def_readonly("name", &BufferDecl::name)
      .def_property_readonly(
          "role", [](const BufferDecl &b) { return bufferRoleName(b.role); })
      .def_property_readonly(
          "dtype", [](const BufferDecl &b) { return dtypeName(b.dtype); })
      .def_property_readonly(
          "shape", [](const BufferDecl &b) { return shapeOf(b.rank, b.sizes); })
      .def("__repr__", [](const BufferDecl &b) {
        return "BufferInfo('" + b.name + "', " + bufferRoleName(b.role) +
               ", " + dtypeName(b.dtype) + ", " +
               std::string(py::str(shapeOf(b.rank, b.sizes))) + ")";
      });

  py::class_<CacheDecl>(m, "CacheInfo", "A paged KV cache the artifact "
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
      .def_property_readonly(
          "rope_dim", [](const CacheDecl &c) { return c.desc.ropeDim; })
      .def_property_readonly(
          "row_bytes", [](const CacheDecl &c) { return c.desc.rowBytes(); })
      .def(
          "shape",
          [](const CacheDecl &c, std::optional<int64_t> numBlocks) {
            int64_t blocks = numBlocks.value_or(c.desc.numBlocks);
            if (blocks <= 0)
              throw py::value_error("shape: the artifact leaves the block "
                                    "count to the caller; pass num_blocks");
            return py::make_tuple(blocks, c.desc.blockSize,
                                  cacheRowElements(c.desc));
          },
          py::arg("num_blocks") = py::none(),
          "The shape of the tensor bind_cache takes; its element type is "
          "`dtype` (f8E4M3FN: uint8 bytes).")
      .def("__repr__", [](const CacheDecl &c) {
        return "CacheInfo('" + c.name + "', " +
               cacheLayoutName(c.desc.layout) + ", " + dtypeName(c.desc.dtype) +
               ", block_size=" + std::to_string(c.desc.blockSize) + ")";
      });

  py::class_<Instruction>(m, "InstructionInfo",
                          "One instruction of the artifact's step.")
      .def_property_readonly(
          "opcode", [](const Instruction &i) { return opcodeName(i.opcode); })
      .def_readonly("location", &Instruction::location)
      .def("__repr__", [](const Instruction &i) {
        return std::string("InstructionInfo(") + opcodeName(i.opcode) +
               ", '" + i.location + "')";
      });

  py::class_<Artifact>(m, "Artifact", "A compiled step (docs/artifact.md).")
      .def_static("load", &loadArtifact, py::arg("source"),
                  "Loads and validates an artifact from bytes or a path.")
      .def_property_readonly("function_name", &Artifact::functionName)
      .def_property_readonly("buffers", &Artifact::buffers)
      .def_property_readonly("caches", &Artifact::caches)
      .def_property_readonly("instructions", &Artifact::instructions)
      .def_property_readonly("prepare_instructions",
                             &Artifact::prepareInstructions);

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
           "(CacheInfo.shape()), without copying it.")
      .def("unbind_all", &PyExecutor::unbindAll)
      .def_property_readonly("fully_bound",
                             [](PyExecutor &e) {
                               return e.executor().fullyBound();
                             })
      .def("is_bound", &PyExecutor::isBound, py::arg("name"))
      .def("prepare", &PyExecutor::prepare, py::arg("stream") = py::none())
      .def("run", &PyExecutor::run, py::arg("stream") = py::none(),
           "Runs one step on `stream`.")
      .def("capture_graph", &PyExecutor::captureGraph,
           py::arg("stream") = py::none())
      .def("replay", &PyExecutor::replay, py::arg("stream") = py::none(),
           py::arg("wait") = true)
      .def_property_readonly("artifact", [](PyExecutor &e) {
        return e.executor().artifact();
      });
}
