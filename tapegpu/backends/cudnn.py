"""cuDNN on the `cuda` backend, through NVIDIA's cuDNN frontend (`import cudnn`; the optional
extra `tapegpu[cudnn]`, PyPI `nvidia-cudnn-frontend`): convolution forward, data gradient and
filter gradient, and scaled dot-product attention forward and backward (flash attention).

The ops' `cuda` kernels (ops/conv.py, ops/attention.py) call the functions below; each returns
`NotImplemented` where cuDNN is absent, too old, disabled (`TAPEGPU_CUDNN=0`) or refuses the
case, and the op's reference (im2col + cuBLAS, explicit attention) runs instead. `status()`
says which, for `python -m tapegpu info`.

Layouts. tapegpu's convolutions are channels-last: x `(N, *spatial, C)`, filters
`(*kernel, C / groups, K)`. cuDNN's tensors are described by logical dims in NCHW order with
strides of the physical layout, so x is dims `[N, C, *spatial]` with NHWC strides, and the
filter is passed as KRSC (a copy of tapegpu's RSCK filter, transposed: filters are small),
dims `[K, C / groups, *kernel]`. Attention is Keras' `(B, T, heads, head_dim)`: cuDNN's
BHSD logical dims with BSHD strides, as in the frontend's sample 50_sdpa_forward.

API calls relied on (cudnn-frontend 1.x, python/pygraph/pygraph.cpp and sdpa.cpp):
`cudnn.pygraph(io_data_type=, intermediate_data_type=, compute_data_type=, handle=)`,
`graph.tensor(name=, dim=, stride=, data_type=)`, `graph.conv_fprop(image=, weight=,
pre_padding=, post_padding=, stride=, dilation=, compute_data_type=, name=)`,
`graph.conv_dgrad(loss=, filter=, ...)`, `graph.conv_wgrad(image=, loss=, ...)`,
`graph.sdpa(q=, k=, v=, generate_stats=, attn_scale=, use_causal_mask=, name=)` -> (O, Stats),
`graph.sdpa_backward(q=, k=, v=, o=, dO=, stats=, attn_scale=, use_causal_mask=, name=)` ->
(dQ, dK, dV), `tensor.set_output(True).set_dim(..).set_stride(..).set_data_type(..)`, then in
this order `validate()`, `build_operation_graph()`, `create_execution_plans([heur_mode.A,
heur_mode.FALLBACK])`, `deselect_numeric_notes([numerical_note.TENSOR_CORE])` (float32 with
TF32 off: engines that round to TF32 carry that note; `NONDETERMINISTIC` too with op
determinism on, and sdpa_backward's `use_deterministic_algorithm=`), `check_support()`,
`build_plans()`, `get_workspace_size()`, and `execute({tensor: device pointer}, workspace
pointer, handle=)`; `cudnn.create_handle()`, `cudnn.set_stream(handle=, stream=)`,
`cudnn.backend_version()`, `cudnn.cudnnGraphNotSupportedError`.

Building a graph is slow (heuristics, kernel compilation), so each is built once per key
(the op, shapes, dtypes, params, TF32 setting, device) and kept in `_GRAPHS`; a refused key
is remembered too, so that the fallback costs one dict lookup after the first call.
"""
import collections
import math
import os
import threading

import numpy as np

from ..core import config, determinism

MIN_VERSION = 90000  # cuDNN 9.0: the graph API's conv and SDPA forward and backward
_LOCK = threading.Lock()
_GRAPHS = {}  # key -> _Graph, or a string: why cuDNN refused that key
_HANDLES = {}  # device index -> cuDNN handle
_state = None  # (cudnn module or None, why not)
# what ran, for tests and the profile: builds, runs and refusals per kind (conv_fprop, ...)
COUNTS = collections.Counter()


def reset():
    """Forgets the module, handles and graphs (tests that install or remove a stand-in)."""
    global _state
    with _LOCK:
        _state = None
        _GRAPHS.clear()
        _HANDLES.clear()
        COUNTS.clear()


def _load():
    global _state
    if _state is None:
        _state = _probe()
    return _state


def _probe():
    if os.environ.get("TAPEGPU_CUDNN", "") == "0":
        return None, "disabled by TAPEGPU_CUDNN=0"
    try:
        import cudnn  # optional extra: tapegpu[cudnn] (nvidia-cudnn-frontend)
    except ImportError as e:
        return None, f"the cudnn module is not installed ({e}; pip install 'tapegpu[cudnn]')"
    except Exception as e:  # its library failed to load: no libcudnn.so found, ...
        return None, f"import cudnn failed: {type(e).__name__}: {e}"
    try:
        version = int(cudnn.backend_version())
    except Exception as e:
        return None, f"cudnn.backend_version() failed: {type(e).__name__}: {e}"
    if version < MIN_VERSION:
        return None, f"cuDNN {version} is older than {MIN_VERSION} (cuDNN 9)"
    return cudnn, ""


def status():
    """(available, text): whether convolutions and attention on a GPU may take cuDNN, and
    what decides it."""
    mod, why = _load()
    if mod is None:
        return False, why
    version = getattr(mod, "__version__", "?")
    return True, f"cuDNN {mod.backend_version()} (frontend {version})"


# -- dtypes ---------------------------------------------------------------------------------------

def _data_type(mod, dtype):
    """cuDNN's data type for a numpy dtype this binding sends to cuDNN, or None."""
    dtype = np.dtype(dtype)
    if dtype == np.float32:
        return mod.data_type.FLOAT
    if dtype == np.float16:
        return mod.data_type.HALF
    if dtype.name == "bfloat16":
        return mod.data_type.BFLOAT16
    return None


def _tf32():
    return bool(config.tensor_float_32_execution_enabled())


# -- graphs ---------------------------------------------------------------------------------------

class _Graph:
    """A built cuDNN graph: its tensors by role and its workspace size."""

    def __init__(self, graph, tensors, workspace, handle):
        self.graph, self.tensors, self.workspace, self.handle = graph, tensors, workspace, handle

    def run(self, xp, arrays):
        """Executes on `arrays` ({role: CuPy array}) on CuPy's current stream."""
        mod = _state[0]
        ws = xp.empty(max(self.workspace, 1), dtype=np.uint8)
        mod.set_stream(handle=self.handle, stream=xp.cuda.get_current_stream().ptr)
        pack = {self.tensors[role]: a.data.ptr for role, a in arrays.items()}
        self.graph.execute(pack, ws.data.ptr, handle=self.handle)


def _handle(mod, xp, device):
    h = _HANDLES.get(device)
    if h is None:
        with xp.cuda.Device(device):
            h = _HANDLES[device] = mod.create_handle()
    return h


def _graph(kind, key, xp, device, dtype, make):
    """The built graph for `key`, building it with `make(mod, graph, dt)` the first time
    (which returns {role: tensor}); None where cuDNN is absent or refused the key."""
    mod, _ = _load()
    if mod is None:
        return None
    dt = _data_type(mod, dtype)
    if dt is None:
        return None
    key = (kind, device, _tf32(), determinism.enabled()) + key
    got = _GRAPHS.get(key)
    if got is None:
        with _LOCK:
            got = _GRAPHS.get(key)
            if got is None:
                got = _GRAPHS[key] = _build(mod, kind, xp, device, dt, np.dtype(dtype), make)
    if isinstance(got, str):
        COUNTS[kind + ":refused"] += 1
        return None
    COUNTS[kind] += 1
    return got


def _build(mod, kind, xp, device, dt, dtype, make):
    handle = _handle(mod, xp, device)
    try:
        graph = mod.pygraph(io_data_type=dt, intermediate_data_type=mod.data_type.FLOAT,
                            compute_data_type=mod.data_type.FLOAT, handle=handle)
        tensors = make(mod, graph, dt)
        graph.validate()
        graph.build_operation_graph()
        graph.create_execution_plans([mod.heur_mode.A, mod.heur_mode.FALLBACK])
        notes = []
        if dtype == np.float32 and not _tf32():
            # float32 in full float32, as tg.config.experimental says
            notes.append(mod.numerical_note.TENSOR_CORE)
        if determinism.enabled():  # tg.config.experimental.enable_op_determinism
            notes.append(mod.numerical_note.NONDETERMINISTIC)
        if notes:
            graph.deselect_numeric_notes(notes)
        graph.check_support()
        graph.build_plans()
        workspace = int(graph.get_workspace_size())
    except Exception as e:  # cudnnGraphNotSupportedError, or a descriptor cuDNN rejects
        COUNTS[kind + ":build_refused"] += 1
        return f"{type(e).__name__}: {e}"
    COUNTS[kind + ":built"] += 1
    return _Graph(graph, tensors, workspace, handle)


def refusals():
    """{key: why} of the graphs cuDNN refused so far (for info and tests)."""
    return {k: v for k, v in _GRAPHS.items() if isinstance(v, str)}


# -- convolution ----------------------------------------------------------------------------------

def _channels_last_strides(dims):
    """Strides of logical NC<spatial> dims stored channels-last (NHWC, KRSC)."""
    c, spatial = dims[1], dims[2:]
    strides = [0] * len(dims)
    strides[1] = 1
    step = c
    for i in range(len(spatial) - 1, -1, -1):
        strides[2 + i] = step
        step *= spatial[i]
    strides[0] = step
    return strides


def _tensor(graph, name, dims, dt):
    return graph.tensor(name=name, dim=list(dims), stride=_channels_last_strides(dims),
                        data_type=dt)


def _output(t, dims, dt):
    t.set_output(True).set_dim(list(dims)).set_stride(_channels_last_strides(dims)) \
        .set_data_type(dt)


def _conv_fits(xp, arrays, strides):
    nd = len(strides)
    return xp is not np and nd in (1, 2, 3) and \
        all(a.size and a.dtype == arrays[0].dtype for a in arrays)


def _geometry(x_shape, ksize, strides, dilations, pads):
    """(N, spatial, 2-D-or-3-D params): 1-D convolutions run as 2-D with a unit height."""
    nd = len(strides)
    n = math.prod(x_shape[:-nd - 1])
    spatial = tuple(x_shape[-nd - 1:-1])
    if nd == 1:
        return (n, (1,) + spatial, (1,) + tuple(ksize), (1,) + tuple(strides),
                (1,) + tuple(dilations), ((0, 0),) + tuple(pads))
    return n, spatial, tuple(ksize), tuple(strides), tuple(dilations), tuple(pads)


def _krsc(xp, w, nd):
    """tapegpu's filter (*k, cin_g, cout) as a contiguous KRSC array (cout, *k, cin_g)."""
    return xp.ascontiguousarray(w.transpose((nd + 1,) + tuple(range(nd)) + (nd,)))


def _conv_params(strides, dilations, pads):
    return dict(pre_padding=[lo for lo, _ in pads], post_padding=[hi for _, hi in pads],
                stride=list(strides), dilation=list(dilations))


def _out_spatial(spatial, ksize, strides, dilations, pads):
    return tuple((n + lo + hi - (k - 1) * d - 1) // s + 1 for n, k, s, d, (lo, hi) in
                 zip(spatial, ksize, strides, dilations, pads))


def conv_forward(xp, x, w, strides, dilations, pads):
    """conv(x, w) through cuDNN's conv_fprop, or NotImplemented."""
    nd = len(strides)
    if not _conv_fits(xp, (x, w), strides):
        return NotImplemented
    cin_g, cout = w.shape[-2:]
    c = x.shape[-1]
    n, spatial, ksize, st, dl, pd = _geometry(x.shape, w.shape[:nd], strides, dilations, pads)
    out = _out_spatial(spatial, ksize, st, dl, pd)
    if min(out) <= 0:
        return NotImplemented
    xd, wd, yd = (n, c) + spatial, (cout, cin_g) + ksize, (n, cout) + out

    def make(mod, graph, dt):
        X, W = _tensor(graph, "X", xd, dt), _tensor(graph, "W", wd, dt)
        Y = graph.conv_fprop(image=X, weight=W, compute_data_type=mod.data_type.FLOAT,
                             name="fprop", **_conv_params(st, dl, pd))
        _output(Y, yd, dt)
        return {"x": X, "w": W, "y": Y}

    plan = _graph("conv_fprop", (xd, wd, st, dl, pd, str(x.dtype)), xp, x.device.id, x.dtype,
                  make)
    if plan is None:
        return NotImplemented
    y = xp.empty(x.shape[:-nd - 1] + _out_spatial(x.shape[-nd - 1:-1], w.shape[:nd], strides,
                                                  dilations, pads) + (cout,), x.dtype)
    plan.run(xp, {"x": xp.ascontiguousarray(x), "w": _krsc(xp, w, nd), "y": y})
    return y


def conv_data_grad(xp, g, w, in_shape, strides, dilations, pads):
    """conv_backprop_input(g, w) through cuDNN's conv_dgrad, or NotImplemented."""
    nd = len(strides)
    if not _conv_fits(xp, (g, w), strides):
        return NotImplemented
    cin_g, cout = w.shape[-2:]
    lead = g.shape[:-nd - 1]
    x_shape = tuple(lead) + tuple(in_shape)
    n, spatial, ksize, st, dl, pd = _geometry(x_shape, w.shape[:nd], strides, dilations, pads)
    out = _out_spatial(spatial, ksize, st, dl, pd)
    if math.prod(x_shape) == 0:
        return NotImplemented
    xd, wd, yd = (n, in_shape[-1]) + spatial, (cout, cin_g) + ksize, (n, cout) + out

    def make(mod, graph, dt):
        DY, W = _tensor(graph, "DY", yd, dt), _tensor(graph, "W", wd, dt)
        DX = graph.conv_dgrad(loss=DY, filter=W, compute_data_type=mod.data_type.FLOAT,
                              name="dgrad", **_conv_params(st, dl, pd))
        _output(DX, xd, dt)  # dgrad cannot infer its output's dims: they are given
        return {"dy": DY, "w": W, "dx": DX}

    plan = _graph("conv_dgrad", (xd, wd, st, dl, pd, str(g.dtype)), xp, g.device.id, g.dtype,
                  make)
    if plan is None:
        return NotImplemented
    dx = xp.empty(x_shape, g.dtype)
    plan.run(xp, {"dy": xp.ascontiguousarray(g), "w": _krsc(xp, w, nd), "dx": dx})
    return dx


def conv_filter_grad(xp, x, g, w_shape, strides, dilations, pads):
    """conv_backprop_filter(x, g) through cuDNN's conv_wgrad, or NotImplemented."""
    nd = len(strides)
    if not _conv_fits(xp, (x, g), strides):
        return NotImplemented
    cin_g, cout = w_shape[-2:]
    n, spatial, ksize, st, dl, pd = _geometry(x.shape, tuple(w_shape[:nd]), strides, dilations,
                                              pads)
    out = _out_spatial(spatial, ksize, st, dl, pd)
    xd, wd, yd = (n, x.shape[-1]) + spatial, (cout, cin_g) + ksize, (n, cout) + out

    def make(mod, graph, dt):
        X, DY = _tensor(graph, "X", xd, dt), _tensor(graph, "DY", yd, dt)
        DW = graph.conv_wgrad(image=X, loss=DY, compute_data_type=mod.data_type.FLOAT,
                              name="wgrad", **_conv_params(st, dl, pd))
        _output(DW, wd, dt)  # as dgrad: the filter's dims are given
        return {"x": X, "dy": DY, "dw": DW}

    plan = _graph("conv_wgrad", (xd, wd, st, dl, pd, str(x.dtype)), xp, x.device.id, x.dtype,
                  make)
    if plan is None:
        return NotImplemented
    dw = xp.empty((cout,) + tuple(w_shape[:nd]) + (cin_g,), x.dtype)  # KRSC
    plan.run(xp, {"x": xp.ascontiguousarray(x), "dy": xp.ascontiguousarray(g), "dw": dw})
    return xp.ascontiguousarray(dw.transpose(tuple(range(1, nd + 1)) + (nd + 1, 0)))


# -- scaled dot-product attention -----------------------------------------------------------------

SDPA_HEAD_DIMS = (8, 128)  # head_dim: a multiple of 8, at most 128 (every cuDNN 9 GPU's kernels)


def _bshd(b, s, h, d):
    """BHSD logical dims with BSHD strides (Keras' (batch, seq, heads, head_dim) layout)."""
    return [b, h, s, d], [s * h * d, d, h * d, 1]


def _sdpa_fits(xp, q, k, v):
    if xp is np or q.ndim < 3 or not (q.dtype == k.dtype == v.dtype):
        return False
    if q.dtype == np.float32 or q.dtype == np.float64:
        return False  # cuDNN's flash attention takes float16 and bfloat16 only
    d = q.shape[-1]
    return (k.shape == v.shape and q.shape[:-3] == k.shape[:-3] and q.shape[-2:] == k.shape[-2:]
            and d % SDPA_HEAD_DIMS[0] == 0 and d <= SDPA_HEAD_DIMS[1] and q.size and k.size)


def _sdpa_dims(q, k):
    b = math.prod(q.shape[:-3])
    t, h, d = q.shape[-3:]
    return b, t, k.shape[-3], h, d


def _stats_dims(b, h, t):
    return [b, h, t, 1], [h * t, t, 1, 1]


def _sdpa_tensors(graph, b, t, s, h, d, dt, names):
    qd, qs = _bshd(b, t, h, d)
    kd, ks = _bshd(b, s, h, d)
    return [graph.tensor(name=n, dim=kd if n in ("K", "V") else qd,
                         stride=ks if n in ("K", "V") else qs, data_type=dt) for n in names]


def sdpa_forward(xp, q, k, v, scale, causal, stats=False):
    """Attention (B..., T, heads, d) through cuDNN's sdpa: the output, with the softmax
    statistics (B, heads, T, 1) float32 when `stats`; or NotImplemented."""
    if not _sdpa_fits(xp, q, k, v):
        return NotImplemented
    b, t, s, h, d = _sdpa_dims(q, k)

    def make(mod, graph, dt):
        Q, K, V = _sdpa_tensors(graph, b, t, s, h, d, dt, ("Q", "K", "V"))
        O, S = graph.sdpa(q=Q, k=K, v=V, generate_stats=bool(stats), attn_scale=float(scale),
                          use_causal_mask=bool(causal), name="sdpa")
        od, os_ = _bshd(b, t, h, d)
        O.set_output(True).set_dim(od).set_stride(os_).set_data_type(dt)
        roles = {"q": Q, "k": K, "v": V, "o": O}
        if stats:
            sd, ss = _stats_dims(b, h, t)
            S.set_output(True).set_dim(sd).set_stride(ss).set_data_type(mod.data_type.FLOAT)
            roles["stats"] = S
        return roles

    key = (b, t, s, h, d, float(scale), bool(causal), bool(stats), str(q.dtype))
    plan = _graph("sdpa_fwd", key, xp, q.device.id, q.dtype, make)
    if plan is None:
        return NotImplemented
    out = xp.empty(q.shape, q.dtype)
    arrays = {"q": xp.ascontiguousarray(q), "k": xp.ascontiguousarray(k),
              "v": xp.ascontiguousarray(v), "o": out}
    if stats:
        arrays["stats"] = xp.empty((b, h, t, 1), np.float32)
    plan.run(xp, arrays)
    return (out, arrays["stats"]) if stats else out


def sdpa_backward(xp, g, q, k, v, out, scale, causal):
    """(dq, dk, dv) of attention through cuDNN's sdpa_backward, or NotImplemented. The
    statistics it needs come from a forward run with generate_stats (the op saves its inputs
    and output, not the statistics)."""
    if g.shape != out.shape or g.dtype != q.dtype or not _sdpa_fits(xp, q, k, v):
        return NotImplemented
    b, t, s, h, d = _sdpa_dims(q, k)

    def make(mod, graph, dt):
        Q, K, V, O, DO = _sdpa_tensors(graph, b, t, s, h, d, dt, ("Q", "K", "V", "O", "dO"))
        sd, ss = _stats_dims(b, h, t)
        ST = graph.tensor(name="stats", dim=sd, stride=ss, data_type=mod.data_type.FLOAT)
        DQ, DK, DV = graph.sdpa_backward(q=Q, k=K, v=V, o=O, dO=DO, stats=ST,
                                         attn_scale=float(scale),
                                         use_causal_mask=bool(causal),
                                         use_deterministic_algorithm=determinism.enabled(),
                                         name="sdpa_backward")
        for T, like in ((DQ, Q), (DK, K), (DV, V)):
            T.set_output(True).set_dim(like.get_dim()).set_stride(like.get_stride()) \
                .set_data_type(dt)
        return {"q": Q, "k": K, "v": V, "o": O, "do": DO, "stats": ST,
                "dq": DQ, "dk": DK, "dv": DV}

    key = (b, t, s, h, d, float(scale), bool(causal), str(q.dtype))
    plan = _graph("sdpa_bwd", key, xp, q.device.id, q.dtype, make)
    if plan is None:
        return NotImplemented
    fwd = sdpa_forward(xp, q, k, v, scale, causal, stats=True)
    if fwd is NotImplemented:
        return NotImplemented
    _, stats = fwd
    dq, dk, dv = (xp.empty(a.shape, a.dtype) for a in (q, k, v))
    plan.run(xp, {"q": xp.ascontiguousarray(q), "k": xp.ascontiguousarray(k),
                  "v": xp.ascontiguousarray(v), "o": xp.ascontiguousarray(out),
                  "do": xp.ascontiguousarray(g), "stats": stats, "dq": dq, "dk": dk, "dv": dv})
    return dq, dk, dv
