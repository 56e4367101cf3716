"""Each op's per-element expressions compute what its entry computes: `dc=` the VJP rule (on
numpy arrays, as the array sweep runs it) and `c=` the forward, compiled as C by the same
compiler and flags as tg.function's CPU kernels. Exact expressions (codegen.exact) give the
same bits; those calling library functions are within the bound tests/function/test_fusion.py
uses (C's functions against numpy's), on the spec table's samples plus NaN, infinities, signed
zeros and subnormals, with the params the spec table uses. (Outside the spec table's range a
formula may amplify a library function's last-ulp difference: gelu's tanh form computes
1 + tanh(u), which cancels for u below -5.)"""
import ctypes
import hashlib

import numpy as np
import pytest

from tapegpu import backends
from tapegpu.backends.emu import build
from tapegpu.backends.kernels import codegen
from tapegpu.ops import TENSOR_OPS, generate
from tapegpu.ops.namespace import ArrayOps
from tapegpu.ops.registry import REGISTRY
from tapegpu.testing.op_specs import SPECS, sample

SINGLE_DEVICE = True
ULP = 2
SPECIALS = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, -1e-40, 5e-324, 1e30, -1e30, 30.0,
            -30.0, 1.0, -1.0]  # (test_fusion.py's, and the ends of the activations' ranges)
_RULES = ArrayOps(backends.NUMPY, TENSOR_OPS)  # the rules on numpy arrays, no kernel
PARAMS = {"elu": [{}, {"alpha": 0.5}, {"alpha": 1.6732632423543772}],
          "gelu": [{}, {"approximate": True}]}
# gelu's tanh form cancels (1 + tanh(u), tanh(u) near -1 around x = -2): numpy's float32 tanh,
# 1 ulp from C's on a third of inputs, gives up to 21 ulp there (tests/function/test_fusion.py)
CANCELS = {("gelu", "float32", "approximate"): 32}
WITH_DC = [name for name, op in REGISTRY.items() if op.c is not None and op.dc is not None]
_LIBS = {}


def _compiled(expr, args, dtype):
    """f(arrays, out, n): out[i] = expr of args[k] = arrays[k][i], as C++ on the CPU."""
    ctype = codegen.C_TYPES[np.dtype(dtype).name]
    reads = " ".join(f"const T {a} = in[{k}][i];" for k, a in enumerate(args))
    source = ("#include <math.h>\n"
              f"typedef {ctype} T;\n"
              'extern "C" __attribute__((visibility("default"))) void f(const T *const *in, '
              "T *res, long long n) {\n"
              f"  for (long long i = 0; i < n; ++i) {{ {reads} res[i] = (T)({expr}); }}\n}}\n")
    if source not in _LIBS:
        name = "expr_" + hashlib.sha256(source.encode()).hexdigest()[:12]
        path, _ = build.build_host_library(source, name, ("-O1",))
        _LIBS[source] = ctypes.CDLL(str(path)).f

    def run(*arrays):
        arrays = [np.ascontiguousarray(a, dtype) for a in arrays]
        out = np.empty(arrays[0].shape, dtype)
        ptrs = (ctypes.c_void_p * len(arrays))(*[a.ctypes.data for a in arrays])
        _LIBS[source](ptrs, out.ctypes.data_as(ctypes.c_void_p), ctypes.c_longlong(out.size))
        return out
    return run


def _ulps(a, b):
    it = np.int32 if a.dtype == np.float32 else np.int64

    def line(v):
        i = v.view(it).astype(np.int64)
        return np.where(i < 0, -(i & np.int64(np.iinfo(it).max)), i)
    return np.where(np.isnan(a) & np.isnan(b), 0, np.abs(line(a) - line(b)))


def _assert_close(got, want, bound, what):
    """Within `bound` ulp; 0: the same bits (NaN where NaN, of any sign and payload)."""
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=what)
    if bound == 0:
        assert got[~np.isnan(got)].tobytes() == want[~np.isnan(want)].tobytes(), what
    else:
        worst = _ulps(got, want).max()
        assert worst <= bound, f"{what}: {worst} ulp"


def _expression(op, source, params):
    values = {k: codegen.literal(v) for k, v in {**generate.defaults(op), **params}.items()}
    return codegen.fold(codegen.substitute(source, values))


def _inputs(name, dtype):
    """x: the samples of the op's spec rows and the specials; g: a cotangent for each."""
    rows = [s for s in SPECS if (s.covers or (s.name,)) == (name,) and len(s.shapes) == 1]
    assert rows, f"{name} has no spec row of one input"
    with np.errstate(all="ignore"):
        x = np.concatenate([sample(s, dtype)[0].ravel() for s in rows] +
                           [np.array(SPECIALS, dtype)])
    rng = np.random.default_rng(0)
    g = np.concatenate([rng.standard_normal(x.size - len(SPECIALS)).astype(dtype),
                        np.array(SPECIALS[::-1], dtype)])
    return x, g


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", WITH_DC)
def test_dc_computes_the_rule_and_c_the_forward(name, dtype):
    op = REGISTRY[name]
    x, g = _inputs(name, dtype)
    rule = op.vjp[0] if type(op.vjp) is tuple else op.vjp
    for params in PARAMS.get(name, [{}]):
        with np.errstate(all="ignore"):
            out = op.forward(np, x, **params)
            saved = out if op.saves == ("out",) else x
            want = rule(_RULES, g, saved, **params)
        bound = CANCELS.get((name, np.dtype(dtype).name, *params), ULP)
        c = _expression(op, op.c, params)
        got = _compiled(c, op.args, dtype)(x)
        _assert_close(got, out, 0 if codegen.exact(c) else bound, f"{name} c {params}")
        dc = _expression(op, op.dc, params)
        got = _compiled(dc, ("g", op.saves[0]), dtype)(g, saved)
        _assert_close(got, want, 0 if codegen.exact(dc) else bound, f"{name} dc {params}")
