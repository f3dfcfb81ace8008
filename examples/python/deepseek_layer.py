#!/usr/bin/env python3
"""One DeepSeek attention layer driven from Python, as an engine would.

The engine holds:

* the weights, in a dict under their Hugging Face names;
* a paged KV cache that it allocated itself (a NumPy array here);
* its own block tables.

This example compiles a prefill step and a decode step in process, binds
the engine's tensors without copying them (the package splits kv_b_proj
into the absorbed w_uk and w_uv), and runs a prefill of two prompts and
then a few decode steps. Every step is checked against a float64 NumPy
reference of the same layer in its plain, non-absorbed form, and so is
every cache row it wrote. No other cache byte may change.

    python3 examples/python/deepseek_layer.py [--model deepseek-v2-lite]

With ``--torch cpu`` or ``--torch cuda`` the engine's tensors (weights,
cache, step buffers) are PyTorch tensors, bound by DLPack; on CUDA the
steps run on torch's current stream. A machine with a GPU but no MLIR runs
artifacts compiled elsewhere:

    deepseek_layer.py --target cuda-sm90 --save-artifacts DIR   # here
    deepseek_layer.py --artifacts DIR --torch cuda              # there

The cos/sin table is plain rope (base 10000). Both sides read the same
table, so the check holds whichever table a model uses. Exits 0 when
everything matches, 1 otherwise. docs/python.md explains the API.
"""

import argparse
import json
import os
import sys

import numpy as np

import mla.runtime as rt

BLOCK_SIZE = 16
# Any value the kernels cannot produce by accident: rows of the cache that
# no step may write keep it.
POISON = np.float32(-1.5e6)


def random_weights(config, layer, rng):
    """A model loader's dict for one layer, Hugging Face names and shapes."""
    hidden, heads = config["hidden_size"], config["num_attention_heads"]
    nope, rope = config["qk_nope_head_dim"], config["qk_rope_head_dim"]
    latent, v_dim = config["kv_lora_rank"], config["v_head_dim"]
    q_lora = config["q_lora_rank"]
    prefix = f"model.layers.{layer}."

    def linear(rows, cols):
        # A float32 divisor: NumPy 2 promotes float32 / np.float64 to float64.
        return rng.standard_normal((rows, cols), np.float32) / np.float32(
            np.sqrt(cols))

    def norm(n):
        return (1 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    w = {prefix + "input_layernorm.weight": norm(hidden)}
    if q_lora is None:
        w[prefix + "self_attn.q_proj.weight"] = linear(heads * (nope + rope),
                                                       hidden)
    else:
        w[prefix + "self_attn.q_a_proj.weight"] = linear(q_lora, hidden)
        w[prefix + "self_attn.q_a_layernorm.weight"] = norm(q_lora)
        w[prefix + "self_attn.q_b_proj.weight"] = linear(
            heads * (nope + rope), q_lora)
    w[prefix + "self_attn.kv_a_proj_with_mqa.weight"] = linear(latent + rope,
                                                              hidden)
    w[prefix + "self_attn.kv_a_layernorm.weight"] = norm(latent)
    w[prefix + "self_attn.kv_b_proj.weight"] = linear(heads * (nope + v_dim),
                                                      latent)
    w[prefix + "self_attn.o_proj.weight"] = linear(hidden, heads * v_dim)
    return w


def cos_sin_table(max_position, rope, base=10000.0):
    """[max_position, rope] f32: cos in the first half, sin in the second."""
    inv_freq = base ** (-np.arange(0, rope, 2, dtype=np.float64) / rope)
    angles = np.arange(max_position, dtype=np.float64)[:, None] * inv_freq
    return np.concatenate([np.cos(angles), np.sin(angles)], 1).astype(
        np.float32)


class ReferenceLayer:
    """The layer in float64 and in its plain form: per head, keys and values
    are the latent projected by kv_b_proj, not absorbed into the query."""

    def __init__(self, config, weights, cos_sin, softmax_scale, layer=0):
        self.c = config
        self.w = {k.split(f"model.layers.{layer}.", 1)[1]: v.astype(np.float64)
                  for k, v in weights.items()}
        self.cos_sin = cos_sin.astype(np.float64)
        self.scale = softmax_scale
        self.eps = config["rms_norm_eps"]
        # Per request: the latent and rotated k_pe of every cached token.
        self.latents, self.k_pes = {}, {}

    def rms_norm(self, x, weight):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + self.eps) * weight

    def rope(self, x, positions):
        """GPT-J style: rotates the interleaved pairs (2i, 2i + 1)."""
        half = x.shape[-1] // 2
        cos = self.cos_sin[positions, :half]
        sin = self.cos_sin[positions, half:]
        if x.ndim == 3:
            cos, sin = cos[:, None, :], sin[:, None, :]
        even, odd = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2] = even * cos - odd * sin
        out[..., 1::2] = odd * cos + even * sin
        return out

    def step(self, hidden, requests):
        """hidden [T, D]; requests: (id, new tokens, first position) in token
        order. Returns the step's output and the cache rows it writes."""
        c, w = self.c, self.w
        heads, nope = c["num_attention_heads"], c["qk_nope_head_dim"]
        rope, latent = c["qk_rope_head_dim"], c["kv_lora_rank"]
        v_dim = c["v_head_dim"]
        x = hidden.astype(np.float64)
        positions = np.concatenate(
            [np.arange(start, start + n) for _, n, start in requests])
        h = self.rms_norm(x, w["input_layernorm.weight"])
        if c["q_lora_rank"] is None:
            q = h @ w["self_attn.q_proj.weight"].T
        else:
            qa = self.rms_norm(h @ w["self_attn.q_a_proj.weight"].T,
                               w["self_attn.q_a_layernorm.weight"])
            q = qa @ w["self_attn.q_b_proj.weight"].T
        q = q.reshape(len(x), heads, nope + rope)
        q_nope, q_pe = q[..., :nope], self.rope(q[..., nope:], positions)
        kv = h @ w["self_attn.kv_a_proj_with_mqa.weight"].T
        latents = self.rms_norm(kv[:, :latent],
                                w["self_attn.kv_a_layernorm.weight"])
        k_pes = self.rope(kv[:, latent:], positions)
        kv_b = w["self_attn.kv_b_proj.weight"].reshape(heads, nope + v_dim,
                                                       latent)
        out = np.zeros((len(x), heads, v_dim))
        t = 0
        for request, count, start in requests:
            cached_c = self.latents.setdefault(request, np.zeros((0, latent)))
            cached_p = self.k_pes.setdefault(request, np.zeros((0, rope)))
            assert len(cached_c) == start, "positions follow the cache"
            all_c = np.concatenate([cached_c, latents[t:t + count]])
            all_p = np.concatenate([cached_p, k_pes[t:t + count]])
            keys = np.einsum("hnl,jl->jhn", kv_b[:, :nope], all_c)
            values = np.einsum("hvl,jl->jhv", kv_b[:, nope:], all_c)
            for i in range(count):
                visible = start + i + 1  # causal: itself and what precedes
                scores = (np.einsum("hn,jhn->hj", q_nope[t + i],
                                    keys[:visible]) +
                          np.einsum("hp,jp->hj", q_pe[t + i],
                                    all_p[:visible])) * self.scale
                p = np.exp(scores - scores.max(-1, keepdims=True))
                p /= p.sum(-1, keepdims=True)
                out[t + i] = np.einsum("hj,jhv->hv", p, values[:visible])
            self.latents[request], self.k_pes[request] = all_c, all_p
            t += count
        y = x + out.reshape(len(x), -1) @ w["self_attn.o_proj.weight"].T
        return y, np.concatenate([latents, k_pes], 1)


class Engine:
    """What an engine keeps for this example: a paged cache of its own and a
    block table a request, blocks handed out in order (block 0 is the null
    block no request owns)."""

    def __init__(self, cache_info, num_blocks, max_blocks_per_seq):
        self.cache = np.full(cache_info.shape(num_blocks), POISON,
                             np.float32)
        self.max_blocks = max_blocks_per_seq
        self.next_block = 1
        self.tables, self.lengths = {}, {}

    def schedule(self, request, count):
        """Slots and positions of `count` new tokens of `request`."""
        table = self.tables.setdefault(request, [])
        start = self.lengths.get(request, 0)
        while len(table) * BLOCK_SIZE < start + count:
            table.append(self.next_block)
            self.next_block += 1
        self.lengths[request] = start + count
        positions = np.arange(start, start + count)
        slots = np.array([table[p // BLOCK_SIZE] * BLOCK_SIZE + p % BLOCK_SIZE
                          for p in positions])
        return start, positions, slots

    def metadata(self, requests, counts):
        """The step buffers for new tokens of `requests` (counts each)."""
        positions, slots, starts = [], [], []
        for request, count in zip(requests, counts):
            start, p, s = self.schedule(request, count)
            starts.append(start)
            positions.append(p)
            slots.append(s)
        table = np.zeros((len(requests), self.max_blocks), np.int32)
        for i, request in enumerate(requests):
            blocks = self.tables[request]
            table[i, :len(blocks)] = blocks
        seq_lens = np.array([self.lengths[r] for r in requests], np.int32)
        step = {
            "positions": np.concatenate(positions).astype(np.int64),
            "slot_mapping": np.concatenate(slots).astype(np.int64),
            "block_table": table,
            "seq_lens": seq_lens,
            "query_start_loc": np.concatenate(
                [[0], np.cumsum(counts)]).astype(np.int32),
        }
        return step, list(zip(requests, counts, starts))


def relative_error(got, want):
    return float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))


def compile_steps(args):
    """(model description, prefill bytes, decode bytes) compiled in process
    (mla.compiler needs MLIR; the runtime half does not)."""
    import mla.compiler as mc
    config, softmax_scale = mc.model_config(args.model)
    max_blocks = -(-(max(args.prompts) + args.decode_steps) // BLOCK_SIZE)
    shape = dict(layers=1, dtype="f32", block_size=BLOCK_SIZE,
                 max_blocks_per_seq=max_blocks,
                 max_position=BLOCK_SIZE * max_blocks)
    pipeline = "" if args.target == "cpu" else f"target={args.target}"
    prefill = mc.compile(model=args.model, phase="prefill",
                         tokens=sum(args.prompts), requests=len(args.prompts),
                         pipeline=pipeline, **shape)
    decode = mc.compile(model=args.model, batch=len(args.prompts),
                        pipeline=pipeline, **shape)
    model = dict(config=config, softmax_scale=softmax_scale,
                 prompts=args.prompts, decode_steps=args.decode_steps,
                 max_blocks=max_blocks)
    return model, prefill, decode


def load_steps(directory):
    with open(os.path.join(directory, "model.json")) as f:
        model = json.load(f)
    steps = []
    for name in ("prefill.mlaa", "decode.mlaa"):
        with open(os.path.join(directory, name), "rb") as f:
            steps.append(f.read())
    return (model, *steps)


def save_steps(directory, model, prefill, decode):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "model.json"), "w") as f:
        json.dump(model, f)
    for name, artifact in (("prefill.mlaa", prefill), ("decode.mlaa", decode)):
        with open(os.path.join(directory, name), "wb") as f:
            f.write(artifact)


class Tensors:
    """The engine's tensor library: NumPy, or torch on a device. The
    reference and the checks read host NumPy copies (`host`)."""

    def __init__(self, torch_device):
        self.torch = None
        if torch_device is not None:
            import torch
            self.torch, self.device = torch, torch.device(torch_device)

    def runtime_device(self):
        if self.torch is not None and self.device.type == "cuda":
            return rt.Device(f"cuda:{self.device.index or 0}")
        return rt.Device("cpu")

    def stream(self):
        """The stream the engine's work is on (torch's current one)."""
        if self.torch is not None and self.device.type == "cuda":
            return self.torch.cuda.current_stream(self.device)
        return None

    def of(self, array):
        if self.torch is None:
            return array
        return self.torch.from_numpy(np.ascontiguousarray(array)).to(
            self.device)

    def host(self, tensor):
        return tensor if self.torch is None else tensor.cpu().numpy()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="deepseek-v2-lite")
    parser.add_argument("--prompts", type=int, nargs="+", default=[5, 19])
    parser.add_argument("--decode-steps", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tolerance", type=float, default=1e-4)
    parser.add_argument("--torch", metavar="DEVICE",
                        help="hold the engine's tensors as torch tensors on "
                             "DEVICE ('cpu' or 'cuda')")
    parser.add_argument("--target", default="cpu",
                        help="compile for 'cpu' or 'cuda-sm90'")
    parser.add_argument("--save-artifacts", metavar="DIR",
                        help="compile the two steps into DIR and exit")
    parser.add_argument("--artifacts", metavar="DIR",
                        help="run the steps saved in DIR instead of "
                             "compiling (their prompts and steps apply)")
    args = parser.parse_args(argv)

    if args.artifacts:
        model, prefill_bytes, decode_bytes = load_steps(args.artifacts)
        args.prompts, args.decode_steps = model["prompts"], model[
            "decode_steps"]
    else:
        model, prefill_bytes, decode_bytes = compile_steps(args)
    if args.save_artifacts:
        save_steps(args.save_artifacts, model, prefill_bytes, decode_bytes)
        return 0
    prefill = rt.Artifact.load(prefill_bytes)
    decode = rt.Artifact.load(decode_bytes)
    config, softmax_scale = model["config"], model["softmax_scale"]
    max_blocks = model["max_blocks"]

    rng = np.random.default_rng(args.seed)
    lib = Tensors(args.torch)
    requests = list(range(len(args.prompts)))
    weights = random_weights(config, 0, rng)
    cos_sin = cos_sin_table(BLOCK_SIZE * max_blocks,
                            config["qk_rope_head_dim"])
    reference = ReferenceLayer(config, weights, cos_sin, softmax_scale)
    engine = Engine(prefill.caches[0], 1 + len(requests) * max_blocks,
                    max_blocks)

    # One executor a step shape, both over the same weights and cache, all
    # the engine's own tensors (kv_b_proj is split by the package).
    device, stream = lib.runtime_device(), lib.stream()
    cache = lib.of(engine.cache)
    absorbed = dict(rt.absorb({k: lib.of(v) for k, v in weights.items()},
                              prefill), cos_sin_cache=lib.of(cos_sin))
    executors = {}
    for artifact in (prefill, decode):
        executor = rt.Executor(artifact, device)
        rt.bind_weights(executor, absorbed, stream=stream)
        executor.bind_cache(artifact.caches[0].name, cache, stream=stream)
        executors[artifact.function_name] = executor

    failures = 0
    phases = [("prefill", prefill, args.prompts)] + [
        (f"decode {i}", decode, [1] * len(requests))
        for i in range(args.decode_steps)]
    for name, artifact, counts in phases:
        executor = executors[artifact.function_name]
        step, schedule = engine.metadata(requests, counts)
        hidden = rng.standard_normal((sum(counts), config["hidden_size"]),
                                     np.float32)
        buffers = {k: lib.of(v) for k, v in step.items()}
        buffers.update(hidden_states=lib.of(hidden),
                       hidden_states_out=lib.of(np.full_like(hidden, POISON)))
        for b in artifact.buffers:
            if b.role != "weight":
                executor.bind(b.name, buffers[b.name], stream=stream)
        before = engine.cache.copy()
        executor.run(stream=stream)
        out = lib.host(buffers["hidden_states_out"])  # waits for the step
        engine.cache[:] = lib.host(cache)

        want_out, want_rows = reference.step(hidden, schedule)
        flat = engine.cache.reshape(-1, engine.cache.shape[-1])
        written = flat[step["slot_mapping"]]
        untouched = np.delete(flat, step["slot_mapping"], 0)
        out_error = relative_error(out, want_out)
        row_error = relative_error(written, want_rows)
        others_kept = np.array_equal(
            untouched, np.delete(before.reshape(flat.shape),
                                 step["slot_mapping"], 0))
        ok = (out_error <= args.tolerance and row_error <= args.tolerance
              and others_kept)
        failures += not ok
        print(f"{name:9s} {sum(counts):3d} tokens: output error "
              f"{out_error:.2e}, cache rows {row_error:.2e}, other rows "
              f"{'unchanged' if others_kept else 'CHANGED'}"
              f"{'' if ok else '  MISMATCH'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
