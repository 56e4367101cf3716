"""The launch layer shared by the CUDA backend and the emulator.

A ``KernelSet`` knows, for every custom op, which kernel in ``cuda_kernels/``
implements it, how to size its grid, how to allocate its outputs and how to
pass its arguments. It is written against an array module ``xp`` (numpy or
cupy) and a ``load_module(path, names)`` function returning an object with
``.get_function(name)`` (``cupy.RawModule`` or ``tapegpu.backends.emu.RawModule``), so
the same code runs on a GPU and in the emulator::

    >>> import numpy as np
    >>> from tapegpu.backends.kernels import KernelSet
    >>> ks = KernelSet.emulated()
    >>> ks.act_fwd("elu", np.array([0.0, 2.0]))
    array([0., 2.])
    >>> dict(ks.launches)
    {'tapegpu_elu_fwd_f64': 1}

Arguments are passed as CuPy passes them: sizes as ``numpy.int64``, float
scalars in the kernel's dtype, flags as ``numpy.int32``.
"""

import collections
import glob
import math
import os
import re

import numpy as np

from ...core.dtypes import name_of


def _kernel_dir():
    """Where the kernels are: the repository's top-level cuda_kernels/ is the package data
    `tapegpu/cuda_kernels/` of an install (setup.py maps it), so an installed package loads
    them from there; a source checkout that runs uninstalled or installed in place (`pip
    install -e`) loads its own cuda_kernels/ beside tapegpu/. Nothing else is searched (no
    environment variable, no other distribution's directory, not the working directory)."""
    package = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    installed = os.path.join(package, "cuda_kernels")
    checkout = os.path.dirname(package)
    if not os.path.isdir(installed) and \
            os.path.isfile(os.path.join(checkout, "pyproject.toml")):
        return os.path.join(checkout, "cuda_kernels")
    return installed


KERNEL_DIR = _kernel_dir()

DTYPES = {"float32": "f32", "float64": "f64"}

# NVRTC's options for every kernel tapegpu compiles on a GPU, hand-written (cuda_kernels/) and
# generated (tg.function's fused kernels) alike: one FMA policy. `--fmad=false` keeps a * b + c
# two roundings, as numpy, g++ (ISO C++: -ffp-contract=off) and so the emulator compute it:
# a kernel's result on a GPU then equals the emulator's bit for bit where it calls no
# library function.
NVRTC_OPTIONS = ("-std=c++17", "--fmad=false")

# A column sum over more rows than this takes several threads per column (bias_act_bwd, and
# the generated kernels' sums of tapegpu/function/fusion.py)
SUM_ROWS_PER_THREAD = 16


def column_sum_parts(rows, cols, threads, rows_per_thread=SUM_ROWS_PER_THREAD):
    """Into how many interleaved shares of rows a GPU column sum over `rows` rows of `cols`
    columns splits: one up to `rows_per_thread` rows (a thread per column adds every row in
    order, numpy's bits), else shares of at least that many rows, up to one thread per share
    and column of `threads`."""
    return max(1, min(-(-rows // rows_per_thread), threads // cols))


def _activations():
    """The activations of activations.cu: one `TAPEGPU_ACTIVATION(name, T, suffix)` line per
    name and dtype, each giving `<name>_fwd`, `<name>_bwd`, `bias_<name>_fwd` and
    `bias_<name>_bwd`."""
    with open(os.path.join(KERNEL_DIR, "activations.cu")) as f:
        names = re.findall(r"^TAPEGPU_ACTIVATION\((\w+), \w+, \w+\)", f.read(), re.M)
    return tuple(dict.fromkeys(names))


ACTIVATIONS = _activations()

def _op_files():
    """op -> the .cu file (in KERNEL_DIR, without extension) that defines its entry points
    `tapegpu_<op>_<f32|f64>`, read from the sources: written out, or by a macro with the dtype
    suffix as its parameter (`tapegpu_<op>_##SUFFIX`), or by a TAPEGPU_ACTIVATION line."""
    files = {}
    for path in sorted(glob.glob(os.path.join(KERNEL_DIR, "*.cu"))):
        name = os.path.basename(path)[:-3]
        with open(path) as f:
            for op in re.findall(r"void tapegpu_(\w+?)_(?:##SUFFIX|f32|f64)\s*\(", f.read()):
                files[op] = name
    for a in ACTIVATIONS:
        for op in (f"{a}_fwd", f"{a}_bwd", f"bias_{a}_fwd", f"bias_{a}_bwd"):
            files[op] = "activations"
    return files


_OP_FILES = _op_files()

# The one table: (op, dtype name) -> (file, kernel name).
KERNELS = {(op, dtype): (f, f"tapegpu_{op}_{suffix}")
           for op, f in _OP_FILES.items() for dtype, suffix in DTYPES.items()}


def _multi_tensors():
    """Tensors per launch of the multi-tensor kernels (TAPEGPU_MULTI in optimizers.cu)."""
    with open(os.path.join(KERNEL_DIR, "optimizers.cu")) as f:
        return int(re.search(r"^#define TAPEGPU_MULTI (\d+)$", f.read(), re.M).group(1))


MULTI_TENSORS = _multi_tensors()


def kernel_names(file):
    """The entry points the table expects in ``cuda_kernels/<file>.cu``."""
    return sorted(name for f, name in KERNELS.values() if f == file)


def kernel_files():
    return sorted(set(f for f, _ in KERNELS.values()))


class KernelSet:
    """Launch the custom kernels on arrays of ``xp``.

    Args:
      xp: ``numpy`` (emulator) or ``cupy``.
      load_module: ``load_module(path, names)`` -> object with ``get_function``.
      block: threads per block (a multiple of 32, at most 1024).
      max_blocks: grid-size cap; kernels loop (grid-stride) over what is left.
      context: a function returning a context manager entered around each module load and
        launch (a GPU's `cupy.cuda.Device`: kernels run on the GPU of their arrays, whatever
        CuPy's current device is), or None.
    """

    def __init__(self, xp, load_module, *, block=256, max_blocks=1024, kernel_dir=KERNEL_DIR,
                 context=None):
        if block % 32 or not 32 <= block <= 1024:
            raise ValueError(f"block must be a multiple of 32 in [32, 1024], got {block}")
        self.xp, self.load_module = xp, load_module
        self.block, self.max_blocks, self.kernel_dir = block, max_blocks, kernel_dir
        self.context = context
        self.launches = collections.Counter()
        self._modules = {}

    @classmethod
    def emulated(cls, order="forward", seed=0, **kwargs):
        """A KernelSet on numpy arrays running the kernels in ``tapegpu.backends.emu``."""
        from .. import emu

        def load(path, names):
            return emu.RawModule(path=path, order=order, seed=seed)

        return cls(np, load, **kwargs)

    # ------------------------------------------------------------ plumbing
    def _kernel(self, op, dtype):
        key = (op, name_of(np.dtype(dtype)))
        if key not in KERNELS:
            raise TypeError(f"no {op} kernel for dtype {key[1]}; supported: {', '.join(DTYPES)}")
        file, name = KERNELS[key]
        if file not in self._modules:
            path = os.path.join(self.kernel_dir, file + ".cu")
            self._modules[file] = self.load_module(path, kernel_names(file))
        return self._modules[file].get_function(name), name

    def _launch(self, op, dtype, grid, block, args):
        if self.context is None:
            fn, name = self._kernel(op, dtype)
            fn((grid,), (block,), args)
        else:
            with self.context():
                fn, name = self._kernel(op, dtype)
                fn((grid,), (block,), args)
        self.launches[name] += 1

    def _elementwise_grid(self, n):
        return min(self.max_blocks, -(-n // self.block))

    def _row_block(self, cols):
        """Threads for one-block-per-row kernels: a multiple of 32 covering the row, capped."""
        return min(self.block, max(32, 32 * -(-cols // 32)))

    def _float(self, x, what):
        x = self.xp.asarray(x, order="C")  # (ascontiguousarray would make 0-d arrays 1-d)
        if name_of(x.dtype) not in DTYPES:
            raise TypeError(f"{what} must be float32 or float64, got {x.dtype}")
        return x

    @staticmethod
    def _check_batched(g, saved, op):
        if g.dtype != saved.dtype or g.shape[g.ndim - saved.ndim:] != saved.shape:
            raise ValueError(f"{op}: cotangent {g.shape} {g.dtype} must be batch_shape + {saved.shape} "
                             f"with dtype {saved.dtype}")

    # ------------------------------------------------------------ activations
    def act_fwd(self, name, x):
        """y = act(x) elementwise."""
        x = self._float(x, f"{name} input")
        y = self.xp.empty_like(x)
        if x.size:
            self._launch(f"{name}_fwd", x.dtype, self._elementwise_grid(x.size), self.block,
                         (x, y, np.int64(x.size)))
        return y

    def act_bwd(self, name, g, saved):
        """dx = g * act'(saved), g.shape == batch_shape + saved.shape, one launch."""
        g, saved = self._float(g, f"{name} cotangent"), self._float(saved, f"{name} saved value")
        self._check_batched(g, saved, f"{name}_bwd")
        dx = self.xp.empty_like(g)
        if g.size:
            self._launch(f"{name}_bwd", g.dtype, self._elementwise_grid(g.size), self.block,
                         (g, saved, dx, np.int64(g.size), np.int64(saved.size)))
        return dx

    def bias_act_fwd(self, name, x, b):
        """y = act(x + b) with b of shape (x.shape[-1],)."""
        x, b = self._float(x, "bias_act input"), self._float(b, "bias")
        if name not in ACTIVATIONS:
            raise ValueError(f"unknown activation {name!r}; known: {', '.join(ACTIVATIONS)}")
        if x.ndim < 1 or b.shape != x.shape[-1:] or b.dtype != x.dtype:
            raise ValueError(f"bias_act: bias {b.shape} {b.dtype} must be ({x.shape[-1:]},) {x.dtype}")
        y = self.xp.empty_like(x)
        if x.size:
            cols = x.shape[-1]
            self._launch(f"bias_{name}_fwd", x.dtype, self._elementwise_grid(x.size), self.block,
                         (x, b, y, np.int64(x.size // cols), np.int64(cols)))
        return y

    def bias_act_bwd(self, name, g, saved):
        """(dx, db) of y = act(x + b): dx = g * act'(saved) and db its sum over every axis but
        the last, in one launch (g and saved of one shape, rank >= 1). Up to SUM_ROWS_PER_THREAD
        rows a thread per column adds every row in order from +0.0 (the bits of the unfused
        sum); over more rows, `parts` threads per column each add an interleaved share, and the
        launch's last block adds the shares in order: the same bits at every run, the rows'
        sum up to rounding (at most (rows - 1) ulp of the sum of magnitudes)."""
        g, saved = self._float(g, f"bias_{name} cotangent"), self._float(saved, f"bias_{name} saved value")
        if name not in ACTIVATIONS:
            raise ValueError(f"unknown activation {name!r}; known: {', '.join(ACTIVATIONS)}")
        if g.ndim < 1 or g.shape != saved.shape or g.dtype != saved.dtype:
            raise ValueError(f"bias_{name}_bwd: cotangent {g.shape} {g.dtype} must have the saved "
                             f"value's shape {saved.shape} and dtype {saved.dtype}, rank >= 1")
        rows, cols = self._rows(saved)
        dx = self.xp.empty_like(g)
        if not g.size:
            return dx, self.xp.zeros(g.shape[-1:], g.dtype)
        db = self.xp.empty(cols, g.dtype)
        parts = self.column_sum_parts(rows, cols)
        if parts == 1:  # neither `part` nor `count` is read
            part, count = db, self.xp.empty(1, np.uint32)
        else:
            part, count = self.xp.empty(parts * cols, g.dtype), self.xp.zeros(1, np.uint32)
        self._launch(f"bias_{name}_bwd", g.dtype, -(-(parts * cols) // self.block), self.block,
                     (g, saved, dx, db, part, count, np.int64(rows), np.int64(cols),
                      np.int64(parts)))
        return dx, db

    def column_sum_parts(self, rows, cols):
        """Into how many shares of rows `bias_act_bwd` splits a column sum (`column_sum_parts`
        for this set's largest grid)."""
        return column_sum_parts(rows, cols, self.block * self.max_blocks)

    # ------------------------------------------------------------ row-wise normalisation
    def _rows(self, x):
        cols = x.shape[-1] if x.ndim else 1
        return (x.size // cols if cols else 0), cols

    def _softmax_fwd(self, op, x):
        x = self._float(x, f"{op} input")
        y = self.xp.empty_like(x)
        rows, cols = self._rows(x)
        if x.size:
            self._launch(op, x.dtype, min(rows, self.max_blocks), self._row_block(cols),
                         (x, y, np.int64(rows), np.int64(cols)))
        return y

    def _softmax_bwd(self, op, g, y):
        g, y = self._float(g, f"{op} cotangent"), self._float(y, f"{op} saved output")
        self._check_batched(g, y, op)
        dx = self.xp.empty_like(g)
        rows, cols = self._rows(y)
        if g.size:
            rows_g = g.size // cols
            self._launch(op, g.dtype, min(rows_g, self.max_blocks), self._row_block(cols),
                         (g, y, dx, np.int64(rows_g), np.int64(rows), np.int64(cols)))
        return dx

    def softmax_fwd(self, x):
        """Softmax over the last axis."""
        return self._softmax_fwd("softmax_fwd", x)

    def log_softmax_fwd(self, x):
        """Log-softmax over the last axis."""
        return self._softmax_fwd("log_softmax_fwd", x)

    def softmax_bwd(self, g, y):
        """dx = y * (g - sum(g * y)); g may have leading batch axes."""
        return self._softmax_bwd("softmax_bwd", g, y)

    def log_softmax_bwd(self, g, y):
        """dx = g - exp(y) * sum(g); g may have leading batch axes."""
        return self._softmax_bwd("log_softmax_bwd", g, y)

    def _labels(self, labels, rows, cols):
        labels = self.xp.asarray(labels, order="C")
        if labels.dtype.kind not in "iu" or labels.shape != (rows,):
            raise ValueError(f"labels must be integers of shape ({rows},), got {labels.shape} {labels.dtype}")
        return labels.astype(np.int64, copy=False)

    def sparse_xent_fwd(self, logits, labels):
        """(loss, probs) for logits (rows, cols) and integer labels (rows,).

        loss[r] = logsumexp(logits[r]) - logits[r, labels[r]] (NaN for a label
        outside [0, cols)); probs = exp(logits) / sum(exp(logits)) per row."""
        z = self._float(logits, "logits")
        if z.ndim != 2:
            raise ValueError(f"sparse_xent: logits must be (rows, cols), got {z.shape}")
        rows, cols = z.shape
        labels = self._labels(labels, rows, cols)
        loss, probs = self.xp.empty(rows, z.dtype), self.xp.empty_like(z)
        if rows and not cols:
            loss[...] = np.nan
        elif z.size:
            self._launch("sparse_xent_fwd", z.dtype, min(rows, self.max_blocks), self._row_block(cols),
                         (z, labels, loss, probs, np.int64(rows), np.int64(cols)))
        return loss, probs

    def sparse_xent_bwd(self, g, probs, labels):
        """dz = g[:, None] * (probs - onehot(labels))."""
        g, p = self._float(g, "cotangent"), self._float(probs, "probs")
        rows, cols = p.shape
        if g.shape != (rows,) or g.dtype != p.dtype:
            raise ValueError(f"sparse_xent_bwd: g must be ({rows},) {p.dtype}, got {g.shape} {g.dtype}")
        labels = self._labels(labels, rows, cols)
        dz = self.xp.empty_like(p)
        if p.size:
            self._launch("sparse_xent_bwd", p.dtype, self._elementwise_grid(p.size), self.block,
                         (g, p, labels, dz, np.int64(rows), np.int64(cols)))
        return dz

    # ------------------------------------------------------------ un-broadcast
    def unbroadcast(self, g, batch_ndim, in_shape):
        """Sum g (batch_shape + full_shape) to batch_shape + in_shape, where
        in_shape broadcasts to full_shape: one launch per run of reduced axes."""
        g = self._float(g, "cotangent")
        batch_shape, in_shape = g.shape[:batch_ndim], tuple(in_shape)
        target = batch_shape + in_shape
        groups = reduction_groups(g.shape, batch_ndim, in_shape)
        if g.size == 0:
            return self.xp.zeros(target, g.dtype)
        out = g
        # Reduce the rightmost run first; each launch removes one run.
        while any(reduced for _, reduced in groups):
            k = max(i for i, (_, reduced) in enumerate(groups) if reduced)
            outer = math.prod(s for s, _ in groups[:k])
            inner = math.prod(s for s, _ in groups[k + 1:])
            reduce = groups[k][0]
            res = self.xp.empty(outer * inner, g.dtype)
            if inner == 1:
                self._launch("sum_last_fwd", g.dtype, min(outer, self.max_blocks),
                             self._row_block(reduce), (out, res, np.int64(outer), np.int64(reduce)))
            else:
                self._launch("sum_middle_fwd", g.dtype, self._elementwise_grid(outer * inner),
                             self.block, (out, res, np.int64(outer), np.int64(reduce), np.int64(inner)))
            out, groups = res, groups[:k] + groups[k + 1:]
        return (out.copy() if out is g else out).reshape(target)

    # ------------------------------------------------------------ optimizers
    def _in_place(self, arrays, what):
        p = arrays[0]
        for a in arrays:
            if a.dtype != p.dtype or a.shape != p.shape or not a.flags.c_contiguous:
                raise ValueError(f"{what}: every array must be C-contiguous with the parameter's shape "
                                 f"{p.shape} and dtype {p.dtype}; got {a.shape} {a.dtype}")
        if name_of(p.dtype) not in DTYPES:
            raise TypeError(f"{what}: parameters must be float32 or float64, got {p.dtype}")

    def _rate(self, rate, dtype, what):
        """(op suffix, kernel argument) of a step's rate: a number is passed by value; a 0-d
        array of the parameters' dtype on the device (the rate a captured graph computes at
        each step) is passed by address to the `_devlr` entry point."""
        if isinstance(rate, (int, float, np.number)):
            return "", dtype.type(rate)
        if not isinstance(rate, self.xp.ndarray) or rate.shape != () or rate.dtype != dtype:
            raise TypeError(f"{what}: the rate must be a number or a 0-d device array of the "
                            f"parameters' dtype {dtype}, got {type(rate).__name__} "
                            f"{getattr(rate, 'shape', '')} {getattr(rate, 'dtype', '')}")
        return "_devlr", rate

    def sgd_update(self, p, g, v, lr, momentum=0.0, nesterov=False):
        """Keras SGD in place on p and the velocity v (v may be None when momentum == 0). `lr`
        is a number or a 0-d device array of p's dtype (read by the kernel)."""
        if v is None:
            if momentum:
                raise ValueError("sgd_update: momentum needs a velocity slot v")
            v = self.xp.zeros_like(p)
        self._in_place((p, g, v), "sgd_update")
        if p.size:
            t = p.dtype.type
            suffix, lr = self._rate(lr, p.dtype, "sgd_update")
            self._launch("sgd_update" + suffix, p.dtype, self._elementwise_grid(p.size),
                         self.block, (p, g, v, np.int64(p.size), lr, t(momentum),
                                      np.int32(bool(nesterov))))

    def adam_update(self, p, g, m, v, lr_t, b1, b2, eps):
        """Keras Adam in place on p, m, v; lr_t = lr sqrt(1 - b2^t) / (1 - b1^t), a number or
        a 0-d device array of p's dtype (read by the kernel)."""
        self._in_place((p, g, m, v), "adam_update")
        if p.size:
            t = p.dtype.type
            suffix, lr_t = self._rate(lr_t, p.dtype, "adam_update")
            self._launch("adam_update" + suffix, p.dtype, self._elementwise_grid(p.size),
                         self.block, (p, g, m, v, np.int64(p.size), lr_t, t(b1), t(b2), t(eps)))

    def _multi_update(self, op, tensors, scalars, absent_slot=None, rate=None):
        """`op` over every tensor, in launches of up to MULTI_TENSORS tensors (their addresses
        and sizes are kernel arguments: nothing is copied to the device). `tensors` is a list of
        (parameter, gradient, slots...) tuples of one float dtype. A slot of `absent_slot`
        index may be None in every tuple: the parameter is passed in its place, and the kernel
        neither reads nor writes it (its `has_v` argument, first of `scalars`, is 0).
        `scalars[rate]` is the step's rate: a number, or a 0-d device array of the dtype (the
        `_devlr` kernel reads it)."""
        if not tensors:
            return
        dtype = tensors[0][0].dtype
        for arrays in tensors:
            self._in_place([a for a in arrays if a is not None], op)
            if arrays[0].dtype != dtype:
                raise ValueError(f"{op}: every parameter must have one dtype; got {dtype} and "
                                 f"{arrays[0].dtype}")
        if absent_slot is not None and tensors[0][absent_slot] is None:
            tensors = [a[:absent_slot] + (a[0],) + a[absent_slot + 1:] for a in tensors]
        t = dtype.type
        suffix = ""
        if rate is not None:  # the step's rate: by value, or by address (`_devlr`)
            suffix, arg = self._rate(scalars[rate], dtype, op)
            scalars = scalars[:rate] + (arg,) + scalars[rate + 1:]
        scalars = tuple(t(s) if isinstance(s, float) else s for s in scalars)
        op += suffix
        tensors = [a for a in tensors if a[0].size]
        for start in range(0, len(tensors), MULTI_TENSORS):
            chunk = tensors[start:start + MULTI_TENSORS]
            total = sum(a[0].size for a in chunk)
            pad = MULTI_TENSORS - len(chunk)  # unused argument slots: size 0
            arrays = tuple(a[i] for i in range(len(chunk[0])) for a in chunk + [chunk[0]] * pad)
            sizes = tuple(np.int64(a[0].size) for a in chunk) + (np.int64(0),) * pad
            self._launch(op, dtype, self._elementwise_grid(total), self.block,
                         arrays + sizes + scalars)

    def sgd_multi_update(self, params, grads, velocities, lr, momentum=0.0, nesterov=False):
        """`sgd_update` on every parameter (one dtype), bit for bit the same, in one launch per
        MULTI_TENSORS non-empty parameters; the velocities may be None when momentum == 0.
        `lr` as in `sgd_update`."""
        if momentum and any(v is None for v in velocities):
            raise ValueError("sgd_multi_update: momentum needs a velocity slot for every "
                             "parameter")
        if any(v is None for v in velocities) and not all(v is None for v in velocities):
            raise ValueError("sgd_multi_update: give a velocity for every parameter or none")
        has_v = np.int32(bool(velocities) and velocities[0] is not None)
        self._multi_update("sgd_multi_update", list(zip(params, grads, velocities)),
                           (has_v, _number(lr), float(momentum), np.int32(bool(nesterov))),
                           absent_slot=2, rate=1)

    def adam_multi_update(self, params, grads, ms, vs, lr_t, b1, b2, eps):
        """`adam_update` on every parameter (one dtype), bit for bit the same, in one launch per
        MULTI_TENSORS non-empty parameters. `lr_t` as in `adam_update`."""
        self._multi_update("adam_multi_update", list(zip(params, grads, ms, vs)),
                           (_number(lr_t), float(b1), float(b2), float(eps)), rate=0)


    # ------------------------------------------------------------ recurrent cells (rnn.cu)
    def _cell_inputs(self, what, x, h, b, state, gates, b_shape):
        x, h = self._float(x, f"{what} x"), self._float(h, f"{what} h")
        b, state = self._float(b, f"{what} bias"), self._float(state, f"{what} state")
        u = state.shape[-1] if state.ndim else 0
        want = state.shape[:-1] + (gates * u,)
        if state.ndim < 1 or x.shape != want or h.shape != want or b.shape != b_shape(u) or \
                not x.dtype == h.dtype == b.dtype == state.dtype:
            raise ValueError(f"{what}: x and h must be {want}, bias {b_shape(u)} and the state "
                             f"{state.shape}, all of one dtype; got x {x.shape} {x.dtype}, h "
                             f"{h.shape} {h.dtype}, bias {b.shape} {b.dtype}, state "
                             f"{state.shape} {state.dtype}")
        return x, h, b, state, state.size // u if u else 0, u

    def lstm_cell_fwd(self, x, h, b, c):
        """[h; c] of an LSTM step, (2,) + c.shape, from the gates' projections x and h
        (c.shape[:-1] + (4u,)), the bias b (4u,) and the previous cell state c."""
        x, h, b, c, rows, u = self._cell_inputs("lstm_cell", x, h, b, c, 4, lambda u: (4 * u,))
        out = self.xp.empty((2,) + c.shape, c.dtype)
        if c.size:
            self._launch("lstm_cell_fwd", c.dtype, self._elementwise_grid(c.size), self.block,
                         (x, h, b, c, out, np.int64(rows), np.int64(u)))
        return out

    def lstm_cell_bwd(self, g, x, h, b, c, out):
        """(dz, dc_prev): the cotangent of z = x + h + b and of the previous cell state, for
        the cotangent g of lstm_cell_fwd's output `out` (one launch; no batch axes)."""
        x, h, b, c, rows, u = self._cell_inputs("lstm_cell_bwd", x, h, b, c, 4,
                                                lambda u: (4 * u,))
        g, out = self._float(g, "lstm_cell_bwd cotangent"), self._float(out, "lstm_cell output")
        if g.shape != out.shape or out.shape != (2,) + c.shape or g.dtype != c.dtype:
            raise ValueError(f"lstm_cell_bwd: cotangent {g.shape} {g.dtype} and output "
                             f"{out.shape} must be {(2,) + c.shape} {c.dtype}")
        dz, dc = self.xp.empty_like(x), self.xp.empty_like(c)
        if c.size:
            self._launch("lstm_cell_bwd", c.dtype, self._elementwise_grid(c.size), self.block,
                         (g, x, h, b, c, out, dz, dc, np.int64(rows), np.int64(u)))
        return dz, dc

    def gru_cell_fwd(self, x, h, b, s):
        """The new state of a GRU step (reset_after) from the projections x and h
        (s.shape[:-1] + (3u,), no biases), the biases b (2, 3u) and the previous state s."""
        x, h, b, s, rows, u = self._cell_inputs("gru_cell", x, h, b, s, 3, lambda u: (2, 3 * u))
        out = self.xp.empty_like(s)
        if s.size:
            self._launch("gru_cell_fwd", s.dtype, self._elementwise_grid(s.size), self.block,
                         (x, h, b, s, out, np.int64(rows), np.int64(u)))
        return out

    def gru_cell_bwd(self, g, x, h, b, s):
        """(dxh, ds) for the cotangent g (s.shape) of gru_cell_fwd's output: dxh
        (s.shape[:-1] + (2, 3u)) holds the cotangents of x and of h, which are also the
        biases' rows'; ds the previous state's (one launch; no batch axes)."""
        x, h, b, s, rows, u = self._cell_inputs("gru_cell_bwd", x, h, b, s, 3,
                                                lambda u: (2, 3 * u))
        g = self._float(g, "gru_cell_bwd cotangent")
        if g.shape != s.shape or g.dtype != s.dtype:
            raise ValueError(f"gru_cell_bwd: cotangent {g.shape} {g.dtype} must be {s.shape} "
                             f"{s.dtype}")
        dxh, ds = self.xp.empty(s.shape[:-1] + (2, 3 * u), s.dtype), self.xp.empty_like(s)
        if s.size:
            self._launch("gru_cell_bwd", s.dtype, self._elementwise_grid(s.size), self.block,
                         (g, x, h, b, s, dxh, ds, np.int64(rows), np.int64(u)))
        return dxh, ds


def _number(x):
    """A Python float for a number (a device array is kept: a kernel reads it)."""
    return float(x) if isinstance(x, (int, float, np.number)) else x


def reduction_groups(g_shape, batch_ndim, in_shape):
    """Collapse the axes of g into runs of kept or reduced axes.

    Returns [(size, reduced)], adjacent runs alternating. Batch axes are kept;
    a full axis is reduced where in_shape (right-aligned) has 1 and full has
    more; axes of size 1 are dropped (they can join either kind)."""
    full_shape = tuple(g_shape[batch_ndim:])
    if len(in_shape) > len(full_shape):
        raise ValueError(f"unbroadcast: {in_shape} has more axes than {full_shape}")
    padded = (1,) * (len(full_shape) - len(in_shape)) + tuple(in_shape)
    for i, f in zip(padded, full_shape):
        if i not in (1, f):
            raise ValueError(f"unbroadcast: {tuple(in_shape)} does not broadcast to {full_shape}")
    axes = [(s, False) for s in g_shape[:batch_ndim]]
    axes += [(f, i == 1 and f != 1) for i, f in zip(padded, full_shape)]
    groups = []
    for size, reduced in axes:
        if size == 1:
            continue
        if groups and groups[-1][1] == reduced:
            groups[-1] = (groups[-1][0] * size, reduced)
        else:
            groups.append((size, reduced))
    return groups


def parity_cases(seed=0, shape=(37, 70)):
    """Every kernel of the table on fixed inputs of `shape` (rows, columns), as `(label, run)`
    pairs: `run(ks, put)` calls one `KernelSet` method with host arrays placed by `put` (numpy
    -> the set's arrays, a fresh copy each time) and returns its outputs as a tuple (in-place
    updates: the updated arrays). `python -m tapegpu selftest` runs each on a GPU and in the
    emulator and compares them, at a small shape and at one that wraps the grid."""
    rng = np.random.default_rng(seed)
    rows, cols = shape
    for name in DTYPES:
        dt = np.dtype(name)
        x = rng.uniform(-3.0, 3.0, (rows, cols)).astype(dt)
        g = rng.uniform(-1.0, 1.0, (rows, cols)).astype(dt)
        b = rng.uniform(-1.0, 1.0, cols).astype(dt)
        probs = rng.uniform(0.01, 1.0, (rows, cols)).astype(dt)
        probs /= probs.sum(axis=-1, keepdims=True)
        labels = rng.integers(0, cols, rows)
        g_rows = rng.uniform(-1.0, 1.0, rows).astype(dt)
        g3 = rng.uniform(-1.0, 1.0, (5, rows, cols)).astype(dt)
        for a in ACTIVATIONS:
            yield f"{a}_fwd {name}", lambda ks, put, a=a, x=x: (ks.act_fwd(a, put(x)),)
            yield f"{a}_bwd {name}", lambda ks, put, a=a, g=g, x=x: (
                ks.act_bwd(a, put(g), put(x)),)
            yield f"bias_{a}_fwd {name}", lambda ks, put, a=a, x=x, b=b: (
                ks.bias_act_fwd(a, put(x), put(b)),)
            yield f"bias_{a}_bwd {name}", lambda ks, put, a=a, g=g, x=x: tuple(
                ks.bias_act_bwd(a, put(g), put(x)))
        for op in ("softmax", "log_softmax"):
            yield f"{op}_fwd {name}", lambda ks, put, op=op, x=x: (
                getattr(ks, op + "_fwd")(put(x)),)
            yield f"{op}_bwd {name}", lambda ks, put, op=op, g=g, p=probs: (
                getattr(ks, op + "_bwd")(put(g), put(p)),)
        yield f"sparse_xent_fwd {name}", lambda ks, put, x=x, y=labels: \
            tuple(ks.sparse_xent_fwd(put(x), put(y)))
        yield f"sparse_xent_bwd {name}", lambda ks, put, g=g_rows, p=probs, y=labels: (
            ks.sparse_xent_bwd(put(g), put(p), put(y)),)
        u = max(1, cols // 4)   # recurrent cells of u units over `rows` examples
        z4, z3 = (rng.uniform(-2.0, 2.0, (2, rows, k * u)).astype(dt) for k in (4, 3))
        c, hc = (rng.uniform(-1.0, 1.0, shp).astype(dt) for shp in ((rows, u), (2, rows, u)))
        b4, b3 = (rng.uniform(-1.0, 1.0, shp).astype(dt) for shp in ((4 * u,), (2, 3 * u)))
        yield f"lstm_cell_fwd {name}", lambda ks, put, z=z4, b=b4, c=c: (
            ks.lstm_cell_fwd(put(z[0]), put(z[1]), put(b), put(c)),)

        def lstm_bwd(ks, put, z=z4, b=b4, c=c, g=hc):
            args = (put(z[0]), put(z[1]), put(b), put(c))
            return tuple(ks.lstm_cell_bwd(put(g), *args, ks.lstm_cell_fwd(*args)))
        yield f"lstm_cell_bwd {name}", lstm_bwd
        yield f"gru_cell_fwd {name}", lambda ks, put, z=z3, b=b3, s=c: (
            ks.gru_cell_fwd(put(z[0]), put(z[1]), put(b), put(s)),)
        yield f"gru_cell_bwd {name}", lambda ks, put, z=z3, b=b3, s=c, g=hc: tuple(
            ks.gru_cell_bwd(put(g[0]), put(z[0]), put(z[1]), put(b), put(s)))
        for in_shape in ((1, cols), (rows, 1), ()):  # sum_middle_fwd, sum_last_fwd, both
            yield f"unbroadcast to {in_shape} {name}", lambda ks, put, g=g3, s=in_shape: (
                ks.unbroadcast(put(g), 0, s),)

        def sgd(ks, put, x=x, g=g, b=b):
            p, v = put(x), put(g * 0.5)
            ks.sgd_update(p, put(g), v, 0.1, momentum=0.9, nesterov=True)
            return p, v

        def adam(ks, put, x=x, g=g, probs=probs):
            p, m, v = put(x), put(g * 0.1), put(probs)
            ks.adam_update(p, put(g), m, v, 0.01, 0.9, 0.999, 1e-7)
            return p, m, v
        yield f"sgd_update {name}", sgd
        yield f"adam_update {name}", adam

        # the rate by address (a captured graph's): `put` places the 0-d rate on the device
        def sgd_devlr(ks, put, x=x, g=g, dt=dt):
            p, v = put(x), put(g * 0.5)
            ks.sgd_update(p, put(g), v, put(np.array(0.1, dt)), momentum=0.9, nesterov=True)
            return p, v

        def adam_devlr(ks, put, x=x, g=g, probs=probs, dt=dt):
            p, m, v = put(x), put(g * 0.1), put(probs)
            ks.adam_update(p, put(g), m, v, put(np.array(0.01, dt)), 0.9, 0.999, 1e-7)
            return p, m, v
        yield f"sgd_update_devlr {name}", sgd_devlr
        yield f"adam_update_devlr {name}", adam_devlr
        # multi-tensor updates: a matrix, a 0-d, an empty and a vector parameter
        parts = [lambda a: a, lambda a: np.array(a[3, 5]), lambda a: a[:0, 0].copy(),
                 lambda a: a[7].copy()]

        def sgd_multi(ks, put, x=x, g=g):
            ps, gs, vs = ([put(f(a)) for f in parts] for a in (x, g, g * 0.5))
            ks.sgd_multi_update(ps, gs, vs, 0.1, momentum=0.9, nesterov=True)
            return tuple(ps + vs)

        def adam_multi(ks, put, x=x, g=g, probs=probs):
            ps, gs, ms, vs = ([put(f(a)) for f in parts] for a in (x, g, g * 0.1, probs))
            ks.adam_multi_update(ps, gs, ms, vs, 0.01, 0.9, 0.999, 1e-7)
            return tuple(ps + ms + vs)
        yield f"sgd_multi_update {name}", sgd_multi
        yield f"adam_multi_update {name}", adam_multi

        def sgd_multi_devlr(ks, put, x=x, g=g, dt=dt):
            ps, gs, vs = ([put(f(a)) for f in parts] for a in (x, g, g * 0.5))
            ks.sgd_multi_update(ps, gs, vs, put(np.array(0.1, dt)), momentum=0.9, nesterov=True)
            return tuple(ps + vs)

        def adam_multi_devlr(ks, put, x=x, g=g, probs=probs, dt=dt):
            ps, gs, ms, vs = ([put(f(a)) for f in parts] for a in (x, g, g * 0.1, probs))
            ks.adam_multi_update(ps, gs, ms, vs, put(np.array(0.01, dt)), 0.9, 0.999, 1e-7)
            return tuple(ps + ms + vs)
        yield f"sgd_multi_update_devlr {name}", sgd_multi_devlr
        yield f"adam_multi_update_devlr {name}", adam_multi_devlr
