"""`tg.experimental.dtensor`: TensorFlow's DTensor names, computed on one device.

A DTensor here is an ordinary tensor holding the global value, with a `Layout` kept beside it
as metadata (api.py says how layouts follow ops). Every op, gradient, `tg.function` and Keras
layer works on it unchanged and gives TensorFlow DTensor's numbers; nothing runs faster, since
one device does all the work. Meshes are made of tapegpu's logical devices
(`tg.config.set_logical_device_configuration` splits the CPU into several, as TensorFlow's
guides do). Checked as TensorFlow checks them: meshes (device counts, names, types), layouts
(specs, repeated dimensions), shapes against layouts (rank, even shards), `pack`'s components.
"""
from .api import (DVariable, barrier, call_with_layout, check_layout, client_id,  # noqa: F401
                  copy_to_mesh, create_distributed_mesh, create_mesh, default_mesh,
                  fetch_layout, full_job_name, get_default_mesh, heartbeat_enabled,
                  initialize_accelerator_system, is_dtensor, job_name, jobs, local_devices,
                  num_clients, num_global_devices, num_local_devices, pack,
                  preferred_device_type, relayout, relayout_like, run_on,
                  shutdown_accelerator_system, unpack)
from .layout import MATCH, UNSHARDED, Layout, Mesh  # noqa: F401

__all__ = ["Mesh", "Layout", "UNSHARDED", "MATCH", "DVariable", "create_mesh",
           "create_distributed_mesh", "default_mesh", "get_default_mesh", "run_on",
           "call_with_layout", "pack", "unpack", "fetch_layout", "check_layout", "is_dtensor",
           "relayout", "relayout_like", "copy_to_mesh", "client_id", "num_clients", "job_name",
           "full_job_name", "jobs", "heartbeat_enabled", "preferred_device_type",
           "local_devices", "num_local_devices", "num_global_devices",
           "initialize_accelerator_system", "shutdown_accelerator_system", "barrier"]
