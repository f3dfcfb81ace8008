"""mla.runtime and mla.ops on CUDA with torch tensors: zero-copy binding,
the caller's stream, capture inside torch.cuda.graph, device-side checks
reported at check_errors(), and the ops against the CPU kernels.

Skips without torch, a GPU or a CUDA-enabled mla.runtime. The GPU machine
has no MLIR: the artifacts come compiled from MLA_CUDA_ARTIFACTS
(scripts/gpu-prepare.sh puts them there; runtime/scripts/gpu/gpu-python.sh
runs this file).
"""

import os

import numpy as np
import pytest

import mla.ops as ops
import mla.runtime as rt
from conftest import bf16_bits, bf16_float

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)
try:
    rt.Device("cuda:0")
except rt.Error as error:
    pytest.skip(f"mla.runtime without CUDA: {error}", allow_module_level=True)

ARTIFACTS = os.environ.get("MLA_CUDA_ARTIFACTS", "")
CONTEXT = 100


def artifact_path(name):
    path = os.path.join(ARTIFACTS, name)
    if not os.path.exists(path):
        pytest.skip(f"{path} is missing (MLA_CUDA_ARTIFACTS)")
    return path


def to_torch(array, dtype_name):
    """A CUDA tensor with `array`'s values (bf16 from uint16 bits)."""
    if dtype_name == "bf16":
        return torch.from_numpy(array.view(np.int16)).view(
            torch.bfloat16).cuda()
    return torch.from_numpy(array).cuda()


class Step:
    """Random inputs of one decode step of `artifact` with CONTEXT tokens of
    earlier context a request, as host arrays (bf16 as uint16 bits)."""

    def __init__(self, artifact, rng):
        self.artifact = artifact
        buffers = {b.name: b for b in artifact.buffers}
        batch = buffers["seq_lens"].shape[0]
        max_blocks = buffers["block_table"].shape[1]
        info = artifact.caches[0]
        block = info.block_size
        self.arrays = {}
        for b in artifact.buffers:
            if b.role in ("weight", "input"):
                fan_in = b.shape[-1]
                values = rng.standard_normal(b.shape) / np.sqrt(fan_in)
                if b.name.endswith("layernorm.weight"):
                    values = 1 + 0.1 * rng.standard_normal(b.shape)
                if b.name == "cos_sin_cache":
                    angle = rng.uniform(0, 6.3, (b.shape[0], b.shape[1] // 2))
                    values = np.concatenate([np.cos(angle), np.sin(angle)], 1)
                self.arrays[b.name] = (bf16_bits(values) if b.dtype == "bf16"
                                       else values.astype(np.float32))
            elif b.role == "output":
                self.arrays[b.name] = np.zeros(b.shape, np.uint16
                                               if b.dtype == "bf16"
                                               else np.float32)
        table = np.zeros((batch, max_blocks), np.int32)
        per_request = -(-(CONTEXT + 1) // block)
        for r in range(batch):
            table[r, :per_request] = 1 + r * per_request + np.arange(
                per_request)
        positions = np.full(batch, CONTEXT, np.int64)
        slots = table[np.arange(batch), CONTEXT // block] * block + \
            CONTEXT % block
        self.arrays.update(positions=positions, slot_mapping=slots.astype(
            np.int64), block_table=table,
            seq_lens=np.full(batch, CONTEXT + 1, np.int32))
        num_blocks = 1 + batch * per_request
        self.cache = bf16_bits(rng.standard_normal(info.shape(num_blocks)))

    def bind(self, executor, on_cuda):
        tensors = {}
        for b in self.artifact.buffers:
            array = self.arrays[b.name]
            tensors[b.name] = (to_torch(array, b.dtype) if on_cuda
                               else array.copy())
            executor.bind(b.name, tensors[b.name])
        cache = (to_torch(self.cache, "bf16") if on_cuda
                 else self.cache.copy())
        executor.bind_cache(self.artifact.caches[0].name, cache)
        return tensors, cache


def host_float(tensor):
    if isinstance(tensor, np.ndarray):
        return bf16_float(tensor) if tensor.dtype == np.uint16 else tensor
    return tensor.float().cpu().numpy()


def relative_error(a, b):
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30))


@pytest.fixture(scope="module")
def cuda():
    return rt.Device("cuda:0")


@pytest.fixture(scope="module")
def decode_artifact():
    return rt.Artifact.load(artifact_path("l1.cg.mlaa"))


def test_torch_tensors_bind_without_copies_and_match_the_cpu(
        cuda, decode_artifact, rng):
    step = Step(decode_artifact, rng)
    cpu_exec = rt.Executor(decode_artifact, rt.Device("cpu"))
    cpu_tensors, cpu_cache = step.bind(cpu_exec, on_cuda=False)
    cpu_exec.run()

    executor = rt.Executor(decode_artifact, cuda)
    tensors, cache = step.bind(executor, on_cuda=True)
    out = tensors["hidden_states_out"]
    out.fill_(float("nan"))
    pointer = out.data_ptr()
    stream = torch.cuda.current_stream()
    executor.run(stream=stream)
    stream.synchronize()
    assert out.data_ptr() == pointer
    assert not torch.isnan(out).any(), "every output element was written"
    error = relative_error(host_float(out),
                           host_float(cpu_tensors["hidden_states_out"]))
    assert error < 2e-2, error
    # The rows the step wrote into the engine's cache, and no other.
    flat = cache.view(-1, cache.shape[-1])
    cpu_flat = cpu_cache.reshape(-1, cpu_cache.shape[-1])
    slots = step.arrays["slot_mapping"]
    assert relative_error(host_float(flat[torch.from_numpy(slots).cuda()]),
                          host_float(cpu_flat[slots])) < 2e-2
    untouched = np.delete(np.arange(len(cpu_flat)), slots)
    assert np.array_equal(
        flat.view(torch.int16).cpu().numpy()[untouched].view(np.uint16),
        step.cache.reshape(cpu_flat.shape)[untouched])


def test_capture_inside_torch_cuda_graph_and_checks_at_check_errors(
        cuda, decode_artifact, rng):
    step = Step(decode_artifact, rng)
    executor = rt.Executor(decode_artifact, cuda)
    tensors, cache = step.bind(executor, on_cuda=True)
    cuda.synchronous_checks = False
    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            executor.run(stream=side)  # warm-up, as torch asks
        torch.cuda.current_stream().wait_stream(side)
        cache_before = cache.clone()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            executor.run(stream=torch.cuda.current_stream())
        # New inputs in place, then the caller's replay against an eager
        # step on the same inputs and cache.
        tensors["hidden_states"].copy_(
            torch.randn_like(tensors["hidden_states"].float()).to(
                torch.bfloat16) * 0.1)
        cache.copy_(cache_before)
        graph.replay()
        cuda.check_errors(torch.cuda.current_stream())
        replayed = tensors["hidden_states_out"].clone()
        replayed_cache = cache.clone()
        cache.copy_(cache_before)
        executor.run(stream=torch.cuda.current_stream())
        cuda.check_errors(torch.cuda.current_stream())
        assert torch.equal(replayed, tensors["hidden_states_out"])
        assert torch.equal(replayed_cache, cache)

        # A slot outside the cache inside a replay: nothing is lost, it is
        # reported once, at the next check_errors.
        tensors["slot_mapping"][0] = cache.shape[0] * cache.shape[1]
        cache.copy_(cache_before)
        graph.replay()
        with pytest.raises(rt.Error, match="OUT_OF_RANGE"):
            cuda.check_errors(torch.cuda.current_stream())
        cuda.check_errors(torch.cuda.current_stream())
        assert torch.equal(cache, cache_before), "the checked update wrote nothing"
    finally:
        cuda.synchronous_checks = True


def test_refusals_name_the_buffer(cuda, decode_artifact, rng):
    executor = rt.Executor(decode_artifact, cuda)
    hidden = next(b for b in decode_artifact.buffers
                  if b.name == "hidden_states")
    with pytest.raises(rt.Error, match="'hidden_states': a cpu tensor cannot be used on cuda:0"):
        executor.bind("hidden_states", np.zeros(hidden.shape, np.uint16))
    cpu_exec = rt.Executor(decode_artifact, rt.Device("cpu"))
    with pytest.raises(rt.Error, match="a cuda:0 tensor cannot be used on the cpu device"):
        cpu_exec.bind("hidden_states", torch.zeros(
            hidden.shape, dtype=torch.bfloat16, device="cuda"))
    info = decode_artifact.caches[0]
    blocks, block, row = info.shape(16)
    # Rows within a block must be dense.
    padded_rows = torch.zeros(blocks, block, row + 8, dtype=torch.bfloat16,
                              device="cuda")
    with pytest.raises(rt.Error, match="dense rows within a block"):
        executor.bind_cache(info.name, padded_rows[..., :row])


def test_a_strided_per_layer_view_runs_like_a_dense_cache(
        cuda, decode_artifact, rng):
    """vLLM's per-layer view of one allocation (a strided block dimension)
    gives the dense cache's step bit for bit and leaves the other layer's
    rows alone."""
    step = Step(decode_artifact, rng)
    dense_exec = rt.Executor(decode_artifact, cuda)
    dense_tensors, dense_cache = step.bind(dense_exec, on_cuda=True)
    dense_exec.run(stream=torch.cuda.current_stream())

    executor = rt.Executor(decode_artifact, cuda)
    tensors, _ = step.bind(executor, on_cuda=True)
    blocks, block, row = dense_cache.shape
    whole = torch.full((blocks, 2, block, row), -7.0, dtype=torch.bfloat16,
                       device="cuda")
    layer = whole[:, 1]
    layer.copy_(to_torch(step.cache, "bf16"))
    executor.bind_cache(decode_artifact.caches[0].name, layer)
    executor.run(stream=torch.cuda.current_stream())
    torch.cuda.synchronize()
    assert torch.equal(tensors["hidden_states_out"],
                       dense_tensors["hidden_states_out"])
    assert torch.equal(layer, dense_cache)
    assert bool((whole[:, 0] == -7.0).all()), "the other layer was written"


@pytest.mark.parametrize("kv_cache_dtype",
                         ["auto", "fp8", "fp8_e5m2", "fp8_ds_mla"])
def test_concat_and_cache_mla_on_cuda_matches_the_cpu_kernel(kv_cache_dtype,
                                                             rng):
    tokens, latent, rope, blocks, block = 37, 512, 64, 8, 16
    kv_c = bf16_bits(rng.standard_normal((tokens, latent)))
    k_pe = bf16_bits(rng.standard_normal((tokens, rope)))
    slots = rng.choice(blocks * block, tokens, replace=False).astype(np.int64)
    slots[3] = -1
    row = 656 if kv_cache_dtype == "fp8_ds_mla" else latent + rope
    cache_dtype = np.uint16 if kv_cache_dtype == "auto" else np.uint8
    cpu_cache = np.zeros((blocks, block, row), cache_dtype)
    scale = np.float32([0.04])
    # The CPU kernels need host bf16 inputs: NumPy uint16 bits.
    ops.concat_and_cache_mla(kv_c, k_pe, cpu_cache, slots, kv_cache_dtype,
                             scale)
    if kv_cache_dtype == "auto":
        gpu_cache = torch.zeros(blocks, block, row, dtype=torch.bfloat16,
                                device="cuda")
    else:
        gpu_cache = torch.zeros(blocks, block, row, dtype=torch.uint8,
                                device="cuda")
    ops.concat_and_cache_mla(to_torch(kv_c, "bf16"), to_torch(k_pe, "bf16"),
                             gpu_cache, torch.from_numpy(slots).cuda(),
                             kv_cache_dtype, torch.tensor([0.04]).cuda())
    torch.cuda.synchronize()
    got = (gpu_cache.view(torch.int16).cpu().numpy().view(np.uint16)
           if kv_cache_dtype == "auto" else gpu_cache.cpu().numpy())
    assert np.array_equal(got, cpu_cache)


def test_a_device_scale_is_read_at_replay(rng):
    """vLLM's k_scale as a CUDA tensor: an fp8 decode captured once in a
    torch.cuda.graph follows a new scale without a recapture, and matches
    the CPU kernel given the same scale as a number."""
    batch, heads, blocks, block = 2, 16, 8, 64
    seq_lens = np.array([100, 257], np.int32)
    table = np.array([[0, 1, 2, 3, 4], [5, 6, 7, 0, 1]], np.int32)
    kv = bf16_bits(rng.standard_normal((blocks * block, 576)))
    host_cache = np.zeros((blocks, block, 576), np.uint8)
    slots = np.arange(blocks * block, dtype=np.int64)
    ops.concat_and_cache_mla(kv[:, :512], kv[:, 512:], host_cache, slots,
                             "fp8", 0.02)
    q = bf16_bits(rng.standard_normal((batch, 1, heads, 576)))
    k_scale = torch.tensor([0.02], device="cuda")
    args = (to_torch(q, "bf16"), torch.from_numpy(host_cache).cuda(),
            torch.from_numpy(table).cuda(), torch.from_numpy(seq_lens).cuda())
    out = torch.empty(batch, 1, heads, 512, dtype=torch.bfloat16,
                      device="cuda")
    # The ops run on their own Device for the tensors' device (device_of).
    device = ops.device_of(args[0])
    device.synchronous_checks = False
    try:
        ops.flash_mla_decode(*args, kv_cache_dtype="fp8", scale=k_scale,
                             out=out)  # warm-up outside the capture
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            ops.flash_mla_decode(*args, kv_cache_dtype="fp8", scale=k_scale,
                                 out=out)
        for value in (0.02, 0.035):
            k_scale.fill_(value)
            graph.replay()
            torch.cuda.synchronize()
            device.check_errors(torch.cuda.current_stream())
            want, _ = ops.flash_mla_decode(q, host_cache, table, seq_lens,
                                           kv_cache_dtype="fp8", scale=value)
            assert relative_error(host_float(out), host_float(want)) < 2e-2, \
                value
    finally:
        device.synchronous_checks = True


def test_flash_mla_decode_on_cuda_matches_the_cpu_kernel(rng):
    batch, heads, blocks, block = 4, 128, 40, 64
    seq_lens = np.array([1, 64, 300, 1000], np.int32)
    table = np.zeros((batch, 16), np.int32)
    used = 1
    for b, n in enumerate(seq_lens):
        count = -(-n // block)
        table[b, :count] = np.arange(used, used + count)
        used += count
    q = bf16_bits(rng.standard_normal((batch, 1, heads, 576)))
    cache = bf16_bits(rng.standard_normal((blocks, block, 1, 576)))
    want, want_lse = ops.flash_mla_decode(q, cache, table, seq_lens)
    got, lse = ops.flash_mla_decode(
        to_torch(q, "bf16"), to_torch(cache, "bf16"),
        torch.from_numpy(table).cuda(), torch.from_numpy(seq_lens).cuda())
    torch.cuda.synchronize()
    assert got.shape == (batch, 1, heads, 512)
    assert relative_error(host_float(got), host_float(want)) < 2e-2
    assert relative_error(lse.cpu().numpy(), want_lse) < 1e-3


def test_executors_on_threads_and_streams_match_serial_runs(
        cuda, decode_artifact, rng):
    """docs/runtime.md, "Thread safety": executors of one device on their
    own threads and streams, over their own caches (the CUDA side of
    runtime/test/ConcurrencyTest.cpp)."""
    import threading
    steps = [Step(decode_artifact, rng) for _ in range(3)]

    def run(parallel):
        executors, bound = [], []
        for step in steps:
            executor = rt.Executor(decode_artifact, cuda)
            bound.append(step.bind(executor, on_cuda=True))
            executors.append(executor)
        torch.cuda.synchronize()
        streams = [torch.cuda.Stream() for _ in steps]

        def work(i):
            for _ in range(4):  # the same slots and values each time
                executors[i].run(stream=streams[i])
            streams[i].synchronize()

        if parallel:
            threads = [threading.Thread(target=work, args=(i,))
                       for i in range(len(steps))]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        else:
            for i in range(len(steps)):
                work(i)
        return [(tensors["hidden_states_out"].clone(), cache.clone())
                for tensors, cache in bound]

    serial, threaded = run(False), run(True)
    for (out_s, cache_s), (out_t, cache_t) in zip(serial, threaded):
        assert torch.equal(out_s, out_t)
        assert torch.equal(cache_s, cache_t)
    assert not torch.equal(serial[0][0], serial[1][0])
