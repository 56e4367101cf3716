"""The MPI job: `init`, `shutdown`, ranks and sizes, the abort-on-exception hook, the exit
notice, and the bounded wait every collective goes through.

A rank that ends without an uncaught exception (its script ends, or calls `sys.exit`, or
raises SystemExit: no excepthook sees these) tells the other ranks at its exit; a rank that
waits for it in a collective then raises UnavailableError naming it, and its excepthook aborts
the job, instead of waiting out the timeout (MPI_Finalize on the exiting rank waits for the
others meanwhile).

mpi4py is an optional dependency (`pip install -e ".[distributed]"`): it is imported by `init`
only, so `import tapegpu` works without it.

One GPU per rank: where CuPy sees GPUs, `init` makes GPU `local_rank() % gpu_count()` this
process's default device (unless TAPEGPU_DEVICE names one), so that the ranks of a node share
its GPUs without anyone choosing; device tensors are then reduced by NCCL (nccl.py).
"""
import atexit
import os
import sys
import time
import warnings

from .. import backends as _backend
from ..errors import UnavailableError

DEFAULT_TIMEOUT = 300.0  # seconds a collective waits for the other ranks (init(timeout=...))
# seconds a failing rank waits, after printing its error, before MPI_Abort: mpiexec kills the
# job at once and would drop output still on its way (the traceback, cut short)
ABORT_DELAY = 1.0
# seconds a collective goes on after another rank's exit notice arrived before it raises: what
# that rank sent before it left may still be on its way (the end of a healthy job)
EXIT_GRACE = 2.0
_EXIT_TAG = 1


class _State:
    """The job as `init` set it up: MPI's module, the communicators, the timeout."""

    def __init__(self):
        self.MPI = None
        self.world = None  # COMM_WORLD (Abort goes there)
        self.comm = None  # a duplicate for blocking collectives and the signature checks
        self.comm_scatter = None  # phase 1 of reductions (Ialltoall), issued in bucket order
        self.comm_gather = None  # phase 2 of reductions (Iallgather), issued in bucket order
        self.local = None  # the ranks on this node (COMM_TYPE_SHARED)
        self.exits = None  # exit notices: one empty message from each rank that leaves
        self.exited = set()  # the ranks whose exit notice arrived
        self.timeout = DEFAULT_TIMEOUT
        self.previous_hook = None
        self.device = None  # the GPU `init` gave this rank (None: no GPU, or the user chose)
        self.link = None  # this rank's NCCL communicator (nccl.Link), made at first use


_state = _State()


def _import_mpi(what):
    try:
        from mpi4py import MPI  # optional dependency: the distributed extra
    except ImportError as exc:
        raise ImportError(
            f"tg.distribute.{what}: needs mpi4py and an MPI library, which are not installed "
            f"({exc}); install them with `pip install -e \".[distributed]\"` (mpi4py and the "
            "mpich wheel), or `pip install mpi4py mpich`") from exc
    return MPI


def init(comm=None, timeout=None):
    """Starts (or joins) the MPI job: call it once at the start of every rank's script.

    `comm` is the communicator whose ranks take part (default: MPI.COMM_WORLD). `timeout` is
    how many seconds a collective waits for the other ranks before raising TimeoutError
    (default: the environment's TAPEGPU_DISTRIBUTE_TIMEOUT, else 300). `init` also installs a
    `sys.excepthook` that prints the exception and calls MPI_Abort, so that a rank that dies
    ends the whole job instead of leaving the others waiting, and an exit notice: a rank that
    leaves otherwise (`sys.exit`, the end of its script) makes the ranks that wait for it in a
    collective raise UnavailableError naming it. Where CuPy sees GPUs, the rank's default
    device becomes GPU `local_rank() % gpu_count()` (unless the environment's TAPEGPU_DEVICE
    names a device): one GPU per rank of a node. Calling it again is a no-op.

        import tapegpu as tg
        tg.distribute.init()
        print(tg.distribute.rank(), "of", tg.distribute.size())
    """
    if _state.comm is not None:
        return
    if timeout is None:
        timeout = float(os.environ.get("TAPEGPU_DISTRIBUTE_TIMEOUT", DEFAULT_TIMEOUT))
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ValueError(f"tg.distribute.init: timeout must be a positive number of seconds, "
                         f"got {timeout!r}")
    MPI = _import_mpi("init")
    base = MPI.COMM_WORLD if comm is None else comm
    if not isinstance(base, MPI.Comm):
        raise TypeError(f"tg.distribute.init: comm must be an mpi4py communicator, got "
                        f"{type(comm).__name__}")
    _state.MPI = MPI
    _state.world = MPI.COMM_WORLD
    _state.timeout = float(timeout)
    # every duplicate is created collectively, in this order, on every rank
    _state.comm = base.Dup()
    _state.comm_scatter = base.Dup()
    _state.comm_gather = base.Dup()
    _state.local = base.Split_type(MPI.COMM_TYPE_SHARED, key=base.Get_rank())
    _state.exits = base.Dup()
    _state.device = _pin_gpu(_state.local.Get_rank())
    _state.previous_hook = sys.excepthook
    sys.excepthook = _abort_hook
    # registered after mpi4py's import, so that it runs before MPI is finalized
    atexit.unregister(_send_exit_notice)
    atexit.register(_send_exit_notice)


def _pin_gpu(local_rank):
    """Makes GPU `local_rank % gpu_count()` this process's default device and CuPy's current
    one; None where there is no GPU or TAPEGPU_DEVICE chose the device."""
    if os.environ.get("TAPEGPU_DEVICE"):
        return None
    n = _backend.gpu_count()
    if n == 0:
        return None
    dev = _backend.gpu(local_rank % n)
    os.environ["TAPEGPU_DEVICE"] = dev.short  # what the default device resolves to
    resolved = _backend._default_backend  # the default, if something was created already
    if resolved is not None and resolved is not dev:
        warnings.warn(f"tg.distribute.init: this rank's GPU is {dev.short}, but tensors were "
                      f"created on {resolved.short} before init(); call init() first, or "
                      f"place them with tg.device('{dev.short}')", RuntimeWarning,
                      stacklevel=3)
    dev.context().use()  # CuPy's current device in this thread
    return dev


def _abort_hook(kind, value, tb):
    """Prints the uncaught exception as Python would, then ends every rank (MPI_Abort)."""
    previous = _state.previous_hook or sys.__excepthook__
    previous(kind, value, tb)
    world = _state.world
    if world is None:
        return
    try:
        sys.stderr.write(f"tg.distribute: rank {world.Get_rank()} of {world.Get_size()} "
                         f"raised {kind.__name__}; aborting the job (MPI_Abort)\n")
        sys.stderr.flush()
        sys.stdout.flush()
        time.sleep(ABORT_DELAY)
    finally:
        world.Abort(1)


def _send_exit_notice():
    """At this process's exit while it is in the job: an empty message to every other rank
    (see the module docstring). At the end of a healthy job every rank sends one and no one
    reads them. Bounded: an exit never waits more than ABORT_DELAY on them."""
    st = _state
    comm = st.exits
    if comm is None:
        return
    me = comm.Get_rank()
    requests = [comm.Isend([bytearray(), st.MPI.BYTE], dest=r, tag=_EXIT_TAG)
                for r in range(comm.Get_size()) if r != me]
    deadline = time.monotonic() + ABORT_DELAY
    while not st.MPI.Request.Testall(requests) and time.monotonic() < deadline:
        time.sleep(1e-4)


def _exited(st):
    """The ranks whose exit notice has arrived (each notice is received once)."""
    status = st.MPI.Status()
    while st.exits.Iprobe(source=st.MPI.ANY_SOURCE, tag=_EXIT_TAG, status=status):
        source = status.Get_source()
        st.exits.Recv([bytearray(), st.MPI.BYTE], source=source, tag=_EXIT_TAG)
        st.exited.add(source)
    return st.exited


def _exit_error(st, what):
    gone = sorted(st.exited)
    who = f"rank{'s' if len(gone) > 1 else ''} {', '.join(map(str, gone))} of " \
          f"{st.comm.Get_size()}"
    return UnavailableError(
        f"tg.distribute.{what}: {who} exited while this rank waited for "
        f"{'them' if len(gone) > 1 else 'it'} (the script ended, or called sys.exit or raised "
        "SystemExit, before joining this collective); the job cannot complete. Every rank "
        "must make the same collective calls, in the same order, before it exits")


def shutdown():
    """Leaves the job: frees tapegpu's communicators and restores `sys.excepthook` (MPI
    itself is finalized when the process exits). `init` may be called again afterwards.

        tg.distribute.shutdown()
        tg.distribute.is_initialized()  # False
    """
    if _state.comm is None:
        return
    if _state.link is not None:
        _state.link.destroy()
    for c in (_state.comm, _state.comm_scatter, _state.comm_gather, _state.local,
              _state.exits):
        c.Free()
    if sys.excepthook is _abort_hook:
        sys.excepthook = _state.previous_hook
    _state.__init__()


def is_initialized():
    """Whether `init` was called (and `shutdown` was not since).

        tg.distribute.is_initialized()  # False before init()
    """
    return _state.comm is not None


def _need(what):
    if _state.comm is None:
        raise ValueError(f"tg.distribute.{what}: tg.distribute.init() has not been called; "
                         "call it once at the start of every rank's script")
    return _state


def rank():
    """This process's rank in the job, 0 .. size() - 1.

        if tg.distribute.rank() == 0:
            print("I log and save checkpoints")
    """
    return _need("rank").comm.Get_rank()


def size():
    """The number of ranks in the job.

        lr = 0.01 * tg.distribute.size()  # scale the learning rate with the global batch
    """
    return _need("size").comm.Get_size()


def local_rank():
    """This process's rank among the ranks on its node (choose a GPU with it).

        tg.device(f"gpu:{tg.distribute.local_rank()}")
    """
    return _need("local_rank").local.Get_rank()


def local_size():
    """The number of ranks on this node.

        tg.distribute.local_size()  # 2 under `mpiexec -n 2` on one machine
    """
    return _need("local_size").local.Get_size()


def wait(done, what):
    """Waits, bounded by the job's timeout, until `done` (a list of MPI requests, or a callable
    that advances work and returns whether it is complete) is; TimeoutError names `what`.

    Polls spin briefly, then sleep in growing steps up to 1 ms, so that oversubscribed ranks
    leave the CPU to the others. While sleeping they read exit notices: once another rank has
    exited, the wait raises UnavailableError naming it unless it completes within EXIT_GRACE.
    """
    st = _state
    if not callable(done):
        requests, test_all = done, st.MPI.Request.Testall
        done = lambda: test_all(requests)  # noqa: E731
    deadline = time.monotonic() + st.timeout
    gone_at = None  # when this wait learnt that a rank has exited
    polls = 0
    while not done():
        polls += 1
        if polls > 64:
            now = time.monotonic()
            if gone_at is None and _exited(st):
                gone_at = now
            if gone_at is not None and now > gone_at + EXIT_GRACE:
                raise _exit_error(st, what)
            if now > deadline:
                raise TimeoutError(
                    f"tg.distribute.{what}: the other ranks did not join within "
                    f"{st.timeout:g} s (is a rank stuck, dead, or calling collectives in a "
                    "different order?); raise the limit with init(timeout=...) or "
                    "TAPEGPU_DISTRIBUTE_TIMEOUT")
            time.sleep(min(1e-3, 1e-6 * (polls - 64)))
