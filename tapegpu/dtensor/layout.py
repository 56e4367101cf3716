"""`Mesh` and `Layout`: TensorFlow DTensor's description of how a tensor is split over devices.

A mesh is a named grid of devices (`Mesh(["x", "y"], ids of shape (2, 4), ...)`); a layout gives
each axis of a tensor a mesh dimension it is split over, or `UNSHARDED` (every device along the
mesh holds all of it). Device `d` of a mesh sits at `np.unravel_index(d, mesh.shape())`; the
shard it holds of a tensor axis split over mesh dimension `m` is its coordinate along `m`.
Both are plain data here, with TensorFlow's names, checks and string forms.
"""
import itertools
from collections import namedtuple

import numpy as np

UNSHARDED = "unsharded"
MATCH = "match"
MeshDimension = namedtuple("MeshDimension", ["name", "size"])
_LOCAL = "/job:localhost/replica:0/task:0/device:"


def canonical_device(name):
    """'CPU:3', '/cpu:3', '/device:CPU:3' -> '/job:localhost/replica:0/task:0/device:CPU:3'."""
    if not isinstance(name, str):
        name = getattr(name, "name", None) or str(name)
    key = name.strip()
    for prefix in ("/job:localhost/replica:0/task:0", "/device:", "/", "device:"):
        if key.lower().startswith(prefix):
            key = key[len(prefix):]
    kind, _, index = key.partition(":")
    if not index.isdigit() or not kind:
        raise ValueError(f"dtensor: cannot read the device name {name!r}; give names such as "
                         f"'CPU:0' or '/device:GPU:1'")
    return f"{_LOCAL}{kind.upper()}:{int(index)}"


class Mesh:
    """A named grid of devices, as `tf.experimental.dtensor.Mesh(dim_names, global_device_ids,
    local_device_ids, local_devices, mesh_name='', global_devices=None, use_xla_spmd=False)`.
    `create_mesh` is the simpler way to make one.

    >>> ids = np.arange(4).reshape(2, 2)
    >>> mesh = tg.experimental.dtensor.Mesh(["x", "y"], ids, list(range(4)),
    ...     [f"CPU:{i}" for i in range(4)])
    >>> mesh.shape(), mesh.size, mesh["y"]
    ([2, 2], 4, MeshDimension(name='y', size=2))
    """

    def __init__(self, dim_names, global_device_ids, local_device_ids, local_devices,
                 mesh_name="", global_devices=None, use_xla_spmd=False):
        if not isinstance(global_device_ids, np.ndarray):
            raise ValueError("Variable global_device_ids must be an ndarray.")
        if global_device_ids.size == 0:
            raise ValueError("Variable global_device_ids must be non-empty.")
        flat = global_device_ids.ravel()
        if any(int(g) - i != int(flat[0]) for i, g in enumerate(flat)):
            raise ValueError(f"global_device_ids must sequentially increase: {global_device_ids}")
        dim_names = list(dim_names)
        if len(dim_names) != global_device_ids.ndim:
            raise ValueError("Number of mesh dimensions does not match number of dimension "
                             "names.")
        if len(set(dim_names)) != len(dim_names):
            raise ValueError(f"Mesh dimension names must be unique, got {dim_names}")
        if not isinstance(local_device_ids, list):
            raise ValueError("Variable local_device_ids must be a list of integers.")
        if not isinstance(local_devices, list):
            raise ValueError("Variable local_devices must be a list of DeviceSpecs.")
        if not local_devices and not global_devices:
            raise ValueError("Empty list of devices not allowed.")
        local_devices = [canonical_device(d) for d in local_devices]
        if len(set(local_devices)) != len(local_devices):
            raise ValueError(f"Duplicate devices found in mesh specification "
                             f"{[d for d in local_devices if local_devices.count(d) > 1]}.")
        if len(local_device_ids) != len(local_devices):
            raise ValueError("Variable local_device_ids does not have same size as "
                             "local_devices.")
        if len(local_device_ids) > flat.size:
            raise ValueError("Cannot have more local than gobal device IDs.")
        types = {d.rsplit(":", 2)[-2].rsplit(":", 1)[-1] for d in local_devices}
        if len(types) > 1:
            raise ValueError(f"Devices containing multiple device_types : {types}")
        if use_xla_spmd:
            raise ValueError(f"XLA SPMD is not currently not supported for {types.pop()} "
                             f"mesh.")
        self._dim_names = dim_names
        self._ids = np.asarray(global_device_ids, dtype=np.int64)
        self._local_ids = [int(i) for i in local_device_ids]
        self._local_devices = local_devices
        self._global_devices = [canonical_device(d) for d in global_devices or []]
        self._name = mesh_name
        self._device_type = types.pop()

    # -- TensorFlow's accessors --------------------------------------------------------------
    @property
    def dim_names(self):
        return list(self._dim_names)

    @property
    def name(self):
        return self._name

    @property
    def size(self):
        return int(self._ids.size)

    @property
    def strides(self):
        """[b*c, c, 1] for a mesh of shape [a, b, c]: device id = sum(coordinate * stride)."""
        shape = self.shape()
        return [int(np.prod(shape[i + 1:], dtype=np.int64)) for i in range(len(shape))]

    def shape(self):
        return list(self._ids.shape)

    def device_type(self):
        return self._device_type

    def dim_size(self, dim_name):
        if dim_name not in self._dim_names:
            raise ValueError(f'"{dim_name}" not a dimension name in current mesh. Dimension '
                             f'names: {self._dim_names}.')
        return int(self._ids.shape[self._dim_names.index(dim_name)])

    def contains_dim(self, dim_name):
        return dim_name in self._dim_names

    def __contains__(self, dim_name):
        return dim_name in self._dim_names

    def __getitem__(self, dim_name):
        if dim_name not in self._dim_names:
            raise KeyError(f"Dimension {dim_name} not defined in mesh: {self._dim_names}")
        return MeshDimension(dim_name, self.dim_size(dim_name))

    def global_device_ids(self):
        return self._ids.copy()

    def local_device_ids(self):
        return list(self._local_ids)

    def local_devices(self):
        return list(self._local_devices)

    def num_local_devices(self):
        return len(self._local_devices)

    def is_remote(self):
        return not self._local_devices

    def is_single_device(self):
        return False

    def host_mesh(self):
        """This mesh, for a CPU mesh; the one-to-one CPU mesh of a GPU mesh."""
        if self._device_type == "CPU":
            return self
        return Mesh(self._dim_names, self._ids, self._local_ids,
                    [d.rsplit(":", 2)[0] + ":CPU:" + d.rsplit(":", 1)[1]
                     for d in self._local_devices], self._name)

    def unravel_index(self):
        """{device id: {dim name: coordinate}} over the whole mesh."""
        out = {}
        for d, pos in enumerate(itertools.product(*[range(n) for n in self.shape()])):
            out[d] = dict(zip(self._dim_names, pos))
        return out

    def local_device_locations(self):
        mapping = self.unravel_index()
        return [mapping[i] for i in self._local_ids]

    def coords(self, device_idx):
        return [(device_idx // s) % n for s, n in zip(self.strides, self.shape())]

    # -- strings, equality ----------------------------------------------------------------------
    def to_string(self):
        """TensorFlow's form: 'name|x=2,y=4|global ids|local ids|local devices'."""
        dims = ",".join(f"{n}={s}" for n, s in zip(self._dim_names, self.shape()))
        parts = [self._name, dims, ",".join(str(int(i)) for i in self._ids.ravel()),
                 ",".join(str(i) for i in self._local_ids), ",".join(self._local_devices)]
        if self._global_devices:
            parts.append(",".join(self._global_devices))
        return "|".join(parts)

    @staticmethod
    def from_string(mesh_str):
        parts = mesh_str.split("|")
        if len(parts) not in (5, 6):
            raise ValueError(f"Invalid mesh string : {mesh_str}")
        name, dims, global_ids, local_ids, devices = parts[:5]
        names, shape = [], []
        for dim in dims.split(","):
            n, _, s = dim.partition("=")
            names.append(n)
            shape.append(int(s))
        ids = np.asarray([int(i) for i in global_ids.split(",")]).reshape(shape)
        return Mesh(names, ids, [int(i) for i in local_ids.split(",") if i],
                    [d for d in devices.split(",") if d], name,
                    [d for d in parts[5].split(",") if d] if len(parts) == 6 else None)

    def __eq__(self, other):
        if not isinstance(other, Mesh):
            raise ValueError(f"comparing with type : {type(other)} but expecting : {Mesh}")
        return self.to_string() == other.to_string()

    def __hash__(self):
        return hash(self.to_string())

    def __repr__(self):
        dims = [tuple(self[n]) for n in self._dim_names]
        return (f'<Mesh object with dims={dims}, device_type="{self._device_type}", '
                f'num_local_devices={self.num_local_devices()}), size={self.size}>')

    def __reduce__(self):
        return Mesh.from_string, (self.to_string(),)


class Layout:
    """How each axis of a tensor is split over a mesh, as
    `tf.experimental.dtensor.Layout(sharding_specs, mesh)`: one spec per axis, a mesh
    dimension name or `UNSHARDED`; a mesh dimension shards at most one axis.

    >>> tg.config.set_logical_device_configuration(tg.config.list_physical_devices("CPU")[0],
    ...     [tg.config.LogicalDeviceConfiguration()] * 4)   # 4 logical CPUs
    >>> mesh = tg.experimental.dtensor.create_mesh([("x", 2)], devices=["CPU:0", "CPU:1"])
    >>> layout = tg.experimental.dtensor.Layout(["x", tg.experimental.dtensor.UNSHARDED], mesh)
    >>> layout.rank, layout.sharding_specs, layout.num_shards(0)
    (2, ['x', 'unsharded'], 2)
    """

    def __init__(self, sharding_specs, mesh):
        if not isinstance(mesh, Mesh):
            raise ValueError("mesh is not a valid Mesh object.")
        specs = list(sharding_specs)
        for spec in specs:
            if spec in (UNSHARDED, MATCH):
                continue
            if specs.count(spec) > 1:
                raise ValueError(f"Mesh dimension {spec} was repeated in sharding "
                                 f"specification {specs}. Mesh dimensions must be unique in a "
                                 f"layout.")
            if spec not in mesh:
                raise ValueError(f"{spec}: A dimension sharding must either be a valid mesh "
                                 f"dimension or UNSHARDED.")
        self._specs = specs
        self._mesh = mesh

    sharding_specs = property(lambda self: list(self._specs))
    mesh = property(lambda self: self._mesh)
    rank = property(lambda self: len(self._specs))

    @property
    def shape(self):
        """The number of shards along each axis."""
        return [self.num_shards(i) for i in range(self.rank)]

    def num_shards(self, idx):
        spec = self._specs[idx]
        if spec == UNSHARDED:
            return 1
        if spec == MATCH:
            return -1
        return self._mesh.dim_size(spec)

    def is_fully_replicated(self):
        return all(s == UNSHARDED for s in self._specs)

    def is_single_device(self):
        return False

    @staticmethod
    def replicated(mesh, rank):
        """Every axis unsharded."""
        return Layout([UNSHARDED] * rank, mesh)

    @staticmethod
    def batch_sharded(mesh, batch_dim, rank, axis=0):
        """Axis `axis` split over mesh dimension `batch_dim`, the others unsharded."""
        specs = [UNSHARDED] * rank
        specs[axis] = batch_dim
        return Layout(specs, mesh)

    @staticmethod
    def inner_sharded(mesh, inner_dim, rank):
        """The last axis split over mesh dimension `inner_dim`, the others unsharded."""
        return Layout([UNSHARDED] * (rank - 1) + [inner_dim], mesh)

    def delete(self, dims):
        """This layout without the axes `dims`."""
        dims = dims if isinstance(dims, (list, tuple)) else [dims]
        return Layout([s for i, s in enumerate(self._specs) if i not in dims], self._mesh)

    def offset_to_shard(self):
        """For each device of the mesh, in order, the shard index it holds along each axis."""
        out = []
        for _, loc in sorted(self._mesh.unravel_index().items()):
            out.append(tuple(0 if s in (UNSHARDED, MATCH) else loc[s] for s in self._specs))
        return out

    def to_string(self):
        """TensorFlow's form: 'sharding_specs:x,unsharded, mesh:<mesh string>'."""
        return "sharding_specs:" + "".join(s + "," for s in self._specs) + \
            " mesh:" + self._mesh.to_string()

    @staticmethod
    def from_string(layout_str):
        parts = layout_str.split(" ")
        if len(parts) != 2:
            raise ValueError(f"layout string must contain two parts: specs and mesh. But got "
                             f"{layout_str}.")
        specs = parts[0].replace("sharding_specs:", "").split(",")[:-1]
        return Layout(specs, Mesh.from_string(parts[1].replace("mesh:", "")))

    def __eq__(self, other):
        return isinstance(other, Layout) and self.to_string() == other.to_string()

    def __hash__(self):
        return hash(self.to_string())

    def __repr__(self):
        return f"Layout.from_string({self.to_string()})"

    def __reduce__(self):
        return Layout.from_string, (self.to_string(),)
