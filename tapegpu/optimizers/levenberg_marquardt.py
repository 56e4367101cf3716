"""Levenberg–Marquardt: nonlinear least squares on variables.

Minimises `F(p) = 0.5 * ||r(p)||^2` over the variables `p` (all of them, flattened and
concatenated), where `r` is the concatenation of every residual, flattened. Each iteration:

1. r and the Jacobian J = dr/dp by `tape.jacobian`: batched VJPs (reverse mode), or batched
   JVPs (forward mode) when there are more residuals than parameters (`jacobian_mode='auto'`);
2. the damped normal equations `(JᵀJ + λ D) δ = -Jᵀr`, D = diag(JᵀJ) (Marquardt's scaling,
   kept as the running maximum so it never shrinks to 0, as MINPACK) or the identity
   (Levenberg's), solved by Cholesky in the variables' dtype;
3. the gain ratio ρ = (F(p) - F(p + δ)) / (L(0) - L(δ)), L the linear model: the step is
   accepted when ρ > 0, and λ adapts by Nielsen's rule (λ *= max(1/3, 1 - (2ρ - 1)^3) on
   success, λ *= ν, ν *= 2 on failure) or by a constant factor.

It stops when ||Jᵀr||_inf <= gradient_tolerance, when ||δ|| <= step_tolerance (||p|| +
step_tolerance), when an accepted step reduces F by less than objective_tolerance * F, or after
max_iterations trial steps.
"""
import dataclasses
import inspect
import math

import numpy as np

from ..autodiff.tape import GradientTape
from ..core import nest
from .. import ops
from ..core.tensor import Tensor, Variable, convert_to_tensor


@dataclasses.dataclass
class LevenbergMarquardtResult:
    """What `LevenbergMarquardt.minimize` found.

    `objective` is 0.5 * ||r||^2 at the final variables (half the sum of squares, as
    TensorFlow Graphics' `l2_loss`); `iterations` counts trial steps (accepted or not);
    `function_evaluations` counts calls of the residual function (one per trial step, plus the
    first), `jacobian_evaluations` the Jacobians taken (one per accepted step, plus the first).
    """
    converged: bool
    message: str
    iterations: int
    objective: float
    initial_objective: float
    gradient_norm: float
    damping: float
    function_evaluations: int
    jacobian_evaluations: int
    history: list = dataclasses.field(default_factory=list, repr=False)


def _default_tolerances(dtype):
    eps = float(np.finfo(dtype).eps)
    return eps ** (2.0 / 3.0), math.sqrt(eps), eps


class LevenbergMarquardt:
    """Fits variables to a residual function by Levenberg–Marquardt.

    Args:
      damping: the initial λ. With `scaling='marquardt'` it is relative to each parameter's
        curvature already; with `scaling='levenberg'` and Nielsen's update it is relative to
        max(diag(JᵀJ)) (Nielsen's τ); with `damping_update='factor'` it is absolute.
      scaling: 'marquardt' (D = diag(JᵀJ)) or 'levenberg' (D = I).
      damping_update: 'nielsen' or 'factor' (λ /= factor on success, *= factor on failure).
      factor: with `damping_update='factor'`, λ is multiplied by it after a rejected step...
      decrease_factor: ...and divided by it after an accepted one (default: `factor`; 1 keeps
        λ from decreasing, as TensorFlow Graphics does).
      jacobian_mode: 'auto' (forward mode when the residuals outnumber the parameters),
        'reverse' or 'forward': passed to `tape.jacobian(..., mode=)`.

    >>> x = tg.constant(np.linspace(0.0, 1.0, 20), dtype=tg.float64)
    >>> y = 2.0 * tg.exp(-1.5 * x) + 0.5
    >>> a, b, c = (tg.Variable(v, dtype=tg.float64) for v in (1.0, 0.0, 0.0))
    >>> lm = tg.optimizers.LevenbergMarquardt()
    >>> result = lm.minimize(lambda: a * tg.exp(b * x) + c - y, [a, b, c])
    >>> result.converged, [round(float(v), 6) for v in (a, b, c)]
    (True, [2.0, -1.5, 0.5])
    """

    def __init__(self, damping=1e-3, scaling="marquardt", damping_update="nielsen",
                 factor=10.0, decrease_factor=None, jacobian_mode="auto",
                 name="LevenbergMarquardt"):
        if scaling not in ("marquardt", "levenberg"):
            raise ValueError(f"LevenbergMarquardt: scaling must be 'marquardt' or 'levenberg', "
                             f"got {scaling!r}")
        if damping_update not in ("nielsen", "factor"):
            raise ValueError(f"LevenbergMarquardt: damping_update must be 'nielsen' or "
                             f"'factor', got {damping_update!r}")
        if jacobian_mode not in ("auto", "reverse", "forward"):
            raise ValueError(f"LevenbergMarquardt: jacobian_mode must be 'auto', 'reverse' or "
                             f"'forward', got {jacobian_mode!r}")
        if not damping >= 0:
            raise ValueError(f"LevenbergMarquardt: damping must be >= 0, got {damping}")
        self.damping, self.scaling, self.damping_update = float(damping), scaling, damping_update
        self.factor, self.jacobian_mode, self.name = float(factor), jacobian_mode, name
        self.decrease_factor = self.factor if decrease_factor is None else float(decrease_factor)

    def minimize(self, residual_fn, var_list, max_iterations=100, gradient_tolerance=None,
                 step_tolerance=None, objective_tolerance=None, callback=None):
        """Minimises 0.5 * ||residual_fn()||^2 over `var_list`, updating the variables.

        Args:
          residual_fn: a callable of no arguments returning the residuals (a tensor or a nested
            structure of tensors, all in the variables' dtype); it reads the variables.
          var_list: the variables to fit (a list, or a nested structure).
          max_iterations: the maximum number of trial steps.
          gradient_tolerance, step_tolerance, objective_tolerance: the stopping thresholds
            (module docstring); defaults eps^(2/3), sqrt(eps) and eps of the dtype.
          callback: `callback(iteration, objective, variables)` after each trial step.

        Returns:
          A `LevenbergMarquardtResult`; the variables hold the best point found.
        """
        variables = _check_variables(nest.flatten(var_list), self.name)
        dtype = variables[0]._value._data.dtype
        xp = variables[0]._value._dev.xp
        defaults = _default_tolerances(dtype)
        gtol = defaults[0] if gradient_tolerance is None else float(gradient_tolerance)
        xtol = defaults[1] if step_tolerance is None else float(step_tolerance)
        ftol = defaults[2] if objective_tolerance is None else float(objective_tolerance)
        if int(max_iterations) < 1:
            raise ValueError(f"{self.name}: max_iterations must be at least 1, got "
                             f"{max_iterations}")
        problem = _Problem(residual_fn, variables, self.jacobian_mode, self.name)
        return _Solver(self, problem, xp, dtype).run(int(max_iterations), gtol, xtol, ftol,
                                                    callback)


class _Problem:
    """The residual function over a flat parameter vector: values, Jacobians, assignment."""

    def __init__(self, residual_fn, variables, mode, name):
        self.fn, self.variables, self.mode, self.name = residual_fn, variables, mode, name
        self.dtype = variables[0]._value._data.dtype
        self.n = sum(int(v._value._data.size) for v in variables)
        self.function_evaluations = 0
        self.jacobian_evaluations = 0

    def arrays(self):
        return [v._value._data for v in self.variables]

    def set_arrays(self, arrays):
        for v, a in zip(self.variables, arrays):
            v._assign_array(a)

    def flat_params(self, xp):
        return xp.concatenate([a.reshape(-1) for a in self.arrays()])

    def unflatten(self, xp, flat):
        out, start = [], 0
        for v in self.variables:
            size = int(v._value._data.size)
            out.append(flat[start:start + size].reshape(v.shape).astype(self.dtype, copy=True))
            start += size
        return out

    def residuals(self):
        """The flat residual vector, as a tensor."""
        self.function_evaluations += 1
        flat = [r if isinstance(r, Tensor) else convert_to_tensor(r) for r in
                nest.flatten(self.fn())]
        if not flat:
            raise ValueError(f"{self.name}: residual_fn returned no residuals")
        for r in flat:
            if r._data.dtype != self.dtype:
                raise TypeError(f"{self.name}: residual of dtype {r.dtype.name} and shape "
                                f"{r.shape}, but the variables are {np.dtype(self.dtype).name}; "
                                "compute the residuals in the variables' dtype")
        parts = [ops.reshape(r, (-1,)) for r in flat]
        return parts[0] if len(parts) == 1 else ops.concat(parts, axis=0)

    def evaluate(self):
        """The residuals at the variables' current values, recorded on a tape (r, tape)."""
        with GradientTape(watch_accessed_variables=False) as tape:
            tape.watch(self.variables)
            r = self.residuals()
        return r, tape

    def jacobian(self, xp, r, tape):
        """J (m, n) of the residuals `r` recorded on `tape`."""
        self.jacobian_evaluations += 1
        jac = tape.jacobian(r, self.variables, unconnected_gradients="zero", **self._mode())
        m = r.shape[0]
        return xp.concatenate([j._data.reshape(m, -1) for j in jac], axis=1)

    def _mode(self):
        """`mode=` for `tape.jacobian` when this build has forward mode ('auto' there picks
        forward mode when the residuals outnumber the parameters), else nothing (reverse)."""
        if "mode" in inspect.signature(GradientTape.jacobian).parameters:
            return {"mode": self.mode}
        if self.mode == "forward":
            raise RuntimeError(f"{self.name}: jacobian_mode='forward' needs forward-mode "
                               "jacobians (tape.jacobian(..., mode='forward')), which this "
                               "build lacks")
        return {}


class _Solver:
    """The LM iteration on flat arrays of the variables' backend. On a GPU each trial step
    reads the device twice (`_read`: the gradient norm, whether the damped system factored,
    the step and parameter norms in one; the new objective and the predicted reduction in
    the other), besides what the residual function and the Jacobian read."""

    def __init__(self, options, problem, xp, dtype):
        self.o, self.p, self.xp, self.dtype = options, problem, xp, dtype

    def _objective(self, r):
        return 0.5 * self.xp.sum(r.astype(np.float64) ** 2)

    def _gnorm(self, g):
        return self.xp.max(self.xp.abs(g)) if g.size else 0.0

    def run(self, max_iterations, gtol, xtol, ftol, callback):
        xp, o, prob = self.xp, self.o, self.p
        r, tape = prob.evaluate()
        jac = prob.jacobian(xp, r, tape)
        r = r._data
        f = f0 = _read(xp, self._objective(r))[0]
        a, g = jac.T @ jac, jac.T @ r
        marquardt = o.scaling == "marquardt"
        d = xp.diagonal(a).copy() if marquardt else xp.ones(a.shape[0], dtype=a.dtype)
        lam = o.damping
        if not marquardt and o.damping_update == "nielsen" and a.size:
            lam *= _read(xp, xp.diagonal(a).max())[0]  # Nielsen's τ, relative to the curvature
        nu, history, it = 2.0, [f], 0
        message, converged = f"reached max_iterations={max_iterations}", False
        while it < max_iterations:
            # the damped step is solved before the gradient test, so both are read at once
            d_next = xp.maximum(d, xp.diagonal(a)) if marquardt else d  # running max (MINPACK)
            step, ok = _solve_damped(xp, a, d_next, lam, g)
            x = prob.flat_params(xp)
            gnorm, ok, step_norm, x_norm = _read(xp, self._gnorm(g), ok,
                                                 *((0.0, 0.0) if step is None else
                                                   (xp.linalg.norm(step), xp.linalg.norm(x))))
            if gnorm <= gtol:
                message, converged = f"gradient norm {gnorm:.3g} <= {gtol:.3g}", True
                break
            it += 1
            d = d_next
            stop = None
            if not ok:  # not positive definite at this damping: damp more
                lam, nu = self._reject(lam, nu)
            else:
                if step_norm <= xtol * (x_norm + xtol):
                    stop = f"step norm below {xtol:.3g} relative to the parameters"
                old = prob.arrays()
                prob.set_arrays(prob.unflatten(xp, x + step))
                r_new, tape = prob.evaluate()
                # the linear model's predicted reduction: L(0) - L(δ) = δᵀ(λ D δ - g) / 2
                f_new, predicted = _read(xp, self._objective(r_new._data), 0.5 * (
                    step * (lam * d * step - g)).astype(np.float64).sum())
                rho = (f - f_new) / predicted if predicted > 0 else -1.0
                if rho > 0 and math.isfinite(f_new):
                    if f - f_new <= ftol * f_new and stop is None:
                        stop = f"relative reduction of the objective below {ftol:.3g}"
                    f, r = f_new, r_new._data
                    jac = prob.jacobian(xp, r_new, tape)
                    a, g = jac.T @ jac, jac.T @ r
                    lam, nu = self._accept(lam, rho)
                else:
                    prob.set_arrays(old)  # the old arrays were never written: restore them
                    lam, nu = self._reject(lam, nu)
            history.append(f)
            if callback is not None:
                callback(it, f, prob.variables)
            if stop is not None:
                message, converged = stop, True
                break
            if not math.isfinite(lam) or lam > 1e30:
                message = "the damping grew without bound: no step reduces the objective " \
                          "(at the dtype's precision)"
                break
        gnorm = _read(xp, self._gnorm(g))[0]
        return LevenbergMarquardtResult(converged, message, it, f, f0, gnorm, lam,
                                        prob.function_evaluations, prob.jacobian_evaluations,
                                        history)

    def _accept(self, lam, rho):
        if self.o.damping_update == "nielsen":
            return lam * max(1.0 / 3.0, 1.0 - (2.0 * rho - 1.0) ** 3), 2.0
        return lam / self.o.decrease_factor, 2.0

    def _reject(self, lam, nu):
        if self.o.damping_update == "nielsen":
            return max(lam, 1e-30) * nu, nu * 2.0
        return max(lam, 1e-30) * self.o.factor, nu


def _read(xp, *values):
    """Python floats of device scalars, read in one host sync (numpy: no copy at all)."""
    if xp is np:
        return [float(v) for v in values]
    return [float(v) for v in xp.asnumpy(xp.stack([xp.asarray(v, dtype=np.float64)
                                                   for v in values]))]


def _solve_damped(xp, a, d, lam, g):
    """δ with (A + λ D) δ = -g by Cholesky, and whether it is valid (a device boolean on a GPU,
    nothing read): (None, False) when numpy's Cholesky raises. CuPy's never raises: it returns
    a partial factor, so the factor is valid only with a positive, finite diagonal (the
    factored matrix is then positive definite) and a finite step."""
    m = a + xp.diag(lam * d)
    try:
        chol = xp.linalg.cholesky(m)
    except np.linalg.LinAlgError:
        return None, False
    y = _solve_triangular(xp, chol, -g, lower=True)
    step = _solve_triangular(xp, chol.T, y, lower=False)
    diagonal = xp.diagonal(chol)
    return step, xp.all(diagonal > 0) & xp.all(xp.isfinite(diagonal)) & \
        xp.all(xp.isfinite(step))


def _solve_triangular(xp, t, b, lower):
    if xp is np:
        try:
            from scipy.linalg import solve_triangular
        except ImportError:
            return np.linalg.solve(t, b)
        return solve_triangular(t, b, lower=lower, check_finite=False)
    from cupyx.scipy.linalg import solve_triangular
    return solve_triangular(t, b, lower=lower)


def _check_variables(variables, who):
    if not variables:
        raise ValueError(f"{who}: var_list is empty")
    for v in variables:
        if not isinstance(v, Variable):
            raise TypeError(f"{who}: var_list must hold tg.Variable objects, got "
                            f"{type(v).__name__}")
        if v._value._data.dtype.kind != "f":
            raise TypeError(f"{who}: variable {v.name!r} has dtype {v.dtype.name}; only "
                            "floating variables can be fitted")
    dtypes = {v._value._data.dtype for v in variables}
    if len(dtypes) > 1:
        raise TypeError(f"{who}: the variables mix dtypes {sorted(d.name for d in dtypes)}; "
                        "use one floating dtype")
    devices = {id(v._value._dev) for v in variables}
    if len(devices) > 1:
        raise ValueError(f"{who}: the variables are on several devices "
                         f"{sorted({v.device for v in variables})}; put them on one")
    return variables


def minimize(residuals, variables, max_iterations, regularizer=1e-20,
             regularizer_multiplier=10.0, callback=None, name=None):
    """Minimises a sum of squared residuals, with TensorFlow Graphics' signature.

    Args:
      residuals: a callable or a list/tuple of callables, each called as
        `residual(*variables)` and returning a tensor.
      variables: a tensor/variable or a list/tuple of them: the starting point.
      max_iterations: the maximum number of iterations (at least 1).
      regularizer: the initial damping λ of `(JᵀJ + λ I) δ = -Jᵀr`.
      regularizer_multiplier: λ is multiplied by it when a step does not reduce the objective
        (it never decreases, as in TFG).
      callback: `callback(iteration, objective_value, variables)` after each iteration.

    Returns:
      `(objective_value, variables)`: the objective `sum_i 0.5 * ||r_i||^2` (a scalar tensor,
      as TFG's sum of `l2_loss`) and the list of the variables' final values (tensors). Input
      variables are left unchanged, as in TFG.

    >>> x = np.linspace(0.0, 1.0, 20)
    >>> y = 2.0 * np.exp(-1.5 * x) + 0.5
    >>> def residual(a, b, c):
    ...     return a * tg.exp(b * x) + c - y
    >>> start = [tg.constant(v, dtype=tg.float64) for v in (1.0, 0.0, 0.0)]
    >>> objective, (a, b, c) = tg.optimizers.levenberg_marquardt.minimize(residual, start, 20)
    >>> [round(float(v), 6) for v in (a, b, c)]
    [2.0, -1.5, 0.5]
    """
    fns = list(residuals) if isinstance(residuals, (list, tuple)) else [residuals]
    starts = list(variables) if isinstance(variables, (list, tuple)) else [variables]
    if int(max_iterations) < 1:
        raise ValueError(f"levenberg_marquardt.minimize: max_iterations must be at least 1, "
                         f"got {max_iterations}")
    for i, fn in enumerate(fns):
        if not callable(fn):
            raise TypeError(f"levenberg_marquardt.minimize: residual {i} is not callable")
    work = [Variable(v.read_value() if isinstance(v, Variable) else convert_to_tensor(v),
                     name=f"lm/{i}") for i, v in enumerate(starts)]
    lm = LevenbergMarquardt(damping=regularizer, scaling="levenberg", damping_update="factor",
                            factor=regularizer_multiplier, decrease_factor=1.0,
                            jacobian_mode="reverse",
                            name=name or "levenberg_marquardt.minimize")

    def all_residuals():
        values = [w.read_value() for w in work]
        return [fn(*values) for fn in fns]

    wrapped = None if callback is None else \
        (lambda it, f, vs: callback(it, ops.constant(f, dtype=work[0].dtype),
                                    [v.read_value() for v in vs]))
    result = lm.minimize(all_residuals, work, max_iterations, gradient_tolerance=0.0,
                         step_tolerance=0.0, objective_tolerance=0.0, callback=wrapped)
    objective = ops.constant(result.objective, dtype=work[0].dtype)
    return objective, [ops.constant(w.read_value()) for w in work]
