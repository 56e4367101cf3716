"""Checks float32 tanh on numpy against the correctly rounded value for every float32 (not a
test: about a minute per sign, and it needs mpmath). The reference is the double tanh rounded
to float32, or where that double lies within 64 units of a midpoint between two floats, the
float nearest a 200-bit value; the kernel (`tapegpu.backends._cpu.tanh32`: the AVX2 loop where
the processor has it) must equal it everywhere, and so must numpy's long double where the
numpy computation (`ops.kernels.tanh_float32` without the kernel) takes it.

    python tests/backends/exhaustive_tanh32.py [path of another build of _cpu ...]

A build with `-DTAPEGPU_PLAIN` (gcc -O3 -ffp-contract=off -DTAPEGPU_PLAIN -shared -fPIC ...
tapegpu/backends/_cpu.c) checks the plain loop."""
import importlib.util
import sys

import mpmath
import numpy as np

mpmath.mp.prec = 200
CHUNK = 1 << 24


def load(path):
    spec = importlib.util.spec_from_file_location("_cpu", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def nearest(x, f):
    """The float32 nearest tanh(x) among f and its neighbours."""
    v = mpmath.tanh(mpmath.mpf(float(x)))
    cands = [np.nextafter(f, np.float32(-2)), f, np.nextafter(f, np.float32(2))]
    return min(cands, key=lambda c: abs(mpmath.mpf(float(c)) - v))


def main(paths):
    from tapegpu.backends import cpu_kernels
    kernels = {"built": cpu_kernels, **{p: load(p) for p in paths}}
    wrong = dict.fromkeys(list(kernels) + ["long double"], 0)
    for sign in (0, 1 << 31):
        for start in range(0, 0x7f800001, CHUNK):  # up to +-inf and one NaN
            bits = np.arange(start, min(start + CHUNK, 0x7f800001), dtype=np.uint32) | \
                np.uint32(sign)
            x = bits.view(np.float32)
            t = np.tanh(x.astype(np.float64))
            want = t.astype(np.float32)
            near = np.nonzero(np.abs((t.view(np.int64) & ((1 << 29) - 1)) - (1 << 28)) <= 64)[0]
            for i in near:
                want[i] = nearest(x[i], want[i])
                wrong["long double"] += np.tanh(np.longdouble(x[i])).astype(np.float32) != want[i]
            for name, k in kernels.items():
                out = np.empty_like(x)
                k.tanh32(x, out)
                wrong[name] += int(np.count_nonzero(out.view(np.uint32) != want.view(np.uint32)))
    print("float32 inputs whose tanh is not the correctly rounded value:", wrong)
    return 1 if any(wrong.values()) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
