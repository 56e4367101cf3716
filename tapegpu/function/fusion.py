"""Elementwise fusion of a traced graph: groups of elementwise ops become one generated kernel.

`fuse(graph)` returns a copy of an optimized graph in which every group of fusible nodes is one
`fused` node (the graph given is not changed: `concrete.graph` stays the IR of registry ops,
and saved models keep it). A node is fusible when its op's description has a C expression
(`c=` in its `def_op` entry: the generated code comes from those and nothing else, through
backends/kernels/codegen.py, the generator of every elementwise kernel), the params that
expression reads are numbers or bools (they become literals), it runs on `numpy`,
`cuda_emu` or `cuda`, and its output and every input have one floating dtype (some may be
bool instead: comparisons, `where`'s condition), with each input of a shape that broadcasts
to the output's (or of its size, for a reshape). On GPUs a comparison of integers (one
integer dtype in, bool out: labels against class ids) is fusible too; it has no floating
dtype of its own and joins the one group that uses it, else stays unfused.

Groups (on the CPU see HOST_MAX_ELEMENTS for which are fused). A node's level counts the
non-fusible nodes (and side effects, reads and random draws, in trace order) on the longest
path to it; fusible nodes of one level, size and dtype form one group (a group of one op, with
views, is left as it is: fusing it saves nothing), so no path between two members of a group
passes through an unfused node. A value is written to memory (an output of its kernel) only
when an unfused node, the graph's result or another group needs it; single-element values
needed elsewhere are recomputed instead. Each kernel computes its members (and those
recomputed values) once per element, in registers; on the CPU its first result goes into a
buffer of the replay's plan (graph.py).

A sum over leading axes of a group's value (`reduce_sum(v, axis=(0, ..., k-1))`, rows of two
elements or more: a bias gradient) ends the group's kernel instead of being a launch or a pass
of its own (one sum width per kernel). On the CPU, and in GPU kernels over at most
SUM_ROWS_PER_THREAD rows, the rows are added in order from +0.0, numpy's order for such sums,
so its bits. Over more rows a GPU kernel sums in two stages (codegen.fused_column_sums: many
threads per column, then a tree per column; 802816 x 64 runs on 4096 threads per column, not
1): the same bits at every run, another order than numpy's, so on `cuda_emu` (and on `cuda`,
whose unfused sum is CuPy's reduction) the sum differs from the unfused one by rounding: at
most (rows - 1) ulp of the sum of magnitudes, as any reordering. An op alone in its group (a launch or a pass of its own)
whose every use is in one later group of its shape is computed in that group (an activation's
mask, made right after the forward, joins its backward's kernel).

Targets, from one body of generated statements:

* `numpy`: C++ compiled by the system compiler (g++, `CXX`) into the private build cache of the
  emulator (tapegpu/backends/emu/build.py: owned by the user, verified by size and sha256
  before loading), called through `tapegpu.backends._cpu.call_fused` (one foreign call per
  kernel) or through ctypes where that extension was not built;
* `cuda_emu`: the same body as a CUDA C kernel, run by the emulator;
* `cuda`: that CUDA C kernel compiled by NVRTC through `cupy.RawModule` (`--fmad=false`).

Where no compiler works, `fuse` leaves the graph unfused and `unavailable_reason()` says why
(`python -m tapegpu info` shows it). `TAPEGPU_FUSION=0`, `options.fusion = False` (core/options.py) or
`tg.function(..., jit_compile=False)` turn fusion off.

Numerics: exact expressions (codegen.exact: arithmetic, comparisons, selects, fabs, sqrt) and
relabelling views give the unfused program's bits (no contraction into fused multiply-adds:
`-ffp-contract=off`, `--fmad=false`; a NaN result is NaN, its sign and payload may differ
where NaNs meet). Library functions (sin, exp, log, ...) are C's on the CPU and CUDA's on a
GPU, where the unfused program runs numpy's or CuPy's; tests/function/test_fusion.py measures
the difference on the op spec table's inputs and on NaN, infinities and subnormals, and docs/
function.md states the bound per function.
"""
import atexit
import collections
import copy
import ctypes
import functools
import hashlib
import heapq
import inspect
import math
import os
import queue
import threading

import numpy as np

from ..backends import emu
from ..backends.emu import build
from ..backends.kernels import codegen
from ..backends.kernels.codegen import broadcasts as _broadcasts, index
from ..backends.kernels.launch import NVRTC_OPTIONS, SUM_ROWS_PER_THREAD
from ..backends.kernels.launch import column_sum_parts as _column_sum_parts
from ..core import determinism
from ..core.options import options
from .graph import Node

try:
    from ..backends._cpu import call_fused
except ImportError:  # the compiled helpers are optional: ctypes calls the kernels instead
    call_fused = None

C_TYPES = codegen.C_TYPES
INT_TYPES = {"int32": "int", "int64": "long long"}  # compared (on GPUs), never computed on
ANY = ""  # the compute dtype of an integer comparison: that of the group it joins
TARGETS = ("numpy", "cuda_emu", "cuda")
GPU_TARGETS = ("cuda_emu", "cuda")  # where integer comparisons are fused
MAX_ARRAYS = 64  # inputs + outputs of one kernel (tapegpu.backends._cpu.call_fused's limit)
BLOCK = 256
MAX_BLOCKS = 1024
# A column sum on a GPU over more than SUM_ROWS_PER_THREAD rows takes two stages (codegen.
# fused_column_sums): the rows split into `parts` interleaved shares of at least that many
# rows, one thread per (share, column), up to BLOCK * MAX_BLOCKS threads (SUM_ROWS_PER_THREAD:
# launch.py's, bias_act_bwd's too; read here at each call).

_failed = {}  # target -> why it cannot compile (set at the first failure)


def unavailable_reason(target="numpy"):
    """Why fused kernels cannot be built for `target` here, or None when they can (or were
    not tried yet)."""
    return _failed.get(target)


def _size(shape):
    return math.prod(shape)


def column_sum_parts(n, cols):
    """Into how many interleaved shares of rows a GPU kernel's column sums over `n` elements
    of `cols` columns split (1: a thread per column walks every row in order, numpy's bits)."""
    return _column_sum_parts(n // cols, cols, BLOCK * MAX_BLOCKS, SUM_ROWS_PER_THREAD)


def launch_geometry(n, cols=None, n_sums=0):
    """The launches of a generated kernel over `n` elements on a GPU, with `n_sums` column
    sums of `cols` columns: [(entry name suffix, grid, block)], in order. Without sums (or
    with one share of rows) one grid-stride launch, a thread per element (per column with
    sums); else the two stages of codegen.fused_column_sums."""
    parts = column_sum_parts(n, cols) if n_sums else 1
    if parts == 1:
        return [("", min(MAX_BLOCKS, -(-(cols if n_sums else n) // BLOCK)), BLOCK)]
    return [("", -(-(parts * cols) // BLOCK), BLOCK),
            ("_sum", min(MAX_BLOCKS, n_sums * cols), codegen.column_sum_block(parts))]


def compute_dtype(graph, node):
    """The floating dtype `node` computes in: its output's and inputs' one floating dtype, the
    others bool (comparisons, `where`'s condition); None if there is none."""
    dtypes = {graph.meta[v][2] for v in (node.out, *node.ins)}
    floats = dtypes - {"bool"}
    if len(floats) != 1:
        return None
    if floats <= set(INT_TYPES):  # integers in, bool out: a comparison (on GPUs)
        return ANY if graph.meta[node.out][2] == "bool" and \
            node.dev.name in GPU_TARGETS else None
    return floats.pop() if floats <= set(C_TYPES) else None


@functools.lru_cache(maxsize=None)
def _defaults(op):
    """The params of `op`'s forward with a default value (what a call without them uses)."""
    try:
        params = list(inspect.signature(op.forward).parameters.values())[1 + len(op.args):]
    except (TypeError, ValueError):
        return {}
    return {p.name: p.default for p in params if p.default is not inspect.Parameter.empty}


def param_values(node):
    """{param name: its C literal} for the params `node.op.c` reads (the call's value or the
    forward's default), or None when one is missing or not a number or a bool."""
    read = codegen.names(node.op.c) - set(node.op.args)
    if not read:
        return {}
    given = {**_defaults(node.op), **node.params}
    values = {k: codegen.literal(given[k]) if k in given else None for k in read}
    return None if None in values.values() else values


def fusible(graph, node):
    """Whether `node` can be part of a generated kernel (see the module docstring)."""
    if node.kind != "op" or node.op.c is None or node.dev is None or \
            node.dev.name not in TARGETS or node.dev.name in _failed or \
            param_values(node) is None:
        return False
    _, shape, dtype, _ = graph.meta[node.out]
    size = _size(shape)
    if compute_dtype(graph, node) is None or size == 0:
        return False
    for i in node.ins:
        _, ishape, idtype, idev = graph.meta[i]
        if idev is not node.dev or not (
                _broadcasts(ishape, shape) or (_size(ishape) == size and len(node.ins) == 1)):
            return False
    return True


def _ctype(graph, v):
    """The C type of value `v` in a kernel: `bool`, an integer type or the kernel's `T`."""
    dtype = graph.meta[v][2]
    return "bool" if dtype == "bool" else INT_TYPES.get(dtype, "T")


class Kernel:
    """One fused group: the nodes it computes (in order), the values it reads (`leaves`) and
    writes (`outputs`), its element count `n` (of every value it computes but single-element
    ones) and dtype."""

    def __init__(self, graph, nodes, leaves, outputs, n, dtype, dev, sums=(), cols=None):
        self.graph, self.nodes, self.leaves, self.outputs = graph, nodes, leaves, outputs
        self.n, self.dtype, self.dev = n, dtype, dev
        # column sums ending the group: (value summed, the reduce_sum's output), over the
        # leading n // cols rows of elements, each a sum of `cols` columns
        self.sums, self.cols = tuple(sums), cols
        self.parts = column_sum_parts(n, cols) if self.sums else 1  # on a GPU
        self.stmts = _statements(graph, nodes, leaves, outputs, [v for v, _ in self.sums])
        self.key = hashlib.sha256(
            f"{dtype}\n{self.n}\n{self.cols}\n{self.stmts}".encode()).hexdigest()[:16]
        self.name = f"tg_fused_{self.key}"
        self._cuda = self._host = None   # the sources, made when first asked
        summing = {out for _, out in self.sums}
        self.ops = [node.op.name for node in nodes] + [
            node.op.name for node in graph.nodes if node.kind == "op" and node.out in summing]

    @property
    def results(self):
        """The values the kernel writes: its outputs, then its column sums."""
        return tuple(self.outputs) + tuple(out for _, out in self.sums)

    def _types(self):
        g = self.graph
        return [_ctype(g, v) for v in self.leaves], [_ctype(g, v) for v in self.results]

    def cuda_source(self):
        """The kernel as CUDA C: what NVRTC compiles for `cuda` and the emulator runs. With
        column sums over at most SUM_ROWS_PER_THREAD rows, a thread per column walks the rows
        in order (numpy's order for a sum over leading axes: its bits); over more, the sums
        take two stages on `parts * cols` threads (codegen.fused_column_sums: deterministic,
        within rounding of the sum in order)."""
        if self._cuda is None:   # asked by the build, the runner and the tests: made once
            self._cuda = codegen.fused_cuda(self.name, self.dtype, *self._types(), self.stmts,
                                            len(self.sums), self.cols, self.parts)
        return self._cuda

    def launches(self):
        """The kernel's launches on a GPU: [(entry name, grid, block)], in order."""
        return [(self.name + suffix, grid, block)
                for suffix, grid, block in launch_geometry(self.n, self.cols, len(self.sums))]

    @property
    def exact(self):
        """Whether every expression of the kernel is exact (codegen.exact: no library call)."""
        return all(codegen.exact(n.op.c) for n in self.nodes)

    def host_source(self):
        """The kernel as C++ for the CPU, arrays passed as one pointer array (`call_fused`'s
        calling convention): blocks of LANES elements where it calls library functions, a
        plain loop the compiler vectorizes where it does not; column sums add the rows in
        order (numpy's bits)."""
        if self._host is None:   # 4 ms for W1's 600 statements; asked up to four times
            self._host = codegen.fused_host(self.name, self.dtype, *self._types(), self.stmts,
                                            None if self.exact else LANES, len(self.sums),
                                            self.cols)
        return self._host

    def __str__(self):
        return f"{self.name}[{', '.join(self.ops)}]"


def _statements(graph, nodes, leaves, outputs, summed=()):
    """The kernel's work for flat element `i`, as codegen's statements: ("load", name, array
    number, index template with `{i}`), ("let", name, C expression of earlier names), ("store",
    name, output number), ("sum", name, sum number). Every value of the group has n elements
    and is computed at its flat element `i` (C order: a reshape keeps it); an input is read
    where broadcasting (or a reshape) maps its consumer's element `i`; single-element values
    are read, and computed, at index 0. An op's expression gets its inputs and its params."""
    number = {v: j for j, v in enumerate(leaves)}
    computed = {}  # value -> its name, numbered in order (equal groups: one source)
    stmts, loads = [], {}

    def name(v, count):  # by the value's C type: v<k> (T), b<k> (bool), a<k> (T, loaded), ...
        return f"{codegen.PREFIX[_ctype(graph, v)][v not in nodes_out]}{count}"

    def value(v, consumer_shape):
        if v in computed:
            return computed[v]
        at = index(graph.meta[v][1], consumer_shape, "{i}")
        if (v, at) not in loads:
            loads[v, at] = name(v, len(loads))
            stmts.append(("load", loads[v, at], number[v], at))
        return loads[v, at]
    nodes_out = {n.out for n in nodes}
    for node in nodes:
        out_shape = graph.meta[node.out][1]
        values = dict(zip(node.op.args, (value(i, out_shape) for i in node.ins)))
        values.update(param_values(node))
        computed[node.out] = name(node.out, len(computed))
        stmts.append(("let", computed[node.out], codegen.substitute(node.op.c, values), None))
    stmts += [("store", computed[v], j, None) for j, v in enumerate(outputs)]
    stmts += [("sum", computed[v], k, None) for k, v in enumerate(summed)]
    return tuple(stmts)


LANES = 8
# On the CPU a group whose expressions are all exact (arithmetic, comparisons, selects, fabs,
# sqrt: no library call, see codegen.exact) is fused from two ops on, at any size: its plain
# loop, vectorized by the compiler, does numpy's arithmetic in one pass instead of one per op
# and one call instead of one per op (a ReLU's backward and its bias gradient: one pass where
# numpy makes three, and numpy's `where` is slow). A group that calls library functions is
# fused up to HOST_MAX_ELEMENTS elements when it has at least HOST_MIN_OPS ops: there the
# per-op dispatch that fusion removes is most of the time (W1: 16 elements, 15x faster than
# numpy by hand). Above it, numpy's vectorized loops (SIMD library functions) writing into
# the plan's reused buffers beat a generated loop of scalar library calls (W5's gradient at
# 64 x 256: 1.7x slower fused), and a group of a few such ops saves less than its call costs
# (W5's and W6's groups of 2-4 ops at 640 elements: 4-7% slower fused). On a GPU every group
# is fused: there each op is a kernel launch.
HOST_MAX_ELEMENTS = 4096
HOST_MIN_OPS = 8
# -O1 and the vectorizer: the lanes' arithmetic in SIMD registers, compiled in about a second
# for the 600 statements of a long chain (-O2 takes five times as long and runs no faster)
HOST_FLAGS = ("-O1", "-ftree-vectorize")
EXACT_FLAGS = ("-O3",)  # a plain loop of arithmetic, vectorized


# -- grouping ---------------------------------------------------------------------------------
def groups(graph):
    """The kernels of `graph`, a list of Kernel (groups of one op, with views, are left out)."""
    nodes = graph.nodes
    fus = [fusible(graph, n) for n in nodes]
    level = {}
    ordered = 0  # the level of the last side effect, read or random draw, in trace order
    for k, n in enumerate(nodes):
        base = max((level.get(i, 0) for i in n.ins), default=0)
        if n.kind != "op":
            base = max(base, ordered)
            ordered = base + 1
        if n.out is not None:
            level[n.out] = base if fus[k] else base + 1
    key = {}
    producer = {}
    for k, n in enumerate(nodes):
        if fus[k]:
            shape = graph.meta[n.out][1]
            key[n.out] = (level[n.out], _size(shape), compute_dtype(graph, n), n.dev.name)
            producer[n.out] = n
    # an op alone in its group (no kernel: a launch of its own on a GPU, a pass of its own on
    # the CPU) whose every use is in one later group of its size and shape moves into that
    # group (computed where it is used: a mask made early and used late costs no launch)
    alone = collections.Counter(key[v] for v, n in producer.items() if not n.op.view)
    results = {v for kind, v in graph.outputs if kind == "v"}
    users = {}
    for k, n in enumerate(nodes):
        for i in n.ins:
            users.setdefault(i, []).append(n)
    for k in reversed(range(len(nodes))):
        n = nodes[k]
        any_dtype = fus[k] and key[n.out][2] == ANY  # an integer comparison: never alone
        if not fus[k] or n.out in results or not users.get(n.out) or n.op.view or \
                (alone[key[n.out]] != 1 and not any_dtype):
            continue
        uses = users[n.out]
        if all(u.out in key and u.kind == "op" and
               graph.meta[u.out][1] == graph.meta[n.out][1] for u in uses):
            targets = {key[u.out] for u in uses}
            target = next(iter(targets))
            if len(targets) == 1 and target[2] != ANY and (target[1:] == key[n.out][1:] or (
                    any_dtype and (target[1], target[3]) == (key[n.out][1], key[n.out][3]))):
                alone[key[n.out]] -= 1
                key[n.out] = targets.pop()
                alone[key[n.out]] += 1
    for k, n in enumerate(nodes):  # an integer comparison that joined no group: unfused
        if fus[k] and key[n.out][2] == ANY:
            fus[k] = False
            del key[n.out], producer[n.out]
    # a column sum of a group's value ends the group's kernel (one width per kernel)
    sums, cols = {}, {}  # group key -> [(summed value, sum's output)]; group key -> width
    absorbed = set()
    for k, n in enumerate(nodes):
        width = _column_sum(graph, n, producer)
        if width is None:
            continue
        gkey = key[n.ins[0]]
        if cols.setdefault(gkey, width) == width:
            sums.setdefault(gkey, []).append((n.ins[0], n.out))
            absorbed.add(k)
    # values a kernel must write: needed by unfused nodes, the result, or other groups
    needed = {v for kind, v in graph.outputs if kind == "v"}
    for k, n in enumerate(nodes):
        if k in absorbed:
            continue
        for i in n.ins:
            if i in producer and (not fus[k] or (key[i] != key[n.out] and key[i][1] > 1)):
                needed.add(i)
    written = {v for v in needed if v in producer}
    members = {}
    for v in producer:
        if v in written:
            members.setdefault(key[v], []).append(v)
    kernels = []
    for gkey in list(members) + [g for g in sums if g not in members]:
        outs, summed = members.get(gkey, []), sums.get(gkey, [])
        order, leaves, seen = [], [], set()

        def visit(v):
            if v in seen:
                return
            seen.add(v)
            n = producer.get(v)
            inline = n is not None and (key[v] == gkey or (v not in written and key[v][1] == 1))
            if not inline:
                leaves.append(v)
                return
            for i in n.ins:
                visit(i)
            order.append(n)
        for v in outs + [v for v, _ in summed]:
            visit(v)
        outs = sorted(outs)
        if len(leaves) + len(outs) + len(summed) > MAX_ARRAYS:
            continue  # too many arrays for one call: those nodes stay unfused
        # one op (and views) in a kernel saves nothing; on the CPU see HOST_MAX_ELEMENTS
        ops = sum(not n.op.view for n in order) + len(summed)
        if ops < 2 or gkey[3] == "numpy" and not (
                all(codegen.exact(n.op.c) for n in order) or
                (ops >= HOST_MIN_OPS and gkey[1] <= HOST_MAX_ELEMENTS)):
            continue
        first = order[-1]
        kernels.append(Kernel(graph, order, leaves, outs, gkey[1], gkey[2], first.dev,
                              summed, cols.get(gkey)))
    return kernels


def _column_sum(graph, node, producer):
    """The width (elements per row) of `node` if it is a sum over leading axes of a fusible
    value (`reduce_sum(v, axis=(0, ..., k-1))`, k below v's rank) that can end the kernel
    computing v; else None. Rows of at least two elements: numpy adds those in order from
    +0.0, as the kernels do (a sum to one element is numpy's pairwise sum)."""
    if node.kind != "op" or node.op.reduction != "add" or node.dev is None or \
            node.dev.name not in TARGETS or len(node.ins) != 1 or \
            node.ins[0] not in producer or set(node.params) - {"axis", "keepdims"}:
        return None
    _, shape, dtype, _ = graph.meta[node.ins[0]]
    axis = node.params.get("axis")
    axis = (axis,) if isinstance(axis, int) else tuple(axis or ())
    if not axis or axis != tuple(range(len(axis))) or len(axis) >= len(shape) or \
            graph.meta[node.out][2] != dtype or producer[node.ins[0]].dev is not node.dev:
        return None
    width = _size(shape[len(axis):])
    return width if width >= 2 and _size(shape) else None


def fuse(graph, on_ready=None):
    """A copy of `graph` with its fusible groups replaced by `fused` nodes (or `graph` itself
    when nothing is fused).

    With `on_ready`, a first call does not wait for the system compiler: when some kernel of
    the CPU (`numpy`) is not in the build cache yet and `options.compile_in_background` is on
    (and op determinism is not),
    `graph` itself is returned at once (the unfused replay) and the kernels are compiled on a
    background thread, which calls `on_ready(fused copy)` when they are ready."""
    if not options.fusion:
        return graph
    kernels = groups(graph)
    if on_ready is not None and options.compile_in_background and kernels and \
            not determinism.enabled() and \
            all(k.dev.name == "numpy" for k in kernels) and \
            any(_compiled.get(("numpy", k.host_source())) is None and
                build.cached_host_library(k.host_source(), k.name, _host_flags(k)) is None
                for k in kernels):
        def job():
            fused = _fused(graph, kernels)
            if fused is not graph:
                on_ready(fused)
        _background.submit(job)
        return graph
    return _fused(graph, kernels)


def _fused(graph, kernels):
    _build_together(kernels)
    fused = []
    for k in kernels:
        run = _runner(k)
        if run is not None:  # a `fused` node: the kernel's leaves in, its outputs out
            fused.append(Node("fused", run, tuple(k.leaves), k, k.results, k.dev))
    if not fused:
        return graph
    # what the kernels do not replace stays, if something still reads it (as `optimize`'s DCE)
    replaced = {v for f in fused for v in f.out}
    live = {v for kind, v in graph.outputs if kind == "v"}
    for f in fused:
        live.update(f.ins)
    kept = []
    for n in reversed(graph.nodes):
        if n.out is None or (n.out in live and n.out not in replaced):
            live.update(n.ins)
            kept.append(n)
    kept.reverse()
    out = copy.copy(graph)
    out.nodes = _schedule(kept, fused)
    out.fused = [f.params for f in fused]
    return out


class _Background:
    """One daemon thread that compiles kernels in the order they were asked for (one compiler
    process at a time, beside the program's own work). A process waits for it at exit (the
    kernels then are in the cache for the next one); a forked child starts without jobs."""

    def __init__(self):
        self._reset()
        atexit.register(self.wait)
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._reset)

    def _reset(self):
        self._jobs = queue.Queue()
        self._thread = None
        self._lock = threading.Lock()

    def submit(self, job):
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, daemon=True,
                                                name="tapegpu-compile")
                self._thread.start()
        self._jobs.put(job)

    def _work(self):
        while True:
            job = self._jobs.get()
            try:
                job()
            except Exception:  # noqa: BLE001  (_runner keeps a compiler's failure for info)
                pass
            finally:
                self._jobs.task_done()

    def wait(self):
        """Returns when every kernel asked for so far is compiled (or failed to)."""
        self._jobs.join()


_background = _Background()
wait_compiled = _background.wait


def _schedule(nodes, fused):
    """Unfused nodes and fused ones in a topological order close to the trace's (side effects,
    reads and random draws keep their order)."""
    items = [(k, n) for k, n in enumerate(nodes)] + \
        [(len(nodes) + j, f) for j, f in enumerate(fused)]
    made_by = {}
    for idx, n in items:
        for v in (n.out if isinstance(n.out, tuple) else (n.out,)):
            if v is not None:
                made_by[v] = idx
    deps = {idx: set() for idx, _ in items}
    last = None
    for idx, n in items:
        deps[idx].update(made_by[i] for i in n.ins if i in made_by)
        if n.kind not in ("op", "fused"):
            if last is not None:
                deps[idx].add(last)
            last = idx
    # priority: an unfused node its trace position, a kernel just after its last input's
    # producer (it runs as soon as it can: later nodes wait for its outputs)
    prio = {}
    for idx, n in items:  # the unfused nodes come first in `items`
        prio[idx] = idx if n.kind != "fused" else \
            max((prio.get(d, -1) for d in deps[idx]), default=-1) + 0.5
    users = {idx: [] for idx, _ in items}
    for idx, ds in deps.items():
        for d in ds:
            users[d].append(idx)
    missing = {idx: len(ds) for idx, ds in deps.items()}
    by_idx = dict(items)
    ready = [(prio[idx], idx) for idx, m in missing.items() if m == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        _, idx = heapq.heappop(ready)
        order.append(by_idx[idx])
        for u in users[idx]:
            missing[u] -= 1
            if missing[u] == 0:
                heapq.heappush(ready, (prio[u], u))
    if len(order) != len(items):
        raise AssertionError("tg.function fusion: the fused graph has a cycle")
    return order


# -- running ----------------------------------------------------------------------------------
_compiled = {}  # (target, source) -> callable on arrays


def _runner(kernel):
    """`run(*leaf arrays) -> tuple of output arrays` for `kernel` on its device, or None when
    this target cannot compile it (the reason is kept for unavailable_reason)."""
    target = kernel.dev.name
    try:
        if target == "numpy":
            return _host_runner(kernel)
        return _device_runner(kernel)
    except Exception as e:  # a missing or failing compiler: run unfused, say why
        _failed[target] = f"{type(e).__name__}: {e}".strip()[:500]
        return None


def _build_together(kernels):
    """The plan's kernels not compiled yet, built as one library per target and set of flags
    (build.build_libraries: a library's fixed cost is most of a small kernel's build); each
    runner then finds its kernel in the cache. The real GPU's NVRTC is not concerned."""
    groups = collections.defaultdict(list)
    for k in kernels:
        target = k.dev.name
        if target == "numpy":
            source = k.host_source()
            if ("numpy", source) not in _compiled:
                groups["numpy", _host_flags(k)].append((source, k.name))
        elif target == "cuda_emu":
            source = k.cuda_source()
            if (target, source) not in _compiled:   # "<code>": RawModule(code=...)'s name
                groups[target, ()].append((source, "<code>"))
    try:
        for (target, flags), sources in groups.items():
            if len(sources) >= 2:
                if target == "numpy":
                    build.build_host_libraries(sources, flags)
                else:
                    build.build_libraries(sources)
    except Exception:  # noqa: BLE001  (the kernels are then built one by one, errors and all)
        pass


def _host_flags(kernel):
    return EXACT_FLAGS if kernel.exact else HOST_FLAGS


def _host_runner(kernel):
    """`run(*leaves)` and `run.into(*leaves, out)` (the first result written into `out`, a
    buffer of the replay's plan; a new array where `out` is None)."""
    source = kernel.host_source()
    fn = _compiled.get(("numpy", source))
    if fn is None:
        path, _ = build.build_host_library(source, kernel.name, _host_flags(kernel))
        fn = _compiled[("numpy", source)] = getattr(ctypes.CDLL(str(path)), kernel.name)
    address = ctypes.cast(fn, ctypes.c_void_p).value
    meta = kernel.graph.meta
    in_dtypes = [np.dtype(meta[v][2]) for v in kernel.leaves]
    outs_meta = [(meta[v][1], np.dtype(meta[v][2])) for v in kernel.results]
    values = tuple(kernel.leaves) + kernel.results
    counts = tuple(_size(meta[v][1]) for v in values)
    sizes = tuple(np.dtype(meta[v][2]).itemsize for v in values)
    n, n_out, empty = kernel.n, len(outs_meta), np.empty
    rest = outs_meta[1:]
    if call_fused is None:
        fn.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_longlong]
        fn.restype = None

        def call(arrays, outs):
            arrays = [np.ascontiguousarray(a, d) for a, d in zip(arrays, in_dtypes)]
            ptrs = (ctypes.c_void_p * (len(arrays) + n_out))(
                *[a.ctypes.data for a in arrays + outs])
            fn(ptrs, n)
            return outs
    else:
        def call(arrays, outs):
            try:
                call_fused(address, n, n_out, counts, sizes, *arrays, *outs)
            except (BufferError, ValueError, TypeError):  # a strided view or a numpy scalar
                arrays = [np.ascontiguousarray(a, d) for a, d in zip(arrays, in_dtypes)]
                call_fused(address, n, n_out, counts, sizes, *arrays, *outs)
            return outs

    def run(*arrays):
        return call(arrays, [empty(s, d) for s, d in outs_meta])

    def into(*arrays):
        *arrays, out = arrays
        if out is None:
            return run(*arrays)
        return call(arrays, [out] + [empty(s, d) for s, d in rest])
    run.into = into
    return run


def _module(dev, source):
    """The CUDA C `source` loaded for `dev`: by the emulator, or by NVRTC through CuPy."""
    if dev.name == "cuda_emu":  # many kernels per process: no stacks kept between launches
        return emu.RawModule(code=source, keep_stacks=False)
    with dev.context():  # the module belongs to its device's GPU
        return dev.xp.RawModule(code=source, options=NVRTC_OPTIONS)


def _device_runner(kernel):
    dev = kernel.dev
    xp = dev.xp
    source = kernel.cuda_source()
    entries = _compiled.get((dev.name, source))
    if entries is None:
        module = _module(dev, source)
        entries = _compiled[(dev.name, source)] = [
            module.get_function(entry) for entry, _, _ in kernel.launches()]
    fn = entries[0]
    meta = kernel.graph.meta
    in_dtypes = [np.dtype(meta[v][2]) for v in kernel.leaves]
    outs_meta = [(meta[v][1], np.dtype(meta[v][2])) for v in kernel.results]
    n = kernel.n
    launches, name = dev.launches, kernel.name
    (_, grid, block), *second = kernel.launches()
    context = dev.context if hasattr(dev, "context") else None
    if not second:
        def launch(arrays, outs):
            fn((grid,), (block,), (*arrays, *outs, np.int64(n)))
            launches[name] += 1
    else:  # a two-stage column sum: the partial sums in a scratch array, then their sums
        fn2 = entries[1]
        (_, grid2, block2), = second
        n_sums, scratch = len(kernel.sums), len(kernel.sums) * kernel.parts * kernel.cols
        dtype = np.dtype(kernel.dtype)

        def launch(arrays, outs):
            part = xp.empty(scratch, dtype)
            fn((grid,), (block,), (*arrays, *outs[:-n_sums], part, np.int64(n)))
            fn2((grid2,), (block2,), (part, *outs[-n_sums:]))
            launches[name] += 1
            launches[name + "_sum"] += 1

    def run(*arrays):
        if context is not None:
            with context():  # the kernel runs on its arrays' GPU
                return run_here(arrays)
        return run_here(arrays)

    def run_here(arrays):
        arrays = [xp.ascontiguousarray(xp.asarray(a), d) for a, d in zip(arrays, in_dtypes)]
        outs = [xp.empty(s, d) for s, d in outs_meta]
        launch(arrays, outs)
        return outs
    return run
