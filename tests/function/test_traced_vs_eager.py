"""Nothing a trace captures may be a stale value: every op of the spec table and every public
function that takes tensors gives, inside `tg.function`, what it gives eagerly, at three calls
with different inputs of one signature (values and, where differentiable, gradients taken
inside the function). Every tensor argument of a call is an argument of the traced function
(indices, labels, masks and conditions included), so a function that computed from the traced
call's arrays would give the first call's results at the later ones."""
import numpy as np
import pytest

import tapegpu as tg
from tapegpu.testing.op_specs import SPECS, sample

CALLS = 3


def _flat(value):
    if isinstance(value, (list, tuple)):
        return [leaf for v in value for leaf in _flat(v)]
    if isinstance(value, dict):
        return [leaf for k in sorted(value) for leaf in _flat(value[k])]
    return [value]


def _floating(t):
    return isinstance(t, tg.Tensor) and t.dtype.is_floating


def _run(fn, args, cotangents):
    """fn's outputs on `args` (tensors) and, when `cotangents` is given, the gradients of
    sum(output * cotangent) w.r.t. the floating arguments, taken with a tape."""
    diff = [a for a in args if _floating(a)]
    with tg.GradientTape() as tape:
        tape.watch(diff)
        out = fn(*args)
    outs = _flat(out)
    if cotangents is None:
        return outs, []
    targets = [o for o, u in zip(outs, cotangents) if u is not None]
    us = [u for u in cotangents if u is not None]
    grads = tape.gradient(targets, diff, output_gradients=us) if targets else []
    return outs, list(grads)


def _cotangents(outs, rng):
    return [tg.constant(rng.standard_normal(o.shape).astype(o.numpy().dtype))
            if _floating(o) else None for o in outs]


def _compare(got, want, what):
    assert len(got) == len(want), what
    for i, (a, b) in enumerate(zip(got, want)):
        assert (a is None) == (b is None), f"{what}[{i}]: {a!r} vs {b!r}"
        if a is None:
            continue
        if not isinstance(b, tg.Tensor):
            assert a == b, f"{what}[{i}]"
            continue
        a, b = np.asarray(a.numpy()), np.asarray(b.numpy())
        assert a.shape == b.shape and a.dtype == b.dtype, f"{what}[{i}]: {a.shape} vs {b.shape}"
        if a.dtype.kind in "fc":
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12, err_msg=f"{what}[{i}]")
        else:
            np.testing.assert_array_equal(a, b, err_msg=f"{what}[{i}]")


def check_traced_matches_eager(fn, make, grad=True):
    """Three calls of `tg.function(step)` on different inputs `make(rng)` (numpy arrays or
    Python values: the arrays become tensor arguments) against `step` run eagerly."""
    def step(args, us):
        return _run(fn, args, us)

    traced = tg.function(step)
    for call in range(CALLS):
        rng = np.random.default_rng(100 + call)
        args = [tg.constant(a) if isinstance(a, np.ndarray) else a for a in make(rng)]
        outs, _ = _run(fn, args, None)
        us = _cotangents(outs, rng) if grad else None
        want = step(args, us)
        got = traced(args, us)
        _compare(got[0], want[0], f"call {call}: outputs")
        _compare(got[1], want[1], f"call {call}: gradients")


# -- every spec of the op table ------------------------------------------------------------------

def _spec_maker(spec):
    def make(rng):
        return sample(spec, np.float64, seed=int(rng.integers(1 << 30)))
    return make


# draws differ between calls by design (TF's stateful random ops): checked by their own test
RANDOM_SPECS = {"dropout"}


@pytest.mark.parametrize("spec", [s for s in SPECS if s.name not in RANDOM_SPECS], ids=str)
def test_spec_traced_matches_eager(spec):
    check_traced_matches_eager(spec.fn, _spec_maker(spec), grad=spec.grad)


def test_traced_dropout_scales_each_call_s_input_and_gradient():
    """A traced dropout draws a new mask at every call and applies it to that call's input;
    its gradient is the same mask times that call's cotangent."""
    @tg.function
    def f(x, u):
        with tg.GradientTape() as tape:
            tape.watch(x)
            y = tg.nn.dropout(x, 0.5)
        return y, tape.gradient(y, x, output_gradients=u)

    masks = []
    for call in range(CALLS):
        rng = np.random.default_rng(call)
        x, u = rng.uniform(1, 2, (64,)), rng.standard_normal(64)
        y, g = (t.numpy() for t in f(tg.constant(x), tg.constant(u)))
        mask = y / x
        assert set(np.unique(mask)) == {0.0, 2.0}
        np.testing.assert_array_equal(g, mask * u)
        masks.append(mask)
    assert not np.array_equal(masks[1], masks[2])


# -- every public function that takes tensors ----------------------------------------------------
# (name, fn, make): `make(rng, call)` gives the call's arguments, numpy arrays for tensors (each
# an argument of the traced function) or Python values; `fn` takes them. Samples differ between
# calls in every tensor argument, integer and boolean ones included; shapes stay the same.

def _f(*shape, lo=-2.0, hi=2.0):
    return lambda rng: rng.uniform(lo, hi, shape)


def _i(*shape, hi, dtype=np.int32):
    return lambda rng: rng.integers(0, hi, shape).astype(dtype)


def _b(*shape):
    return lambda rng: rng.random(shape) < 0.5


def _s(lo=-2.0, hi=2.0):
    return lambda rng: np.asarray(rng.uniform(lo, hi))


def _spd(n=3):
    def make(rng):
        a = rng.standard_normal((n, n))
        return a @ a.T + n * np.eye(n)
    return make


def _args(*makers):
    return lambda rng, call: [m(rng) for m in makers]


def _perm_rows(rng):  # distinct indices: a scatter's result does not depend on write order
    return rng.permutation(4)[:3].reshape(3, 1).astype(np.int32)


def _sorted_ids(rng):
    return np.sort(rng.integers(0, 3, 6)).astype(np.int32)


def _image(rng, shape=(5, 6, 3)):
    return rng.uniform(0.0, 1.0, shape)


def _custom_square():
    @tg.custom_gradient
    def f(x):
        def grad(dy):
            return dy * 3.0 * x  # not the true derivative: the test sees which rule ran
        return x * x, grad
    return f


def _lu_solve(a, b):
    lu, perm = tg.linalg.lu(a)
    return tg.linalg.lu_solve(lu, perm, b)


def _lu_inverse(a):
    return tg.linalg.lu_matrix_inverse(*tg.linalg.lu(a))


def _lu_reconstruct(a):
    return tg.linalg.lu_reconstruct(*tg.linalg.lu(a))


def _while(x, n):
    return tg.while_loop(lambda i, a: i < n, lambda i, a: (i + 1, a * 1.5 + 1.0),
                         [tg.constant(0), x])[1]


def _hvp(x, v):
    return tg.autodiff.hvp(lambda t: tg.reduce_sum(tg.sin(t) * t * t), x, v)


def _jvp(x, v):
    return tg.autodiff.jvp(lambda t: tg.tanh(t) * t, x, v)


def _vjp(x, u):
    y, pullback = tg.autodiff.vjp(lambda t: tg.exp(t) * t, x)
    return y, pullback(u)


def _hessian(x):
    return tg.autodiff.hessian(lambda t: tg.reduce_sum(tg.sin(t) * t * t), x)


def _u8_image(rng):
    return rng.integers(0, 256, (3, 4, 3)).astype(np.uint8)


def _bmp(rng):
    """A 24-bit BMP file of a random (2, 3) image, as a scalar string (rows bottom-up, BGR,
    each padded to 4 bytes)."""
    img = rng.integers(0, 256, (2, 3, 3)).astype(np.uint8)
    rows = b"".join(img[r, :, ::-1].tobytes() + b"\0" * 3 for r in (1, 0))
    header = b"BM" + (54 + len(rows)).to_bytes(4, "little") + bytes(4) + (54).to_bytes(4, "little")
    info = (40).to_bytes(4, "little") + (3).to_bytes(4, "little") + (2).to_bytes(4, "little") + \
        (1).to_bytes(2, "little") + (24).to_bytes(2, "little") + bytes(4) + \
        len(rows).to_bytes(4, "little") + bytes(16)
    return np.array(header + info + rows, dtype=object)


PUBLIC = [
    # -- image files (host codecs: a trace guards the bytes, so a new file retraces) ----------
    ("encode_png", lambda img: tg.image.decode_png(tg.image.encode_png(img)), _args(_u8_image)),
    ("decode_png", lambda img: tg.image.decode_png(tg.image.encode_png(img), channels=1),
     _args(_u8_image)),
    ("decode_image", lambda img: tg.image.decode_image(tg.image.encode_png(img)),
     _args(_u8_image)),
    ("is_jpeg", lambda img: tg.image.is_jpeg(tg.image.encode_png(img)), _args(_u8_image)),
    ("decode_bmp", tg.image.decode_bmp, _args(_bmp)),
    # -- the top level -------------------------------------------------------------------------
    ("add_n", lambda a, b, c: tg.add_n([a, b, c]), _args(_f(3, 4), _f(3, 4), _f(3, 4))),
    ("complex_parts", lambda a, b: (tg.math.real(tg.complex(a, b)) * 2.0,
                                    tg.math.imag(tg.complex(a, b) + tg.complex(b, a))),
     _args(_f(3, 4), _f(3, 4))),
    ("argmax", lambda x: tg.argmax(x, axis=1), _args(_f(3, 4))),
    ("argmin", lambda x: tg.argmin(x, axis=0), _args(_f(3, 4))),
    ("argsort", lambda x: tg.argsort(x), _args(_f(3, 4))),
    ("batch_normalization", lambda x, m, v, o, s: tg.nn.batch_normalization(x, m, v, o, s, 1e-3),
     _args(_f(5, 4), _f(4), _f(4, lo=0.5), _f(4), _f(4))),
    ("bias_act", lambda x, b: tg.nn.bias_act(x, b, "tanh"), _args(_f(3, 4), _f(4))),
    ("lstm_cell", tg.nn.lstm_cell, _args(_f(3, 8), _f(3, 8), _f(8), _f(3, 2))),
    ("gru_cell", tg.nn.gru_cell, _args(_f(3, 6), _f(3, 6), _f(2, 6), _f(3, 2))),
    ("bias_add", tg.nn.bias_add, _args(_f(3, 4), _f(4))),
    ("boolean_mask", tg.boolean_mask, _args(_f(4, 3), _b(4))),
    ("broadcast_to", tg.broadcast_to, lambda rng, call: [rng.standard_normal((1, 4)),
                                                         np.array([3, 4], np.int32)]),
    ("cast", lambda x: (tg.cast(x, tg.int32), tg.cast(x, tg.float32)), _args(_f(3, 4, hi=9))),
    ("clip_by_global_norm", lambda a, b, n: tg.clip_by_global_norm([a, b], n),
     _args(_f(3, 4), _f(2), _s(0.5, 2.0))),
    ("clip_by_norm", tg.clip_by_norm, _args(_f(3, 4), _s(0.5, 2.0))),
    ("clip_by_value", tg.clip_by_value, _args(_f(3, 4), _s(-1.0, 0.0), _s(0.0, 1.0))),
    ("concat", lambda a, b: tg.concat([a, b], axis=1), _args(_f(3, 2), _f(3, 4))),
    ("cond", lambda p, x: tg.cond(p, lambda: x * 2.0, lambda: tg.sin(x)),
     lambda rng, call: [np.array(call % 2 == 0), rng.standard_normal(3)]),
    ("constant", lambda x: tg.constant(x) * 2.0, _args(_f(3))),
    ("convert_to_tensor", lambda x: tg.convert_to_tensor(x) * 2.0, _args(_f(3))),
    ("copy_to", lambda x: tg.copy_to(x, x.device) * 2.0, _args(_f(3))),
    ("count_nonzero", lambda x: tg.math.count_nonzero(x > 0.0, axis=1), _args(_f(3, 4))),
    ("cumprod", lambda x: tg.math.cumprod(x, axis=1, exclusive=True, reverse=True),
     _args(_f(3, 4))),
    ("cumsum", lambda x: tg.math.cumsum(x, axis=1, exclusive=True), _args(_f(3, 4))),
    ("custom_gradient", lambda x: _custom_square()(x), _args(_f(3))),
    ("einsum", lambda a, b: tg.einsum("ij,jk->ik", a, b), _args(_f(2, 3), _f(3, 4))),
    ("expand_dims", lambda x: tg.expand_dims(x, 1), _args(_f(3, 4))),
    ("eye", lambda n: tg.eye(n, dtype=tg.float64),
     lambda rng, call: [np.array(3, np.int32)]),
    ("fill", tg.fill, lambda rng, call: [np.array([2, 3], np.int32), np.asarray(rng.normal())]),
    ("foldl", lambda e, i: tg.foldl(lambda a, x: a * x + 1.0, e, initializer=i),
     _args(_f(4), _s())),
    ("foldr", lambda e, i: tg.foldr(lambda a, x: a * x - 1.0, e, initializer=i),
     _args(_f(4), _s())),
    ("gather", lambda p, i: tg.gather(p, i, axis=1), _args(_f(3, 5), _i(2, 3, hi=5))),
    ("gather_nd", tg.gather_nd, _args(_f(3, 4), _i(5, 2, hi=3))),
    ("grad_pass_through", lambda x: tg.grad_pass_through(tg.round)(x) * x,
     _args(_f(3, hi=5))),
    ("l2_normalize", lambda x: tg.math.l2_normalize(x, axis=1), _args(_f(3, 4))),
    ("linspace", lambda a, b: tg.linspace(a, b, 5), _args(_s(), _s(3.0, 5.0))),
    ("linspace_nd", lambda a, b: tg.linspace(a, b, 4, axis=1), _args(_f(3), _f(3))),
    ("logical", lambda a, b: (tg.logical_and(a, b), tg.logical_or(a, b), tg.logical_xor(a, b),
                              tg.logical_not(a)), _args(_b(3, 4), _b(3, 4))),
    ("map_fn", lambda e: tg.map_fn(lambda r: tg.reduce_sum(tg.sin(r) * r), e),
     _args(_f(4, 3))),
    ("meshgrid", lambda a, b: tg.meshgrid(a, b), _args(_f(3), _f(4))),
    ("moments", lambda x: tg.nn.moments(x, axes=[0]), _args(_f(5, 3))),
    ("numpy_function", lambda x: tg.numpy_function(lambda a: np.sin(a) * 2, [x], tg.float64,
                                                    grad=lambda g, a: g * tg.cos(a) * 2.0),
     _args(_f(3))),
    ("one_hot", lambda i: tg.one_hot(i, 4), _args(_i(5, hi=4))),
    ("ones_like", lambda x: tg.ones_like(x) * x, _args(_f(3))),
    ("ones", lambda s: tg.ones(s), lambda rng, call: [np.array([2, 3], np.int32)]),
    ("pad", lambda x, c: tg.pad(x, [[1, 0], [0, 2]], constant_values=c), _args(_f(3, 4), _s())),
    ("py_function", lambda x: tg.py_function(lambda a: a * 3.0, [x], tg.float64),
     _args(_f(3))),
    ("range", lambda n: tg.range(n), lambda rng, call: [np.array(3 + call, np.int32)]),
    ("rank", lambda x: tg.rank(x), _args(_f(3, 4))),
    ("recompute_grad", lambda x: tg.recompute_grad(lambda t: tg.sin(t) * t)(x), _args(_f(3))),
    ("reduce_all_any", lambda b: (tg.reduce_all(b, axis=1), tg.reduce_any(b, axis=0)),
     _args(_b(3, 4))),
    ("reduces", lambda x: (tg.reduce_logsumexp(x, axis=1), tg.reduce_max(x, axis=0),
                           tg.reduce_mean(x), tg.reduce_min(x, axis=1), tg.reduce_prod(x, 0),
                           tg.math.reduce_variance(x, axis=1), tg.math.reduce_std(x)),
     _args(_f(3, 4))),
    ("repeat", lambda x, r: tg.repeat(x, r, axis=0),
     lambda rng, call: [rng.standard_normal((3, 2)), np.array([1, 2, 3], np.int32)]),
    ("reshape", tg.reshape, lambda rng, call: [rng.standard_normal((3, 4)),
                                               np.array([2, 6], np.int32)]),
    ("reverse", lambda x: tg.reverse(x, [1]), _args(_f(3, 4))),
    ("roll", lambda x, s: tg.roll(x, s, axis=1),
     lambda rng, call: [rng.standard_normal((3, 4)), np.array(call + 1, np.int32)]),
    ("scan", lambda e, i: tg.scan(lambda a, x: a * 0.5 + x, e, initializer=i),
     _args(_f(4, 2), _f(2))),
    ("scatter_nd", lambda i, u: tg.scatter_nd(i, u, [4, 2]), _args(_perm_rows, _f(3, 2))),
    ("searchsorted", tg.searchsorted, lambda rng, call: [np.sort(rng.standard_normal(6)),
                                                         rng.standard_normal(4)]),
    ("sequence_mask", lambda n: tg.sequence_mask(n, 5), _args(_i(3, hi=6))),
    ("shape_size", lambda x: (tg.shape(x), tg.size(x)), _args(_f(3, 4))),
    ("sigmoid_cross_entropy_with_logits",
     lambda z, x: tg.nn.sigmoid_cross_entropy_with_logits(labels=z, logits=x),
     _args(_f(3, 4, lo=0.0, hi=1.0), _f(3, 4))),
    ("silu", lambda x, b: tg.nn.silu(x, beta=b), _args(_f(3, 4), _s(0.5, 2.0))),
    ("slice", lambda x, b: tg.slice(x, b, [2, 2]), _args(_f(4, 5), _i(2, hi=3))),
    ("softmax_cross_entropy_with_logits", tg.nn.softmax_cross_entropy_with_logits,
     _args(_f(3, 4, lo=0.0, hi=1.0), _f(3, 4))),
    ("sort", lambda x: tg.sort(x, direction="DESCENDING"), _args(_f(3, 4))),
    ("sparse_softmax_cross_entropy_with_logits",
     lambda y, x: tg.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=x),
     _args(_i(5, hi=4), _f(5, 4))),
    ("split", lambda x: tg.split(x, [1, 3], axis=1), _args(_f(3, 4))),
    ("squeeze", lambda x: tg.squeeze(x, 1), _args(_f(3, 1, 4))),
    ("stack", lambda a, b: tg.stack([a, b], axis=1), _args(_f(3, 4), _f(3, 4))),
    ("strided_slice", lambda x, b: tg.strided_slice(x, b, [4, 5], [1, 2]),
     _args(_f(4, 5), _i(2, hi=2))),
    ("getitem", lambda x, i: x[i, 1:], _args(_f(4, 5), _i(3, hi=4))),
    ("switch_case", lambda i, x: tg.switch_case(i, [lambda: x * 2.0, lambda: tg.sin(x),
                                                    lambda: x - 1.0]),
     lambda rng, call: [np.array(call % 3, np.int32), rng.standard_normal(3)]),
    ("tensor_scatter_nd", lambda t, i, u: (
        tg.tensor_scatter_nd_add(t, i, u), tg.tensor_scatter_nd_sub(t, i, u),
        tg.tensor_scatter_nd_max(t, i, u), tg.tensor_scatter_nd_min(t, i, u),
        tg.tensor_scatter_nd_update(t, i, u)), _args(_f(4, 2), _perm_rows, _f(3, 2))),
    ("tensordot", lambda a, b: tg.tensordot(a, b, 1), _args(_f(2, 3), _f(3, 4))),
    ("tile", lambda x: tg.tile(x, [2, 1]), _args(_f(3, 4))),
    ("transpose", lambda x: tg.transpose(x, [1, 0]), _args(_f(3, 4))),
    ("unique", lambda x: tg.unique(x), _args(_i(6, hi=4))),
    ("unstack", lambda x: tg.unstack(x, axis=1), _args(_f(3, 4))),
    ("vectorized_map", lambda e: tg.vectorized_map(lambda r: tg.reduce_sum(r * r), e),
     _args(_f(4, 3))),
    ("where_one_arg", lambda c: tg.where(c), _args(_b(3, 4))),
    ("where", lambda c, x, y: tg.where(c, x, y), _args(_b(3, 4), _f(3, 4), _f(4))),
    ("while_loop", _while, lambda rng, call: [rng.standard_normal(3),
                                              np.array(call + 1, np.int32)]),
    ("zeros", lambda s: tg.zeros(s), lambda rng, call: [np.array([3, 2], np.int32)]),
    ("zeros_like", lambda x: tg.zeros_like(x) + x, _args(_f(3))),
    # -- tg.math ---------------------------------------------------------------------------------
    ("bincount", lambda a, w: tg.math.bincount(a, weights=w, minlength=5),
     _args(_i(6, hi=5), _f(6))),
    ("confusion_matrix", lambda y, p, w: tg.math.confusion_matrix(y, p, 4, weights=w,
                                                                   dtype=tg.float64),
     _args(_i(6, hi=4), _i(6, hi=4), _f(6))),
    ("cumulative_logsumexp", lambda x: tg.math.cumulative_logsumexp(x, axis=1, reverse=True),
     _args(_f(3, 4))),
    ("divide_no_nan", tg.math.divide_no_nan,
     lambda rng, call: [rng.standard_normal(6),
                        rng.standard_normal(6) * (rng.random(6) < 0.5)]),
    ("multiply_no_nan", tg.math.multiply_no_nan,
     lambda rng, call: [np.where(rng.random(6) < 0.5, np.inf, rng.standard_normal(6)),
                        rng.standard_normal(6) * (rng.random(6) < 0.5)]),
    ("in_top_k", lambda t, p: tg.math.in_top_k(t, p, 2), _args(_i(5, hi=4), _f(5, 4))),
    ("polygamma", tg.math.polygamma,
     lambda rng, call: [np.asarray(float(call)), rng.uniform(0.5, 3.0, 4)]),
    ("segments", lambda d, i: (tg.math.segment_sum(d, i), tg.math.segment_mean(d, i),
                               tg.math.segment_max(d, i), tg.math.segment_min(d, i)),
     lambda rng, call: [rng.standard_normal((6, 2)), np.array([0, 0, 1, 1, 2, 2], np.int32)
                        if call == 0 else _sorted_ids(rng)]),
    ("unsorted_segments", lambda d, i: (
        tg.math.unsorted_segment_sum(d, i, 3), tg.math.unsorted_segment_mean(d, i, 3),
        tg.math.unsorted_segment_max(d, i, 3), tg.math.unsorted_segment_min(d, i, 3)),
     _args(_f(6, 2), _i(6, hi=3))),
    ("top_k", lambda x: tg.math.top_k(x, k=2), _args(_f(3, 4))),
    # -- tg.nn -------------------------------------------------------------------------------------
    ("scaled_dot_product_attention", lambda q, k, v, b: (
        tg.nn.scaled_dot_product_attention(q, k, v, is_causal=True),
        tg.nn.scaled_dot_product_attention(q, k, v, bias=b, mask=tg.constant(
            [[True, False, True, True]] * 3)),
        tg.keras.ops.dot_product_attention(q, k[:, :, :1], v[:, :, :1], scale=0.3)),
     _args(_f(2, 3, 2, 4), _f(2, 4, 2, 4), _f(2, 4, 2, 4), _f(3, 4))),
    ("pools", lambda x: (tg.nn.max_pool1d(x, 2, 2, "SAME"), tg.nn.avg_pool1d(x, 2, 1, "VALID"),
                         tg.nn.pool(x, [3], "MAX", strides=[2], padding="SAME"),
                         tg.nn.max_pool(x, 2, 2, "VALID"), tg.nn.avg_pool(x, 3, 2, "SAME")),
     _args(_f(2, 7, 3))),
    ("pools2d", lambda x: (tg.nn.max_pool2d(x, 2, 2, "SAME"), tg.nn.avg_pool2d(x, 3, 2, "SAME")),
     _args(_f(2, 5, 4, 3))),
    ("pools3d", lambda x: (tg.nn.max_pool3d(x, 2, 2, "VALID"), tg.nn.avg_pool3d(x, 2, 1, "SAME")),
     _args(_f(1, 3, 4, 4, 2))),
    ("compute_average_loss", lambda l, w: tg.nn.compute_average_loss(l, w, global_batch_size=8),
     _args(_f(4), _f(4, lo=0.0))),
    ("conv1d", lambda x, w: tg.nn.conv1d(x, w, 2, "SAME"), _args(_f(2, 7, 3), _f(3, 3, 4))),
    ("conv2d", lambda x, w: tg.nn.conv2d(x, w, 1, "SAME"), _args(_f(2, 5, 5, 3), _f(3, 3, 3, 2))),
    ("conv3d", lambda x, w: tg.nn.conv3d(x, w, 1, "VALID"),
     _args(_f(1, 3, 4, 4, 2), _f(2, 2, 2, 2, 3))),
    ("conv2d_transpose", lambda x, w: tg.nn.conv2d_transpose(x, w, [2, 6, 6, 2], 2),
     _args(_f(2, 3, 3, 3), _f(3, 3, 2, 3))),
    ("convolution", lambda x, w: tg.nn.convolution(x, w, padding="SAME", dilations=2),
     _args(_f(2, 6, 6, 2), _f(2, 2, 2, 3))),
    ("depthwise_conv2d", lambda x, w: tg.nn.depthwise_conv2d(x, w, [1, 1, 1, 1], "SAME"),
     _args(_f(2, 5, 5, 3), _f(3, 3, 3, 2))),
    ("embedding_lookup", tg.nn.embedding_lookup, _args(_f(6, 3), _i(2, 4, hi=6))),
    ("embedding_lookup_max_norm", lambda p, i: tg.nn.embedding_lookup(p, i, max_norm=1.0),
     _args(_f(6, 3), _i(5, hi=6))),
    ("l2_loss", tg.nn.l2_loss, _args(_f(3, 4))),
    # -- tg.linalg ---------------------------------------------------------------------------------
    ("adjoint", tg.linalg.adjoint, _args(_f(3, 4))),
    ("band_part", lambda x, lo, hi: tg.linalg.band_part(x, lo, hi),
     lambda rng, call: [rng.standard_normal((4, 4)), np.array(1, np.int32),
                        np.array(call % 2, np.int32)]),
    ("cholesky", tg.linalg.cholesky, _args(_spd())),
    ("cholesky_solve", lambda a, b: tg.linalg.cholesky_solve(tg.linalg.cholesky(a), b),
     _args(_spd(), _f(3, 2))),
    ("cross", tg.linalg.cross, _args(_f(4, 3), _f(4, 3))),
    ("diag", lambda v: tg.linalg.diag(v, k=1), _args(_f(3))),
    ("diag_part", lambda x: tg.linalg.diag_part(x, k=-1), _args(_f(4, 4))),
    ("eigh", tg.linalg.eigh, _args(_spd())),
    ("global_norm", lambda a, b: tg.linalg.global_norm([a, b]), _args(_f(3), _f(2, 2))),
    ("logdet", tg.linalg.logdet, _args(_spd())),
    ("lu", tg.linalg.lu, _args(_f(4, 4))),
    ("lu_solve", _lu_solve, _args(_f(4, 4), _f(4, 2))),
    ("lu_matrix_inverse", _lu_inverse, _args(_f(4, 4))),
    ("lu_reconstruct", _lu_reconstruct, _args(_f(4, 4))),
    ("qr", tg.linalg.qr, _args(_f(4, 3))),
    ("slogdet", tg.linalg.slogdet, _args(_f(3, 3))),
    ("svd", tg.linalg.svd, _args(_f(4, 3))),
    ("trace", tg.linalg.trace, _args(_f(3, 3))),
    ("triangular_solve",
     lambda a, b: tg.linalg.triangular_solve(a + 4.0 * tg.eye(3, dtype=a.dtype), b),
     _args(_f(3, 3), _f(3, 2))),
    ("lstsq", tg.linalg.lstsq, _args(_f(5, 3), _f(5, 2))),
    ("expm", tg.linalg.expm, _args(_f(3, 3, lo=-0.5, hi=0.5))),
    ("norm", lambda x: (tg.linalg.norm(x), tg.linalg.norm(x, ord=1, axis=1)), _args(_f(3, 4))),
    # -- tg.image ----------------------------------------------------------------------------------
    ("adjust_brightness", tg.image.adjust_brightness, _args(_image, _s(-0.3, 0.3))),
    ("adjust_contrast", tg.image.adjust_contrast, _args(_image, _s(0.5, 2.0))),
    ("adjust_hue", tg.image.adjust_hue, _args(_image, _s(-0.3, 0.3))),
    ("adjust_saturation", tg.image.adjust_saturation, _args(_image, _s(0.5, 2.0))),
    ("sobel_edges", lambda x: tg.image.sobel_edges(tg.reshape(x, (1, 4, 3, 1))),
     _args(_f(4, 3))),
    ("crop_and_resize", lambda x: tg.image.crop_and_resize(
        tg.reshape(x, (1, 4, 3, 1)), [[0.1, 0.2, 0.9, 0.7], [-0.5, 0.0, 1.0, 1.5]], [0, 0],
        [3, 2]), _args(_f(4, 3))),
    ("stateless_random_ops", lambda x: (
        tg.image.stateless_random_brightness(x, 0.2, seed=(1, 2)),
        tg.image.stateless_random_contrast(x, 0.5, 1.5, seed=(3, 4)),
        tg.image.stateless_random_crop(x, [2, 2, 3], seed=(5, 6))), _args(_image)),
    ("central_crop", lambda x: tg.image.central_crop(x, 0.5), _args(_image)),
    ("convert_image_dtype_from_uint8", lambda x: tg.image.convert_image_dtype(x, tg.float32),
     lambda rng, call: [rng.integers(0, 256, (4, 3)).astype(np.uint8)]),
    ("convert_image_dtype_to_uint8",
     lambda x: (tg.image.convert_image_dtype(x, tg.uint8),
                tg.image.convert_image_dtype(x, tg.int16, saturate=True)), _args(_image)),
    ("convert_image_dtype_int",
     lambda x: (tg.image.convert_image_dtype(x, tg.uint8),
                tg.image.convert_image_dtype(x, tg.int32, saturate=True)),
     lambda rng, call: [rng.integers(-3000, 30000, (4, 3)).astype(np.int16)]),
    ("crop_to_bounding_box", lambda x, h, w: tg.image.crop_to_bounding_box(x, h, w, 2, 3),
     lambda rng, call: [_image(rng), np.array(call, np.int32), np.array(2 - call, np.int32)]),
    ("flip", lambda x: (tg.image.flip_left_right(x), tg.image.flip_up_down(x),
                        tg.image.transpose(x)), _args(_image)),
    ("grayscale_to_rgb", tg.image.grayscale_to_rgb, _args(lambda rng: _image(rng, (4, 5, 1)))),
    ("hsv_rgb", lambda x: (tg.image.hsv_to_rgb(x), tg.image.rgb_to_hsv(x),
                           tg.image.rgb_to_grayscale(x)), _args(_image)),
    ("pad_to_bounding_box", lambda x, h: tg.image.pad_to_bounding_box(x, h, 1, 8, 8),
     lambda rng, call: [_image(rng), np.array(call, np.int32)]),
    ("per_image_standardization", tg.image.per_image_standardization, _args(_image)),
    ("psnr", lambda a, b: tg.image.psnr(a, b, 1.0), _args(_image, _image)),
    ("resize", lambda x: (tg.image.resize(x, [7, 4]), tg.image.resize(x, [3, 8], "nearest"),
                          tg.image.resize(x, [6, 5], "bicubic")), _args(_image)),
    ("resize_with_crop_or_pad", lambda x: tg.image.resize_with_crop_or_pad(x, 4, 8),
     _args(_image)),
    ("resize_with_pad", lambda x: tg.image.resize_with_pad(x, 7, 7), _args(_image)),
    ("rot90", lambda x, k: tg.image.rot90(x, k),
     lambda rng, call: [_image(rng, (5, 5, 3)), np.array(call + 1, np.int32)]),
    ("ssim", lambda a, b: tg.image.ssim(a, b, 1.0, filter_size=3),
     _args(lambda rng: _image(rng, (8, 8, 1)), lambda rng: _image(rng, (8, 8, 1)))),
    ("total_variation", tg.image.total_variation, _args(_image)),
    # -- tg.random: deterministic draws only -------------------------------------------------------
    ("categorical", lambda z: tg.random.categorical(z, 3),
     lambda rng, call: [np.where(np.eye(4)[rng.integers(0, 4, 2)] > 0, 0.0, -1e30)]),
    ("normal_params", lambda m: tg.random.normal([2, 3], mean=m, stddev=0.0, dtype=tg.float64),
     _args(_s())),
    ("truncated_normal_params",
     lambda m: tg.random.truncated_normal([2, 3], mean=m, stddev=0.0, dtype=tg.float64),
     _args(_s())),
    ("uniform_params", lambda lo: tg.random.uniform([2, 3], lo, lo, dtype=tg.float64),
     _args(_s())),
    ("stateless", lambda s: (tg.random.stateless_normal([2, 3], s),
                             tg.random.stateless_uniform([2, 3], s)),
     lambda rng, call: [rng.integers(0, 1000, 2).astype(np.int32)]),
    # -- tg.autodiff, tg.debugging -----------------------------------------------------------------
    ("hvp", _hvp, _args(_f(3), _f(3))),
    ("jvp", _jvp, _args(_f(3), _f(3))),
    ("vjp", _vjp, _args(_f(3), _f(3))),
    ("hessian", _hessian, _args(_f(3))),
    ("check_numerics", lambda x: tg.debugging.check_numerics(x, "x") * 2.0, _args(_f(3))),
    ("assert_near", lambda x: (tg.debugging.assert_near(x, x * 1.0), x * 2.0)[1], _args(_f(3))),
    ("assert_equal", lambda x: (tg.debugging.assert_equal(x, x), x * 2.0)[1], _args(_i(3, hi=4))),
]

# public functions that take no tensor (or take functions only), or whose results are random by
# design; each with the reason
EXEMPT = {
    "as_dtype": "takes a dtype", "function": "a transformation (this whole file tests it)",
    "init_scope": "a context manager", "print": "a side effect (test_function_graphs)",
    "from_dlpack": "takes a DLPack capsule", "dropout": "random (test above)",
    "shuffle": "random", "set_seed": "takes an int",
    "get_global_generator": "takes nothing", "set_global_generator": "takes a generator",
    "random_brightness": "random", "random_contrast": "random", "random_crop": "random",
    "random_hue": "random", "random_saturation": "random",
    "random_flip_left_right": "random", "random_flip_up_down": "random",
    "assert_shapes": "checks static shapes only",
    "executing_eagerly": "takes nothing (tests/test_porting.py checks it traced and eager)",
    "get_current_name_scope": "takes nothing", "get_logger": "takes nothing",
    "no_op": "takes nothing", "group": "returns None (its inputs' effects happened)",
    "is_tensor": "a type check",
    "register_tensor_conversion_function": "registers a conversion (test_conversion_rules)",
    "set_log_device_placement": "a switch (tests/core/test_logical_devices.py)",
    "make_tensor_proto": "makes a TensorProto (a Python object; tests/test_io_tensors.py)",
    "make_ndarray": "reads a TensorProto (a Python object)",
    "decode_jpeg": "JPEG needs Pillow (tests/test_image_codecs.py, where it is installed)",
    "decode_and_crop_jpeg": "JPEG needs Pillow", "encode_jpeg": "JPEG needs Pillow",
    "extract_jpeg_shape": "JPEG needs Pillow",
    "decode_gif": "takes a GIF file (tests/test_image_codecs.py writes them byte by byte)",
    "get_log_device_placement": "reads a switch",
}


@pytest.mark.parametrize("name, fn, make", PUBLIC, ids=[p[0] for p in PUBLIC])
def test_public_function_traced_matches_eager(name, fn, make):
    calls = iter(range(CALLS))
    check_traced_matches_eager(fn, lambda rng: make(rng, next(calls)))


NAMESPACES = {"tg": tg, "tg.math": tg.math, "tg.nn": tg.nn, "tg.linalg": tg.linalg,
              "tg.image": tg.image, "tg.random": tg.random, "tg.autodiff": tg.autodiff,
              "tg.debugging": tg.debugging}


def _public_functions():
    seen = {}
    for prefix, ns in NAMESPACES.items():
        for name in sorted(dir(ns)):
            fn = getattr(ns, name)
            if not name.startswith("_") and callable(fn) and not isinstance(fn, type) and \
                    id(fn) not in seen and getattr(fn, "__module__", "").startswith("tapegpu"):
                seen[id(fn)] = (f"{prefix}.{name}", name, fn)
    return list(seen.values())


def test_every_public_function_is_checked_traced_against_eager():
    """Each public function of the namespaces above is the function of a spec (all of whose
    arguments are traced), is called by an entry of PUBLIC, or is exempt with a reason."""
    import inspect
    import re
    source = inspect.getsource(__import__(__name__, fromlist=["PUBLIC"]))
    specs = {id(s.fn) for s in SPECS}
    missing = [full for full, name, fn in _public_functions()
               if id(fn) not in specs and name not in EXEMPT and
               not re.search(rf"\.{re.escape(name)}\b", source)]
    assert not missing, f"public functions not checked traced against eager: {missing}"


# -- the tracer's own guard ------------------------------------------------------------------------

def test_a_traced_value_s_array_among_an_op_s_params_is_refused():
    """A function that hands an op a traced value's array as a param (which the graph would
    fix at the traced call's values) is stopped at its trace, naming the op."""
    from tapegpu.function.trace import TracedValueAsConstantError
    from tapegpu.ops.registry import REGISTRY, apply

    @tg.function
    def f(x, i):
        return apply(REGISTRY["getitem"], (x,), {"key": (i._data,), "inner": 1})

    with pytest.raises(TracedValueAsConstantError, match="getitem"):
        f(tg.constant([1.0, 2.0, 3.0]), tg.constant(np.array([2, 0], np.intp)))


def test_a_view_of_a_traced_value_s_array_made_into_a_tensor_is_refused(tg_device):
    from tapegpu.function.trace import TracedValueAsConstantError
    if tg_device == "cuda_sim":
        pytest.skip("the CuPy stand-in's views do not keep their base array (CuPy's do)")

    @tg.function
    def f(x):
        head = tg.Tensor(x._data[:2], x._dev)  # no op: the graph would hold the traced values
        return head * 2.0

    with pytest.raises(TracedValueAsConstantError, match="view"):
        f(tg.constant([1.0, 2.0, 3.0]))


def test_constants_made_in_the_trace_from_python_values_are_still_constants():
    @tg.function
    def f(x):
        return x * tg.constant([1.0, 2.0]) + tg.fill([2], 3.0) + tg.linspace(0.0, 1.0, 2)

    for v in (1.0, 2.0):
        np.testing.assert_array_equal(f(tg.constant([v, v])).numpy(),
                                      [v + 3.0, 2 * v + 4.0])
    assert f.experimental_get_tracing_count() == 1


@pytest.mark.parametrize("guarded", [False, True], ids=["straight", "guarded"])
def test_an_op_s_error_at_a_replay_is_raised_as_eagerly(guarded):
    """A value an op refuses at a later call (an index out of range, an integer division by
    zero) raises InvalidArgumentError naming the op, as the eager call does, on both replay
    paths (straight-line code; the step loop of a graph with guards)."""
    @tg.function
    def f(p, i, a, b, flag):
        if guarded and bool(flag):
            p = p * 1.0
        return tg.gather(p, i) * 2.0, a // b

    ok = [tg.constant([1.0, 2.0]), tg.constant([1]), tg.constant([4]), tg.constant([2]),
          tg.constant(True)]
    f(*ok)
    bad_index = [ok[0], tg.constant([5])] + ok[2:]
    with pytest.raises(tg.errors.InvalidArgumentError,
                       match=r"^gather: indices\[0\] = 5 is not in \[0, 2\)"):
        [t.numpy() for t in f(*bad_index)]  # on a GPU: at the first read (a device check)
    with pytest.raises(tg.errors.InvalidArgumentError,
                       match=r"^floordiv: Integer division by zero"):
        [t.numpy() for t in f(*ok[:3], tg.constant([0]), ok[4])]
    assert f.experimental_get_tracing_count() == 1
