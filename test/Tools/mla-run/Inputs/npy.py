"""Writes and inspects .npy files without numpy (for the mla-run tests).

  npy.py write OUT DESCR D0,D1,... [SEED] [VERSION]   deterministic values
  npy.py scalar OUT VALUE                             a 0-d float32
  npy.py fortran OUT DESCR D0,D1,...                  same, fortran_order True
  npy.py truncate IN OUT BYTES                        first BYTES of IN
  npy.py garbage OUT                                  not a .npy at all
  npy.py show FILE                                    prints descr and shape
"""
import math
import random
import struct
import sys


def header(descr, shape, fortran=False, version=1):
    dims = ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "")
    text = "{'descr': '%s', 'fortran_order': %s, 'shape': (%s), }" % (
        descr, "True" if fortran else "False", dims)
    pre = 10 if version == 1 else 12
    text += " " * ((64 - (pre + len(text) + 1) % 64) % 64) + "\n"
    size = struct.pack("<H", len(text)) if version == 1 else struct.pack("<I", len(text))
    return b"\x93NUMPY" + bytes([version, 0]) + size + text.encode("latin1")


def values(descr, count, seed):
    rng = random.Random(seed)
    out = bytearray()
    for _ in range(count):
        x = rng.uniform(-1.0, 1.0)
        if descr == "<f4":
            out += struct.pack("<f", x)
        elif descr in ("<u2", "<V2", "|V2"):  # bf16: top half of the f32
            out += struct.pack("<I", struct.unpack("<I", struct.pack("<f", x))[0])[2:]
        elif descr == "<f2":
            out += struct.pack("<e", x)
        elif descr == "<i4":
            out += struct.pack("<i", int(x * 100))
        elif descr == "<i8":
            out += struct.pack("<q", int(x * 100))
        else:
            raise SystemExit("unknown descr " + descr)
    return bytes(out)


def main():
    cmd = sys.argv[1]
    if cmd in ("write", "fortran"):
        out, descr = sys.argv[2], sys.argv[3]
        shape = [int(d) for d in sys.argv[4].split(",")]
        seed = int(sys.argv[5]) if len(sys.argv) > 5 else 0
        version = int(sys.argv[6]) if len(sys.argv) > 6 else 1
        with open(out, "wb") as f:
            f.write(header(descr, shape, cmd == "fortran", version))
            f.write(values(descr, math.prod(shape), seed))
    elif cmd == "scalar":
        with open(sys.argv[2], "wb") as f:
            f.write(header("<f4", []))
            f.write(struct.pack("<f", float(sys.argv[3])))
    elif cmd == "truncate":
        data = open(sys.argv[2], "rb").read()
        open(sys.argv[3], "wb").write(data[: int(sys.argv[4])])
    elif cmd == "garbage":
        open(sys.argv[2], "wb").write(b"this is not a numpy file\n" * 3)
    elif cmd == "show":
        data = open(sys.argv[2], "rb").read()
        assert data[:6] == b"\x93NUMPY", "bad magic"
        n = struct.unpack("<H", data[8:10])[0]
        text = data[10:10 + n].decode("latin1")
        assert (10 + n) % 64 == 0, "header not aligned"
        meta = eval(text)  # a Python literal written by mla-run
        count = math.prod(meta["shape"])
        body = data[10 + n:]
        assert len(body) == 4 * count, "data size"
        vals = struct.unpack("<%df" % count, body)
        finite = all(math.isfinite(v) for v in vals)
        print("descr %s shape %s finite %s" % (meta["descr"], meta["shape"], finite))
    else:
        raise SystemExit(__doc__)


main()
