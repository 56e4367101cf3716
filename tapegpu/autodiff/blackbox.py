"""Black-box ops: `numpy_function` and the gradient estimators it can use; `py_function`.

`numpy_function(func, inp, Tout, grad=...)` runs `func` on host numpy arrays — plain numpy, an
external program, a measurement on hardware — and records one op per floating output on the
active tapes. Its VJP is, in order of preference:

* a user rule `grad(upstream, *inputs) -> input gradients`;
* an estimator of the Jacobian (`'central_difference'`, `'forward_difference'`,
  `tg.estimators.spsa(...)`): it evaluates `func` near the inputs once, when a gradient is
  first asked for, and the VJP is then `g @ J` — for any number of cotangents, so
  `tape.jacobian` through the op costs no more evaluations than `tape.gradient`;
* nothing: asking for a gradient through the op raises `LookupError` saying how to supply one.

Estimators work in float64 on the host whatever the tensors' dtype, and return the Jacobian in
the output's dtype.
"""
import math

import numpy as np

from .. import backends as _backend
from ..core.dtypes import np_dtype
from ..errors import OpError, OutOfRangeError, UnknownError
from ..ops.registry import InvalidArgumentError, Op
from ..core.tensor import Tensor, Variable, _thread, convert_to_tensor


# -- estimators -----------------------------------------------------------------------------------

class JacobianEstimator:
    """Estimates the Jacobian of a black-box function from evaluations of it.

    `jacobian(func, inputs, n_outputs)` gets the function, the input arrays (its own copies)
    and the number of outputs, and returns `J[k][i]`, the Jacobian of output k with respect to
    input i as a float64 array of shape `(size of output k, inputs[i].size)`, or None for a
    non-floating input.
    """

    def jacobian(self, func, inputs, n_outputs):
        raise NotImplementedError


def _floating(a):
    return a.dtype.kind == "f"


def _evaluate(func, inputs, n_out):
    out = func(*inputs)
    out = list(out) if isinstance(out, (list, tuple)) else [out]
    if len(out) != n_out:
        raise ValueError(f"numpy_function: func returned {len(out)} outputs while estimating a "
                         f"gradient, but {n_out} at the forward call")
    return [np.asarray(o, dtype=np.float64).reshape(-1) for o in out]


class _Difference(JacobianEstimator):
    """Finite differences, one coordinate at a time."""

    central = False

    def __init__(self, step=None):
        self.step = step

    def _h(self, x):
        if self.step is not None:
            return np.full(x.shape, float(self.step))
        eps = float(np.finfo(x.dtype).eps)
        base = eps ** (1.0 / 3.0) if self.central else math.sqrt(eps)
        return base * np.maximum(1.0, np.abs(x.astype(np.float64)))

    def jacobian(self, func, inputs, n_outputs):
        # the forward difference measures f(x) again, next to its shifted evaluations (a
        # drifting measurement then differences consistently)
        f0 = None if self.central else _evaluate(func, inputs, n_outputs)
        result = [[None] * len(inputs) for _ in range(n_outputs)]
        for i, x in enumerate(inputs):
            if not _floating(x):
                continue
            hs = self._h(x.reshape(-1))
            cols = []
            for j in range(x.size):
                plus, h_plus = _shifted(inputs, i, j, hs[j])
                fp = _evaluate(func, plus, n_outputs)
                if self.central:
                    minus, h_minus = _shifted(inputs, i, j, -hs[j])
                    fm = _evaluate(func, minus, n_outputs)
                    cols.append([(a - b) / (h_plus - h_minus) for a, b in zip(fp, fm)])
                else:
                    cols.append([(a - b) / h_plus for a, b in zip(fp, f0)])
            for k in range(n_outputs):
                result[k][i] = np.stack([c[k] for c in cols], axis=1)
        return result


def _shifted(inputs, i, j, h):
    """The inputs with element j of input i moved by h, and the step actually taken (the
    difference as represented in the input's dtype)."""
    x = inputs[i].copy()
    flat = x.reshape(-1)
    old = flat[j]
    flat[j] = old + flat.dtype.type(h)
    taken = float(flat[j]) - float(old)
    return inputs[:i] + [x] + inputs[i + 1:], taken


class CentralDifference(_Difference):
    """(f(x + h e_j) - f(x - h e_j)) / 2h for each input element j: 2 evaluations per element,
    error O(h^2); h = eps^(1/3) * max(1, |x_j|) for the input's dtype unless `step` is given."""

    central = True

    def __repr__(self):
        return f"central_difference(step={self.step})"


class ForwardDifference(_Difference):
    """(f(x + h e_j) - f(x)) / h for each input element j: 1 evaluation per element plus one
    of f(x) (measured again, next to the others), error O(h); h = sqrt(eps) * max(1, |x_j|)
    unless `step`."""

    def __repr__(self):
        return f"forward_difference(step={self.step})"


class SPSA(JacobianEstimator):
    """Simultaneous perturbation (Spall): J ≈ mean over samples of
    (f(x + c Δ) - f(x - c Δ)) / 2c ⊗ Δ, with Δ a random ±1 vector over every floating input
    element. Costs 2 * num_samples evaluations whatever the input size; unbiased to O(c^2),
    with a variance that falls as 1 / num_samples. `seed` makes the sequence of estimates
    repeatable; c defaults to eps^(1/3) * max(1, max|x|) for the dtype."""

    def __init__(self, num_samples=32, seed=None, perturbation=None):
        if int(num_samples) < 1:
            raise ValueError(f"spsa: num_samples must be at least 1, got {num_samples}")
        self.num_samples = int(num_samples)
        self.seed = seed
        self.perturbation = perturbation
        self._rng = np.random.default_rng(seed)

    def __repr__(self):
        return f"spsa(num_samples={self.num_samples}, seed={self.seed})"

    def jacobian(self, func, inputs, n_outputs):
        idx = [i for i, x in enumerate(inputs) if _floating(x)]
        sizes = [inputs[i].size for i in idx]
        n = sum(sizes)
        if not idx:
            return [[None] * len(inputs) for _ in range(n_outputs)]
        c = self.perturbation
        if c is None:
            scale = max([1.0] + [float(np.abs(inputs[i]).max()) for i in idx if inputs[i].size])
            c = float(np.finfo(inputs[idx[0]].dtype).eps) ** (1.0 / 3.0) * scale
        totals = None
        for _ in range(self.num_samples):
            delta = self._rng.choice(np.array([-1.0, 1.0]), size=n)
            plus, minus = _perturbed(inputs, idx, sizes, delta * c)
            fp = _evaluate(func, plus, n_outputs)
            fm = _evaluate(func, minus, n_outputs)
            steps = _taken(idx, plus, minus)  # 2c Δ as represented in the dtype
            sample = [np.outer(a - b, 1.0 / steps) for a, b in zip(fp, fm)]
            totals = sample if totals is None else [t + e for t, e in zip(totals, sample)]
        result = [[None] * len(inputs) for _ in range(n_outputs)]
        for k in range(n_outputs):
            start = 0
            for i, size in zip(idx, sizes):
                result[k][i] = totals[k][:, start:start + size] / self.num_samples
                start += size
        return result


def _perturbed(inputs, idx, sizes, shift):
    plus, minus, start = list(inputs), list(inputs), 0
    for i, size in zip(idx, sizes):
        x = inputs[i]
        s = shift[start:start + size].reshape(x.shape)
        plus[i] = (x + s).astype(x.dtype)
        minus[i] = (x - s).astype(x.dtype)
        start += size
    return plus, minus


def _taken(idx, plus, minus):
    return np.concatenate([plus[i].astype(np.float64).reshape(-1) -
                           minus[i].astype(np.float64).reshape(-1) for i in idx])


def central_difference(step=None):
    """The central-difference estimator (see `CentralDifference`).

    >>> f = lambda x: tg.numpy_function(np.sin, [x], tg.float64, grad="central_difference")
    >>> x = tg.constant([0.0, 1.0], dtype=tg.float64)
    >>> with tg.GradientTape() as tape:
    ...     tape.watch(x)
    ...     y = f(x)
    >>> tape.gradient(y, x).numpy().round(6)
    array([1.      , 0.540302])
    """
    return CentralDifference(step)


def forward_difference(step=None):
    """The forward-difference estimator (see `ForwardDifference`).

    >>> tg.estimators.forward_difference()
    forward_difference(step=None)
    """
    return ForwardDifference(step)


def spsa(num_samples=32, seed=None, perturbation=None):
    """The SPSA estimator (see `SPSA`): for many inputs and a noisy or costly function.

    >>> tg.estimators.spsa(num_samples=8, seed=0)
    spsa(num_samples=8, seed=0)
    """
    return SPSA(num_samples, seed, perturbation)


_ESTIMATORS = {"central_difference": CentralDifference, "forward_difference": ForwardDifference,
               "spsa": SPSA}


def _estimator(grad):
    if isinstance(grad, JacobianEstimator):
        return grad
    if isinstance(grad, str):
        if grad not in _ESTIMATORS:
            raise ValueError(f"numpy_function: unknown gradient estimator {grad!r}; valid: "
                             f"{sorted(_ESTIMATORS)}, an estimator such as "
                             "tg.estimators.spsa(num_samples=..., seed=...), or a callable")
        return _ESTIMATORS[grad]()
    return None


# -- numpy_function -------------------------------------------------------------------------------

class NoGradientError(LookupError):
    """A gradient was asked for through a black-box op that has no way to compute one."""


def numpy_function(func, inp, Tout, grad=None, stateful=True, name=None):
    """Wraps a Python function of numpy arrays as an op (as `tf.numpy_function`).

    `func(*arrays)` receives host numpy copies of `inp` and returns one array (when `Tout` is a
    dtype) or a list of arrays (when `Tout` is a list of dtypes); floating results are
    converted to their `Tout` dtype, and the outputs live on the inputs' device. `stateful` is
    accepted for TensorFlow compatibility: the function always runs once per call.

    Gradients: `grad` is
      * a callable `grad(upstream, *inputs)`, with `upstream` the cotangent of the output (one
        tensor per output, as positional arguments, when `Tout` is a list) and `inputs` the
        op's input tensors; it returns one gradient (a tensor, array or None) per input, and
        may use tapegpu ops (then higher-order gradients work) or numpy;
      * an estimator: `'central_difference'`, `'forward_difference'`, `'spsa'`, or an object
        from `tg.estimators` (e.g. `tg.estimators.spsa(num_samples=64, seed=0)`); it estimates
        the whole Jacobian (difference estimators: one or two evaluations of `func` per input
        element) the first time a gradient is needed, and `tape.jacobian` reuses it;
      * None: the op runs, but asking a tape for a gradient through it raises
        `NoGradientError` (a `LookupError`) explaining how to supply one.

    >>> def measure(x):                  # stands for anything outside the graph
    ...     return np.sum(x ** 2)
    >>> x = tg.Variable([1.0, 2.0])
    >>> with tg.GradientTape() as tape:
    ...     y = tg.numpy_function(measure, [x], tg.float32,
    ...                           grad=lambda g, x: g * 2.0 * x)
    >>> tape.gradient(y, x).numpy()
    array([2., 4.], dtype=float32)
    """
    label = name or getattr(func, "__name__", "func")
    if not (grad is None or callable(grad) or isinstance(grad, (str, JacobianEstimator))):
        raise TypeError(f"numpy_function {label!r}: grad must be a callable, an estimator name "
                        "('central_difference', 'forward_difference', 'spsa'), an estimator "
                        f"from tg.estimators, or None; got {grad!r}")
    estimator = _estimator(grad)  # validates a name now, not at gradient time
    inputs = [_as_input(x, label) for x in (inp if isinstance(inp, (list, tuple)) else [inp])]
    single = not isinstance(Tout, (list, tuple))
    touts = [Tout] if single else list(Tout)
    result = func(*[x.numpy() for x in inputs])
    results = [result] if single else _as_list(result, len(touts), label)
    dev = inputs[0]._dev if inputs else _backend.current()
    outs = [_as_output(r, dt, dev, label, k) for k, (r, dt) in enumerate(zip(results, touts))]
    if _thread.recorders and any(x._data.dtype.kind in "fcV" for x in inputs):
        _record(func, grad, estimator, inputs, outs, label, single)
    return outs[0] if single else outs


def _as_input(x, label):
    if isinstance(x, Variable):
        return x._read()
    return x if isinstance(x, Tensor) else convert_to_tensor(x)


def _as_list(result, n, label):
    if not isinstance(result, (list, tuple)) or len(result) != n:
        raise ValueError(f"numpy_function {label!r}: Tout lists {n} outputs but func returned "
                         f"{type(result).__name__}" +
                         (f" of length {len(result)}" if isinstance(result, (list, tuple))
                          else ""))
    return list(result)


def _as_output(r, dtype, dev, label, k):
    want = np.dtype(np_dtype(dtype))
    a = np.asarray(r)
    if a.dtype != want:
        ok = (a.dtype.kind in "fiub" and want.kind == "f") or \
             (a.dtype.kind in "iub" and want.kind in "iub")
        if not ok:
            raise TypeError(f"numpy_function {label!r}: output {k} has dtype {a.dtype.name} but "
                            f"Tout says {want.name}; return an array of dtype {want.name}")
        a = a.astype(want)
    else:
        a = a.copy()
    return Tensor(a if dev.xp is np else dev.asarray(a), dev)


def _record(func, grad, estimator, inputs, outs, label, single):
    """One recorded op per floating output. Each op declares the inputs as its saved values
    (its rule gets them back from the tape); the closures keep only the function, output
    shapes and dtypes, and the estimated Jacobian, which the outputs' ops share."""
    out_specs = [(o.shape, o.dtype) for o in outs]
    args = tuple(f"a{i}" for i in range(len(inputs)))
    cache = {}

    def jacobian(saved):
        if "J" not in cache:
            cache["J"] = estimator.jacobian(func, [x.numpy() for x in saved], len(outs))
        return cache["J"]

    for k, out in enumerate(outs):
        if out._data.dtype.kind not in "fcV":
            continue
        saves = args
        if estimator is not None:
            vjp, jvp, batched = _estimated_vjp(jacobian, k, out.shape), \
                _estimated_jvp(jacobian, k, out.shape), True
        elif grad is not None:
            vjp, jvp, batched = _user_vjp(grad, k, out_specs, label, single), None, False
        else:
            vjp, jvp, batched, saves = _missing_vjp(label), None, True, ()
        op = Op(f"numpy_function:{label}", args=args, vjp=vjp, jvp=jvp, saves=saves,
                batched=batched, same_dtype=False, variadic=True, tensor_rule=True)
        for rec in list(_thread.recorders):
            rec.record(op, inputs, out, {})


def _estimated_vjp(jacobian, k, out_shape):
    # x_i's cotangent = g_k @ J[k][i], with g carrying any leading batch axes
    def vjp(ops, g, *inputs):
        batch = g.shape[:g.ndim - len(out_shape)]
        flat = ops.reshape(g, (-1, int(np.prod(out_shape))))
        grads = []
        for x, j in zip(inputs, jacobian(inputs)[k]):
            if j is None:
                grads.append(None)
                continue
            jt = Tensor(_to_dev(j.astype(g._data.dtype), x._dev), x._dev)
            grads.append(ops.reshape(ops.matmul(flat, jt), batch + x.shape))
        return tuple(grads)
    return vjp


def _estimated_jvp(jacobian, k, out_shape):
    # out_k's tangent = sum_i J[k][i] t_i, with t carrying any leading batch axes
    def jvp(ops, ts, *inputs):
        total = None
        for x, j, t in zip(inputs, jacobian(inputs)[k], ts):
            if j is None or t is None:
                continue
            batch = t.shape[:t.ndim - x.ndim]
            jt = Tensor(_to_dev(j.T.astype(t._data.dtype), x._dev), x._dev)
            part = ops.reshape(ops.matmul(ops.reshape(t, (-1, x._data.size)), jt),
                               batch + tuple(out_shape))
            total = part if total is None else total + part
        return total
    return jvp


def _to_dev(a, dev):
    return a if dev.xp is np else dev.asarray(a)


def _user_vjp(grad, k, out_specs, label, single):
    def vjp(ops, g, *inputs):
        upstream = [g] if single else [g if j == k else ops.zeros(shape, dtype=dtype)
                                       for j, (shape, dtype) in enumerate(out_specs)]
        got = grad(*upstream, *inputs)
        got = list(got) if isinstance(got, (list, tuple)) else [got]
        if len(got) != len(inputs):
            raise ValueError(f"numpy_function {label!r}: grad returned {len(got)} gradients for "
                             f"{len(inputs)} inputs; return one per input (None for none)")
        return tuple(None if c is None else _grad_tensor(c, x, label)
                     for c, x in zip(got, inputs))
    return vjp


def _grad_tensor(c, x, label):
    c = c if isinstance(c, Tensor) else convert_to_tensor(np.asarray(c, dtype=x._data.dtype))
    if c.shape != x.shape:
        raise ValueError(f"numpy_function {label!r}: grad returned a gradient of shape "
                         f"{c.shape} for an input of shape {x.shape}")
    return c


def _missing_vjp(label):
    def vjp(ops, g):  # saves nothing: it only explains
        raise NoGradientError(
            f"numpy_function {label!r} has no gradient: it wraps a black-box Python function. "
            f"Pass grad= to tg.numpy_function: a callable grad(upstream, *inputs) returning one "
            f"gradient per input, or an estimator: 'central_difference', 'forward_difference', "
            f"'spsa' or tg.estimators.spsa(num_samples=..., seed=...); or wrap the inputs in "
            f"tg.stop_gradient if no gradient should flow through it")
    return vjp


# -- py_function ----------------------------------------------------------------------------------

def py_function(func=None, inp=None, Tout=None, name=None):
    """Runs a Python function of tensors as one step of the program (as `tf.py_function`).

    `func(*inp)` receives `inp` as tensors (variables are read) and may use any Python control
    flow, tapegpu ops and `.numpy()`. It returns one value when `Tout` is a dtype, a list of
    values when `Tout` is a list of dtypes (`[]`: it returns None); each becomes a tensor of its
    `Tout` dtype (a tensor must already have it; Python and numpy values are converted as by
    `tg.convert_to_tensor(value, dtype)`).

    Gradients flow through the tapegpu ops that `func` runs on its inputs, as in TensorFlow:
    the active tapes record them like any other ops (values that leave through numpy have no
    gradient). Unlike `tg.numpy_function` there is no gradient rule to give.

    Errors from `func` come back as TensorFlow reports them: a `ValueError` or `TypeError` as
    `tg.errors.InvalidArgumentError`, `StopIteration` as `tg.errors.OutOfRangeError`, any other
    exception as `tg.errors.UnknownError` (each naming the original, which is its `__cause__`);
    tapegpu's and TensorFlow's own error classes pass unchanged.

    Called with `func` omitted, it is a decorator: `@tg.py_function(Tout=tg.float32)`.

    >>> def log_huber(x, m):            # TensorFlow's example
    ...     if tg.abs(x) <= m:
    ...         return x ** 2
    ...     return m ** 2 * (1 - 2 * tg.math.log(m) + tg.math.log(x ** 2))
    >>> x, m = tg.constant(1.0), tg.constant(2.0)
    >>> with tg.GradientTape() as tape:
    ...     tape.watch([x, m])
    ...     y = tg.py_function(func=log_huber, inp=[x, m], Tout=tg.float32)
    >>> float(tape.gradient(y, x))
    2.0
    """
    if func is None:
        if inp is not None:
            raise TypeError("py_function: as a decorator (func omitted) it takes Tout and name, "
                            "not inp: @tg.py_function(Tout=tg.float32)")
        if Tout is None:
            raise TypeError("py_function: as a decorator it needs Tout: "
                            "@tg.py_function(Tout=tg.float32)")

        def decorator(f):
            def wrapper(*args):
                return py_function(f, list(args), Tout, name)
            wrapper.__name__ = getattr(f, "__name__", "py_function")
            wrapper.__doc__ = getattr(f, "__doc__", None)
            wrapper.__wrapped__ = f
            return wrapper
        return decorator
    if not callable(func):
        raise TypeError(f"py_function: func must be callable, got {func!r}")
    if Tout is None:
        raise TypeError("py_function: Tout is required: a dtype (func returns one value), a list "
                        "of dtypes (a list of values), or [] (func returns None)")
    label = name or getattr(func, "__name__", "func")
    if inp is None:
        inp = []
    if not isinstance(inp, (list, tuple)):
        raise TypeError(f"py_function {label!r}: inp must be a list of the arguments of func, "
                        f"got {type(inp).__name__}; write inp=[x]")
    single = not isinstance(Tout, (list, tuple))
    touts = [Tout] if single else list(Tout)
    try:
        dtypes_ = [np.dtype(np_dtype(t)) for t in touts]
    except (TypeError, ValueError) as e:
        raise TypeError(f"py_function {label!r}: Tout must be a dtype or a list of dtypes, got "
                        f"{Tout!r} ({e})") from None
    args = [_as_input(x, label) for x in inp]
    try:
        result = func(*args)
    except (OpError, InvalidArgumentError):
        raise
    except (ValueError, TypeError) as e:
        raise InvalidArgumentError(f"py_function {label!r}: {type(e).__name__}: {e}") from e
    except StopIteration as e:
        raise OutOfRangeError(None, None, f"py_function {label!r}: StopIteration: {e}") from e
    except Exception as e:
        raise UnknownError(None, None, f"py_function {label!r}: {type(e).__name__}: {e}") from e
    if not touts:
        if result is not None and not (isinstance(result, (list, tuple)) and not result):
            raise InvalidArgumentError(f"py_function {label!r}: Tout is [] but func returned "
                                       f"{type(result).__name__}; return None")
        return []
    if single:
        results = [result]
    elif isinstance(result, (list, tuple)) and len(result) == len(touts):
        results = list(result)
    else:
        raise InvalidArgumentError(
            f"py_function {label!r}: Tout lists {len(touts)} outputs but func returned "
            f"{type(result).__name__}" + (f" of length {len(result)}"
                                          if isinstance(result, (list, tuple)) else ""))
    outs = [_py_output(r, dt, label, k) for k, (r, dt) in enumerate(zip(results, dtypes_))]
    return outs[0] if single else outs


def _py_output(value, dtype, label, k):
    if isinstance(value, Variable):
        value = value._read()
    if value is None:
        raise InvalidArgumentError(f"py_function {label!r}: output {k} is None; func must return "
                                   f"a value of dtype {dtype.name} for each entry of Tout")
    if isinstance(value, Tensor) and value._data.dtype != dtype:
        raise InvalidArgumentError(f"py_function {label!r}: output {k} is a {value.dtype.name} "
                                   f"tensor but Tout says {dtype.name}; cast it in func with "
                                   f"tg.cast(value, tg.{dtype.name})")
    try:
        return convert_to_tensor(value, dtype=dtype)
    except (TypeError, ValueError) as e:
        raise InvalidArgumentError(f"py_function {label!r}: output {k} does not convert to "
                                   f"Tout's {dtype.name}: {e}") from None
