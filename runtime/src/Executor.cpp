//===- Executor.cpp - Binding checks and instruction dispatch -------------===//
#include "mlart/Executor.h"

#include "PreparedAliases.h"

#include <algorithm>
#include <functional>
#include <chrono>
#include <cstdio>
#include <limits>
#include <set>

namespace mlart {

namespace {

std::string shapeString(DType dtype, int rank, const int64_t *sizes) {
  std::string s = "[";
  for (int d = 0; d < rank; ++d)
    s += (d ? ", " : "") + std::to_string(sizes[d]);
  return s + "] " + dtypeName(dtype);
}

/// `decl` is the artifact's; its num_blocks 0 accepts any block count.
bool sameDesc(const KVCacheDesc &decl, const KVCacheDesc &b) {
  const KVCacheDesc &a = decl;
  return (a.numBlocks == 0 || a.numBlocks == b.numBlocks) &&
         a.blockSize == b.blockSize &&
         a.latentRank == b.latentRank && a.ropeDim == b.ropeDim &&
         a.dtype == b.dtype && a.layout == b.layout;
}

std::string descString(const KVCacheDesc &d) {
  return "{blocks " + std::to_string(d.numBlocks) + ", block_size " +
         std::to_string(d.blockSize) + ", latent " +
         std::to_string(d.latentRank) + ", rope " + std::to_string(d.ropeDim) +
         ", " + dtypeName(d.dtype) + ", " + cacheLayoutName(d.layout) + "}";
}

} // namespace

Executor::Executor(Artifact artifact, Device &device, Buffer arena)
    : artifact_(std::move(artifact)), device_(&device),
      arena_(std::move(arena)) {
  bufferData_.assign(artifact_.buffers().size(), nullptr);
  caches_.assign(artifact_.caches().size(), KVCacheRef());
  cacheBound_.assign(artifact_.caches().size(), false);
}

StatusOr<Executor> Executor::create(Artifact artifact, Device &device) {
  // Always allocate something so that even an empty arena view has a
  // non-null address (kernels treat null as "operand absent").
  const size_t bytes = size_t(std::max<int64_t>(artifact.arenaBytes(), 64));
  MLART_ASSIGN_OR_RETURN(Buffer arena, device.allocate(bytes));
  // The prepared arena is allocated by layoutPrepared(), and only when the
  // bound weights do not already hold its bytes.
  return Executor(std::move(artifact), device, std::move(arena));
}

Status Executor::bind(const std::string &name, const TensorRef &tensor) {
  const int index = artifact_.findBuffer(name);
  if (index < 0) {
    if (artifact_.findCache(name) >= 0)
      return invalidArgument("bind: '" + name + "' is a cache; use bindCache");
    return invalidArgument("bind: the artifact declares no buffer '" + name +
                           "'");
  }
  const BufferDecl &decl = artifact_.buffers()[size_t(index)];
  bool same = tensor.dtype == decl.dtype && tensor.rank == decl.rank;
  for (int d = 0; same && d < decl.rank; ++d)
    same = tensor.sizes[d] == decl.sizes[d];
  if (!same)
    return invalidArgument(
        "bind: buffer '" + name + "' is declared " +
        shapeString(decl.dtype, decl.rank, decl.sizes) + ", got " +
        shapeString(tensor.dtype, std::min(std::max(tensor.rank, 0), kMaxRank),
                    tensor.sizes));
  if (!tensor.present())
    return invalidArgument("bind: buffer '" + name + "' has no memory");
  if (!tensor.isContiguous())
    return invalidArgument("bind: buffer '" + name +
                           "' must be contiguous (row-major)");
  bufferData_[size_t(index)] = tensor.data;
  return Status::success();
}

Status Executor::bindCache(const std::string &name, const KVCacheRef &cache) {
  const int index = artifact_.findCache(name);
  if (index < 0)
    return invalidArgument("bindCache: the artifact declares no cache '" +
                           name + "'");
  const KVCacheDesc &decl = artifact_.caches()[size_t(index)].desc;
  if (!sameDesc(decl, cache.desc))
    return invalidArgument("bindCache: cache '" + name + "' is declared " +
                           descString(decl) + ", got " +
                           descString(cache.desc));
  if (Status valid = cache.validate(); !valid.ok())
    return invalidArgument("bindCache: cache '" + name +
                           "': " + valid.message());
  caches_[size_t(index)] = cache;
  cacheBound_[size_t(index)] = true;
  return Status::success();
}

Status Executor::bindCache(const std::string &name, KVCache &cache) {
  return bindCache(name, cache.ref());
}

void Executor::unbindAll() {
  std::fill(bufferData_.begin(), bufferData_.end(), nullptr);
  std::fill(caches_.begin(), caches_.end(), KVCacheRef());
  std::fill(cacheBound_.begin(), cacheBound_.end(), false);
}

bool Executor::fullyBound() const {
  for (void *p : bufferData_)
    if (!p)
      return false;
  for (bool b : cacheBound_)
    if (!b)
      return false;
  return true;
}

TensorRef Executor::view(uint32_t index) const {
  if (index == kNoIndex)
    return TensorRef();
  const ViewDecl &v = artifact_.views()[index];
  void *base = v.base == ViewBase::Arena ? arena_.data()
               : v.base == ViewBase::Prepared
                   ? (preparedViewBase_.empty() || !preparedViewBase_[index]
                          ? prepared_.data()
                          : preparedViewBase_[index])
                   : bufferData_[v.baseIndex];
  return v.resolve(base);
}

bool Executor::isWeightView(uint32_t index) const {
  if (index == kNoIndex || index >= artifact_.views().size())
    return false;
  const ViewDecl &v = artifact_.views()[index];
  return v.base == ViewBase::Prepared ||
         (v.base == ViewBase::Buffer &&
          artifact_.buffers()[v.baseIndex].role == BufferRole::Weight);
}

Status Executor::setPrefillContextBound(int64_t bound) {
  if (bound < 0)
    return invalidArgument("prefill context bound must be >= 0 (0: none), not " +
                           std::to_string(bound));
  prefillContextBound_ = bound;
  return Status::success();
}

namespace {

void setIntAttr(RopeStyle &m, int32_t v) { m = static_cast<RopeStyle>(v); }
void setIntAttr(int &m, int32_t v) { m = v; }
void setIntAttr(bool &m, int32_t v) { m = v == 1; }

/// Binding<Op>::bind fills Op's Args from an instruction: operand slots in
/// Opcodes.def order, the cache, the scalar attributes.
template <Opcode Op> struct Binding;
#define MLART_OPERAND(name, member, ranks, dtypes, use)                        \
  a.member = view(inst.operands[slot++]);
#define MLART_CACHE(use) a.cache = cache;
#define MLART_FLOAT_ATTR(name, member, check) a.member = inst.floatAttr;
#define MLART_INT_ATTR(name, member, check) setIntAttr(a.member, inst.intAttr);
#define MLART_OPCODE(Enum, Value, name, ArgsType, Flags, Fields)               \
  template <> struct Binding<Opcode::Enum> {                                   \
    using Args = ArgsType;                                                     \
    template <typename ViewFn>                                                 \
    static Args bind(const Instruction &inst, const KVCacheRef &cache,         \
                     ViewFn view) {                                            \
      Args a;                                                                  \
      size_t slot = 0;                                                         \
      Fields(void) slot;                                                       \
      (void)cache;                                                             \
      return a;                                                                \
    }                                                                          \
  };
#include "mlart/Opcodes.def"
#undef MLART_OPERAND
#undef MLART_CACHE
#undef MLART_FLOAT_ATTR
#undef MLART_INT_ATTR

} // namespace

// launch<Args>: what the executor adds to the instruction's arguments
// (its own state and policies) before the kernel runs.
template <typename Args>
Status Executor::launch(size_t, const Instruction &, Args &args,
                        StreamHandle stream) {
  return runKernel(device_->kernels(), args, stream);
}

template <>
Status Executor::launch(size_t, const Instruction &, CopyArgs &args,
                        StreamHandle stream) {
  return device_->copyView(args.src, args.dst, stream);
}

template <>
Status Executor::launch(size_t, const Instruction &inst, CacheUpdateArgs &args,
                        StreamHandle stream) {
  if (inst.kernel != kNoIndex && device_->supportsCodegenKernels()) {
    RopeCacheUpdateArgs a;
    a.kvC = args.kvC;
    a.kPe = args.kPe;
    a.slotMapping = args.slotMapping;
    a.cache = args.cache;
    return runCodegen(inst, a, stream);
  }
  return device_->kernels().cacheUpdate(args, stream);
}

template <>
Status Executor::launch(size_t, const Instruction &inst,
                        RopeCacheUpdateArgs &args, StreamHandle stream) {
  if (inst.kernel != kNoIndex && device_->supportsCodegenKernels())
    return runCodegen(inst, args, stream);
  return device_->kernels().ropeCacheUpdate(args, stream);
}

template <>
Status Executor::launch(size_t, const Instruction &, DecodeAttentionArgs &args,
                        StreamHandle stream) {
  args.schedule = decodeSchedule_;
  return device_->kernels().decodeAttention(args, stream);
}

template <>
Status Executor::launch(size_t, const Instruction &,
                        DecodeAttentionWithUpdateArgs &args,
                        StreamHandle stream) {
  args.schedule = decodeSchedule_;
  return device_->kernels().decodeAttentionWithUpdate(args, stream);
}

template <>
Status Executor::launch(size_t, const Instruction &, PrefillAttentionArgs &args,
                        StreamHandle stream) {
  args.contextLenBound = prefillContextBound_;
  return device_->kernels().prefillAttention(args, stream);
}

// The GEMMs read their weight early when nothing before them on the
// stream can have written it (isWeightView). The first instruction of a
// run follows the caller's own work.
template <>
Status Executor::launch(size_t i, const Instruction &inst, QAbsorbArgs &args,
                        StreamHandle stream) {
  args.staticWeight =
      i > 0 && isWeightView(inst.operands[operand::QAbsorb::w_uk]);
  return device_->kernels().qAbsorb(args, stream);
}

template <>
Status Executor::launch(size_t i, const Instruction &inst, VUpArgs &args,
                        StreamHandle stream) {
  args.staticWeight = i > 0 && isWeightView(inst.operands[operand::VUp::w_uv]);
  return device_->kernels().vUp(args, stream);
}

template <>
Status Executor::launch(size_t i, const Instruction &inst, LinearArgs &args,
                        StreamHandle stream) {
  args.staticWeight =
      i > 0 && isWeightView(inst.operands[operand::Linear::weight]);
  return device_->kernels().linear(args, stream);
}

KVCacheRef Executor::cacheFor(const Instruction &inst) const {
  if (inst.cache == kNoIndex)
    return KVCacheRef();
  KVCacheRef cache = caches_[inst.cache];
  // The artifact's scale buffer overrides the bound cache's own scale.
  const uint32_t scale = artifact_.caches()[inst.cache].scaleBuffer;
  if (scale != kNoIndex)
    cache.scaleTensor = static_cast<const float *>(bufferData_[scale]);
  return cache;
}

Status Executor::runInstruction(size_t i, StreamHandle stream) {
  const Instruction &inst = artifact_.instructions()[i];
  const KVCacheRef cache = cacheFor(inst);
  auto viewOf = [this](uint32_t index) { return view(index); };
  switch (inst.opcode) {
#define MLART_OPCODE(Enum, Value, name, ArgsType, Flags, Fields)               \
  case Opcode::Enum: {                                                         \
    ArgsType args = Binding<Opcode::Enum>::bind(inst, cache, viewOf);          \
    return launch(i, inst, args, stream);                                      \
  }
#include "mlart/Opcodes.def"
  }
  return internalError("unknown opcode survived validation");
}

LinearArgs Executor::linearArgs(size_t i) const {
  const Instruction &inst = artifact_.instructions()[i];
  LinearArgs a = Binding<Opcode::Linear>::bind(
      inst, KVCacheRef(), [this](uint32_t index) { return view(index); });
  // As launch<LinearArgs>.
  a.staticWeight =
      i > 0 && isWeightView(inst.operands[operand::Linear::weight]);
  return a;
}

Status Executor::runCodegen(const Instruction &inst,
                            const RopeCacheUpdateArgs &args,
                            StreamHandle stream) {
  const CodegenKernel &kernel = artifact_.kernels()[inst.kernel];
  return device_->launchCodegenCacheWrite(artifact_.modules()[kernel.module],
                                          kernel, args, stream);
}

Status Executor::checkBound() const {
  for (size_t i = 0; i < bufferData_.size(); ++i)
    if (!bufferData_[i])
      return failedPrecondition("run: buffer '" + artifact_.buffers()[i].name +
                                "' is not bound");
  for (size_t i = 0; i < cacheBound_.size(); ++i)
    if (!cacheBound_[i])
      return failedPrecondition("run: cache '" + artifact_.caches()[i].name +
                                "' is not bound");
  return Status::success();
}

namespace {

/// The error record as an access: an interval no device allocation has.
constexpr uintptr_t kErrorRecordAddress = 0;

} // namespace

std::vector<MemoryAccess>
Executor::accessesOf(const Instruction &inst) const {
  std::vector<MemoryAccess> accesses;
  const OpcodeInfo &info = *opcodeInfo(inst.opcode);
  const OperandSpec *specs = info.operands;
  for (int k = 0; k < info.numOperands; ++k)
    if (inst.operands[size_t(k)] != kNoIndex)
      accesses.push_back(MemoryAccess::ofView(
          view(inst.operands[size_t(k)]), specs[k].written));
  if (inst.cache != kNoIndex) {
    const KVCacheRef &cache = caches_[inst.cache];
    const uintptr_t base = reinterpret_cast<uintptr_t>(cache.data);
    accesses.push_back(
        MemoryAccess::ofInterval(base, base + uintptr_t(cache.spanBytes()),
                                 info.cache == CacheUse::Write));
    const uint32_t scale = artifact_.caches()[inst.cache].scaleBuffer;
    if (scale != kNoIndex)
      accesses.push_back(MemoryAccess::ofView(
          artifact_.buffers()[scale].view(bufferData_[scale]),
          /*write=*/false));
  }
  // Kernels that record into the device's shared error record are kept in
  // program order among themselves, so that a synchronous check reads back
  // only its own call's verdict.
  if (info.usesErrorRecord)
    accesses.push_back(MemoryAccess::ofInterval(
        kErrorRecordAddress, kErrorRecordAddress + 1, /*write=*/true));
  return accesses;
}

Status Executor::preparePlan() {
  const int streams = device_->supportsConcurrentStreams() ? maxStreams_ : 1;
  std::vector<const void *> key(bufferData_.begin(), bufferData_.end());
  for (const KVCacheRef &c : caches_) {
    key.push_back(c.data);
    // The stride sets the interval the plan sees the cache occupy.
    key.push_back(reinterpret_cast<const void *>(uintptr_t(c.blockStride)));
  }
  key.push_back(reinterpret_cast<const void *>(uintptr_t(streams)));
  // Where the prepared views live (caller memory or the prepared arena);
  // it changes only with the weight addresses, which the key holds.
  MLART_RETURN_IF_ERROR(layoutPrepared());
  const size_t n = artifact_.instructions().size();
  if (key == planKey_ && plan_.stream.size() == n)
    return Status::success();

  std::vector<std::vector<MemoryAccess>> accesses;
  accesses.reserve(n);
  for (const Instruction &inst : artifact_.instructions())
    accesses.push_back(accessesOf(inst));
  StreamPlan plan = planStreams(accesses, streams);

  // Streams and events are made once and kept for later plans.
  while (int(sideStreams_.size()) + 1 < plan.numStreams) {
    MLART_ASSIGN_OR_RETURN(Stream side, device_->createStream());
    MLART_ASSIGN_OR_RETURN(Event join, device_->createOrderingEvent());
    sideStreams_.push_back(std::move(side));
    joinEvents_.push_back(std::move(join));
  }
  if (plan.numStreams > 1 && !forkEvent_.handle()) {
    MLART_ASSIGN_OR_RETURN(forkEvent_, device_->createOrderingEvent());
  }
  doneEvents_.resize(n);
  for (size_t i = 0; i < n; ++i)
    if (plan.recordAfter[i] && !doneEvents_[i].handle()) {
      MLART_ASSIGN_OR_RETURN(doneEvents_[i], device_->createOrderingEvent());
    }
  plan_ = std::move(plan);
  planKey_ = std::move(key);
  return Status::success();
}

StatusOr<const StreamPlan *> Executor::streamPlan() {
  MLART_RETURN_IF_ERROR(checkBound());
  MLART_RETURN_IF_ERROR(preparePlan());
  return &plan_;
}

Status Executor::instructionError(const char *what, size_t i,
                                  const Status &s) const {
  return Status(s.code(), std::string(what) + "instruction " +
                              artifact_.describeInstruction(i) + ": " +
                              s.message());
}

Status Executor::issueProgram(StreamHandle origin, const char *what) {
  const std::vector<Instruction> &program = artifact_.instructions();
  if (plan_.numStreams <= 1) {
    for (size_t i = 0; i < program.size(); ++i) {
      Status s = runInstruction(i, origin);
      if (!s.ok())
        return instructionError(what, i, s);
    }
    return Status::success();
  }

  auto streamOf = [&](int s) {
    return s == 0 ? origin : sideStreams_[size_t(s) - 1].handle();
  };
  MLART_RETURN_IF_ERROR(device_->recordEvent(forkEvent_.handle(), origin));
  std::vector<bool> started(size_t(plan_.numStreams), false);
  started[0] = true;
  Status failed = Status::success();
  for (size_t i = 0; i < program.size() && failed.ok(); ++i) {
    const int s = plan_.stream[i];
    const StreamHandle h = streamOf(s);
    Status st = Status::success();
    if (!started[size_t(s)]) {
      st = device_->streamWaitEvent(h, forkEvent_.handle());
      started[size_t(s)] = true;
    }
    for (uint32_t j : plan_.waitFor[i])
      if (st.ok())
        st = device_->streamWaitEvent(h, doneEvents_[j].handle());
    if (st.ok())
      st = runInstruction(i, h);
    if (st.ok() && plan_.recordAfter[i])
      st = device_->recordEvent(doneEvents_[i].handle(), h);
    if (!st.ok())
      failed = instructionError(what, i, st);
  }
  for (int s = 1; s < plan_.numStreams; ++s) {
    if (!started[size_t(s)])
      continue;
    EventHandle join = joinEvents_[size_t(s) - 1].handle();
    Status st = device_->recordEvent(join, streamOf(s));
    if (st.ok())
      st = device_->streamWaitEvent(origin, join);
    if (!st.ok() && failed.ok())
      failed = st;
  }
  return failed;
}

Status Executor::prepare(StreamHandle stream) {
  const std::vector<Instruction> &program = artifact_.prepareInstructions();
  if (program.empty())
    return Status::success();
  // The program reads weights only, so only they must be bound.
  for (size_t i = 0; i < bufferData_.size(); ++i)
    if (artifact_.buffers()[i].role == BufferRole::Weight && !bufferData_[i])
      return failedPrecondition("prepare: weight '" +
                                artifact_.buffers()[i].name +
                                "' is not bound");
  preparedFilled_ = false;
  MLART_RETURN_IF_ERROR(layoutPrepared());
  for (size_t i = 0; i < program.size(); ++i) {
    const Instruction &inst = program[i];
    if (!preparedCopyNeeded_[i])
      continue; // its bytes are read where the caller's weights hold them
    // Validation admits copies only.
    Status s = device_->copyView(view(inst.operands[0]),
                                 view(inst.operands[1]), stream);
    if (!s.ok())
      return Status(s.code(), "prepare: instruction #" + std::to_string(i) +
                                  (inst.location.empty()
                                       ? std::string()
                                       : " (" + inst.location + ")") +
                                  ": " + s.message());
  }
  preparedFilled_ = true;
  return Status::success();
}

Status Executor::layoutPrepared() {
  if (artifact_.prepareInstructions().empty())
    return Status::success();
  if (!preparedViewBase_.empty() && weightsStillAt(preparedLayoutFrom_))
    return Status::success();
  PreparedAliases aliases = planPreparedAliases(artifact_, bufferData_);
  if (aliases.needsArena && prepared_.empty()) {
    MLART_ASSIGN_OR_RETURN(
        prepared_, device_->allocate(size_t(artifact_.preparedBytes())));
  } else if (!aliases.needsArena && !prepared_.empty()) {
    // A graph captured with the old layout may read the arena: drop it
    // before the memory goes (rebinding needs a new capture anyway).
    graph_.reset();
    prepared_.reset();
  }
  if (aliases.viewBase != preparedViewBase_) {
    graph_.reset();
    preparedViewBase_ = std::move(aliases.viewBase);
  }
  preparedCopyNeeded_ = std::move(aliases.copyNeeded);
  preparedLayoutFrom_.clear();
  for (size_t i = 0; i < bufferData_.size(); ++i)
    if (artifact_.buffers()[i].role == BufferRole::Weight)
      preparedLayoutFrom_.push_back(bufferData_[i]);
  // Aliased bytes need no copy, but the others must be copied again.
  preparedFilled_ = false;
  return Status::success();
}

bool Executor::weightsStillAt(const std::vector<void *> &addresses) const {
  // Called on every run: compares in place, allocates nothing.
  size_t k = 0;
  for (size_t i = 0; i < bufferData_.size(); ++i) {
    if (artifact_.buffers()[i].role != BufferRole::Weight)
      continue;
    if (k == addresses.size() || addresses[k] != bufferData_[i])
      return false;
    ++k;
  }
  return k == addresses.size();
}

Status Executor::prepareIfStale(StreamHandle stream) {
  // Activations and step data are rebound every step; only weights feed
  // the prepare program.
  if (artifact_.prepareInstructions().empty() ||
      (preparedFilled_ && weightsStillAt(preparedLayoutFrom_)))
    return Status::success();
  return prepare(stream);
}

Status Executor::run(StreamHandle stream) {
  MLART_RETURN_IF_ERROR(checkBound());
  MLART_RETURN_IF_ERROR(prepareIfStale(stream));
  if (!timing_) {
    MLART_RETURN_IF_ERROR(preparePlan());
    return issueProgram(stream, "");
  }
  // Timing: in order on the caller's stream, synchronized after each op.
  using Clock = std::chrono::steady_clock;
  MLART_RETURN_IF_ERROR(device_->synchronize(stream));
  const std::vector<Instruction> &program = artifact_.instructions();
  for (size_t i = 0; i < program.size(); ++i) {
    const Clock::time_point start = Clock::now();
    Status s = runInstruction(i, stream);
    if (s.ok())
      s = device_->synchronize(stream);
    if (!s.ok())
      return instructionError("", i, s);
    timing_(i, program[i],
            std::chrono::duration<double>(Clock::now() - start).count());
  }
  return Status::success();
}

Status Executor::captureGraph(StreamHandle stream) {
  MLART_RETURN_IF_ERROR(checkBound());
  if (!stream)
    return invalidArgument("captureGraph: needs a created stream, not the "
                           "default stream");
  graph_.reset();
  // The prepare program runs now, outside the graph: replays only read it.
  MLART_RETURN_IF_ERROR(prepareIfStale(stream));
  // Streams and events are created before the capture starts.
  MLART_RETURN_IF_ERROR(preparePlan());
  MLART_RETURN_IF_ERROR(device_->beginCapture(stream));
  Status failed = issueProgram(stream, "captureGraph: ");
  // Always close the capture, so the stream is usable again.
  StatusOr<GraphHandle> graph = device_->endCapture(stream);
  if (!failed.ok()) {
    if (graph.ok())
      device_->destroyGraph(graph.value());
    return failed;
  }
  if (!graph.ok())
    return graph.status();
  graph_ = Graph(device_, graph.value());
  return Status::success();
}

Status Executor::runGraph(StreamHandle stream, bool wait) {
  if (graph_.empty())
    return failedPrecondition("runGraph: no graph captured");
  MLART_RETURN_IF_ERROR(device_->launchGraph(graph_.handle(), stream));
  if (!wait)
    return Status::success();
  MLART_RETURN_IF_ERROR(device_->synchronize(stream));
  Status s = device_->checkErrors(stream);
  if (!s.ok())
    return Status(s.code(), "graph replay: " + s.message());
  return Status::success();
}

StatusOr<double> Executor::timeGraph(StreamHandle stream, int replays) {
  using Clock = std::chrono::steady_clock;
  // The first replays of a new graph pay for its upload.
  for (int r = 0; r < 3; ++r)
    MLART_RETURN_IF_ERROR(device_->launchGraph(graph_.handle(), stream));
  MLART_RETURN_IF_ERROR(device_->synchronize(stream));
  double best = std::numeric_limits<double>::infinity();
  // The fastest of three batches: host-side jitter only ever adds time.
  for (int batch = 0; batch < 3; ++batch) {
    const Clock::time_point start = Clock::now();
    for (int r = 0; r < replays; ++r)
      MLART_RETURN_IF_ERROR(device_->launchGraph(graph_.handle(), stream));
    MLART_RETURN_IF_ERROR(device_->synchronize(stream));
    const double us =
        std::chrono::duration<double, std::micro>(Clock::now() - start)
            .count() /
        replays;
    best = std::min(best, us);
  }
  Status s = device_->checkErrors(stream);
  if (!s.ok())
    return Status(s.code(), "tuneGraph: graph replay: " + s.message());
  return best;
}

std::string Executor::describeGemmChoice(const GemmChoice &c) const {
  char numbers[96];
  std::snprintf(numbers, sizeof(numbers), "algorithm %d of %d, %.2f us a step",
                c.chosen, c.candidates, c.microseconds);
  return std::string(opcodeName(artifact_.instructions()[c.instruction].opcode)) +
         " #" + std::to_string(c.instruction) + " (" +
         artifact_.describeInstruction(c.instruction) + "): " + numbers;
}

namespace {

/// What a GEMM instruction's algorithm choice is keyed on: the kind of
/// product, and the dtype, pointer alignment, sizes and strides of each
/// operand (absent: -1). Equal keys share the device's choice.
std::vector<int64_t> gemmShapeKey(Opcode kind,
                                  std::initializer_list<const TensorRef *> ts) {
  std::vector<int64_t> key{int64_t(kind == Opcode::Linear ? 0 : 1)};
  for (const TensorRef *t : ts) {
    key.push_back(t->present() ? int64_t(t->dtype) : -1);
    key.push_back(int64_t(reinterpret_cast<uintptr_t>(t->data) % 256));
    for (int d = 0; d < t->rank; ++d) {
      key.push_back(t->sizes[d]);
      key.push_back(t->strides[d]);
    }
  }
  return key;
}

} // namespace

StatusOr<std::vector<Executor::GemmChoice>>
Executor::tuneGraph(StreamHandle stream, int replays) {
  MLART_RETURN_IF_ERROR(checkBound());
  if (!stream)
    return invalidArgument("tuneGraph: needs a created stream, not the "
                           "default stream");
  if (replays < 1)
    return invalidArgument("tuneGraph: replays must be >= 1, not " +
                           std::to_string(replays));
  // The prepared views resolve to their final addresses before any shape
  // is keyed on them.
  MLART_RETURN_IF_ERROR(prepareIfStale(stream));
  std::vector<GemmChoice> choices;
  // GEMMs that share a shape share the device's choice: each is tuned once.
  std::set<std::vector<int64_t>> tunedShapes;
  const std::vector<Instruction> &program = artifact_.instructions();
  for (size_t i = 0; i < program.size(); ++i) {
    const Opcode op = program[i].opcode;
    if (op != Opcode::Linear && op != Opcode::QAbsorb && op != Opcode::VUp)
      continue;
    // The device's count and choice calls for this instruction.
    std::function<StatusOr<int>()> count;
    std::function<Status(int)> choose;
    std::vector<int64_t> shape;
    if (op == Opcode::Linear) {
      const LinearArgs a = linearArgs(i);
      shape = gemmShapeKey(op, {&a.x, &a.weight, &a.out, &a.addend});
      count = [this, a] { return device_->linearAlgorithmCount(a); };
      choose = [this, a](int c) { return device_->chooseLinearAlgorithm(a, c); };
    } else {
      const PerHeadGemmArgs a{view(program[i].operands[0]),
                              view(program[i].operands[1]),
                              view(program[i].operands[2])};
      shape = gemmShapeKey(op, {&a.x, &a.w, &a.out});
      count = [this, a] { return device_->perHeadAlgorithmCount(a); };
      choose = [this, a](int c) {
        return device_->choosePerHeadAlgorithm(a, c);
      };
    }
    if (!tunedShapes.insert(shape).second)
      continue;
    StatusOr<int> n = count();
    if (!n.ok())
      return instructionError("tuneGraph: ", i, n.status());
    if (*n <= 1)
      continue;
    GemmChoice choice{i, *n, 0, std::numeric_limits<double>::infinity()};
    for (int c = 0; c < *n; ++c) {
      Status s = choose(c);
      if (!s.ok())
        return instructionError("tuneGraph: ", i, s);
      MLART_RETURN_IF_ERROR(captureGraph(stream));
      MLART_ASSIGN_OR_RETURN(double us, timeGraph(stream, replays));
      if (us < choice.microseconds) {
        choice.microseconds = us;
        choice.chosen = c;
      }
    }
    Status s = choose(choice.chosen);
    if (!s.ok())
      return instructionError("tuneGraph: ", i, s);
    choices.push_back(choice);
  }
  if (!choices.empty())
    MLART_RETURN_IF_ERROR(captureGraph(stream));
  return choices;
}

} // namespace mlart
