"""A strict stand-in for NVIDIA's cuDNN frontend Python module (`import cudnn`), for running
tapegpu's cuDNN binding (tapegpu/backends/cudnn.py) on the CuPy stand-in (tests/support/cupy_sim).

It implements the subset of the frontend's API the binding uses, with the names and argument
conventions of cudnn-frontend 1.x (python/cudnn/__init__.py, python/pygraph/pygraph.cpp,
python/pygraph/sdpa.cpp, python/properties.cpp; samples/python/50_sdpa_forward.ipynb and
51_sdpa_backward.ipynb; test/python/test_conv_fprop.py), and checks what the real one checks:

* `pygraph(...)` and every method take keyword arguments by the real names; enums are
  `data_type`, `heur_mode`, `numerical_note`; errors are `cudnnGraphNotSupportedError`
  (check_support, heuristics) or ValueError (pybind's std::invalid_argument: a bad
  descriptor, a missing attribute, a bad variant pack) or RuntimeError (call order).
* tensors: `dim` and `stride` of one length (4 or 5 for a convolution's, 4 for attention's),
  positive dims, strides describing a layout where no two elements overlap; a data type set
  on the tensor or the graph's io_data_type; conv tensors are logical NCHW (image, output)
  and KCRS (filter), their strides must be channels-last (NHWC / KRSC: C has stride 1), as
  tapegpu asks; dgrad/wgrad outputs need their dims set (cuDNN cannot infer them).
* conv: image channels a multiple of the filter's (groups), output dims = the convolution
  formula of pre/post padding, stride, dilation; one padding/stride/dilation per spatial dim.
* sdpa: q, k, v BHSD logical dims, one batch and head_dim, k and v alike; exactly one of
  generate_stats / is_inference (sdpa.cpp); the stats output (B, H, S_q, 1) FLOAT where
  generated; check_support refuses io types other than HALF and BFLOAT16 and head_dim not a
  multiple of 8 or above 128 (cuDNN 9's flash attention), as the real one does.
* order: tensors and ops only before `validate()`, then `build_operation_graph()`,
  `create_execution_plans(modes)`, optional `deselect_numeric_notes(notes)`,
  `check_support()`, `build_plans()`; `get_workspace_size()` and `execute()` only after.
* `execute(variant_pack, workspace, handle=)`: the pack maps every non-virtual tensor of the
  graph (tensor objects or uids) to a device pointer (an int from a live cupy_sim array's
  `.data.ptr`), nothing else; the workspace pointer must hold `get_workspace_size()` bytes.
  It reads and writes device memory through cupy_sim (so a wrong stride or a short buffer
  gives wrong numbers or an error, as on a GPU), computing with numpy in float64.

`REFUSE` (a set of op kinds: "conv_fprop", "conv_dgrad", "conv_wgrad", "sdpa",
"sdpa_backward") makes check_support refuse those, for fallback tests; `CALLS` counts
executes per kind. `install()` puts the module in `sys.modules` as `cudnn`.
"""
import collections
import enum
import itertools
import sys

import numpy as np

import cupy_sim

__version__ = "1.23.0"
BACKEND_VERSION = 91000
REFUSE = set()
CALLS = collections.Counter()


class cudnnGraphNotSupportedError(Exception):  # noqa: N801 (the real name)
    pass


class data_type(enum.Enum):  # noqa: N801
    FLOAT = "float32"
    DOUBLE = "float64"
    HALF = "float16"
    BFLOAT16 = "bfloat16"
    INT32 = "int32"
    INT64 = "int64"
    BOOLEAN = "bool"
    NOT_SET = None


class heur_mode(enum.Enum):  # noqa: N801
    A = 0
    B = 1
    FALLBACK = 2


class numerical_note(enum.Enum):  # noqa: N801
    TENSOR_CORE = 0
    DOWN_CONVERT_INPUTS = 1
    REDUCED_PRECISION_REDUCTION = 2
    FFT = 3
    NONDETERMINISTIC = 4
    WINOGRAD = 5


def backend_version():
    return BACKEND_VERSION


def backend_version_string():
    return f"{BACKEND_VERSION // 10000}.{BACKEND_VERSION // 100 % 100}.{BACKEND_VERSION % 100}"


class _Handle:
    def __init__(self):
        self.stream = 0


def create_handle():
    return _Handle()


def set_stream(handle, stream):
    if not isinstance(handle, _Handle):
        raise TypeError("set_stream: handle must come from cudnn.create_handle()")
    if not isinstance(stream, int):
        raise TypeError("set_stream: stream must be an int (a cudaStream_t)")
    handle.stream = stream


def _np_dtype(dt):
    if dt.value == "bfloat16":
        import ml_dtypes
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(dt.value)


_uids = itertools.count(1)

# -- tensors ---------------------------------------------------------------------------------------


class tensor:  # noqa: N801 (the real class name)
    def __init__(self, graph, dim=None, stride=None, data_type_=data_type.NOT_SET, name="",
                 virtual=False):
        self._graph = graph
        self._dim = None if dim is None else [int(d) for d in dim]
        self._stride = None if stride is None else [int(s) for s in stride]
        self._data_type = data_type_
        self._name = name
        self._virtual = virtual
        self._uid = next(_uids)

    def _mutable(self):
        if self._graph._stage != 0:
            raise RuntimeError("cudnn_sim: a tensor's attributes are fixed once the graph is "
                               "validated")

    def set_output(self, is_output):
        self._mutable()
        self._virtual = not is_output
        return self

    def set_dim(self, dim):
        self._mutable()
        self._dim = [int(d) for d in dim]
        return self

    def set_stride(self, stride):
        self._mutable()
        self._stride = [int(s) for s in stride]
        return self

    def set_data_type(self, data_type=data_type.NOT_SET):
        self._mutable()
        self._data_type = data_type
        return self

    def set_name(self, name):
        self._name = name
        return self

    def get_dim(self):
        return list(self._dim or [])

    def get_stride(self):
        return list(self._stride or [])

    def get_data_type(self):
        return self._data_type

    def get_uid(self):
        return self._uid

    def get_name(self):
        return self._name

    def get_is_virtual(self):
        return self._virtual

    def __repr__(self):
        return f"<cudnn_sim tensor {self._name!r} dim={self._dim} stride={self._stride}>"


def _check_layout(t, what):
    if t._dim is None or t._stride is None:
        raise ValueError(f"cudnn_sim: {what} {t._name!r}: dims and strides must be set")
    if len(t._dim) != len(t._stride):
        raise ValueError(f"cudnn_sim: {what} {t._name!r}: {len(t._dim)} dims but "
                         f"{len(t._stride)} strides")
    if any(d <= 0 for d in t._dim) or any(s <= 0 for s in t._stride):
        raise ValueError(f"cudnn_sim: {what} {t._name!r}: dims and strides must be positive, "
                         f"got {t._dim} / {t._stride}")
    # no two elements at one offset: sorted by stride, each stride covers the dims below it
    span = 1
    for s, d in sorted(zip(t._stride, t._dim)):
        if d > 1 and s < span:
            raise ValueError(f"cudnn_sim: {what} {t._name!r}: strides {t._stride} overlap "
                             f"for dims {t._dim}")
        span = max(span, s * d) if d > 1 else span


def _check_channels_last(t, what):
    if t._stride[1] != 1:
        raise cudnnGraphNotSupportedError(
            f"cudnn_sim: {what} {t._name!r}: only channels-last layouts are supported by these "
            f"engines (stride of dim 1 must be 1), got strides {t._stride}")


# -- graph ---------------------------------------------------------------------------------------

_STAGES = ("created", "validated", "operation graph built", "execution plans created",
           "support checked", "plans built")


class pygraph:  # noqa: N801
    def __init__(self, name="test_graph", io_data_type=data_type.NOT_SET,
                 intermediate_data_type=data_type.NOT_SET, compute_data_type=data_type.NOT_SET,
                 handle=None, sm_count=None, sm_version=None, kernel_cache=None,
                 device_property=None, is_dynamic_shape_enabled=False,
                 is_override_shape_enabled=False):
        for dt in (io_data_type, intermediate_data_type, compute_data_type):
            if not isinstance(dt, data_type):
                raise TypeError(f"cudnn_sim: pygraph data types must be cudnn.data_type, got "
                                f"{dt!r}")
        if handle is not None and not isinstance(handle, _Handle):
            raise TypeError("cudnn_sim: handle must come from cudnn.create_handle()")
        self.io_data_type, self.compute_data_type = io_data_type, compute_data_type
        self.handle = handle
        self._stage = 0
        self._tensors = []
        self._ops = []
        self._deselected = set()

    def _advance(self, to, what):
        if self._stage != to - 1:
            raise RuntimeError(f"cudnn_sim: {what}() called with the graph at stage "
                               f"'{_STAGES[self._stage]}'; it needs '{_STAGES[to - 1]}'")
        self._stage = to

    def _adding(self, what):
        if self._stage != 0:
            raise RuntimeError(f"cudnn_sim: {what}() after validate(): the graph is fixed")

    def tensor(self, dim, stride, data_type=data_type.NOT_SET, is_virtual=False,
               is_pass_by_value=False, ragged_offset=None, reordering_type=None, name="",
               uid=-1):
        self._adding("tensor")
        t = tensor(self, dim, stride, data_type, name, virtual=is_virtual)
        self._tensors.append(t)
        return t

    def _out(self, name):
        t = tensor(self, name=name, virtual=True)
        self._tensors.append(t)
        return t

    def _own(self, *ts):
        for t in ts:
            if not isinstance(t, tensor) or t._graph is not self:
                raise ValueError(f"cudnn_sim: {t!r} is not a tensor of this graph")

    # -- convolutions (pygraph.cpp: conv_fprop / conv_dgrad / conv_wgrad) --
    def _conv(self, kind, a, b, padding, pre_padding, post_padding, stride, dilation,
              convolution_mode, compute_data_type, name):
        self._adding(kind)
        self._own(a, b)
        if padding is not None:
            if pre_padding is not None or post_padding is not None:
                raise TypeError("cudnn_sim: padding= or pre_padding=/post_padding=, not both")
            pre_padding = post_padding = padding
        out = self._out(name + "::out")
        self._ops.append(dict(kind=kind, a=a, b=b, out=out, pre=list(pre_padding or []),
                              post=list(post_padding or []), stride=list(stride or []),
                              dilation=list(dilation or [])))
        return out

    def conv_fprop(self, image, weight, padding=None, pre_padding=None, post_padding=None,
                   stride=None, dilation=None, convolution_mode=None,
                   compute_data_type=data_type.NOT_SET, name=""):
        return self._conv("conv_fprop", image, weight, padding, pre_padding, post_padding,
                          stride, dilation, convolution_mode, compute_data_type, name)

    def conv_dgrad(self, loss, filter, padding=None, pre_padding=None, post_padding=None,
                   stride=None, dilation=None, convolution_mode=None,
                   compute_data_type=data_type.NOT_SET, name=""):
        return self._conv("conv_dgrad", loss, filter, padding, pre_padding, post_padding,
                          stride, dilation, convolution_mode, compute_data_type, name)

    def conv_wgrad(self, image, loss, padding=None, pre_padding=None, post_padding=None,
                   stride=None, dilation=None, convolution_mode=None,
                   compute_data_type=data_type.NOT_SET, name=""):
        return self._conv("conv_wgrad", image, loss, padding, pre_padding, post_padding,
                          stride, dilation, convolution_mode, compute_data_type, name)

    # -- attention (sdpa.cpp) --
    def sdpa(self, q, k, v, is_inference=None, attn_scale=None, bias=None, block_mask=None,
             use_alibi_mask=False, use_padding_mask=False, seq_len_q=None, seq_len_kv=None,
             use_causal_mask=False, use_causal_mask_bottom_right=False,
             sliding_window_length=None, diagonal_alignment=None, diagonal_band_left_bound=None,
             diagonal_band_right_bound=None, dropout=None, rng_dump=None,
             paged_attention_k_table=None, paged_attention_v_table=None,
             paged_attention_max_seq_len_kv=None, compute_data_type=data_type.NOT_SET, name="",
             score_mod=None, generate_stats=None, implementation=None, score_max=None,
             score_sum_exp=None, sink_token=None, unfuse_fma=False):
        self._adding("sdpa")
        self._own(q, k, v)
        if (generate_stats is None) == (is_inference is None):
            raise RuntimeError("Exactly one of {generate_stats, is_inference} must be set "
                               "(prefer generate_stats).")
        stats = bool(not is_inference) if generate_stats is None else generate_stats
        if not isinstance(stats, bool):
            raise RuntimeError("generate_stats must be a bool.")
        if attn_scale is not None and not isinstance(attn_scale, float):
            raise RuntimeError("attn_scale must be a cudnn_tensor or float.")
        if bias is not None or dropout is not None or use_padding_mask or use_alibi_mask:
            raise NotImplementedError("cudnn_sim: bias, dropout, padding and alibi masks are "
                                      "not simulated")
        o, st = self._out(name + "::O"), self._out(name + "::Stats")
        self._ops.append(dict(kind="sdpa", q=q, k=k, v=v, o=o, stats=st if stats else None,
                              scale=1.0 if attn_scale is None else attn_scale,
                              causal=bool(use_causal_mask)))
        return [o, st if stats else None]

    def sdpa_backward(self, q, k, v, o, dO, stats, attn_scale=None, bias=None, dBias=None,
                      use_alibi_mask=False, use_padding_mask=False, seq_len_q=None,
                      seq_len_kv=None, max_total_seq_len_q=None, max_total_seq_len_kv=None,
                      use_causal_mask=False, use_causal_mask_bottom_right=False,
                      sliding_window_length=None, diagonal_alignment=None,
                      diagonal_band_left_bound=None, diagonal_band_right_bound=None,
                      dropout=None, rng_dump=None, use_deterministic_algorithm=False,
                      compute_data_type=data_type.NOT_SET, name="", score_mod=None,
                      score_mod_bprop=None, sink_token=None, dSink_token=None):
        self._adding("sdpa_backward")
        self._own(q, k, v, o, dO, stats)
        if attn_scale is not None and not isinstance(attn_scale, float):
            raise RuntimeError("attn_scale must be a cudnn_tensor or float.")
        dq, dk, dv = (self._out(name + s) for s in ("::dQ", "::dK", "::dV"))
        self._ops.append(dict(kind="sdpa_backward", q=q, k=k, v=v, o=o, do=dO, stats=stats,
                              dq=dq, dk=dk, dv=dv,
                              deterministic=bool(use_deterministic_algorithm),
                              scale=1.0 if attn_scale is None else attn_scale,
                              causal=bool(use_causal_mask)))
        return [dq, dk, dv]

    # -- building, in the documented order --
    def validate(self):
        self._advance(1, "validate")
        if not self._ops:
            raise ValueError("cudnn_sim: the graph has no operation")
        for t in self._tensors:
            if t._data_type is data_type.NOT_SET:
                t._data_type = self.io_data_type
        for op in self._ops:
            _VALIDATE[op["kind"].split("_")[0]](self, op)
        for t in self._tensors:
            if t._virtual:
                continue
            if t._data_type in (None, data_type.NOT_SET):
                raise ValueError(f"cudnn_sim: tensor {t._name!r} has no data type and the "
                                 "graph no io_data_type")
            _check_layout(t, "tensor")

    def build_operation_graph(self):
        self._advance(2, "build_operation_graph")

    def create_execution_plans(self, modes):
        if not modes or not all(isinstance(m, heur_mode) for m in modes):
            raise TypeError("cudnn_sim: create_execution_plans takes a list of cudnn.heur_mode")
        self._advance(3, "create_execution_plans")

    def deselect_numeric_notes(self, notes):
        if self._stage != 3:
            raise RuntimeError("cudnn_sim: deselect_numeric_notes() filters the execution "
                               "plans: call it after create_execution_plans()")
        if not all(isinstance(n, numerical_note) for n in notes):
            raise TypeError("cudnn_sim: deselect_numeric_notes takes cudnn.numerical_note")
        self._deselected.update(notes)

    def check_support(self):
        self._advance(4, "check_support")
        for op in self._ops:
            kind = op["kind"]
            if kind in REFUSE:
                raise cudnnGraphNotSupportedError(f"cudnn_sim: {kind} refused (REFUSE)")
            if kind.startswith("sdpa"):
                dt = op["q"]._data_type
                if dt not in (data_type.HALF, data_type.BFLOAT16):
                    raise cudnnGraphNotSupportedError(
                        f"cudnn_sim: {kind}: no engine for io type {dt.name} (HALF, BFLOAT16)")
                d = op["q"]._dim[3]
                if d % 8 or d > 128:
                    raise cudnnGraphNotSupportedError(
                        f"cudnn_sim: {kind}: head dim {d} not a multiple of 8 up to 128")
            else:
                for t in (op["a"], op["b"], op["out"]):
                    _check_channels_last(t, kind)

    def build_plans(self, policy=None):
        self._advance(5, "build_plans")

    def build(self, modes=None):
        self.validate()
        self.build_operation_graph()
        self.create_execution_plans(modes or [heur_mode.A])
        self.check_support()
        self.build_plans()

    def get_workspace_size(self):
        if self._stage != 5:
            raise RuntimeError("cudnn_sim: get_workspace_size() before build_plans()")
        size = 0
        for op in self._ops:  # some bytes for the gradients, as real engines ask
            if op["kind"] in ("conv_dgrad", "conv_wgrad"):
                size += 64 + 4 * int(np.prod(op["out"]._dim))
            elif op["kind"] == "sdpa_backward":
                size += 4 * int(np.prod(op["q"]._dim))
        return size

    def execute(self, variant_pack, workspace, handle=None, override_uids=None,
                override_shapes=None, override_strides=None):
        if self._stage != 5:
            raise RuntimeError("cudnn_sim: execute() before build_plans()")
        pointers = {}
        for t, ptr in variant_pack.items():
            uid = t if isinstance(t, int) else t.get_uid()
            if not isinstance(ptr, int):
                raise TypeError("cudnn_sim: variant pack values must be device pointers (int)")
            pointers[uid] = ptr
        needed = {t._uid: t for t in self._tensors if not t._virtual}
        missing = [t._name for u, t in needed.items() if u not in pointers]
        extra = [u for u in pointers if u not in needed]
        if missing or extra:
            raise ValueError(f"cudnn_sim: the variant pack lacks {missing} or has unknown uids "
                             f"{extra}")
        h = handle if handle is not None else self.handle
        if not isinstance(h, _Handle):
            raise RuntimeError("cudnn_sim: execute() needs a handle")
        ws = self.get_workspace_size()
        if ws:
            cupy_sim._memory(workspace, ws, "cudnn execute's workspace")
        views = {u: _view(needed[u], pointers[u]) for u in needed}
        for op in self._ops:
            CALLS[op["kind"]] += 1
            _EXECUTE[op["kind"]](op, views)


def _view(t, ptr):
    """The tensor's elements in device memory, as a strided numpy view (writable)."""
    dt = _np_dtype(t._data_type)
    span = (sum((d - 1) * s for d, s in zip(t._dim, t._stride)) + 1) * dt.itemsize
    mem, _ = cupy_sim._memory(ptr, span, f"tensor {t._name!r}")
    flat = mem.view(dt)
    return np.lib.stride_tricks.as_strided(flat, t._dim, [s * dt.itemsize for s in t._stride])


# -- validation of each op's descriptors -----------------------------------------------------------

def _conv_out_dims(x, w, op):
    nd = len(x) - 2
    for k in ("pre", "post", "stride", "dilation"):
        if len(op[k]) != nd:
            raise ValueError(f"cudnn_sim: {op['kind']}: {k} has {len(op[k])} values for {nd} "
                             "spatial dims")
    if w[1] == 0 or x[1] % w[1] or w[0] % (x[1] // w[1]):
        raise ValueError(f"cudnn_sim: {op['kind']}: image channels {x[1]} and filter "
                         f"{w} do not make whole groups")
    return [x[0], w[0]] + [(n + lo + hi - (k - 1) * d - 1) // s + 1 for n, k, lo, hi, s, d in
                           zip(x[2:], w[2:], op["pre"], op["post"], op["stride"],
                               op["dilation"])]


def _validate_conv(graph, op):
    a, b, out = op["a"], op["b"], op["out"]
    for t in (a, b):
        _check_layout(t, op["kind"] + " input")
    if len(a._dim) not in (4, 5) or len(b._dim) != len(a._dim):
        raise ValueError(f"cudnn_sim: {op['kind']}: inputs must be 4-D or 5-D alike, got "
                         f"{a._dim} and {b._dim}")
    if out._dim is None:
        if op["kind"] != "conv_fprop":  # dgrad/wgrad: cuDNN cannot infer the output's dims
            raise ValueError(f"cudnn_sim: {op['kind']}: output dims not set")
        out._dim = _conv_out_dims(a._dim, b._dim, op)
        out._stride = [int(np.prod(out._dim[1:]))] + [
            int(np.prod(out._dim[2:]))] + [int(np.prod(out._dim[i + 1:])) for i in
                                           range(2, len(out._dim))]
    _check_layout(out, op["kind"] + " output")
    if op["kind"] == "conv_fprop":
        x, w, y = a._dim, b._dim, out._dim
    elif op["kind"] == "conv_dgrad":
        y, w, x = a._dim, b._dim, out._dim
    else:
        x, y, w = a._dim, b._dim, out._dim
    want = _conv_out_dims(x, w, op)
    if list(y) != want:
        raise ValueError(f"cudnn_sim: {op['kind']}: output-side dims {y} but image {x}, filter "
                         f"{w} and the padding/stride/dilation give {want}")
    if any(t._data_type != a._data_type for t in (b, out)):
        raise ValueError(f"cudnn_sim: {op['kind']}: mixed io data types")


def _validate_sdpa(graph, op):
    q, k, v = op["q"], op["k"], op["v"]
    for t in (q, k, v):
        _check_layout(t, "sdpa input")
        if len(t._dim) != 4:
            raise ValueError(f"cudnn_sim: sdpa: {t._name!r} must be 4-D (B, H, S, D), got "
                             f"{t._dim}")
    if k._dim != v._dim or q._dim[0] != k._dim[0] or q._dim[3] != k._dim[3] or \
            q._dim[1] % k._dim[1]:
        raise ValueError(f"cudnn_sim: sdpa: q {q._dim}, k {k._dim}, v {v._dim} disagree")
    outs = [("o", q._dim, None)]
    if op["kind"] == "sdpa":
        if op["stats"] is not None:
            outs.append(("stats", q._dim[:3] + [1], data_type.FLOAT))
    else:
        outs += [("dq", q._dim, None), ("dk", k._dim, None), ("dv", v._dim, None)]
        want = q._dim[:3] + [1]
        if op["stats"]._dim != want or op["stats"]._data_type != data_type.FLOAT:
            raise ValueError(f"cudnn_sim: sdpa_backward: stats must be {want} FLOAT, got "
                             f"{op['stats']._dim} {op['stats']._data_type}")
        if op["do"]._dim != q._dim:
            raise ValueError("cudnn_sim: sdpa_backward: dO must have q's dims")
    for role, dims, dt in outs:
        t = op[role]
        if op["kind"] == "sdpa_backward" and role == "o":
            continue
        if t._dim is None:
            raise ValueError(f"cudnn_sim: {op['kind']}: output {role} dims not set")
        if t._dim != list(dims):
            raise ValueError(f"cudnn_sim: {op['kind']}: output {role} dims {t._dim}, "
                             f"expected {list(dims)}")
        if dt is not None and t._data_type != dt:
            raise ValueError(f"cudnn_sim: {op['kind']}: {role} must be {dt.name}")


_VALIDATE = {"conv": _validate_conv, "sdpa": _validate_sdpa}


# -- computing (numpy, float64) -------------------------------------------------------------------

def _taps(w_dims):
    return itertools.product(*(range(k) for k in w_dims[2:]))


def _window(xpad, tap, op, out):
    return xpad[(slice(None), slice(None)) + tuple(
        slice(t * d, t * d + (n - 1) * s + 1, s) for t, d, n, s in
        zip(tap, op["dilation"], out, op["stride"]))]


def _pad(x, op):
    return np.pad(x, [(0, 0), (0, 0)] + list(zip(op["pre"], op["post"])))


def _grouped(a, g):
    return a.reshape((a.shape[0], g, a.shape[1] // g) + a.shape[2:])


def _conv_fprop(op, views):
    x, w = (views[op[r]._uid].astype(np.float64) for r in ("a", "b"))
    y_shape = tuple(op["out"]._dim)
    g = x.shape[1] // w.shape[1]
    xpad, wg = _pad(x, op), w.reshape((g, w.shape[0] // g) + w.shape[1:])
    acc = np.zeros((y_shape[0], g, y_shape[1] // g) + y_shape[2:])
    for tap in _taps(w.shape):
        xs = _grouped(_window(xpad, tap, op, y_shape[2:]), g)  # (N, G, Cg, *out)
        acc += np.einsum("ngc...,gkc->ngk...", xs, wg[(Ellipsis,) + tap])
    views[op["out"]._uid][...] = acc.reshape(y_shape)


def _conv_dgrad(op, views):
    dy, w = (views[op[r]._uid].astype(np.float64) for r in ("a", "b"))
    dx_shape = tuple(op["out"]._dim)
    g = dx_shape[1] // w.shape[1]
    wg = w.reshape((g, w.shape[0] // g) + w.shape[1:])
    dyg = _grouped(dy, g)
    dxpad = _pad(np.zeros(dx_shape), op)
    for tap in _taps(w.shape):
        part = np.einsum("ngk...,gkc->ngc...", dyg, wg[(Ellipsis,) + tap])
        _window(dxpad, tap, op, dy.shape[2:])[...] += part.reshape(
            (dy.shape[0], dx_shape[1]) + dy.shape[2:])
    crop = (slice(None), slice(None)) + tuple(slice(lo, lo + n) for lo, n in
                                              zip(op["pre"], dx_shape[2:]))
    views[op["out"]._uid][...] = dxpad[crop]


def _conv_wgrad(op, views):
    x, dy = (views[op[r]._uid].astype(np.float64) for r in ("a", "b"))
    w_shape = tuple(op["out"]._dim)
    g = x.shape[1] // w_shape[1]
    xpad, dyg = _pad(x, op), _grouped(dy, g)
    dw = np.zeros((g, w_shape[0] // g) + w_shape[1:])
    for tap in _taps(w_shape):
        xs = _grouped(_window(xpad, tap, op, dy.shape[2:]), g)
        dw[(Ellipsis,) + tap] = np.einsum("ngkp,ngcp->gkc", dyg.reshape(dyg.shape[:3] + (-1,)),
                                          xs.reshape(xs.shape[:3] + (-1,)))
    views[op["out"]._uid][...] = dw.reshape(w_shape)


def _scores(op, q, k):
    s = np.einsum("bhtd,bhsd->bhts", q, k) * op["scale"]
    if op["causal"]:  # use_causal_mask: the top-left diagonal, row i sees columns j <= i
        t, n = s.shape[-2:]
        s = np.where(np.arange(t)[:, None] >= np.arange(n)[None, :], s, -np.inf)
    return s


def _sdpa(op, views):
    q, k, v = (views[op[r]._uid].astype(np.float64) for r in ("q", "k", "v"))
    s = _scores(op, q, k)
    m = s.max(-1, keepdims=True)
    lse = m + np.log(np.exp(s - m).sum(-1, keepdims=True))
    views[op["o"]._uid][...] = np.einsum("bhts,bhsd->bhtd", np.exp(s - lse), v)
    if op["stats"] is not None:
        views[op["stats"]._uid][...] = lse


def _sdpa_backward(op, views):
    q, k, v, o, do, lse = (views[op[r]._uid].astype(np.float64) for r in
                           ("q", "k", "v", "o", "do", "stats"))
    p = np.exp(_scores(op, q, k) - lse)  # the softmax from the forward's statistics
    dv = np.einsum("bhts,bhtd->bhsd", p, do)
    dp = np.einsum("bhtd,bhsd->bhts", do, v)
    ds = p * (dp - (do * o).sum(-1, keepdims=True)) * op["scale"]
    views[op["dq"]._uid][...] = np.einsum("bhts,bhsd->bhtd", ds, k)
    views[op["dk"]._uid][...] = np.einsum("bhts,bhtd->bhsd", ds, q)
    views[op["dv"]._uid][...] = dv


_EXECUTE = {"conv_fprop": _conv_fprop, "conv_dgrad": _conv_dgrad, "conv_wgrad": _conv_wgrad,
            "sdpa": _sdpa, "sdpa_backward": _sdpa_backward}


# -- installing -----------------------------------------------------------------------------------

_saved = []


def install():
    """This module as `cudnn` (returns it)."""
    me = sys.modules[__name__]
    if sys.modules.get("cudnn") is not me:
        _saved.append(sys.modules.get("cudnn"))
        sys.modules["cudnn"] = me
    return me


def uninstall():
    if sys.modules.get("cudnn") is sys.modules[__name__]:
        prev = _saved.pop() if _saved else None
        if prev is None:
            del sys.modules["cudnn"]
        else:
            sys.modules["cudnn"] = prev


def installed():
    return sys.modules.get("cudnn") is sys.modules[__name__]

