"""`tf.train.ClusterSpec` and `tf.distribute.cluster_resolver`'s resolvers that need no
cloud service: plain data with TensorFlow's methods. tapegpu's multi-process strategies take
their workers from MPI, not from these; the resolvers serve code that reads its own task
(`TF_CONFIG`) to decide, say, which worker writes checkpoints."""
import json
import os

from .. import backends as _backend


class ClusterSpec:
    """The jobs of a cluster and their tasks' addresses, as `tf.train.ClusterSpec(cluster)`:
    `cluster` maps each job name to a list of addresses (task i at position i) or to a dict
    {task index: address}; another ClusterSpec is copied.

    >>> spec = tg.train.ClusterSpec({"worker": ["w0:2222", "w1:2222"], "ps": {3: "p:2222"}})
    >>> spec.jobs, spec.num_tasks("worker"), spec.task_indices("ps"), spec.task_address("ps", 3)
    (['ps', 'worker'], 2, [3], 'p:2222')
    """

    def __init__(self, cluster):
        if isinstance(cluster, ClusterSpec):
            cluster = cluster.as_dict()
        if not isinstance(cluster, dict):
            raise TypeError("`cluster` must be a dictionary mapping one or more job names to "
                            "(i) a list of network addresses, or (ii) a dictionary mapping "
                            "integer task indices to network addresses")
        self._jobs = {}
        for job, tasks in cluster.items():
            if not isinstance(job, str):
                raise TypeError(f"Job name must be a string, got {job!r}")
            if isinstance(tasks, (list, tuple)):
                tasks = dict(enumerate(tasks))
            elif not isinstance(tasks, dict):
                raise TypeError(f"The tasks for job {job!r} must be a list or a dictionary "
                                f"from integers to strings, got {tasks!r}")
            for i, address in tasks.items():
                if not isinstance(i, int) or not isinstance(address, str):
                    raise TypeError(f"The tasks for job {job!r} must map integer task indices "
                                    f"to string addresses, got {i!r}: {address!r}")
            self._jobs[job] = dict(sorted(tasks.items()))

    @property
    def jobs(self):
        return sorted(self._jobs)

    def _job(self, job_name):
        if job_name not in self._jobs:
            raise ValueError(f"No such job in cluster: {job_name!r}")
        return self._jobs[job_name]

    def num_tasks(self, job_name):
        return len(self._job(job_name))

    def task_indices(self, job_name):
        return list(self._job(job_name))

    def task_address(self, job_name, task_index):
        tasks = self._job(job_name)
        if task_index not in tasks:
            raise ValueError(f"No task with index {task_index!r} in job {job_name!r}")
        return tasks[task_index]

    def job_tasks(self, job_name):
        """The addresses of the job's tasks by index, None where an index has no task."""
        tasks = self._job(job_name)
        if not tasks:
            return []
        return [tasks.get(i) for i in range(max(tasks) + 1)]

    def as_dict(self):
        """{job: list of addresses} (a dict {index: address} for a job with gaps)."""
        out = {}
        for job, tasks in self._jobs.items():
            dense = list(tasks) == list(range(len(tasks)))
            out[job] = list(tasks.values()) if dense else dict(tasks)
        return out

    def as_cluster_def(self):
        raise NotImplementedError("tf.train.ClusterSpec.as_cluster_def is not available in "
                                  "tapegpu: it has no TensorFlow protocol buffers. Instead: "
                                  "as_dict()")

    def __bool__(self):
        return bool(self._jobs)

    def __eq__(self, other):
        return isinstance(other, ClusterSpec) and self._jobs == other._jobs

    def __ne__(self, other):
        return not self == other

    def __repr__(self):
        return f"ClusterSpec({self.as_dict()!r})"


def _master_url(address, rpc_layer):
    return f"{rpc_layer}://{address}" if rpc_layer else address


def _num_accelerators():
    n = _backend.gpu_count()
    return {"GPU": n} if n else {}


class ClusterResolver:
    """The base of the cluster resolvers (`tf.distribute.cluster_resolver.ClusterResolver`):
    `cluster_spec()`, `master()`, `task_type`, `task_id`, `environment`,
    `num_accelerators()`."""

    task_type = None
    task_id = None
    rpc_layer = None
    environment = ""

    def cluster_spec(self):
        raise NotImplementedError("ClusterResolver.cluster_spec: a subclass gives it")

    def master(self, task_type=None, task_id=None, rpc_layer=None):
        raise NotImplementedError("ClusterResolver.master: a subclass gives it")

    def num_accelerators(self, task_type=None, task_id=None, config_proto=None):
        """{device type: count} of this machine's accelerators ({'GPU': n}; {} without)."""
        return _num_accelerators()


class SimpleClusterResolver(ClusterResolver):
    """A resolver holding what it is given, as
    `tf.distribute.cluster_resolver.SimpleClusterResolver(cluster_spec, master='',
    task_type=None, task_id=None, environment='', num_accelerators=None, rpc_layer=None)`.

    >>> r = tg.distribute.cluster_resolver.SimpleClusterResolver(
    ...     tg.train.ClusterSpec({"worker": ["a:1", "b:1"]}), task_type="worker", task_id=1,
    ...     rpc_layer="grpc")
    >>> r.master(), r.master("worker", 0), r.num_accelerators()
    ('', 'grpc://a:1', {})
    """

    def __init__(self, cluster_spec, master="", task_type=None, task_id=None, environment="",
                 num_accelerators=None, rpc_layer=None):
        if not isinstance(cluster_spec, ClusterSpec):
            raise TypeError(f"cluster_spec must be a tf.train.ClusterSpec, got "
                            f"{cluster_spec!r}")
        if not isinstance(master, str):
            raise TypeError(f"master must be a string, got {master!r}")
        self._spec = cluster_spec
        self._master = master
        self.task_type = task_type
        self.task_id = task_id
        self.environment = environment
        self._accelerators = num_accelerators
        self.rpc_layer = rpc_layer

    def cluster_spec(self):
        return self._spec

    def master(self, task_type=None, task_id=None, rpc_layer=None):
        """The given master, or the address of task (`task_type`, `task_id`) when both are
        given, prefixed by `rpc_layer`:// where there is one."""
        if task_type is not None and task_id is not None:
            address = self._spec.task_address(task_type, task_id)
        else:
            address = self._master
        return _master_url(address, rpc_layer or self.rpc_layer) if address else address

    def num_accelerators(self, task_type=None, task_id=None, config_proto=None):
        if self._accelerators is None:
            return {}
        return dict(self._accelerators)


class TFConfigClusterResolver(ClusterResolver):
    """The cluster and this task as the TF_CONFIG environment variable describes them, as
    `tf.distribute.cluster_resolver.TFConfigClusterResolver(task_type=None, task_id=None,
    rpc_layer=None, environment=None)`: TF_CONFIG is JSON with "cluster" ({job: addresses}),
    "task" ({"type", "index"}), optionally "rpc_layer" and "environment"; it is read at each
    call. Arguments override what TF_CONFIG says.

    >>> import os, json
    >>> os.environ["TF_CONFIG"] = json.dumps({"cluster": {"worker": ["h0:12345", "h1:23456"]},
    ...                                       "task": {"type": "worker", "index": 1}})
    >>> r = tg.distribute.cluster_resolver.TFConfigClusterResolver()
    >>> r.task_type, r.task_id, r.master(rpc_layer="grpc"), r.cluster_spec().num_tasks("worker")
    ('worker', 1, 'grpc://h1:23456', 2)
    >>> del os.environ["TF_CONFIG"]
    """

    def __init__(self, task_type=None, task_id=None, rpc_layer=None, environment=None):
        self._task_type = task_type
        self._task_id = task_id
        self._rpc_layer = rpc_layer
        self._environment = environment

    @staticmethod
    def _config():
        text = os.environ.get("TF_CONFIG", "")
        if not text.strip():
            return {}
        try:
            return json.loads(text)
        except ValueError as exc:
            raise ValueError(f"TFConfigClusterResolver: TF_CONFIG is not valid JSON ({exc}): "
                             f"{text!r}") from None

    @property
    def task_type(self):
        if self._task_type is not None:
            return self._task_type
        task = self._config().get("task", {})
        return str(task["type"]) if "type" in task else None

    @task_type.setter
    def task_type(self, value):
        self._task_type = value

    @property
    def task_id(self):
        if self._task_id is not None:
            return self._task_id
        task = self._config().get("task", {})
        return int(task["index"]) if "index" in task else None

    @task_id.setter
    def task_id(self, value):
        self._task_id = value

    @property
    def environment(self):
        if self._environment is not None:
            return self._environment
        return self._config().get("environment", "")

    @property
    def rpc_layer(self):
        if self._rpc_layer is not None:
            return self._rpc_layer
        return self._config().get("rpc_layer")

    @rpc_layer.setter
    def rpc_layer(self, value):
        self._rpc_layer = value

    def cluster_spec(self):
        return ClusterSpec(self._config().get("cluster", {}))

    def master(self, task_type=None, task_id=None, rpc_layer=None):
        """The address of task (`task_type`, `task_id`) (default: this task) with
        `rpc_layer`:// in front where one is given or configured; '' when the task is not
        known."""
        task_type = task_type if task_type is not None else self.task_type
        task_id = task_id if task_id is not None else self.task_id
        if task_type is None or task_id is None:
            return ""
        address = self.cluster_spec().task_address(task_type, task_id)
        return _master_url(address, rpc_layer or self.rpc_layer)
