"""The multi-tensor optimizer kernels (tapegpu/cuda_kernels/optimizers.cu): one launch updates
up to MULTI_TENSORS parameters of one dtype, bit for bit as the per-parameter kernel does; the
optimizers launch it once per step and dtype on GPUs (for models of up to MULTI_TENSORS
variables per dtype), and the numpy path is the array rule as before."""
import numpy as np
import pytest

import tapegpu as tg
from tapegpu.backends.kernels import KernelSet
from tapegpu.backends.kernels.launch import MULTI_TENSORS
from tapegpu.optimizers import base as opt_base

SHAPES = [(3, 5), (), (0,), (70,), (0, 4), (2, 3, 4), (1,)]  # 0-d and empty among them
RULES = {  # kernel method suffix, slot count, scalar arguments
    "sgd momentum": ("sgd", 1, dict(lr=0.1, momentum=0.9, nesterov=False)),
    "sgd nesterov": ("sgd", 1, dict(lr=0.1, momentum=0.9, nesterov=True)),
    "sgd plain": ("sgd", 0, dict(lr=0.1)),
    "adam": ("adam", 2, dict(lr_t=0.01, b1=0.9, b2=0.999, eps=1e-7)),
}


def _device():
    return tg.constant(0.0)._dev


def _small_grid(dev):
    """The device's kernels on 2 blocks of 32 threads: every thread's grid-stride loop crosses
    tensor boundaries (and steps over the empty tensors)."""
    return KernelSet(dev.kernels.xp, dev.kernels.load_module, block=32, max_blocks=2)


def _arrays(dev, dtype, seed, positive=False, shapes=SHAPES):
    rng = np.random.default_rng(seed)
    out = []
    for s in shapes:
        a = rng.standard_normal(s).astype(dtype)
        out.append(dev.xp.asarray(np.abs(a) if positive else a))
    return out


@pytest.mark.parametrize("repeat", [1, 3])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("rule", RULES)
def test_one_launch_updates_every_tensor_bit_for_bit_as_the_per_tensor_kernel(tg_device, rule,
                                                                                dtype, repeat):
    dev = _device()
    if dev.kernels is None:
        pytest.skip("numpy has no kernels")
    kind, n_slots, hyper = RULES[rule]
    ks = _small_grid(dev)
    shapes = SHAPES * repeat
    nonempty = sum(int(np.prod(s)) > 0 for s in shapes)
    params = _arrays(dev, dtype, 0, shapes=shapes)
    slots = [_arrays(dev, dtype, 1 + i, positive=i == 1, shapes=shapes) for i in range(n_slots)]
    one = [[a.copy() for a in arrays] for arrays in [params] + slots]
    multi = [[a.copy() for a in arrays] for arrays in [params] + slots]
    per_tensor = getattr(ks, f"{kind}_update")
    for step in range(3):
        grads = _arrays(dev, dtype, 10 + step, shapes=shapes)
        for i, g in enumerate(grads):
            per_tensor(one[0][i], g, *[s[i] for s in one[1:]] or [None], **hyper)
        ks.launches.clear()
        getattr(ks, f"{kind}_multi_update")(multi[0], grads,
                                            *(multi[1:] or [[None] * len(shapes)]), **hyper)
        suffix = "f32" if dtype == np.float32 else "f64"
        launches = -(-nonempty // MULTI_TENSORS)
        assert dict(ks.launches) == {f"tapegpu_{kind}_multi_update_{suffix}": launches}
    for a, b, start in zip(sum(one, []), sum(multi, []), sum([params] + slots, [])):
        a, b = dev.to_numpy(a), dev.to_numpy(b)
        assert a.shape == b.shape and a.tobytes() == b.tobytes()
    assert any(not np.array_equal(dev.to_numpy(b), dev.to_numpy(s))
               for b, s in zip(multi[0], params))  # the parameters moved


def test_multi_update_arguments_are_checked(tg_device):
    dev = _device()
    if dev.kernels is None:
        pytest.skip("numpy has no kernels")
    xp, ks = dev.xp, dev.kernels
    p, g = xp.zeros(3, np.float32), xp.zeros(3, np.float32)
    with pytest.raises(ValueError, match="momentum needs a velocity"):
        ks.sgd_multi_update([p], [g], [None], 0.1, momentum=0.9)
    with pytest.raises(ValueError, match="every parameter or none"):
        ks.sgd_multi_update([p, p.copy()], [g, g], [None, p.copy()], 0.1)
    with pytest.raises(ValueError, match="one dtype"):
        ks.sgd_multi_update([p, xp.zeros(2)], [g, xp.zeros(2)], [None, None], 0.1)
    with pytest.raises(ValueError, match=r"shape \(3,\)"):
        ks.sgd_multi_update([p], [xp.zeros(4, np.float32)], [None], 0.1)
    ks.launches.clear()
    ks.sgd_multi_update([xp.zeros(0, np.float32)], [xp.zeros(0, np.float32)], [None], 0.1)
    ks.sgd_multi_update([], [], [], 0.1)
    assert not ks.launches  # nothing to update: no launch


OPTIMIZERS = {
    "sgd": lambda: tg.optimizers.SGD(0.1),
    "sgd momentum": lambda: tg.optimizers.SGD(0.1, momentum=0.9),
    "sgd nesterov": lambda: tg.optimizers.SGD(0.1, momentum=0.9, nesterov=True),
    "adam": lambda: tg.optimizers.Adam(0.01),
}


def _train(make, dtypes, steps=3):
    """The values of variables of SHAPES (one dtype each, cycling through `dtypes`) after
    `steps` updates, and the launches of the last step."""
    rng = np.random.default_rng(0)
    kinds = [dtypes[i % len(dtypes)] for i in range(len(SHAPES))]
    variables = [tg.Variable(rng.standard_normal(s).astype(d)) for s, d in zip(SHAPES, kinds)]
    opt, dev = make(), _device()
    for step in range(steps):
        grads = [tg.constant(rng.standard_normal(s).astype(d)) for s, d in zip(SHAPES, kinds)]
        dev.launches.clear()
        opt.apply_gradients(zip(grads, variables))
    return [v.numpy() for v in variables], dict(dev.launches)


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_optimizers_launch_once_per_dtype_and_step_with_the_per_variable_results(
        tg_device, name, monkeypatch):
    make = OPTIMIZERS[name]
    got, launches = _train(make, [np.float32, np.float64])
    monkeypatch.setattr(opt_base, "_multi_kernel", lambda kind, var: None)
    want, per_variable = _train(make, [np.float32, np.float64])
    for a, b in zip(got, want):
        assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    kind = "adam" if name == "adam" else "sgd"
    if _device().kernels is None:  # numpy: the array rule, as before
        assert launches == per_variable == {}
        return
    nonempty = {np.dtype(d).name: 0 for d in (np.float32, np.float64)}
    for i, s in enumerate(SHAPES):
        nonempty[("float32", "float64")[i % 2]] += int(np.prod(s)) > 0
    assert launches == {f"tapegpu_{kind}_multi_update_f32": 1,
                        f"tapegpu_{kind}_multi_update_f64": 1}
    assert per_variable == {f"tapegpu_{kind}_update_f32": nonempty["float32"],
                            f"tapegpu_{kind}_update_f64": nonempty["float64"]}


def test_the_numpy_path_is_the_array_rule(tg_device):
    if _device().kernels is not None:
        pytest.skip("the numpy backend's path")
    rng = np.random.default_rng(3)
    p, g = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    w = tg.Variable(p)
    tg.optimizers.SGD(0.1, momentum=0.9).apply_gradients([(tg.constant(g), w)])
    v = np.zeros_like(p)
    want = tg.optimizers.SGD.update(np, p, g, v, 0.1, 0.9, False)
    assert w.numpy().tobytes() == want.tobytes()


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_a_variable_given_twice_is_updated_twice_in_order(tg_device, name, monkeypatch):
    g1, g2 = tg.constant([0.5, -1.0, 2.0]), tg.constant([0.1, 0.3, -0.7])
    got = []
    for multi in (True, False):
        if not multi:
            monkeypatch.setattr(opt_base, "_multi_kernel", lambda kind, var: None)
        w = tg.Variable([1.0, -2.0, 0.5])
        OPTIMIZERS[name]().apply_gradients([(g1, w), (g2, w)])
        got.append(w.numpy())
    assert got[0].tobytes() == got[1].tobytes()
    assert not np.array_equal(got[0], [1.0, -2.0, 0.5])
