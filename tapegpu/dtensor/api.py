"""DTensor's functions on one device: a DTensor is an ordinary tensor holding the global value,
plus a `Layout` kept beside it as metadata.

Every op, gradient, `tg.function` and Keras layer therefore works on DTensors unchanged and gives
the numbers TensorFlow's DTensor gives (its SPMD expansion computes the same global result); the
layout says how TensorFlow would split the value, and `unpack` returns those pieces. Nothing is
faster: there is one device doing all the work.

Where layouts live. A side table maps a tensor's id to (weak reference, layout); an entry goes
when its tensor does. Ops learn nothing of it: while any DTensor is alive (or a `default_mesh` /
`call_with_layout` scope is open) an observer of the op registry gives each op's output a
layout, by this rule:

* an elementwise op (add, multiply, relu, ...) keeps its inputs' sharding: output axis i takes the
  spec of the first input with a layout whose matching axis (aligned from the right, as
  broadcasting aligns them) has the output's size there; an axis that was broadcast is
  unsharded;
* a reduction keeps the specs of the axes it does not reduce; `matmul` (a @ b) keeps a's specs
  on the batch axes and rows and b's on the columns; `transpose` permutes the specs;
* any other op (reshapes, softmax, concatenation, ...) gives a replicated layout on the mesh of
  its inputs (TensorFlow's DTensor would often keep a sharded axis: `relayout` states it);
* an op with no DTensor input gives nothing, except inside `default_mesh` (replicated on that
  mesh) and `call_with_layout` (the requested layout).

Until a DTensor exists the observer is not installed and ops pay nothing; once none is left it
leaves (at the latest at the next op, see `_update_observer`). A traced
`tg.function` replays its graph without per-op calls, so its results carry no layout (the ops
see layouts while it traces); relayout a result where it matters. DVariables keep their layout
across assignments and calls.
"""
import contextlib
import threading
import weakref

import numpy as np

from .. import backends as _backend
from ..core import config as _config
from ..core.device import copy_to
from ..core.tensor import Tensor, Variable, convert_to_tensor
from ..errors import InvalidArgumentError
from ..ops import EXPORTS as _ops
from ..ops import registry as _registry
from .layout import MATCH, UNSHARDED, Layout, Mesh, canonical_device

_table = {}  # id(tensor) -> (weakref to it, Layout)
_lock = threading.RLock()  # re-entered when a tensor dies (its callback) while one is tagged
_scopes = threading.local()  # .meshes (default_mesh), .layouts (call_with_layout): stacks
_open_scopes = [0]  # scopes open in all threads


def _update_observer():
    """Installs the observer while it has work; removes it when it has none and it is the
    last observer. Removing an earlier one could happen while an op iterates over the
    observers (a weak reference's callback runs wherever a tensor dies) and make that op skip
    the next one (a trace's); the last one is removed later instead, when it finds nothing to
    do."""
    want = bool(_table) or _open_scopes[0] > 0
    observers = _registry.OBSERVERS
    if want and _observe not in observers:
        observers.append(_observe)
    elif not want and observers and observers[-1] is _observe:
        observers.pop()


def _forget(key):
    def drop(_ref):
        with _lock:
            entry = _table.get(key)
            if entry is not None and entry[0] is _ref:
                del _table[key]
            _update_observer()
    return drop


def _set(t, layout):
    """Gives the tensor `t` the layout (its shape checked against it) and returns `t`."""
    _check_shape(t.shape, layout, "relayout")
    key = id(t)
    with _lock:
        _table[key] = (weakref.ref(t, _forget(key)), layout)
        _update_observer()
    return t


def _get(t):
    entry = _table.get(id(t))
    if entry is not None and entry[0]() is t:
        return entry[1]
    return None


def _fits(shape, layout):
    return len(shape) == layout.rank and all(
        n <= 1 or size % n == 0 for size, n in zip(shape, layout.shape))


def _check_shape(shape, layout, fn):
    shape = tuple(shape)
    if len(shape) != layout.rank:
        raise ValueError(f"dtensor.{fn}: a tensor of rank {len(shape)} (shape {list(shape)}) "
                         f"cannot take the layout of rank {layout.rank} "
                         f"{layout.sharding_specs}")
    for axis, (size, n) in enumerate(zip(shape, layout.shape)):
        if n > 1 and size % n:
            raise ValueError(f"dtensor.{fn}: axis {axis} of shape {list(shape)} has size "
                             f"{size}, which the {n} shards of mesh dimension "
                             f"{layout.sharding_specs[axis]!r} do not divide evenly")


# -- propagation ---------------------------------------------------------------------------------
def _observe(op, inputs, out, params):
    if not _table and not _open_scopes[0]:
        with _lock:
            _update_observer()
        return
    forced = getattr(_scopes, "layouts", None)
    if forced:
        layout = forced[-1]
        if _fits(tuple(out.shape), layout):
            _set(out, layout)
            return
    tagged = [(t, _get(t)) for t in inputs]
    tagged = [(t, lay) for t, lay in tagged if lay is not None]
    if not tagged:
        meshes = getattr(_scopes, "meshes", None)
        if meshes:
            _set(out, Layout.replicated(meshes[-1], len(out.shape)))
        return
    mesh = tagged[0][1].mesh
    shape = tuple(out.shape)
    specs = None
    if getattr(op, "elementwise", False):
        specs = _elementwise_specs(tagged, mesh, shape)
    else:
        rule = _RULES.get(op.name)
        if rule is None and "axis" in params and "keepdims" in params and len(inputs) == 1:
            rule = _reduction_specs
        if rule is not None:
            specs = rule(inputs, [_get(t) for t in inputs], params)
    if specs is None or len(specs) != len(shape) or not _fits(shape, Layout(specs, mesh)):
        specs = [UNSHARDED] * len(shape)
    _set(out, Layout(specs, mesh))


def _elementwise_specs(tagged, mesh, shape):
    """Output axis i takes the spec of the first input (with a layout on `mesh`) whose axis
    aligned with i from the right has the output's size there."""
    specs = [UNSHARDED] * len(shape)
    for axis in range(len(shape)):
        for t, lay in tagged:
            k = axis - (len(shape) - lay.rank)
            if k < 0 or lay.mesh != mesh or t.shape[k] != shape[axis]:
                continue
            spec = lay.sharding_specs[k]
            if spec not in (UNSHARDED, MATCH) and spec not in specs:
                specs[axis] = spec
                break
    return specs


def _reduction_specs(inputs, layouts, params):
    """A reduction keeps the specs of the axes it does not reduce (a kept axis of size 1 is
    unsharded)."""
    (lay,) = layouts
    if lay is None:
        return None
    axis = params["axis"]
    if axis is None:
        axis = range(lay.rank)
    elif isinstance(axis, int):
        axis = (axis,)
    axes = {a % lay.rank for a in axis} if lay.rank else set()
    if params["keepdims"]:
        return [UNSHARDED if i in axes else s for i, s in enumerate(lay.sharding_specs)]
    return [s for i, s in enumerate(lay.sharding_specs) if i not in axes]


def _matmul_specs(inputs, layouts, params):
    """a (..., m, k) @ b (..., k, n): the batch axes and m keep a's specs, n keeps b's (the
    contracted k's sharding is summed away, as TensorFlow's SPMD expansion does)."""
    if params:
        return None
    la, lb = layouts
    a, b = inputs
    rank = max(len(a.shape), len(b.shape))
    specs = [UNSHARDED] * rank
    if la is not None and la.rank >= 2:
        specs[rank - la.rank:rank - 1] = la.sharding_specs[:-1]
    if lb is not None and lb.rank >= 2:
        n = lb.sharding_specs[-1]
        if n not in specs:
            specs[-1] = n
    return specs


def _transpose_specs(inputs, layouts, params):
    (lay,) = layouts
    perm = params.get("perm")
    if lay is None or perm is None or len(perm) != lay.rank:
        return None
    return [lay.sharding_specs[p] for p in perm]


_RULES = {"matmul": _matmul_specs, "transpose": _transpose_specs}


@contextlib.contextmanager
def _scope(name, value):
    stack = getattr(_scopes, name, None)
    if stack is None:
        stack = []
        setattr(_scopes, name, stack)
    stack.append(value)
    with _lock:
        _open_scopes[0] += 1
        _update_observer()
    try:
        yield
    finally:
        stack.pop()
        with _lock:
            _open_scopes[0] -= 1
            _update_observer()


# -- meshes --------------------------------------------------------------------------------------
def _local_device_names(device_type):
    kind = (device_type or preferred_device_type()).upper()
    return [d.name for d in _config.list_logical_devices(kind)]


def create_mesh(mesh_dims=None, mesh_name="", devices=None, device_type=None,
                use_xla_spmd=False):
    """A mesh over devices of this process, as `tf.experimental.dtensor.create_mesh`.
    `mesh_dims`: a list of (name, size) pairs or a dict (default: one dimension 'x' over all
    the devices); `devices`: device names (default: every logical device of `device_type`, or
    of `preferred_device_type()`). Their count must be the mesh's size. The devices are
    tapegpu's logical devices (`tg.config.set_logical_device_configuration` makes several
    CPUs), which all compute on their one physical device.

    >>> cpu = tg.config.list_physical_devices("CPU")[0]
    >>> tg.config.set_logical_device_configuration(
    ...     cpu, [tg.config.LogicalDeviceConfiguration()] * 4)
    >>> mesh = tg.experimental.dtensor.create_mesh([("batch", 2), ("model", 2)],
    ...                                            device_type="CPU")
    >>> mesh.dim_names, mesh.num_local_devices()
    (['batch', 'model'], 4)
    """
    if devices is None:
        devices = _local_device_names(device_type)
    devices = [canonical_device(d) for d in devices]
    if device_type is not None:
        for d in devices:
            if d.rsplit(":", 2)[-2] != str(device_type).upper():
                raise ValueError(f"dtensor.create_mesh: device {d} is not of device_type "
                                 f"{device_type!r}")
    if mesh_dims is None:
        mesh_dims = [("x", len(devices))]
    elif isinstance(mesh_dims, dict):
        mesh_dims = list(mesh_dims.items())
    names = [n for n, _ in mesh_dims]
    shape = [int(s) for _, s in mesh_dims]
    if int(np.prod(shape, dtype=np.int64)) != len(devices):
        raise ValueError(f"length of devices ({len(devices)}) must be equal to total size of "
                         f"the mesh of shape {shape}")
    for d in devices:  # each must be a device here (a logical one counts as used)
        try:
            _backend.lookup(d)
        except (RuntimeError, ValueError) as exc:
            raise ValueError(f"dtensor.create_mesh: {exc}") from None
    ids = np.arange(len(devices)).reshape(shape)
    return Mesh(names, ids, list(range(len(devices))), devices, mesh_name,
                use_xla_spmd=use_xla_spmd)


def create_distributed_mesh(mesh_dims, mesh_name="", local_devices=None, device_type=None,
                            use_xla_spmd=False):
    """`tf.experimental.dtensor.create_distributed_mesh` for one client (tapegpu runs DTensor
    in one process): the mesh of `create_mesh` over `local_devices`.

    >>> cpu = tg.config.list_physical_devices("CPU")[0]
    >>> tg.config.set_logical_device_configuration(
    ...     cpu, [tg.config.LogicalDeviceConfiguration()] * 4)
    >>> tg.experimental.dtensor.create_distributed_mesh([("x", 4)], device_type="CPU").size
    4
    """
    if not isinstance(mesh_dims, (list, tuple, dict)):
        raise ValueError(f"dtensor.create_distributed_mesh: mesh_dims must be a list of "
                         f"(name, size) pairs or a dict, got {mesh_dims!r}")
    return create_mesh(mesh_dims, mesh_name, local_devices, device_type, use_xla_spmd)


@contextlib.contextmanager
def default_mesh(mesh):
    """A scope in which ops on tensors without a layout give replicated DTensors on `mesh`,
    as `tf.experimental.dtensor.default_mesh`.

    >>> mesh = tg.experimental.dtensor.create_mesh([("x", 1)], devices=["CPU:0"])
    >>> with tg.experimental.dtensor.default_mesh(mesh):
    ...     y = tg.ones([2]) + 1.0
    >>> tg.experimental.dtensor.fetch_layout(y).sharding_specs
    ['unsharded']
    """
    if not isinstance(mesh, Mesh):
        raise ValueError(f"Expect `mesh` to be `Mesh`, got {type(mesh)}")
    with _scope("meshes", mesh):
        yield


run_on = default_mesh


def get_default_mesh():
    """The mesh of the innermost `default_mesh` scope, or None.

    >>> tg.experimental.dtensor.get_default_mesh() is None
    True
    """
    meshes = getattr(_scopes, "meshes", None)
    return meshes[-1] if meshes else None


# -- layouts -------------------------------------------------------------------------------------
def _tensor(x, fn):
    if isinstance(x, Variable):
        raise TypeError(f"Received Variable input to {fn}, Variable is not supported.")
    return x if isinstance(x, Tensor) else convert_to_tensor(x)


def _mesh_backend(mesh):
    return _backend.lookup(mesh.local_devices()[0])


def call_with_layout(fn, layout, *args, **kwargs):
    """Calls `fn(*args, **kwargs)` and gives its result `layout`, as
    `tf.experimental.dtensor.call_with_layout` (layout None: a plain call). Ops inside run in
    the layout's mesh; the result's shape must fit the layout (rank, even shards).

    >>> tg.config.set_logical_device_configuration(tg.config.list_physical_devices("CPU")[0],
    ...     [tg.config.LogicalDeviceConfiguration()] * 4)   # 4 logical CPUs
    >>> mesh = tg.experimental.dtensor.create_mesh([("x", 2)], devices=["CPU:0", "CPU:1"])
    >>> layout = tg.experimental.dtensor.Layout.batch_sharded(mesh, "x", rank=2)
    >>> z = tg.experimental.dtensor.call_with_layout(tg.zeros, layout, shape=[4, 3])
    >>> [c.shape for c in tg.experimental.dtensor.unpack(z)]
    [(2, 3), (2, 3)]
    """
    if layout is None:
        return fn(*args, **kwargs)
    if not isinstance(layout, Layout):
        raise TypeError(f"dtensor.call_with_layout: layout must be a Layout or None, got "
                        f"{layout!r}")
    with _scope("meshes", layout.mesh), _scope("layouts", layout):
        out = fn(*args, **kwargs)
    if isinstance(out, Variable):
        raise TypeError("dtensor.call_with_layout: fn returned a Variable; make a "
                        "dtensor.DVariable from call_with_layout's tensor instead")
    if not isinstance(out, Tensor):
        out = convert_to_tensor(out)
    if _get(out) == layout:
        return out
    return relayout(out, layout)


def fetch_layout(tensor):
    """The layout of a DTensor (a DVariable's: its own), as
    `tf.experimental.dtensor.fetch_layout`; a tensor without one raises InvalidArgumentError.

    >>> tg.config.set_logical_device_configuration(tg.config.list_physical_devices("CPU")[0],
    ...     [tg.config.LogicalDeviceConfiguration()] * 4)   # 4 logical CPUs
    >>> mesh = tg.experimental.dtensor.create_mesh([("x", 2)], devices=["CPU:0", "CPU:1"])
    >>> t = tg.experimental.dtensor.copy_to_mesh(
    ...     tg.ones([4]), tg.experimental.dtensor.Layout.replicated(mesh, 1))
    >>> tg.experimental.dtensor.fetch_layout(t).is_fully_replicated()
    True
    """
    if isinstance(tensor, DVariable):
        return tensor.layout
    layout = _get(tensor) if isinstance(tensor, Tensor) else None
    if layout is None:
        raise InvalidArgumentError(f"dtensor.fetch_layout: the argument is not a DTensor (a "
                                   f"tensor made by dtensor.pack, relayout, copy_to_mesh or "
                                   f"call_with_layout, or computed from one); got "
                                   f"{type(tensor).__name__} of shape "
                                   f"{list(getattr(tensor, 'shape', ()))}")
    return layout


def is_dtensor(tensor):
    """Whether `tensor` carries a layout, as `tf.experimental.dtensor.is_dtensor`.

    >>> tg.experimental.dtensor.is_dtensor(tg.ones(2))
    False
    """
    if isinstance(tensor, DVariable):
        return True
    return isinstance(tensor, Tensor) and _get(tensor) is not None


def check_layout(tensor, layout):
    """Raises ValueError unless `tensor`'s layout is `layout`, as
    `tf.experimental.dtensor.check_layout`.

    >>> tg.config.set_logical_device_configuration(tg.config.list_physical_devices("CPU")[0],
    ...     [tg.config.LogicalDeviceConfiguration()] * 4)   # 4 logical CPUs
    >>> mesh = tg.experimental.dtensor.create_mesh([("x", 2)], devices=["CPU:0", "CPU:1"])
    >>> rep = tg.experimental.dtensor.Layout.replicated(mesh, 1)
    >>> tg.experimental.dtensor.check_layout(
    ...     tg.experimental.dtensor.copy_to_mesh(tg.ones([2]), rep), rep)
    """
    found = fetch_layout(tensor)
    if found != layout:
        raise ValueError(f"Layout of tensor: {found}, did not match expected layout: {layout}")


def relayout(tensor, layout, name=None):
    """The value of `tensor` with the layout `layout`, as `tf.experimental.dtensor.relayout`
    (a new tensor: `tensor` keeps its own). `MATCH` in `layout` keeps the spec `tensor` has on
    that axis. Values are unchanged; the gradient passes through.

    >>> tg.config.set_logical_device_configuration(tg.config.list_physical_devices("CPU")[0],
    ...     [tg.config.LogicalDeviceConfiguration()] * 4)   # 4 logical CPUs
    >>> mesh = tg.experimental.dtensor.create_mesh([("x", 2)], devices=["CPU:0", "CPU:1"])
    >>> t = tg.experimental.dtensor.copy_to_mesh(
    ...     tg.constant([1., 2., 3., 4.]), tg.experimental.dtensor.Layout.replicated(mesh, 1))
    >>> s = tg.experimental.dtensor.relayout(t, tg.experimental.dtensor.Layout(["x"], mesh))
    >>> [c.numpy().tolist() for c in tg.experimental.dtensor.unpack(s)]
    [[1.0, 2.0], [3.0, 4.0]]
    """
    del name
    if not isinstance(layout, Layout):
        raise TypeError(f"dtensor.relayout: layout must be a Layout, got {layout!r}")
    t = tensor._read() if isinstance(tensor, Variable) else _tensor(tensor, "relayout")
    if MATCH in layout.sharding_specs:
        old = _get(t)
        if old is None or old.rank != layout.rank:
            raise ValueError("dtensor.relayout: 'match' needs a DTensor of the same rank")
        layout = Layout([o if s == MATCH else s for s, o in
                         zip(layout.sharding_specs, old.sharding_specs)], layout.mesh)
    _check_shape(t.shape, layout, "relayout")
    dev = _mesh_backend(layout.mesh)
    if t._dev is not dev:
        t = copy_to(t, dev)
    return _set(_ops["identity"](t), layout)


def relayout_like(tensor, layout_tensor, name=None):
    """`relayout(tensor, fetch_layout(layout_tensor))`, as
    `tf.experimental.dtensor.relayout_like`.

    >>> tg.config.set_logical_device_configuration(tg.config.list_physical_devices("CPU")[0],
    ...     [tg.config.LogicalDeviceConfiguration()] * 4)   # 4 logical CPUs
    >>> mesh = tg.experimental.dtensor.create_mesh([("x", 2)], devices=["CPU:0", "CPU:1"])
    >>> a = tg.experimental.dtensor.copy_to_mesh(
    ...     tg.ones([2]), tg.experimental.dtensor.Layout(["x"], mesh))
    >>> tg.experimental.dtensor.fetch_layout(
    ...     tg.experimental.dtensor.relayout_like(tg.zeros([2]), a)).sharding_specs
    ['x']
    """
    return relayout(tensor, fetch_layout(layout_tensor), name)


def copy_to_mesh(tensor, layout, source_layout=None):
    """A regular tensor as a DTensor with `layout`, as `tf.experimental.dtensor.copy_to_mesh`
    (`source_layout` is deprecated in TensorFlow and ignored).

    >>> tg.config.set_logical_device_configuration(tg.config.list_physical_devices("CPU")[0],
    ...     [tg.config.LogicalDeviceConfiguration()] * 4)   # 4 logical CPUs
    >>> mesh = tg.experimental.dtensor.create_mesh([("x", 2)], devices=["CPU:0", "CPU:1"])
    >>> t = tg.experimental.dtensor.copy_to_mesh(
    ...     tg.ones([2, 2]), tg.experimental.dtensor.Layout.replicated(mesh, 2))
    >>> tg.experimental.dtensor.is_dtensor(t)
    True
    """
    del source_layout
    return relayout(tensor, layout)


def _shard_slices(shape, layout, shard):
    sizes = [n // k for n, k in zip(shape, layout.shape)]
    return tuple(slice(i * s, (i + 1) * s) for i, s in zip(shard, sizes))


def pack(tensors, layout):
    """Builds a DTensor from its components, one per local device of the layout's mesh in
    mesh order, as `tf.experimental.dtensor.pack`: the global value is the components put
    together along the sharded axes (component d is the shard that device d holds).

    Checked: as many components as the mesh has local devices; one rank (the layout's), dtype
    and shape for all; the sharded axes' global sizes are the component sizes times the shard
    counts. As the global value is stored once, components that TensorFlow would keep as
    replicas of one shard must be equal (ValueError otherwise; TensorFlow leaves that to the
    caller).

    >>> tg.config.set_logical_device_configuration(tg.config.list_physical_devices("CPU")[0],
    ...     [tg.config.LogicalDeviceConfiguration()] * 4)   # 4 logical CPUs
    >>> mesh = tg.experimental.dtensor.create_mesh([("x", 2)], devices=["CPU:0", "CPU:1"])
    >>> t = tg.experimental.dtensor.pack([tg.constant([1., 2.]), tg.constant([3., 4.])],
    ...                                  tg.experimental.dtensor.Layout(["x"], mesh))
    >>> t.numpy().tolist()
    [1.0, 2.0, 3.0, 4.0]
    """
    if not isinstance(layout, Layout):
        raise TypeError(f"dtensor.pack: layout must be a Layout, got {layout!r}")
    tensors = list(tensors)
    comps = [_tensor(t, "Pack") for t in tensors]
    mesh = layout.mesh
    if len(comps) != mesh.num_local_devices():
        raise ValueError(f"dtensor.pack: got {len(comps)} components for a mesh of "
                         f"{mesh.num_local_devices()} local devices ({mesh.dim_names} of shape "
                         f"{mesh.shape()}); give one per device, in mesh order")
    first = comps[0]
    for c in comps:
        if len(c.shape) != layout.rank:
            raise ValueError(f"dtensor.pack: components of rank {len(c.shape)} (shape "
                             f"{list(c.shape)}) do not match the layout's rank {layout.rank}")
        if c.shape != first.shape or c.dtype != first.dtype:
            raise ValueError(f"dtensor.pack: components must share one shape and dtype, got "
                             f"{first.dtype.name}{list(first.shape)} and "
                             f"{c.dtype.name}{list(c.shape)}")
    dev = _mesh_backend(mesh)
    comps = [c if c._dev is dev else copy_to(c, dev) for c in comps]
    offsets = layout.offset_to_shard()
    grid = {}
    for c, device_id in zip(comps, mesh.local_device_ids()):
        shard = offsets[device_id]
        if shard in grid:
            if not np.array_equal(grid[shard].numpy(), c.numpy()):
                raise ValueError(f"dtensor.pack: devices holding the same shard {list(shard)} "
                                 f"of layout {layout.sharding_specs} got different components")
        else:
            grid[shard] = c
    counts = layout.shape

    def build(prefix):
        axis = len(prefix)
        if axis == layout.rank:
            return grid[prefix]
        parts = [build(prefix + (k,)) for k in range(counts[axis])]
        return parts[0] if len(parts) == 1 else _ops["concat"](parts, axis)

    out = build(())
    if out is first or any(out is c for c in comps):
        out = _ops["identity"](out)
    return _set(out, layout)


def unpack(tensor):
    """The components of a DTensor, one per local device of its mesh in mesh order, as
    `tf.experimental.dtensor.unpack`: device d's shard of the global value (slices of it,
    differentiable). `pack(unpack(t), fetch_layout(t))` gives `t` back.

    >>> tg.config.set_logical_device_configuration(tg.config.list_physical_devices("CPU")[0],
    ...     [tg.config.LogicalDeviceConfiguration()] * 4)   # 4 logical CPUs
    >>> mesh = tg.experimental.dtensor.create_mesh([("x", 2)], devices=["CPU:0", "CPU:1"])
    >>> t = tg.experimental.dtensor.copy_to_mesh(
    ...     tg.reshape(tg.range(6.), [3, 2]),
    ...     tg.experimental.dtensor.Layout.inner_sharded(mesh, "x", rank=2))
    >>> [c.numpy().tolist() for c in tg.experimental.dtensor.unpack(t)]
    [[[0.0], [2.0], [4.0]], [[1.0], [3.0], [5.0]]]
    """
    if isinstance(tensor, Variable):
        raise TypeError("Received Variable input to unpack, Variable is not supported.")
    layout = fetch_layout(tensor)
    offsets = layout.offset_to_shard()
    shape = tuple(tensor.shape)
    return [tensor[_shard_slices(shape, layout, offsets[d])]
            for d in layout.mesh.local_device_ids()]


# -- DVariable -----------------------------------------------------------------------------------
class DVariable(Variable):
    """A variable with a layout, as `tf.experimental.dtensor.DVariable(initial_value, ...,
    layout=None)`: the layout is `layout`, else the initial value's (which must then be a
    DTensor). Reads are DTensors with that layout; assignments keep it.

    >>> tg.config.set_logical_device_configuration(tg.config.list_physical_devices("CPU")[0],
    ...     [tg.config.LogicalDeviceConfiguration()] * 4)   # 4 logical CPUs
    >>> mesh = tg.experimental.dtensor.create_mesh([("x", 2)], devices=["CPU:0", "CPU:1"])
    >>> layout = tg.experimental.dtensor.Layout(["x", "unsharded"], mesh)
    >>> v = tg.experimental.dtensor.DVariable(
    ...     tg.experimental.dtensor.call_with_layout(tg.ones, layout, shape=[4, 2]))
    >>> v.layout == layout, tg.experimental.dtensor.fetch_layout(v * 2.0) == layout
    (True, True)
    """

    def __init__(self, initial_value, *args, dtype=None, layout=None, **kwargs):
        if callable(initial_value):
            initial_value = call_with_layout(initial_value, layout)
        if layout is None:
            if isinstance(initial_value, DVariable):
                layout = initial_value.layout
            else:
                layout = _get(initial_value) if isinstance(initial_value, Tensor) else None
            if layout is None:
                raise ValueError("dtensor.DVariable: the initial value is not a DTensor; give "
                                 "layout= or make it with dtensor.call_with_layout / "
                                 "copy_to_mesh")
        if not isinstance(layout, Layout):
            raise TypeError(f"dtensor.DVariable: layout must be a Layout, got {layout!r}")
        super().__init__(initial_value, *args, dtype=dtype, **kwargs)
        _check_shape(self.shape, layout, "DVariable")
        self._layout = layout

    @property
    def layout(self):
        return self._layout

    def _read(self):
        out = super()._read()
        if _get(out) is not self._layout:
            _set(out, self._layout)
        return out

    def __reduce__(self):
        return (_rebuild_dvariable, (self.numpy(), self.trainable, self.name, self._layout))


def _rebuild_dvariable(array, trainable, name, layout):
    return DVariable(array, trainable=trainable, name=name, layout=layout)


# -- the runtime: one client, the devices of this process --------------------------------------
def client_id():
    """This client's id: 0 (tapegpu runs DTensor in one process).

    >>> tg.experimental.dtensor.client_id(), tg.experimental.dtensor.num_clients()
    (0, 1)
    """
    return 0


def num_clients():
    """The number of DTensor clients: 1."""
    return 1


def job_name():
    """The job of this client: 'localhost'.

    >>> tg.experimental.dtensor.job_name()
    'localhost'
    """
    return "localhost"


def full_job_name(task_id=None):
    """'localhost/replica:0/task:0' (the one client's task).

    >>> tg.experimental.dtensor.full_job_name()
    'localhost/replica:0/task:0'
    """
    task = 0 if task_id is None else task_id
    if task != 0:
        raise ValueError(f"dtensor.full_job_name: there is one client (task 0), got {task_id}")
    return "localhost/replica:0/task:0"


def jobs():
    """The jobs of the clients: ['localhost/replica:0/task:0']."""
    return [full_job_name()]


def heartbeat_enabled():
    """False: one client has no peers to watch."""
    return False


def preferred_device_type():
    """'GPU' when a GPU is visible, else 'CPU' (TensorFlow prefers TPUs, which tapegpu lacks).

    >>> tg.experimental.dtensor.preferred_device_type() in ("CPU", "GPU")
    True
    """
    return "GPU" if _backend.gpu_count() else "CPU"


def local_devices(device_type, for_client_id=None):
    """The names of this client's logical devices of `device_type`, as
    `tf.experimental.dtensor.local_devices` (strings here, not DeviceSpecs).

    >>> tg.experimental.dtensor.local_devices("CPU")[0]
    '/job:localhost/replica:0/task:0/device:CPU:0'
    """
    if for_client_id not in (None, 0):
        raise ValueError(f"dtensor.local_devices: there is one client (0), got "
                         f"for_client_id={for_client_id}")
    return [canonical_device(n) for n in _local_device_names(device_type)]


def num_local_devices(device_type):
    """How many logical devices of `device_type` this client has.

    >>> tg.experimental.dtensor.num_local_devices("CPU") >= 1
    True
    """
    return len(_local_device_names(device_type))


def num_global_devices(device_type):
    """How many devices of `device_type` all clients have: this client's."""
    return num_local_devices(device_type)


def initialize_accelerator_system(device_type=None, enable_coordination_service=True,
                                  num_logical_cpu_devices=None,
                                  experimental_reset_context=False,
                                  experimental_enable_megcore=False):
    """Gets the devices ready and returns their type, as
    `tf.experimental.dtensor.initialize_accelerator_system`; one client, so nothing to
    connect. `num_logical_cpu_devices` sets the logical CPU count, as there.

    >>> tg.experimental.dtensor.initialize_accelerator_system("CPU")
    'CPU'
    """
    del enable_coordination_service, experimental_reset_context, experimental_enable_megcore
    kind = (device_type or preferred_device_type()).upper()
    if kind not in ("CPU", "GPU"):
        raise ValueError(f"dtensor.initialize_accelerator_system: device_type must be 'CPU' or "
                         f"'GPU' here (no TPUs), got {device_type!r}")
    if kind == "GPU" and not _backend.gpu_count():
        raise ValueError("dtensor.initialize_accelerator_system: device_type 'GPU' but no GPU "
                         "is visible")
    if num_logical_cpu_devices is not None:
        cpu = _config.list_physical_devices("CPU")[0]
        _config.set_logical_device_configuration(
            cpu, [_config.LogicalDeviceConfiguration()] * int(num_logical_cpu_devices))
    return kind


def barrier(mesh, barrier_name=None, timeout_in_ms=None):
    """Waits until every device of `mesh` got here, as `tf.experimental.dtensor.barrier`: one
    client running its ops in order has nothing to wait for, so this checks `mesh` and
    returns.

    >>> tg.experimental.dtensor.barrier(
    ...     tg.experimental.dtensor.create_mesh([("x", 1)], devices=["CPU:0"]), "step")
    """
    del barrier_name, timeout_in_ms
    if not isinstance(mesh, Mesh):
        raise ValueError(f"dtensor.barrier: mesh must be a Mesh, got {mesh!r}")


def shutdown_accelerator_system():
    """Nothing to release with one client (`tf.experimental.dtensor.shutdown_accelerator_
    system`)."""
