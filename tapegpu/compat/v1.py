"""`tg.compat.v1`: TF1's names that TF2 programs still touch.

Names TF 2 has at the same path are tapegpu's TF2 objects; `logging` is TF1's logging module;
the switches towards TF2 behaviour are accepted (they describe what tapegpu always does); the
reductions and arg-reductions take TF1's argument names (`keep_dims`, `reduction_indices`,
`dimension`); `ConfigProto` and `GPUOptions` are accepted as settings objects; the graph-mode API
raises NotImplementedError (`tapegpu/compat/surface.py` says why and what to use instead).

>>> tg.compat.v1.reduce_sum([[1.0, 2.0]], reduction_indices=1, keep_dims=True).numpy()
array([[3.]], dtype=float32)
"""
import functools
import logging as _py_logging
import types

from . import surface


def _logging_module():
    """TF1's `tf.compat.v1.logging` on Python's logger 'tensorflow'."""
    log = _py_logging.getLogger("tensorflow")
    mod = types.ModuleType("tapegpu.compat.v1.logging", _logging_module.__doc__)
    mod.DEBUG, mod.INFO, mod.WARN = _py_logging.DEBUG, _py_logging.INFO, _py_logging.WARN
    mod.ERROR, mod.FATAL = _py_logging.ERROR, _py_logging.FATAL

    def set_verbosity(v):
        """Sets the threshold of the 'tensorflow' logger (`tf.compat.v1.logging.set_verbosity`).

        >>> tg.compat.v1.logging.set_verbosity(tg.compat.v1.logging.ERROR)
        >>> tg.compat.v1.logging.get_verbosity() == tg.compat.v1.logging.ERROR
        True
        """
        log.setLevel(v)

    def get_verbosity():
        """The threshold of the 'tensorflow' logger.

        >>> isinstance(tg.compat.v1.logging.get_verbosity(), int)
        True
        """
        return log.getEffectiveLevel()

    def _emit(level):
        def fn(msg, *args, **kwargs):
            log.log(level, msg, *args, **kwargs)
        fn.__doc__ = (f"Logs `msg % args` at level {_py_logging.getLevelName(level)} on the "
                      f"'tensorflow' logger.\n\n    >>> tg.compat.v1.logging.info('%d steps', 3)"
                      f"\n    ")
        return fn

    mod.set_verbosity, mod.get_verbosity = set_verbosity, get_verbosity
    mod.debug, mod.info, mod.warn = _emit(10), _emit(20), _emit(30)
    mod.warning, mod.error, mod.fatal = _emit(30), _emit(40), _emit(50)

    def log_fn(level, msg, *args, **kwargs):
        """Logs at `level` (`tf.compat.v1.logging.log`).

        >>> tg.compat.v1.logging.log(tg.compat.v1.logging.DEBUG, 'x')
        """
        log.log(level, msg, *args, **kwargs)

    counts = {}

    def log_every_n(level, msg, n, *args):
        """Logs the 1st, (n+1)th, ... call from the same place (`log_every_n`).

        >>> tg.compat.v1.logging.log_every_n(tg.compat.v1.logging.DEBUG, 'x', 2)
        """
        key = (msg, n)
        counts[key] = counts.get(key, 0) + 1
        if (counts[key] - 1) % n == 0:
            log.log(level, msg, *args)

    def log_first_n(level, msg, n, *args):
        """Logs the first `n` calls from the same place (`log_first_n`).

        >>> tg.compat.v1.logging.log_first_n(tg.compat.v1.logging.DEBUG, 'x', 1)
        """
        key = ("first", msg, n)
        counts[key] = counts.get(key, 0) + 1
        if counts[key] <= n:
            log.log(level, msg, *args)

    def log_if(level, msg, condition, *args):
        """Logs when `condition` holds (`log_if`).

        >>> tg.compat.v1.logging.log_if(tg.compat.v1.logging.DEBUG, 'x', False)
        """
        if condition:
            log.log(level, msg, *args)

    def vlog(level, msg, *args, **kwargs):
        """Logs at `level` (`vlog`).

        >>> tg.compat.v1.logging.vlog(10, 'x')
        """
        log.log(level, msg, *args, **kwargs)

    def flush():
        """Flushes the logger's handlers.

        >>> tg.compat.v1.logging.flush()
        """
        for h in log.handlers:
            h.flush()

    def TaskLevelStatusMessage(msg):  # noqa: N802  (TF's name)
        """Logs `msg` at ERROR (as TF1).

        >>> tg.compat.v1.logging.TaskLevelStatusMessage('x')
        """
        log.error(msg)

    mod.log, mod.log_every_n, mod.log_first_n, mod.log_if = log_fn, log_every_n, log_first_n, log_if
    mod.vlog, mod.flush, mod.TaskLevelStatusMessage = vlog, flush, TaskLevelStatusMessage
    return mod


def _accepted(name, returns=None):
    def fn(*args, **kwargs):
        return returns
    fn.__name__ = name
    fn.__doc__ = (f"`tf.compat.v1.{name}`: accepted, nothing to change (tapegpu always runs "
                  f"eagerly with TF2's semantics).\n\n    >>> tg.compat.v1.{name}()\n    ")
    if returns is not None:
        fn.__doc__ += f"{returns!r}\n    "
    return fn


class _Settings:
    """A bag of settings (`ConfigProto`, `GPUOptions`): keyword arguments become attributes,
    unknown attributes read as a nested bag. Accepted for programs that build one; tapegpu
    reads none of them (`tg.config` holds its settings)."""

    def __init__(self, **kwargs):
        self.__dict__.update(kwargs)

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        value = _Settings()
        setattr(self, name, value)
        return value


class ConfigProto(_Settings):
    """`tf.compat.v1.ConfigProto`: accepted settings (`gpu_options.allow_growth = True`, ...);
    tapegpu reads none of them: use `tg.config.experimental.set_memory_growth` and
    `tg.config.threading`.

    >>> config = tg.compat.v1.ConfigProto(log_device_placement=False)
    >>> config.gpu_options.allow_growth = True
    >>> config.gpu_options.allow_growth
    True
    """


class GPUOptions(_Settings):
    """`tf.compat.v1.GPUOptions`: accepted settings, read by nothing (see `ConfigProto`).

    >>> tg.compat.v1.GPUOptions(allow_growth=True).allow_growth
    True
    """


def _v1_reduction(fn, name):
    """TF1's signature of a reduction: `keep_dims` and `reduction_indices` as well."""
    @functools.wraps(fn)
    def reduce(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None,
               keep_dims=None):
        if axis is not None and reduction_indices is not None:
            raise ValueError(f"tf.compat.v1.{fn.__name__}: give axis or reduction_indices, "
                             f"not both")
        if keepdims is not None and keep_dims is not None:
            raise ValueError(f"tf.compat.v1.{fn.__name__}: give keepdims or keep_dims, not both")
        axis = reduction_indices if axis is None else axis
        keep = bool(keep_dims if keepdims is None else keepdims)
        return fn(input_tensor, axis=axis, keepdims=keep)
    return reduce


def _v1_arg(fn):
    """TF1's arg-reductions: `dimension` as well as `axis` (default 0)."""
    @functools.wraps(fn)
    def arg(input, axis=None, name=None, dimension=None, output_type="int64"):  # noqa: A002
        if axis is not None and dimension is not None:
            raise ValueError(f"tf.compat.v1.{fn.__name__}: give axis or dimension, not both")
        axis = dimension if axis is None else axis
        return fn(input, axis=0 if axis is None else axis, output_type=output_type)
    return arg


def _make():
    import tapegpu as tg
    ns = surface.alias_namespace("tf.compat.v1", "tf", __doc__)
    ns.logging = _logging_module()
    for name in ("enable_eager_execution", "enable_v2_behavior", "enable_v2_tensorshape",
                 "enable_tensor_equality", "enable_resource_variables", "enable_control_flow_v2"):
        setattr(ns, name, _accepted(name))
    for name in ("executing_eagerly", "resource_variables_enabled", "control_flow_v2_enabled",
                 "executing_eagerly_outside_functions"):
        setattr(ns, name, _accepted(name, True))
    for name in ("disable_eager_execution", "disable_v2_behavior", "disable_tensor_equality",
                 "disable_resource_variables", "disable_control_flow_v2", "disable_v2_tensorshape"):
        setattr(ns, name, surface.refused_function(
            f"tf.compat.v1.{name}", "tapegpu runs TF2's eager semantics only; TF1 graph mode "
            "does not exist here", "remove the call and run the program eagerly (or its steps "
            "in a tg.function)"))
    ns.ConfigProto, ns.GPUOptions = ConfigProto, GPUOptions
    ns.set_random_seed = tg.random.set_seed
    for name in ("reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod",
                 "reduce_all", "reduce_any", "reduce_logsumexp"):
        setattr(ns, name, _v1_reduction(getattr(tg, name), name))
    ns.argmax, ns.argmin = _v1_arg(tg.argmax), _v1_arg(tg.argmin)
    return ns


v1 = _make()
