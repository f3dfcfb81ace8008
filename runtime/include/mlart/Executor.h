//===- Executor.h - Runs a loaded artifact's step on a device -------------===//
//
// An Executor owns a copy of the program and its scratch arena on the
// device. The caller binds every declared buffer (by name, to memory of the
// declared dtype and shape) and every declared cache, then calls run() once
// per step; bindings persist across runs, so a step loop rebinds only what
// changed (step metadata, activations) and runs again.
//
//===----------------------------------------------------------------------===//
#ifndef MLART_EXECUTOR_H
#define MLART_EXECUTOR_H

#include "mlart/Artifact.h"
#include "mlart/Device.h"
#include "mlart/KVCache.h"
#include "mlart/Kernels.h"
#include "mlart/StreamPlan.h"

#include <functional>
#include <string>
#include <vector>

namespace mlart {

/// Called after each instruction when timing is on: its index, the
/// instruction and the host wall time in seconds from launch to the end of
/// a device synchronize (so it includes launch overhead).
using InstructionTimingCallback =
    std::function<void(size_t index, const Instruction &inst, double seconds)>;

/// An instantiated device graph; destroys it on destruction. Move-only.
class Graph {
public:
  Graph() = default;
  Graph(Device *device, GraphHandle handle) : device_(device), handle_(handle) {}
  ~Graph() { reset(); }
  Graph(Graph &&o) noexcept { *this = std::move(o); }
  Graph &operator=(Graph &&o) noexcept {
    if (this != &o) {
      reset();
      device_ = o.device_;
      handle_ = o.handle_;
      o.device_ = nullptr;
      o.handle_ = nullptr;
    }
    return *this;
  }
  Graph(const Graph &) = delete;
  Graph &operator=(const Graph &) = delete;
  GraphHandle handle() const { return handle_; }
  bool empty() const { return handle_ == nullptr; }
  void reset() noexcept {
    if (handle_ && device_)
      device_->destroyGraph(handle_);
    handle_ = nullptr;
    device_ = nullptr;
  }

private:
  Device *device_ = nullptr;
  GraphHandle handle_ = nullptr;
};

class Executor {
public:
  /// Allocates the arena on `device`, which must outlive the executor.
  static StatusOr<Executor> create(Artifact artifact, Device &device);

  Executor(Executor &&) = default;
  Executor &operator=(Executor &&) = default;

  const Artifact &artifact() const { return artifact_; }
  Device &device() const { return *device_; }

  /// Binds buffer `name` to `tensor`, which must have the declared dtype and
  /// shape and be contiguous (views address it as a packed row-major array).
  /// The memory must stay valid while runs use it.
  Status bind(const std::string &name, const TensorRef &tensor);
  /// Binds cache `name`; the desc must equal the declared one. The ref is
  /// kept as given, so a BlockManager::guard()ed ref keeps checked mode.
  Status bindCache(const std::string &name, const KVCacheRef &cache);
  Status bindCache(const std::string &name, KVCache &cache);
  /// Forgets every binding.
  void unbindAll();
  /// True when every buffer and cache is bound.
  bool fullyBound() const;

  /// Runs the artifact's prepare program on `stream`: fills the prepared
  /// arena (bytes derived from the weights, such as two projections'
  /// weights concatenated for one GEMM; docs/runtime.md) from the bound
  /// weights. run() and captureGraph() call it themselves whenever a
  /// weight was bound to another address since the last prepare; call it
  /// directly after changing a bound weight's contents in place. A graph
  /// captured earlier keeps reading the prepared arena, so it sees the new
  /// values too. Nothing to do (success) for artifacts without one.
  /// Weights that the program copies whole into consecutive prepared bytes
  /// and that the caller bound back to back, in that order (slices of one
  /// fused tensor, as engines store them), are not copied: the step reads
  /// them where they are, and the prepared arena holds only the rest.
  Status prepare(StreamHandle stream = nullptr);
  /// Device bytes the prepared arena takes now (0 when none is needed).
  size_t preparedArenaBytes() const { return prepared_.size(); }

  /// Runs the step on `stream`: the instructions in program order, or, with
  /// setMaxStreams > 1 on a device with concurrent streams, spread over side
  /// streams that start after the work already queued on `stream` and join
  /// it again at the end (so `stream` orders the whole step either way).
  /// Fails with FailedPrecondition before running anything when a binding
  /// is missing; otherwise stops issuing at the first failing instruction
  /// and returns its status with "instruction #i op (location): " prefixed
  /// to the message. Kernels validate before writing, so a failing
  /// instruction wrote nothing; instructions issued before it did run.
  Status run(StreamHandle stream = nullptr);

  /// Records one step (every instruction, as run() would issue it) into a
  /// device graph on `stream` (must be a created stream, not the default
  /// one), replacing any earlier graph. Nothing runs while capturing. The
  /// graph holds the bound addresses: a later step writes its new values
  /// into the SAME bound buffers and calls runGraph(); rebinding anything
  /// needs a new capture. Cache-write checks are asynchronous inside the
  /// graph; runGraph reports them. Unimplemented on the CPU device. Run one
  /// eager step first (it loads cuBLAS and warms the allocator).
  Status captureGraph(StreamHandle stream);
  /// True when captureGraph succeeded and the graph was not dropped.
  bool hasGraph() const { return !graph_.empty(); }
  void dropGraph() { graph_.reset(); }
  /// Replays the captured step on `stream`. With `wait`, synchronizes the
  /// stream and returns the device-side errors the replay recorded
  /// (OutOfRange for a bad slot, …); without it the caller must call
  /// device().checkErrors(stream) after its own synchronization.
  Status runGraph(StreamHandle stream, bool wait = true);

  /// What tuneGraph chose for one GEMM instruction (linear, q_absorb or
  /// v_up).
  struct GemmChoice {
    size_t instruction = 0; ///< its index in the program
    int candidates = 0;     ///< algorithms the device offered
    int chosen = 0;         ///< the index kept (0: the device's first)
    double microseconds = 0.0; ///< the step's graph replay with it
  };
  /// Chooses the algorithm of every GEMM instruction (linear, q_absorb,
  /// v_up) where the device offers several (Device::linearAlgorithmCount
  /// and perHeadAlgorithmCount: cuBLASLt's candidates on CUDA) by what the
  /// whole step takes: for each such instruction in program order, every
  /// candidate is set, the step captured and its graph replayed `replays`
  /// times (the fastest of three batches counts), the other GEMMs at their
  /// current choice; the fastest is kept. A GEMM timed alone (the
  /// per-shape autotune) misses what matters in the step: which GEMMs run
  /// side by side on the concurrent streams and whether their CTAs fit on
  /// the device together (docs/runtime.md). GEMMs of one shape share a
  /// choice; it holds for this process's later calls of that shape, eager
  /// and captured. Replays write the bound step's cache slots, as runGraph
  /// does. Needs a created stream (as captureGraph); on success the step is
  /// left captured with the final choices, or untouched when there was
  /// nothing to choose.
  static constexpr int kDefaultTuneReplays = 20;
  StatusOr<std::vector<GemmChoice>>
  tuneGraph(StreamHandle stream, int replays = kDefaultTuneReplays);
  /// "OPCODE #I (INSTRUCTION): algorithm C of N, T us a step".
  std::string describeGemmChoice(const GemmChoice &c) const;

  /// Most streams a run or capture may spread the instructions over
  /// (docs/runtime.md, "Concurrent streams"): independent instructions go
  /// to side streams the executor owns and join the caller's stream with
  /// events, so that they overlap on the device; every pair that touches a
  /// common byte (one of them writing) stays in program order. 1 runs
  /// everything in order on the caller's stream. Default 2. Devices without
  /// concurrent streams (the CPU) always run in order.
  void setMaxStreams(int streams) { maxStreams_ = streams < 1 ? 1 : streams; }
  int maxStreams() const { return maxStreams_; }

  /// How every decode-attention instruction spreads over the device
  /// (DecodeSchedule, Kernels.h): Balanced for mixed lengths, as a serving
  /// engine's are. Takes effect at the next run or capture; a captured
  /// graph keeps the schedule it was captured with.
  void setDecodeSchedule(DecodeSchedule s) { decodeSchedule_ = s; }
  DecodeSchedule decodeSchedule() const { return decodeSchedule_; }
  /// An upper bound, known on the host, on every request's cached context
  /// that each prefill-attention instruction passes
  /// (PrefillAttentionArgs::contextLenBound; 0: none). With it the CUDA
  /// prefill expands that many context rows a request instead of the
  /// block table's capacity. A graph captured with a bound keeps it, and a
  /// later step whose context exceeds it fails (OutOfRange). Takes effect at
  /// the next run or capture. InvalidArgument when negative.
  Status setPrefillContextBound(int64_t bound);
  int64_t prefillContextBound() const { return prefillContextBound_; }
  /// The plan the next run uses for the current bindings (made on demand).
  StatusOr<const StreamPlan *> streamPlan();

  /// Turns per-instruction timing on (a non-empty callback) or off. Timing
  /// synchronizes the device after every instruction.
  void setTimingCallback(InstructionTimingCallback callback) {
    timing_ = std::move(callback);
  }

private:
  Executor(Artifact artifact, Device &device, Buffer arena);
  /// Decides, for the bound weight addresses, which prepared bytes are
  /// read in place (runs of whole weights the caller bound back to back,
  /// PreparedAliases.h) and allocates the prepared arena only for the rest;
  /// nothing to do while the weight addresses stay the same.
  Status layoutPrepared();
  /// prepare() unless the prepared arena already holds what the bound
  /// weights give.
  Status prepareIfStale(StreamHandle stream);
  /// Whether the Weight buffers are bound at `addresses` (in declaration
  /// order).
  bool weightsStillAt(const std::vector<void *> &addresses) const;
  /// The bound cache instruction `inst` uses (with the artifact's scale
  /// buffer, if its cache declares one), or an absent ref.
  KVCacheRef cacheFor(const Instruction &inst) const;
  /// Instruction `i` of the program on `stream`.
  Status runInstruction(size_t i, StreamHandle stream);
  /// Runs instruction `i` of the program, whose arguments are `args`
  /// (bound from the artifact), with what the executor adds to them.
  template <typename Args>
  Status launch(size_t i, const Instruction &inst, Args &args,
                StreamHandle stream);
  /// The arguments of linear instruction `i` at the current bindings.
  LinearArgs linearArgs(size_t i) const;
  /// Microseconds a replay of the captured graph takes on `stream`.
  StatusOr<double> timeGraph(StreamHandle stream, int replays);
  /// Whether view `index` lies in a weight buffer or the prepared arena.
  /// No step instruction writes either (Artifact validation), so after the
  /// first instruction of a run the kernel before any GEMM on its stream is
  /// one of ours and cannot have written it (the GEMMs' staticWeight).
  bool isWeightView(uint32_t index) const;
  /// A cache write through the generated kernel the instruction names.
  Status runCodegen(const Instruction &inst, const RopeCacheUpdateArgs &args,
                    StreamHandle stream);
  Status checkBound() const;
  TensorRef view(uint32_t index) const;
  /// What instruction `i` reads and writes at the current bindings.
  std::vector<MemoryAccess> accessesOf(const Instruction &inst) const;
  /// Makes plan_ (and the side streams and events it needs) for the
  /// current bindings, unless it is already up to date.
  Status preparePlan();
  /// Issues every instruction on `origin` and the side streams per plan_;
  /// side streams always join `origin` again, even after a failure (a
  /// capture cannot end with unjoined work). `what` prefixes messages.
  Status issueProgram(StreamHandle origin, const char *what);
  /// `s` of instruction `i`, its message prefixed with `what` and
  /// "instruction #i OPCODE (LOCATION): ".
  Status instructionError(const char *what, size_t i, const Status &s) const;

  Artifact artifact_;
  Device *device_;
  Buffer arena_;
  /// The prepared arena (empty while unneeded).
  Buffer prepared_;
  /// layoutPrepared()'s result: per view, the caller address a prepared
  /// view's run maps to (null: the arena); per prepare instruction whether
  /// it copies; the weight addresses it was made for.
  std::vector<void *> preparedViewBase_;
  std::vector<bool> preparedCopyNeeded_;
  std::vector<void *> preparedLayoutFrom_;
  /// Whether prepare() filled the arena for the current layout.
  bool preparedFilled_ = false;
  std::vector<void *> bufferData_;
  std::vector<KVCacheRef> caches_;
  std::vector<bool> cacheBound_;
  InstructionTimingCallback timing_;
  Graph graph_;
  int maxStreams_ = 2;
  DecodeSchedule decodeSchedule_ = DecodeSchedule::Default;
  int64_t prefillContextBound_ = 0;
  StreamPlan plan_;
  /// The bindings and stream limit plan_ was made for.
  std::vector<const void *> planKey_;
  std::vector<Stream> sideStreams_;
  /// Per instruction, created for those plan_ records after.
  std::vector<Event> doneEvents_;
  Event forkEvent_;
  std::vector<Event> joinEvents_;
};

} // namespace mlart

#endif // MLART_EXECUTOR_H
