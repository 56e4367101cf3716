"""Control flow in eager execution: TensorFlow's documented behaviour, and gradients (reverse and
forward mode) through the branch taken and every iteration."""
import collections

import numpy as np
import pytest

import tapegpu as tg


def _grad(f, x0):
    x = tg.constant(x0, dtype=tg.float64)
    with tg.GradientTape() as tape:
        tape.watch(x)
        y = f(x)
    with tg.autodiff.ForwardAccumulator(x, tg.ones_like(x)) as acc:
        y2 = f(x)
    return float(tape.gradient(y, x)), float(tg.reduce_sum(acc.jvp(y2)))


def _fd(f, x0, h=1e-6):
    return (float(f(tg.constant(x0 + h, dtype=tg.float64))) -
            float(f(tg.constant(x0 - h, dtype=tg.float64)))) / (2 * h)


@pytest.mark.parametrize("f", [
    lambda x: tg.cond(x > 1.0, lambda: x * x, lambda: x * 3.0),
    lambda x: tg.cond(x < 1.0, lambda: x * x, lambda: tg.sin(x)),
    lambda x: tg.switch_case(tg.constant(1), [lambda: x, lambda: x ** 3.0, lambda: -x]),
    lambda x: tg.while_loop(lambda v: v < 50.0, lambda v: v * x, [x])[0],
    lambda x: tg.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, tg.sin(v) + x),
                            (tg.constant(0), x))[1],
    lambda x: tg.reduce_sum(tg.map_fn(lambda r: r * x, tg.constant([1.0, 2.0, 3.0], tg.float64))),
    lambda x: tg.reduce_sum(tg.scan(lambda a, e: a * e + x, tg.constant([1.0, 2.0], tg.float64),
                                    initializer=x)),
    lambda x: tg.foldl(lambda a, e: a * x + e, tg.constant([1.0, 2.0, 3.0], tg.float64)),
    lambda x: tg.foldr(lambda a, e: a * x - e, tg.constant([1.0, 2.0, 3.0], tg.float64)),
], ids=["cond_true", "cond_false", "switch_case", "while", "while_tuple", "map_fn", "scan",
        "foldl", "foldr"])
def test_gradients_through_control_flow(f):
    rev, fwd = _grad(f, 1.3)
    fd = _fd(f, 1.3)
    assert rev == pytest.approx(fd, rel=1e-6) and fwd == pytest.approx(fd, rel=1e-6)


def test_tensorflow_documented_examples():
    # tf.while_loop's example: i = 0; c = i < 10; b = i + 1 -> 10
    assert int(tg.while_loop(lambda i: tg.less(i, 10), lambda i: tg.add(i, 1), [tg.constant(0)])[0]) == 10
    # tf.scan's example: cumulative sum
    np.testing.assert_array_equal(tg.scan(lambda a, x: a + x, tg.constant([1, 2, 3, 4, 5, 6])).numpy(),
                                  [1, 3, 6, 10, 15, 21])
    # tf.foldl / foldr: sums (and their order)
    assert int(tg.foldl(lambda a, x: a + x, tg.constant([1, 2, 3, 4, 5, 6]))) == 21
    assert int(tg.foldr(lambda a, x: a - x, tg.constant([1, 2, 3]))) == 0  # (3 - 2) - 1
    # tf.map_fn over a structure, returning a structure
    out = tg.map_fn(lambda t: (t[0] + t[1], t[0] * t[1]),
                    (tg.constant([1.0, 2.0]), tg.constant([3.0, 4.0])))
    assert [o.numpy().tolist() for o in out] == [[4.0, 6.0], [3.0, 8.0]]
    # scan in reverse
    np.testing.assert_array_equal(tg.scan(lambda a, x: a + x, tg.constant([1, 2, 3]),
                                          reverse=True).numpy(), [6, 5, 3])


def test_while_loop_structure_and_limits():
    P = collections.namedtuple("P", "i s")
    r = tg.while_loop(lambda i, s: i < 3, lambda i, s: P(i + 1, s * 2.0),
                      P(tg.constant(0), tg.constant(1.0)))
    assert isinstance(r, P) and int(r.i) == 3 and float(r.s) == 8.0
    r = tg.while_loop(lambda i: i < 100, lambda i: i + 1, tg.constant(0), maximum_iterations=7)
    assert int(r) == 7
    with pytest.raises(ValueError, match="structure of loop_vars"):
        tg.while_loop(lambda a, b: a < 3, lambda a, b: (a + 1,), (tg.constant(0), tg.constant(1)))
    with pytest.raises(TypeError, match="dtype int32 became float32"):
        tg.while_loop(lambda a: a < 3, lambda a: tg.cast(a, tg.float32) + 1.0, [tg.constant(0)])
    with pytest.raises(tg.InvalidArgumentError, match="predicate must be a bool scalar"):
        tg.while_loop(lambda a: a, lambda a: a - 1, [tg.constant(3)])


def test_cond_and_switch_case_rules():
    with pytest.raises(tg.InvalidArgumentError, match="cond: the predicate must be a bool scalar"):
        tg.cond(tg.constant([True, False]), lambda: 1, lambda: 2)
    with pytest.raises(TypeError, match="true_fn and false_fn must be callables"):
        tg.cond(True, 1, 2)
    fns = [lambda: tg.constant(1.0), lambda: tg.constant(2.0)]
    assert float(tg.switch_case(tg.constant(7), fns)) == 2.0  # out of range: the last branch
    assert float(tg.switch_case(7, fns, default=lambda: tg.constant(-1.0))) == -1.0
    assert float(tg.switch_case(0, {0: fns[1], 5: fns[0]})) == 2.0
    with pytest.raises(ValueError, match="same size along axis 0"):
        tg.map_fn(lambda t: t, (tg.ones(2), tg.ones(3)))
