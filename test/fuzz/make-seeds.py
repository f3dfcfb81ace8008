#!/usr/bin/env python3
"""Builds the fuzz targets' seed corpora (scripts/fuzz.sh, docs/fuzzing.md).

ir/        every .mlir chunk of test/ and examples/ (split at '// -----'),
           prefixed with mla-ir-fuzzer's option byte, and mla-gen steps;
artifact/  artifacts the build's tools compile from mla-gen steps and from
           the hand-written lowering tests;
step/      the same artifacts behind mlart-step-fuzzer's two option bytes;
npy/       small .npy files of each supported dtype and header version.
"""
import argparse
import pathlib
import struct
import subprocess

# Option bytes of mla-ir-fuzzer (see pipelineOptions there): CPU defaults,
# CUDA, fused attention without fused rope, prefill, no pipeline.
IR_OPTION_BYTES = [0x00, 0x01, 0x06, 0x40, 0x80]


def tool(bin_dir, name, *args, stdin=None):
    return subprocess.run([str(bin_dir / name), *args], input=stdin,
                          capture_output=True, check=False)


def write(path, data):
    path.write_bytes(data)


def npy(descr, shape, item, version=1):
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
        descr, ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else ""))
    pre = 10 if version == 1 else 12
    header += " " * ((64 - (pre + len(header) + 1) % 64) % 64) + "\n"
    size = struct.pack("<H", len(header)) if version == 1 else struct.pack("<I", len(header))
    count = 1
    for s in shape:
        count *= s
    return b"\x93NUMPY" + bytes([version, 0]) + size + header.encode() + bytes(item * count)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--root", type=pathlib.Path, required=True)
    p.add_argument("--bin", type=pathlib.Path, required=True)
    p.add_argument("--out", type=pathlib.Path, required=True)
    a = p.parse_args()
    ir, art, step, npy_dir = (a.out / d for d in ("ir", "artifact", "step", "npy"))
    for d in (ir, art, step, npy_dir):
        d.mkdir(parents=True, exist_ok=True)

    n = 0
    sources = sorted((a.root / "test").rglob("*.mlir")) + sorted((a.root / "examples").glob("*.mlir"))
    for src in sources:
        for chunk in src.read_text().split("// -----"):
            if len(chunk) > 60000:
                continue
            for b in IR_OPTION_BYTES:
                write(ir / f"{n:05d}", bytes([b]) + chunk.encode())
                n += 1

    config = a.root / "test/Tools/mla-run/Inputs/tiny-config.json"
    steps = {
        "decode": ["--batch=2"],
        "prefill": ["--phase=prefill", "--tokens=6", "--requests=2"],
    }
    artifacts = []
    for name, extra in steps.items():
        gen = tool(a.bin, "mla-gen", f"--config={config}", "--layers=1",
                   "--block-size=16", "--max-blocks-per-seq=4",
                   "--max-position=256", *extra)
        if gen.returncode != 0:
            raise SystemExit(f"mla-gen {name} failed: {gen.stderr.decode()}")
        for b in (0x00, 0x40 if name == "prefill" else 0x06):
            write(ir / f"gen-{name}-{b:02x}", bytes([b]) + gen.stdout)
        pipeline = f"-mla-{name}-pipeline"
        for options in ("", "=fuse-rope=false fuse-into-attention=true"):
            opt = tool(a.bin, "mla-opt", pipeline + options, stdin=gen.stdout)
            if opt.returncode != 0:
                continue
            tr = tool(a.bin, "mla-translate", "--mla-to-artifact", stdin=opt.stdout)
            if tr.returncode == 0:
                artifacts.append(tr.stdout)
    for src in sorted((a.root / "test/Target/Artifact").glob("*.mlir")):
        for chunk in src.read_text().split("// -----"):
            tr = tool(a.bin, "mla-translate", "--mla-to-artifact",
                      stdin=chunk.encode())
            if tr.returncode == 0 and tr.stdout:
                artifacts.append(tr.stdout)
    if not artifacts:
        raise SystemExit("no seed artifact compiled")
    for i, data in enumerate(artifacts):
        write(art / f"{i:03d}.mlaa", data)
        write(step / f"{i:03d}", bytes([16, 1]) + data)

    for i, (descr, item) in enumerate([("<u2", 2), ("<f4", 4), ("<i8", 8), ("<f8", 8)]):
        write(npy_dir / f"{i}-v1.npy", npy(descr, [2, 256], item))
        write(npy_dir / f"{i}-v2.npy", npy(descr, [2, 256], item, version=2))
    write(npy_dir / "vector.npy", npy("<f4", [5], 4))
    print(f"seeds: {n + 4} IR, {len(artifacts)} artifacts, 10 .npy")


if __name__ == "__main__":
    main()
