//===- CodegenModules.cu - Loads and launches compiler-generated kernels --===//
#include "cuda/CodegenModules.h"
#include "cuda/DriverEntryPoints.h"
#include "cuda/Launch.h"

#include "cpu/CacheWrite.h"
#include "cpu/IndexAccess.h"
#include "cpu/RopeMath.h"
#include "cpu/TensorAccess.h"
#include "mlart/Codegen.h"

#include <algorithm>
#include <vector>

namespace mlart::cuda {
namespace {

/// The driver entry points we use, resolved once through the static cudart.
struct Driver {
  decltype(&::cuModuleLoadDataEx) moduleLoadDataEx = nullptr;
  decltype(&::cuModuleGetFunction) moduleGetFunction = nullptr;
  decltype(&::cuModuleUnload) moduleUnload = nullptr;
  decltype(&::cuLaunchKernelEx) launchKernelEx = nullptr;
  decltype(&::cuGetErrorName) getErrorName = nullptr;
  decltype(&::cuGetErrorString) getErrorString = nullptr;
  Status status = Status::success();
};

const Driver &driver() {
  static const Driver d = [] {
    Driver r;
    Status s = resolveDriverEntryPoint("cuModuleLoadDataEx", r.moduleLoadDataEx);
    if (s.ok())
      s = resolveDriverEntryPoint("cuModuleGetFunction", r.moduleGetFunction);
    if (s.ok())
      s = resolveDriverEntryPoint("cuModuleUnload", r.moduleUnload);
    if (s.ok())
      s = resolveDriverEntryPoint("cuLaunchKernelEx", r.launchKernelEx);
    if (s.ok())
      s = resolveDriverEntryPoint("cuGetErrorName", r.getErrorName);
    if (s.ok())
      s = resolveDriverEntryPoint("cuGetErrorString", r.getErrorString);
    r.status = s;
    return r;
  }();
  return d;
}

} // namespace

Status CodegenModules::driverError(CUresult r, const std::string &what) const {
  const Driver &d = driver();
  const char *name = nullptr, *text = nullptr;
  if (d.getErrorName)
    d.getErrorName(r, &name);
  if (d.getErrorString)
    d.getErrorString(r, &text);
  return internalError("cuda driver: " + what + ": " +
                       (name ? name : "CUresult " + std::to_string(int(r))) +
                       (text ? std::string(": ") + text : std::string()));
}

CodegenModules::~CodegenModules() {
  const Driver &d = driver();
  if (!d.moduleUnload)
    return;
  cudaSetDevice(ordinal_);
  for (auto &entry : modules_)
    d.moduleUnload(entry.second.second.module);
}

CodegenModules::Loaded *
CodegenModules::findLoaded(const CodegenModule &module) {
  auto range = modules_.equal_range(module.hash);
  for (auto it = range.first; it != range.second; ++it) {
    const Loaded &l = it->second.second;
    if (l.knownText == module.ptx.data() && l.knownSize == module.ptx.size())
      return &it->second.second;
  }
  for (auto it = range.first; it != range.second; ++it) {
    if (it->second.first != module.ptx)
      continue;
    Loaded &l = it->second.second;
    l.knownText = module.ptx.data();
    l.knownSize = module.ptx.size();
    return &l;
  }
  return nullptr;
}

StatusOr<CodegenFunction>
CodegenModules::function(const CodegenModule &module, const std::string &name) {
  const Driver &d = driver();
  MLART_RETURN_IF_ERROR(d.status);
  std::lock_guard<std::mutex> lock(mu_);
  Loaded *loaded = findLoaded(module);
  if (!loaded) {
    MLART_CUDA_CHECK(cudaSetDevice(ordinal_), "cudaSetDevice");
    // The primary context must exist before the driver API uses it.
    MLART_CUDA_CHECK(cudaFree(nullptr), "cudaFree(nullptr) (context init)");
    std::vector<char> errorLog(8192, 0), infoLog(2048, 0);
    CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER,
                              CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                              CU_JIT_INFO_LOG_BUFFER,
                              CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES};
    void *values[] = {errorLog.data(),
                      reinterpret_cast<void *>(uintptr_t(errorLog.size())),
                      infoLog.data(),
                      reinterpret_cast<void *>(uintptr_t(infoLog.size()))};
    CUmodule m = nullptr;
    const CUresult r =
        d.moduleLoadDataEx(&m, module.ptx.c_str(), 4, options, values);
    if (r != CUDA_SUCCESS) {
      errorLog.back() = 0;
      Status s = driverError(r, "cuModuleLoadDataEx (generated PTX, " +
                                    std::to_string(module.ptx.size()) +
                                    " bytes)");
      return Status(StatusCode::InvalidArgument,
                    s.message() + "; JIT log: " +
                        (errorLog[0] ? errorLog.data() : "(empty)"));
    }
    auto it = modules_.emplace(module.hash,
                               std::make_pair(module.ptx, Loaded()));
    loaded = &it->second.second;
    loaded->module = m;
    loaded->knownText = module.ptx.data();
    loaded->knownSize = module.ptx.size();
  }
  auto f = loaded->functions.find(name);
  if (f != loaded->functions.end())
    return f->second;
  CodegenFunction fn;
  const CUresult r =
      d.moduleGetFunction(&fn.fn, loaded->module, name.c_str());
  if (r != CUDA_SUCCESS)
    return driverError(r, "cuModuleGetFunction(" + name + ")");
  // The driver reads as many parameters as the entry declares: a kernel of
  // another argument binding (an artifact from an older compiler) would
  // read ours misaligned, so it never runs.
  const int params = codegenEntryParams(module.ptx, name);
  if (params != kCodegenParams && params != kCodegenParamsBeforeNorm)
    return invalidArgument(
        "generated kernel '" + name + "' takes " + std::to_string(params) +
        " parameters, this runtime passes " + std::to_string(kCodegenParams) +
        ": it was generated for another argument binding (recompile the "
        "artifact)");
  // Only a kernel that waits for the previous grid before touching global
  // memory may start early (cuda/Launch.h); artifacts from before the
  // compiler emitted the wait run with plain launches.
  fn.waitsForGrids = codegenEntryWaitsForGrids(module.ptx, name);
  loaded->functions.emplace(name, fn);
  return fn;
}

Status CodegenModules::launch(const CodegenFunction &f,
                              const std::string &name, unsigned grid,
                              unsigned block, void **params,
                              cudaStream_t stream) {
  const Driver &d = driver();
  MLART_RETURN_IF_ERROR(d.status);
  CUlaunchAttribute attr[1] = {};
  attr[0].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  attr[0].value.programmaticStreamSerializationAllowed = 1;
  const bool pdl = f.waitsForGrids && pdlEnabled();
  CUlaunchConfig config = {};
  config.gridDimX = grid;
  config.gridDimY = config.gridDimZ = 1;
  config.blockDimX = block;
  config.blockDimY = config.blockDimZ = 1;
  config.sharedMemBytes = 0;
  config.hStream = reinterpret_cast<CUstream>(stream);
  config.attrs = pdl ? attr : nullptr;
  config.numAttrs = pdl ? 1 : 0;
  const CUresult r = d.launchKernelEx(&config, f.fn, params, nullptr);
  if (r != CUDA_SUCCESS)
    return driverError(r, "cuLaunchKernelEx(" + name + ", " +
                              std::to_string(grid) + " x " +
                              std::to_string(block) + ")");
  std::lock_guard<std::mutex> lock(mu_);
  ++launches_;
  if (pdl)
    ++pdlLaunches_;
  return Status::success();
}

size_t CodegenModules::loadedModules() const {
  std::lock_guard<std::mutex> lock(mu_);
  return modules_.size();
}

uint64_t CodegenModules::launches() const {
  std::lock_guard<std::mutex> lock(mu_);
  return launches_;
}

uint64_t CodegenModules::pdlLaunches() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pdlLaunches_;
}

namespace {

/// One memref argument in MLIR's default calling convention.
struct MemrefArg {
  void *allocated = nullptr;
  void *aligned = nullptr;
  int64_t offset = 0;
  int64_t size = 0;
  int64_t stride = 1;
};


Status checkRopeOperands(const RopeCacheUpdateArgs &a) {
  using namespace mlart::cpu;
  MLART_RETURN_IF_ERROR(checkRopeStyle(a.style));
  MLART_RETURN_IF_ERROR(checkRopeOperand(a.kPe, "k_pe", true, false));
  MLART_RETURN_IF_ERROR(checkIndexTensor(a.positions, "positions"));
  MLART_RETURN_IF_ERROR(checkTensor(a.cosSin, "cos_sin", 2));
  if (a.cosSin.dtype != DType::F32 || a.cosSin.sizes[1] != a.kPe.sizes[1] ||
      a.cosSin.strides[1] != 1)
    return invalidArgument("cos_sin must be f32 [max_pos, rope] with unit "
                           "inner stride, got " + a.cosSin.describe());
  if (a.positions.sizes[0] != a.kPe.sizes[0])
    return invalidArgument("positions has " +
                           std::to_string(a.positions.sizes[0]) +
                           " entries for " + std::to_string(a.kPe.sizes[0]) +
                           " tokens");
  if (a.qPe.present()) {
    MLART_RETURN_IF_ERROR(checkRopeOperand(a.qPe, "q_pe", false, true));
    if (a.qPe.sizes[0] != a.kPe.sizes[0] || a.qPe.sizes[2] != a.kPe.sizes[1] ||
        a.qPe.dtype != a.kPe.dtype)
      return invalidArgument("q_pe " + a.qPe.describe() +
                             " does not match k_pe " + a.kPe.describe());
  }
  return checkRopeSource(a.qPe, a.qPeIn);
}

} // namespace

Status codegenCacheWrite(CudaContext &ctx, CodegenModules &modules,
                         const CodegenModule &module,
                         const CodegenKernel &kernel,
                         const RopeCacheUpdateArgs &a, cudaStream_t stream) {
  const bool rope = kernel.op == Opcode::RopeCacheUpdate;
  MLART_RETURN_IF_ERROR(
      cpu::checkCacheWriteShapes(a.kvC, a.kPe, a.slotMapping, a.cache));
  if (rope) {
    MLART_RETURN_IF_ERROR(checkRopeOperands(a));
    MLART_RETURN_IF_ERROR(cpu::checkLatentNorm(
        a.latentNormWeight, a.latentNormEpsilon, a.kvC, a.cache));
  } else if (a.latentNormWeight.present()) {
    return invalidArgument("cache_update takes no latent norm");
  }

  // The kernel must have been generated for exactly these operands.
  CodegenSignature sig;
  sig.op = kernel.op;
  sig.layout = a.cache.desc.layout;
  sig.cacheDType = a.cache.desc.dtype;
  sig.latentRank = a.cache.desc.latentRank;
  sig.ropeDim = a.cache.desc.ropeDim;
  sig.input = a.kvC.dtype;
  sig.slots = a.slotMapping.dtype;
  if (rope) {
    sig.style = a.style;
    sig.positions = a.positions.dtype;
    sig.rotatesQ = a.qPe.present() && a.qPe.sizes[1] > 0;
    sig.latentNorm = a.latentNormWeight.present();
    if (sig.latentNorm)
      sig.normWeight = a.latentNormWeight.dtype;
  }
  const std::string expected = codegenKernelName(sig);
  if (kernel.name != expected || a.kPe.dtype != a.kvC.dtype)
    return invalidArgument("generated kernel '" + kernel.name +
                           "' does not match its operands (they need '" +
                           expected + "')");

  // Where the generated kernel does not apply, the library kernel runs
  // (same results): checked mode, rows (and cos/sin rows, which it reads as
  // 16-byte vectors) that are not 16-byte aligned, a separate k_pe_out (the
  // compiler never asks for one), a strided cache view (the generated
  // kernel addresses slot * row bytes) and a device scale.
  const bool fallback = a.cache.writeProtect || a.kPeOut.present() ||
                        !a.cache.isDense() || a.cache.scaleTensor ||
                        !rowsAligned16(a.kvC) || !rowsAligned16(a.kPe) ||
                        !rowsAligned16(a.qPe) || !rowsAligned16(a.qPeIn) ||
                        !rowsAligned16(a.latentNormWeight) ||
                        (rope && !rowsAligned16(a.cosSin)) ||
                        reinterpret_cast<uintptr_t>(a.cache.data) % 16 != 0;
  if (fallback)
    return rope ? ropeCacheUpdate(ctx, a, stream)
                : cacheUpdate(ctx, {a.kvC, a.kPe, a.slotMapping, a.cache},
                              stream);

  const int64_t T = a.kvC.sizes[0], N = a.slotMapping.sizes[0];
  const int64_t tokens = rope ? T : std::min(T, N);
  if (tokens == 0 || (!rope && N == 0))
    return Status::success();
  if (T > INT_MAX)
    return invalidArgument("too many tokens for one call");
  MLART_ASSIGN_OR_RETURN(CodegenFunction fn,
                         modules.function(module, kernel.name));

  std::unique_lock<std::mutex> lock(ctx.recordMutex, std::defer_lock);
  if (ctx.synchronousChecks) {
    lock.lock();
    MLART_RETURN_IF_ERROR(resetRecord(ctx, stream));
  }
  // All-or-nothing (docs/codegen.md): a large call is validated first by the
  // library's validation kernel; a small one by every block of the kernel.
  MLART_ASSIGN_OR_RETURN(
      const bool prevalidated,
      prevalidateCacheWrite(ctx, a.slotMapping, a.cache,
                            rope ? &a.positions : nullptr,
                            rope ? &a.cosSin : nullptr, stream));
  auto mem = [](const TensorRef &t) {
    MemrefArg m;
    m.allocated = m.aligned = t.data;
    return m;
  };
  MemrefArg mems[kCodegenMemrefArgs] = {
      mem(a.kvC), mem(a.kPe), mem(a.slotMapping), MemrefArg(),
      mem(a.positions), mem(a.cosSin), mem(a.qPe), MemrefArg(), MemrefArg(),
      MemrefArg(), MemrefArg()};
  mems[3].allocated = mems[3].aligned = a.cache.data;
  mems[7].allocated = mems[7].aligned = &ctx.deviceRecord->badSlotIndex;
  mems[8].allocated = mems[8].aligned = &ctx.deviceRecord->badPosIndex;
  mems[9].allocated = mems[9].aligned = &ctx.deviceRecord->callFailed;
  const bool q = rope && a.qPe.present();
  // In place, the kernel reads q_pe from q_pe itself.
  const TensorRef &qIn = a.qPeIn.present() ? a.qPeIn : a.qPe;
  mems[10] = mem(qIn);
  int64_t scalars[kCodegenScalarArgs] = {
      T,
      N,
      a.kvC.strides[0],
      a.kPe.strides[0],
      a.slotMapping.strides[0],
      a.cache.desc.numSlots(),
      rope ? a.positions.strides[0] : 0,
      rope ? a.cosSin.strides[0] : 0,
      rope ? a.cosSin.sizes[0] : 0,
      q ? a.qPe.strides[0] : 0,
      q ? a.qPe.strides[1] : 0,
      q ? a.qPe.sizes[1] : 0,
      prevalidated ? 1 : 0,
      q ? qIn.strides[0] : 0,
      q ? qIn.strides[1] : 0};
  MemrefArg normWeight = mem(a.latentNormWeight);
  float normEpsilon = a.latentNormEpsilon;
  // A kernel of the binding before the norm reads only the first
  // kCodegenParamsBeforeNorm of these (the driver reads what it declares).
  void *params[kCodegenParams];
  int n = 0;
  auto pushMemref = [&](MemrefArg &m) {
    params[n++] = &m.allocated;
    params[n++] = &m.aligned;
    params[n++] = &m.offset;
    params[n++] = &m.size;
    params[n++] = &m.stride;
  };
  for (MemrefArg &m : mems)
    pushMemref(m);
  for (int64_t &s : scalars)
    params[n++] = &s;
  pushMemref(normWeight);
  params[n++] = &normEpsilon;
  // Enough blocks for the rows, and for the q_pe items, which the kernel
  // strides over the latent threads of the whole grid (docs/codegen.md):
  // one 16-byte unit of the latent each, or 8 values for fp8_ds_mla.
  int64_t grid = (tokens + kernel.tokensPerBlock - 1) / kernel.tokensPerBlock;
  if (q) {
    const KVCacheDesc &d = a.cache.desc;
    const int64_t latThreads = d.layout == CacheLayout::Fp8DsMla
                                   ? d.latentRank / 8
                                   : d.latentRank * int64_t(dtypeSize(d.dtype)) / 16;
    const int64_t perBlock =
        std::max<int64_t>(1, kernel.tokensPerBlock * latThreads);
    const int64_t items = T * a.qPe.sizes[1] * (d.ropeDim / 16);
    grid = std::max(grid, std::min<int64_t>((items + perBlock - 1) / perBlock,
                                            int64_t(ctx.smCount) * 16));
  }
  MLART_RETURN_IF_ERROR(modules.launch(fn, kernel.name, unsigned(grid),
                                       kernel.blockThreads, params, stream));
  if (!ctx.synchronousChecks)
    return Status::success();
  return readRecord(ctx, stream, &a.slotMapping, rope ? &a.positions : nullptr,
                    a.cache.desc.blockSize, a.cache.desc.numSlots(), nullptr);
}

} // namespace mlart::cuda
