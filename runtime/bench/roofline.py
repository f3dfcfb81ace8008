#!/usr/bin/python3
"""Roofline plot of mla-bench JSON results (not a test; needs matplotlib).

    /usr/bin/python3 runtime/bench/roofline.py [--pick best|newest] [--date D]
        [--list] [--no-labels] -o OUT.png FILE.json [FILE.json ...]

Input: files written by mla-bench (runtime/bench/MlaBench.cpp), e.g.
docs/results/*-mla-bench.json:
    {"device": str, "copy_gbs": float, "gemm_tflops": float,
     "rows": [{"kernel": str, "shape": str, "us": float, "gbs": float,
               "tflops": float, ...}, ...]}
The top-level copy_gbs and gemm_tflops (the rows "ceiling:copy" and
"ceiling:gemm") are the measured ceilings: they become the two roofs, and
those two rows are not points.

One point per (kernel, shape). When several files have the same row:
  --pick best    (default) the fastest measurement (smallest "us") wins; the
                 same row always counts the same bytes and FLOPs, so this is
                 also the highest GB/s and TFLOP/s. Ties go to the later file.
  --pick newest  the file given last on the command line wins (pass the
                 files oldest first).
--list prints the chosen rows with the file each came from.

Left panel: rows with FLOPs (tflops > 0) at x = FLOP/byte (1000 * tflops /
gbs, both as the bench counted them), y = achieved TFLOP/s, under
min(copy GB/s * x, GEMM TFLOP/s). Right panel: rows the bench counts no
FLOPs for (cache writes, norms, adds, copies): a FLOP/s axis has no place
for them, so they are shown at their achieved GB/s against the copy roof,
over the bytes one call moves.

Files from different devices are refused (their roofs differ). Roofs are the
median of the files' ceilings; the legend gives their range.
"""

import argparse
import json
import math
import os
import re
import statistics
import sys
import tempfile

CEILING_COPY = "ceiling:copy"
CEILING_GEMM = "ceiling:gemm"


class InputError(Exception):
    """A malformed or unusable input file; the message names the file."""


def _number(value, where, field, minimum=None):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{where}: \"{field}\" must be a number, got "
                         f"{json.dumps(value)}")
    if not math.isfinite(value):
        raise InputError(f"{where}: \"{field}\" is not finite ({value})")
    if minimum is not None and value < minimum:
        raise InputError(f"{where}: \"{field}\" must be >= {minimum}, got "
                         f"{value}")
    return float(value)


def _string(value, where, field):
    if not isinstance(value, str) or not value:
        raise InputError(f"{where}: \"{field}\" must be a non-empty string, "
                         f"got {json.dumps(value)}")
    return value


def load_bench(path):
    """Parses and checks one mla-bench JSON file."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"{path}: not valid JSON: {e.msg} (line {e.lineno}, "
                         f"column {e.colno})") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: the top level must be an object with "
                         "\"device\", \"copy_gbs\", \"gemm_tflops\", \"rows\"")
    for key in ("device", "copy_gbs", "gemm_tflops", "rows"):
        if key not in data:
            raise InputError(f"{path}: missing \"{key}\" (not an mla-bench "
                             "JSON file?)")
    device = _string(data["device"], path, "device")
    copy_gbs = _number(data["copy_gbs"], path, "copy_gbs", 0)
    gemm_tflops = _number(data["gemm_tflops"], path, "gemm_tflops", 0)
    if not isinstance(data["rows"], list):
        raise InputError(f"{path}: \"rows\" must be a list")
    rows = []
    for i, row in enumerate(data["rows"]):
        where = f"{path}: rows[{i}]"
        if not isinstance(row, dict):
            raise InputError(f"{where}: must be an object")
        for key in ("kernel", "shape", "us", "gbs", "tflops"):
            if key not in row:
                raise InputError(f"{where}: missing \"{key}\"")
        kernel = _string(row["kernel"], where, "kernel")
        rows.append({
            "kernel": kernel,
            "shape": _string(row["shape"], where, "shape"),
            "us": _number(row["us"], where, "us"),
            "gbs": _number(row["gbs"], where, "gbs", 0),
            "tflops": _number(row["tflops"], where, "tflops", 0),
            "file": path,
        })
        if rows[-1]["us"] <= 0:
            raise InputError(f"{where}: \"us\" must be > 0, got "
                             f"{rows[-1]['us']}")
        if rows[-1]["gbs"] == 0 and rows[-1]["tflops"] > 0:
            raise InputError(f"{where}: FLOPs without bytes (\"gbs\" 0, "
                             "\"tflops\" > 0) has no arithmetic intensity")
    return {"path": path, "device": device, "copy_gbs": copy_gbs,
            "gemm_tflops": gemm_tflops, "rows": rows}


def merge(benches, pick):
    """One row per (kernel, shape), chosen by `pick`; ceilings excluded."""
    chosen = {}
    for bench in benches:  # command-line order: later = newer
        for row in bench["rows"]:
            if row["kernel"].startswith("ceiling:"):
                continue
            key = (row["kernel"], row["shape"])
            old = chosen.get(key)
            if (old is None or pick == "newest" or
                    row["us"] <= old["us"]):
                chosen[key] = row
    return list(chosen.values())


def ceilings(benches):
    """Median copy GB/s and GEMM TFLOP/s over the files that measured them."""
    copies = [b["copy_gbs"] for b in benches if b["copy_gbs"] > 0]
    gemms = [b["gemm_tflops"] for b in benches if b["gemm_tflops"] > 0]
    if not copies or not gemms:
        raise InputError("no input file has both measured ceilings "
                         "(copy_gbs and gemm_tflops are 0: run mla-bench "
                         "without --no-ceilings)")
    return copies, gemms


def plot_date(paths, override):
    if override:
        return override
    dates = sorted({m.group(0) for p in paths
                    for m in [re.search(r"\d{4}-\d{2}-\d{2}",
                                        os.path.basename(p))] if m})
    if not dates:
        return "date unknown"
    return dates[0] if len(dates) == 1 else f"{dates[0]} to {dates[-1]}"


def family(kernel):
    """Legend group of a kernel name: "decode bf16 bs64", "step linear", ..."""
    if kernel.startswith("step linear"):
        return "step linear (cuBLAS)"
    return kernel


def fmt_range(values, unit):
    lo, hi = min(values), max(values)
    mid = statistics.median(values)
    span = "" if lo == hi else f", measured {lo:.0f}-{hi:.0f}"
    return f"{mid:.0f} {unit}{span}"


def place_labels(fig, ax, points, fontsize=6.5):
    """Labels right of their points, nudged up or down until no two labels
    (or a label and a marker) overlap; a moved label gets a leader line."""
    renderer = fig.canvas.get_renderer()
    to_px = ax.transData.transform
    marker_px = 7.0
    taken = [(x - marker_px, y - marker_px, x + marker_px, y + marker_px)
             for x, y in (to_px(p[:2]) for p in points)]

    frame = ax.get_window_extent(renderer)

    def free(box):
        inside = (box[1] >= frame.y0 and box[3] <= frame.y1 and
                  box[2] <= frame.x1)
        return inside and all(box[2] <= t[0] or box[0] >= t[2] or
                              box[3] <= t[1] or box[1] >= t[3]
                              for t in taken)

    # Top to bottom, so a crowded column fans out downwards and upwards.
    for x, y, text in sorted(points, key=lambda p: -to_px(p[:2])[1]):
        px, py = to_px((x, y))
        probe = ax.annotate(text, (x, y), fontsize=fontsize)
        extent = probe.get_window_extent(renderer)
        probe.remove()
        w, h = extent.width, extent.height
        dx = 8.0
        for step in range(60):
            dy = (step + 1) // 2 * (h + 1) * (1 if step % 2 else -1)
            box = (px + dx, py + dy - h / 2, px + dx + w, py + dy + h / 2)
            if free(box):
                break
        else:  # crowded: keep it next to its point, overlapping
            dy = 0.0
            box = (px + dx, py - h / 2, px + dx + w, py + h / 2)
        taken.append(box)
        # Offsets in points (the figure's dpi converts pixels).
        scale = 72.0 / fig.dpi
        ax.annotate(text, (x, y), xytext=(dx * scale, dy * scale),
                    textcoords="offset points", fontsize=fontsize,
                    va="center", zorder=4,
                    arrowprops=None if abs(dy) < h else
                    dict(arrowstyle="-", lw=0.4, color="0.5",
                         shrinkA=0, shrinkB=3))


def draw(rows, copies, gemms, device, date, out, pick, num_files,
         labels):
    import matplotlib  # late: the input checks above need no matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    copy_gbs = statistics.median(copies)
    gemm_tflops = statistics.median(gemms)
    ridge = gemm_tflops * 1000.0 / copy_gbs  # FLOP/byte
    flop_rows = [r for r in rows if r["tflops"] > 0]
    byte_rows = [r for r in rows if r["tflops"] == 0]

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(17, 9), dpi=130,
                                 gridspec_kw={"width_ratios": [1.25, 1]})
    fig.suptitle(f"MLA runtime kernels on {device} - {date} (mla-bench)",
                 fontsize=13)
    rule = ("the fastest measurement" if pick == "best"
            else "the one from the file given last")
    fig.text(0.5, 0.01,
             f"One point per kernel/shape from {num_files} file(s); where "
             f"several files have a row, {rule} is shown (--pick {pick}). "
             "Roofs: median of the files' measured ceilings. Bytes and "
             "FLOPs as mla-bench counts them.",
             ha="center", fontsize=8.5)
    cmap = plt.get_cmap("tab10")
    markers = "osD^v<>PXh"
    families = sorted({family(r["kernel"]) for r in rows})
    # Unique (color, marker) pairs for up to 100 families.
    style = {f: (cmap(i % 10), markers[(i + i // 10) % len(markers)])
             for i, f in enumerate(families)}

    # Left: the roofline.
    xs = [1000.0 * r["tflops"] / r["gbs"] for r in flop_rows]
    lo = min(xs + [ridge]) / 4 if xs else ridge / 100
    hi = max(xs + [ridge]) * 4 if xs else ridge * 10
    grid = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    ax.plot(grid, [min(gemm_tflops, copy_gbs * x / 1000.0) for x in grid],
            color="black", lw=2, zorder=1)
    ax.axhline(gemm_tflops, color="black", lw=0.8, ls=":", zorder=0)
    ax.plot([], [], color="black", lw=2,
            label="roof = min(copy GB/s x intensity, GEMM TFLOP/s)\n"
                  f"copy {fmt_range(copies, 'GB/s')} (2 GiB d2d, read + "
                  "write)\n"
                  f"GEMM {fmt_range(gemms, 'TFLOP/s')} (cuBLAS bf16 "
                  "8192^3)")
    for f in families:
        pts = [(x, r) for x, r in zip(xs, flop_rows) if family(r["kernel"]) == f]
        if not pts:
            continue
        color, marker = style[f]
        ax.scatter([x for x, _ in pts], [r["tflops"] for _, r in pts],
                   color=color, marker=marker, s=42, zorder=3, label=f,
                   edgecolors="black", linewidths=0.4)
    ax.annotate(f"ridge {ridge:.0f} FLOP/B", (ridge, gemm_tflops),
                xytext=(0, 8), textcoords="offset points", ha="center",
                fontsize=8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_xlabel("arithmetic intensity (FLOP / byte, as mla-bench counts "
                  "them)")
    ax.set_ylabel("achieved TFLOP/s")
    ax.set_title("kernels with FLOPs: roofline", fontsize=11)
    ax.grid(True, which="both", ls=":", lw=0.4)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.09),
              ncol=2, frameon=False)

    # Right: zero-FLOP kernels, bandwidth against the copy roof.
    sizes = [r["gbs"] * r["us"] * 1e3 for r in byte_rows]  # bytes per call
    for f in families:
        pts = [(s, r) for s, r in zip(sizes, byte_rows)
               if family(r["kernel"]) == f]
        if not pts:
            continue
        color, marker = style[f]
        bx.scatter([s for s, _ in pts], [r["gbs"] for _, r in pts],
                   color=color, marker=marker, s=42, zorder=3, label=f,
                   edgecolors="black", linewidths=0.4)
    bx.axhline(copy_gbs, color="black", lw=2, zorder=1,
               label=f"copy roof {fmt_range(copies, 'GB/s')}")
    bx.set_xscale("log")
    bx.set_yscale("log")
    bx.set_xlabel("bytes moved per call (as mla-bench counts them)")
    bx.set_ylabel("achieved GB/s")
    bx.set_title("kernels with no FLOPs counted: achieved bandwidth "
                 "(not on the FLOP/s axis)", fontsize=11)
    bx.grid(True, which="both", ls=":", lw=0.4)
    bx.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.09),
              ncol=2, frameon=False)

    fig.tight_layout(rect=(0, 0.03, 1, 0.95))
    # Labels last: they are placed in pixels of the final layout.
    ax.set_ylim(*ax.get_ylim())
    bx.set_ylim(*bx.get_ylim())
    bx.set_xlim(bx.get_xlim()[0], bx.get_xlim()[1] * 4)
    if labels:
        place_labels(fig, ax, [(x, r["tflops"], r["shape"])
                               for x, r in zip(xs, flop_rows)])
        place_labels(fig, bx, [(sz, r["gbs"], r["shape"])
                               for sz, r in zip(sizes, byte_rows)])
    # Write through a temporary file so a failure leaves no partial PNG.
    directory = os.path.dirname(os.path.abspath(out))
    fd, tmp = tempfile.mkstemp(suffix=".png", dir=directory)
    os.close(fd)
    try:
        fig.savefig(tmp, dpi=130)
        umask = os.umask(0)  # mkstemp made it 0600; use the usual mode
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, out)
    except BaseException:
        os.unlink(tmp)
        raise


def main(argv):
    parser = argparse.ArgumentParser(
        description="Roofline PNG from mla-bench JSON files.")
    parser.add_argument("files", nargs="+", metavar="FILE.json")
    parser.add_argument("-o", "--output", required=True, metavar="OUT.png")
    parser.add_argument("--pick", choices=("best", "newest"), default="best",
                        help="which file's row wins when several have it "
                             "(default: best = smallest us)")
    parser.add_argument("--date", help="date for the title (default: the "
                                       "YYYY-MM-DD in the file names)")
    parser.add_argument("--list", action="store_true",
                        help="print the chosen rows and their files")
    parser.add_argument("--no-labels", action="store_true",
                        help="no shape labels next to the points (for "
                             "crowded files; use --list for the values)")
    args = parser.parse_args(argv)

    try:
        benches = [load_bench(p) for p in args.files]
        devices = sorted({b["device"] for b in benches})
        if len(devices) > 1:
            raise InputError("the files come from different devices ("
                             + ", ".join(devices) + "); plot them separately")
        copies, gemms = ceilings(benches)
        rows = merge(benches, args.pick)
        for r in [r for r in rows if r["gbs"] == 0]:
            print(f"roofline.py: warning: {r['file']}: {r['kernel']} "
                  f"{r['shape']}: 0 GB/s (too little to print?), not "
                  "plotted", file=sys.stderr)
        rows = [r for r in rows if r["gbs"] > 0]
        if not rows:
            raise InputError("no kernel rows besides the ceilings")
    except InputError as e:
        print(f"roofline.py: error: {e}", file=sys.stderr)
        return 2
    if args.list:
        for r in sorted(rows, key=lambda r: (r["kernel"], r["file"])):
            print(f"{r['kernel']:24} {r['shape']:24} {r['us']:10.3f} us "
                  f"{r['gbs']:8.1f} GB/s {r['tflops']:7.2f} TFLOP/s  "
                  f"{os.path.basename(r['file'])}")
    try:
        draw(rows, copies, gemms, devices[0],
             plot_date(args.files, args.date), args.output, args.pick,
             len(args.files), not args.no_labels)
    except ImportError as e:
        print(f"roofline.py: error: matplotlib is missing ({e}); install it "
              "with `apt-get install -y python3-matplotlib` and run "
              "/usr/bin/python3", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"roofline.py: error: cannot write {args.output}: "
              f"{e.strerror or e}", file=sys.stderr)
        return 2
    print(f"wrote {args.output} ({len(rows)} points)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
