#!/usr/bin/env python3
"""A compiled decode step driven from PyTorch, as an engine drives it.

The step runs on the caller's stream and under the caller's CUDA graph
(torch.cuda.graph), with asynchronous device-side checks. Its cost is
compared with the same artifact run by ``mla-run --graph``. Both time
each step the same way: the host clock around a replay and the stream's
synchronisation, median over the steps. This script also reports the
replay's CUDA-event time and the host enqueue time: an eager
``Executor.run`` and a ``graph.replay()``, with no synchronisation.

    torch_graph_step.py STEP.mlaa [--context 4090] [--steps 50]
        [--mla-run PATH] [--json OUT.json]

Not a test: it prints a table and writes JSON (docs/performance.md).
"""

import argparse
import json
import statistics
import subprocess
import sys
import time

import torch

import mla.runtime as rt


def bind_random_step(executor, artifact, context):
    """Random weights and activations, `context` cached tokens a request."""
    g = torch.Generator(device="cuda").manual_seed(0)
    buffers = {b.name: b for b in artifact.buffers}
    batch = buffers["seq_lens"].shape[0]
    max_blocks = buffers["block_table"].shape[1]
    info = artifact.caches[0]
    per_request = -(-(context + 1) // info.block_size)
    if per_request > max_blocks:
        sys.exit(f"--context {context} needs {per_request} blocks a request; "
                 f"the artifact has {max_blocks}")
    tensors = {}
    dtypes = {"bf16": torch.bfloat16, "f32": torch.float32,
              "i64": torch.int64, "i32": torch.int32}
    for b in artifact.buffers:
        if b.role in ("weight", "input", "output"):
            t = torch.randn(b.shape, generator=g, device="cuda") / max(
                1.0, b.shape[-1] ** 0.5)
            tensors[b.name] = t.to(dtypes[b.dtype])
    table = torch.zeros(batch, max_blocks, dtype=torch.int32, device="cuda")
    for r in range(batch):
        table[r, :per_request] = 1 + r * per_request + torch.arange(
            per_request, device="cuda", dtype=torch.int32)
    rows = torch.arange(batch, device="cuda")
    tensors.update(
        positions=torch.full((batch,), context, dtype=torch.int64,
                             device="cuda"),
        slot_mapping=(table[rows, context // info.block_size].long()
                      * info.block_size + context % info.block_size),
        block_table=table,
        seq_lens=torch.full((batch,), context + 1, dtype=torch.int32,
                            device="cuda"))
    for name, t in tensors.items():
        executor.bind(name, t)
    cache = (torch.randn(info.shape(1 + batch * per_request), generator=g,
                         device="cuda") * 0.5).to(dtypes[info.dtype])
    executor.bind_cache(info.name, cache)
    return tensors, cache


def median_host_ms(body, stream, steps):
    samples = []
    for _ in range(steps):
        start = time.perf_counter()
        body()
        stream.synchronize()
        samples.append((time.perf_counter() - start) * 1e3)
    return statistics.median(samples)


def median_enqueue_us(body, stream, steps):
    samples = []
    for _ in range(steps):
        stream.synchronize()
        start = time.perf_counter()
        body()
        samples.append((time.perf_counter() - start) * 1e6)
    stream.synchronize()
    return statistics.median(samples)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("artifact")
    parser.add_argument("--context", type=int, default=4090)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--mla-run", default="")
    parser.add_argument("--json", default="")
    args = parser.parse_args()

    device = rt.Device("cuda:0")
    artifact = rt.Artifact.load(args.artifact)
    executor = rt.Executor(artifact, device)
    bind_random_step(executor, artifact, args.context)
    device.synchronous_checks = False
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        executor.run(stream=stream)  # warm-up: cuBLAS, allocator, prepare
        stream.synchronize()
        eager_ms = median_host_ms(lambda: executor.run(stream=stream),
                                  stream, args.steps)
        eager_enqueue = median_enqueue_us(
            lambda: executor.run(stream=stream), stream, args.steps)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        executor.run(stream=stream)
    device.check_errors(stream)
    # replay() launches on torch's current stream: make it `stream`.
    with torch.cuda.stream(stream):
        replay_ms = median_host_ms(graph.replay, stream, args.steps)
        replay_enqueue = median_enqueue_us(graph.replay, stream, args.steps)
        events = []
        for _ in range(args.steps):
            start, end = (torch.cuda.Event(enable_timing=True)
                          for _ in range(2))
            start.record(stream)
            graph.replay()
            end.record(stream)
            end.synchronize()
            events.append(start.elapsed_time(end))
    device.check_errors(stream)
    result = {
        "card": torch.cuda.get_device_name(),
        "artifact": args.artifact, "context": args.context,
        "steps": args.steps,
        "torch_graph_step_ms_median": replay_ms,
        "torch_graph_event_ms_median": statistics.median(events),
        "eager_step_ms_median": eager_ms,
        "eager_enqueue_us_median": eager_enqueue,
        "graph_replay_enqueue_us_median": replay_enqueue,
    }
    if args.mla_run:
        out = subprocess.run(
            [args.mla_run, args.artifact, "--device", "cuda", "--graph",
             "--steps", str(args.steps), "--context", str(args.context),
             "--json", "--no-per-op"], capture_output=True, text=True,
            check=True).stdout
        mla_run_ms = json.loads(out)["step_ms_median"]
        result["mla_run_graph_step_ms_median"] = mla_run_ms
        result["torch_over_mla_run"] = replay_ms / mla_run_ms
    width = max(len(k) for k in result)
    for key, value in result.items():
        print(f"{key:{width}s}  {value:.4f}" if isinstance(value, float)
              else f"{key:{width}s}  {value}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
