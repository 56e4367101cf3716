"""tg.random: shuffle, categorical, the stateless ops, Generator, and the namespace's surface."""
import numpy as np
import pytest

import tapegpu as tg


def test_shuffle_permutes_the_first_axis_and_its_gradient_goes_back():
    x = tg.constant(np.arange(12.0).reshape(6, 2))
    with tg.GradientTape() as tape:
        tape.watch(x)
        y = tg.random.shuffle(x, seed=5)
        loss = tg.reduce_sum(y * tg.constant(np.arange(6.0)[:, None]))
    rows = y.numpy()
    perm = [int(r[0]) // 2 for r in rows]
    assert sorted(perm) == list(range(6)) and perm != list(range(6))
    np.testing.assert_array_equal(rows, x.numpy()[perm])
    g = tape.gradient(loss, x).numpy()
    np.testing.assert_array_equal(g[perm, 0], np.arange(6.0))  # row i of y came from perm[i]
    with pytest.raises(tg.errors.InvalidArgumentError, match="rank >= 1"):
        tg.random.shuffle(tg.constant(1.0))


def test_shuffle_draws_anew_at_every_call_of_a_function():
    f = tg.function(lambda x: tg.random.shuffle(x))
    x = tg.constant(np.arange(20))
    draws = {tuple(f(x).numpy().tolist()) for _ in range(5)}
    assert len(draws) > 1 and all(sorted(d) == list(range(20)) for d in draws)


def test_categorical_frequencies_follow_the_logits():
    p = np.array([[0.1, 0.6, 0.3], [0.5, 0.0, 0.5]])
    with np.errstate(divide="ignore"):
        logits = tg.constant(np.log(p), tg.float32)
    s = tg.random.categorical(logits, 20000, seed=1)
    assert s.dtype == tg.int64 and s.shape == (2, 20000)
    for row, probs in zip(s.numpy(), p):
        freq = np.bincount(row, minlength=3) / row.size
        np.testing.assert_allclose(freq, probs, atol=0.015)
    assert not (s.numpy()[1] == 1).any()  # probability 0 (logit -inf): never drawn
    s32 = tg.random.categorical(logits, 3, dtype=tg.int32)
    assert s32.dtype == tg.int32 and s32.shape == (2, 3)


def test_categorical_errors():
    with pytest.raises(tg.errors.InvalidArgumentError, match=r"\[batch_size, num_classes\]"):
        tg.random.categorical(tg.constant([0.0, 1.0]), 2)
    with pytest.raises(tg.errors.InvalidArgumentError, match="int32 or int64"):
        tg.random.categorical(tg.constant([[0.0, 1.0]]), 2, dtype=tg.float32)


def test_stateless_ops_depend_only_on_the_seed():
    a = tg.random.stateless_normal([4, 3], seed=[7, 11])
    tg.random.set_seed(0)
    tg.random.normal([5])  # global state moves: stateless draws do not
    b = tg.random.stateless_normal([4, 3], seed=tg.constant([7, 11]))
    c = tg.random.stateless_normal([4, 3], seed=[7, 12])
    assert a.dtype == tg.float32 and a.shape == (4, 3)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert not np.array_equal(a.numpy(), c.numpy())
    u = tg.random.stateless_uniform([1000], seed=[1, 2], minval=2.0, maxval=3.0,
                                    dtype=tg.float64)
    assert u.dtype == tg.float64 and 2.0 <= u.numpy().min() and u.numpy().max() < 3.0
    np.testing.assert_array_equal(u.numpy(), tg.random.stateless_uniform(
        [1000], seed=[1, 2], minval=2.0, maxval=3.0, dtype=tg.float64).numpy())
    ints = tg.random.stateless_uniform([500], seed=[1, 2], minval=-3, maxval=4, dtype=tg.int32)
    assert ints.dtype == tg.int32 and set(ints.numpy().tolist()) == set(range(-3, 4))
    full = tg.random.stateless_uniform([4], seed=[-1, 2], minval=None, maxval=None,
                                       dtype=tg.int64)
    assert full.dtype == tg.int64


def test_stateless_op_errors():
    with pytest.raises(tg.errors.InvalidArgumentError, match=r"shape \[2\]"):
        tg.random.stateless_normal([2], seed=[1, 2, 3])
    with pytest.raises(tg.errors.InvalidArgumentError, match="minval and maxval"):
        tg.random.stateless_uniform([2], seed=[1, 2], dtype=tg.int32)
    with pytest.raises(tg.errors.InvalidArgumentError, match="floating"):
        tg.random.stateless_normal([2], seed=[1, 2], dtype=tg.int32)


def test_generator_from_seed_is_repeatable_and_split_is_independent():
    g1, g2 = tg.random.Generator.from_seed(42), tg.random.Generator.from_seed(42)
    for draw in ("normal", "uniform", "truncated_normal"):
        a, b = getattr(g1, draw)([3, 2]), getattr(g2, draw)(shape=[3, 2])
        assert a.dtype == tg.float32 and a.shape == (3, 2)
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert not np.array_equal(g1.normal([3]).numpy(), g1.normal([3]).numpy())  # state moves
    assert float(tg.reduce_max(tg.abs(g1.truncated_normal([1000], stddev=2.0)))) <= 4.0
    ints = g1.uniform([200], minval=0, maxval=3, dtype=tg.int64)
    assert ints.dtype == tg.int64 and set(ints.numpy().tolist()) == {0, 1, 2}
    kids = g1.split(2)
    assert len(kids) == 2 and not np.array_equal(kids[0].normal([4]).numpy(),
                                                 kids[1].normal([4]).numpy())
    seeds = g1.make_seeds(3)
    assert seeds.shape == (2, 3) and seeds.dtype == tg.int64
    g2.reset_from_seed(42)
    np.testing.assert_array_equal(g2.normal([3, 2]).numpy(),
                                  tg.random.Generator.from_seed(42).normal([3, 2]).numpy())


def test_global_generator():
    g = tg.random.get_global_generator()
    assert g is tg.random.get_global_generator()
    mine = tg.random.Generator.from_seed(3)
    tg.random.set_global_generator(mine)
    try:
        assert tg.random.get_global_generator() is mine
    finally:
        tg.random.set_global_generator(g)
    with pytest.raises(TypeError, match="Generator"):
        tg.random.set_global_generator(3)


@pytest.mark.parametrize("namespace", ["random", "image"])
def test_namespaces_show_only_their_public_functions(namespace):
    ns = getattr(tg, namespace)
    names = {n for n in dir(ns) if not n.startswith("_")}
    assert not names & {"np", "Tensor", "InvalidArgumentError", "np_dtype", "einsum", "math",
                        "public", "tensor", "gather"}
    for n in names:
        assert getattr(ns, n).__module__.startswith("tapegpu."), n


@pytest.mark.parametrize("draw", [
    lambda s: tg.random.uniform([64], seed=s), lambda s: tg.random.normal([64], seed=s),
    lambda s: tg.random.truncated_normal([64], seed=s),
    lambda s: tg.random.shuffle(tg.range(64), seed=s),
    lambda s: tg.random.categorical(tg.zeros((1, 64)), 8, seed=s),
    lambda s: tg.nn.dropout(tg.ones((64,)), 0.5, seed=s)])
def test_an_op_seed_is_a_stream_that_each_call_advances_and_set_seed_restarts(draw):
    """TensorFlow's op seeds: `uniform([1], seed=1)` twice gives A1 then A2 (its kernel's
    counter), also at each call of a traced function; set_seed starts the sequence again, and
    the stream of one op seed does not move another's."""
    tg.random.set_seed(11)
    first, second = draw(1).numpy(), draw(1).numpy()
    assert not np.array_equal(first, second)
    tg.random.set_seed(11)
    other = draw(2).numpy()  # another seed's stream: seed 1's is untouched
    np.testing.assert_array_equal(draw(1).numpy(), first)
    np.testing.assert_array_equal(draw(1).numpy(), second)
    assert not np.array_equal(other, first)
    traced = tg.function(lambda: draw(3))
    assert not np.array_equal(traced().numpy(), traced().numpy())


def test_seeded_dropout_layers_draw_a_new_mask_at_each_call_of_a_traced_step():
    """A layer's seed fixes its sequence of masks (two layers with one seed draw the same
    sequence, as Keras), and a traced training step draws the next mask at every call instead of
    replaying the mask of its trace."""
    x = tg.ones((16, 16))
    layers = [tg.layers.Dropout(0.5, seed=4), tg.layers.Dropout(0.5, seed=4)]
    step = tg.function(lambda t: layers[0](t, training=True))
    traced = [step(x).numpy() for _ in range(3)]
    eager = [layers[1](x, training=True).numpy() for _ in range(3)]
    assert not np.array_equal(traced[0], traced[1]) and not np.array_equal(traced[1], traced[2])
    for t, e in zip(traced, eager):
        np.testing.assert_array_equal(t, e)
    lstm = tg.keras.layers.LSTM(3, dropout=0.5, seed=2)
    seq = np.ones((4, 2, 3), np.float32)
    rnn_step = tg.function(lambda t: lstm(t, training=True))
    assert not np.array_equal(rnn_step(seq).numpy(), rnn_step(seq).numpy())
