"""The workloads W1-W6, each written once per framework on the same float32 data.

A workload builds a dict `{(row, framework): callable}`. Every callable runs one step (forward
and backward, a Jacobian, ...), waits for the result (JAX dispatches asynchronously, a GPU
too) and returns it. Within a row all frameworks compute the same thing; `run.py` checks their
results against each other before it times anything, then times all rows of one workload
interleaved, round by round.

Frameworks are passed in as modules (None when not installed): `fw["torch"]`, `fw["jax"]`,
`fw["tf"]`, `fw["autograd"]`. JAX is timed as it is meant to be used, under `jax.jit` (except
the loop rows of W3: a Python loop over an eager `vjp_fn`, which jit would recompile); PyTorch
and TensorFlow eagerly (TensorFlow with `tf.GradientTape`, the API tapegpu copies); HIPS
autograd on numpy. "numpy (floor)" is the same computation written by hand in numpy: the cost
of the arithmetic with no autodiff machinery at all.

W7 (peak memory) runs in a fresh process per framework: see memory_probe.py.
"""
from dataclasses import dataclass, field

import numpy as np

import tapegpu as tg

F32 = np.float32
TAPEGPU = "tapegpu"
FLOOR = "numpy (floor)"
FRAMEWORKS = (TAPEGPU, FLOOR, "pytorch", "jax", "tensorflow", "autograd")


@dataclass
class Workload:
    key: str                      # "W1"
    title: str
    cases: dict                   # (row, framework) -> callable
    tol: tuple = (1e-4, 1e-6)     # rtol, atol of the cross-check
    derived: list = field(default_factory=list)  # (label, row a, row b): t(a)/t(b) per fw
    reference: dict = field(default_factory=dict)  # row -> the case its results are checked against
    unchecked: tuple = ()         # (row, framework) cases timed but computing something else

    def rows(self):
        out = []
        for row, _ in self.cases:
            if row not in out:
                out.append(row)
        return out


def to_numpy(x):
    """The flat list of host arrays in a (nested) result of any framework."""
    if isinstance(x, (list, tuple)):
        return [a for item in x for a in to_numpy(item)]
    if hasattr(x, "detach"):  # torch
        return [x.detach().cpu().numpy()]
    if hasattr(x, "numpy"):  # tapegpu, tensorflow
        return [np.asarray(x.numpy())]
    return [np.asarray(x)]


def _rng(seed):
    return np.random.default_rng(seed)


def _dense(rng, sizes, scale="glorot"):
    ws, bs = [], []
    for i, o in zip(sizes[:-1], sizes[1:]):
        s = np.sqrt(2.0 / i) if scale == "he" else 1.0 / np.sqrt(i)
        ws.append((rng.standard_normal((i, o)) * s).astype(F32))
        bs.append((rng.standard_normal(o) * 0.1).astype(F32))
    return ws, bs


def _qt(fw, a, **kw):
    """A torch tensor on `fw["torch_device"]` (the CPU unless gpu.py says otherwise)."""
    return fw["torch"].tensor(a, device=fw.get("torch_device", "cpu"), **kw)


# -- W1: eager per-op overhead --------------------------------------------------------------------

def w1_overhead(fw, steps=100):
    """300 elementwise ops on a (16,) vector, forward + backward."""
    x0 = _rng(0).standard_normal(16).astype(F32)
    a, b = F32(1.01), F32(0.1)
    row = f"{steps} x (sin, *, +) on (16,), fwd+bwd"
    cases = {}

    def numpy_by_hand():
        y, saved = x0, []
        for _ in range(steps):
            saved.append(np.cos(y))
            y = np.sin(y) * a + b
        g = np.ones_like(y)
        for c in reversed(saved):
            g = g * a * c
        return g
    cases[row, FLOOR] = numpy_by_hand

    xt = tg.constant(x0)

    def tapegpu_step():
        with tg.GradientTape() as tape:
            tape.watch(xt)
            y = xt
            for _ in range(steps):
                y = tg.sin(y) * 1.01 + 0.1
            s = tg.reduce_sum(y)
        return tape.gradient(s, xt)
    cases[row, TAPEGPU] = tapegpu_step

    if fw.get("torch"):
        torch = fw["torch"]
        xq = _qt(fw, x0, requires_grad=True)

        def torch_step():
            y = xq
            for _ in range(steps):
                y = torch.sin(y) * 1.01 + 0.1
            return torch.autograd.grad(y.sum(), xq)[0]
        cases[row, "pytorch"] = torch_step
    if fw.get("jax"):
        jax, jnp = fw["jax"], fw["jax"].numpy

        def f(x):
            for _ in range(steps):
                x = jnp.sin(x) * 1.01 + 0.1
            return jnp.sum(x)
        g = jax.jit(jax.grad(f))
        xj = jnp.asarray(x0)
        cases[row, "jax"] = lambda: jax.block_until_ready(g(xj))
    if fw.get("tf"):
        tf = fw["tf"]
        xf = tf.constant(x0)

        def tf_step():
            with tf.GradientTape() as tape:
                tape.watch(xf)
                y = xf
                for _ in range(steps):
                    y = tf.sin(y) * 1.01 + 0.1
                s = tf.reduce_sum(y)
            return tape.gradient(s, xf)
        cases[row, "tensorflow"] = tf_step
    if fw.get("autograd"):
        ag, anp = fw["autograd"], fw["autograd"].numpy

        def fa(x):
            for _ in range(steps):
                x = anp.sin(x) * a + b
            return anp.sum(x)
        ga = ag.grad(fa)
        cases[row, "autograd"] = lambda: ga(x0)
    return Workload("W1", "eager per-op overhead: 100 x `y = sin(y) * 1.01 + 0.1` on a (16,) "
                    "vector, forward + backward", cases, tol=(1e-5, 1e-6),
                    reference={row: FLOOR})


# -- W2: MLP training step ------------------------------------------------------------------------

def matmul_floor(x, ws, bs):
    """The 8 matmuls of one step of a 3-layer ReLU MLP: forward (3) and backward (2 + 2 + 1),
    the floor any framework pays; the other work (bias, ReLU, softmax) is left out."""
    h1 = np.maximum(x @ ws[0] + bs[0], 0)
    h2 = np.maximum(h1 @ ws[1] + bs[1], 0)
    g3 = np.ones((x.shape[0], ws[2].shape[1]), x.dtype)

    def floor_8_matmuls():
        a1 = x @ ws[0]
        a2 = h1 @ ws[1]
        a3 = h2 @ ws[2]
        dw3 = h2.T @ g3
        d2 = g3 @ ws[2].T
        dw2 = h1.T @ d2
        d1 = d2 @ ws[1].T
        dw1 = x.T @ d1
        return a1, a2, a3, dw1, dw2, dw3
    return floor_8_matmuls


def w2_training(fw, batch=256, lr=1e-3):
    """One SGD step of a 784-1024-1024-10 ReLU MLP with softmax cross-entropy; the result is
    the gradients (of the parameters before the update), kernels first, then biases."""
    rng = _rng(2)
    sizes = [784, 1024, 1024, 10]
    ws, bs = _dense(rng, sizes, "he")
    x = rng.standard_normal((batch, 784)).astype(F32)
    labels = rng.integers(0, 10, batch).astype(np.int32)
    row = f"784-1024-1024-10 ReLU, batch {batch}: grad + SGD"
    floor_row = row
    cases = {}

    cases[floor_row, FLOOR] = matmul_floor(x, ws, bs)  # timed, not cross-checked

    vw = [tg.Variable(w) for w in ws]
    vb = [tg.Variable(b) for b in bs]
    xt, yt = tg.constant(x), tg.constant(labels)
    opt = tg.optimizers.SGD(learning_rate=lr)  # one fused update per variable on GPU backends

    def tapegpu_step():
        with tg.GradientTape() as tape:
            h = xt
            for i, (w, b) in enumerate(zip(vw, vb)):
                h = tg.matmul(h, w) + b
                if i < 2:
                    h = tg.nn.relu(h)
            loss = tg.reduce_mean(tg.nn.sparse_softmax_cross_entropy_with_logits(yt, h))
        grads = tape.gradient(loss, vw + vb)
        opt.apply_gradients(zip(grads, vw + vb))
        return grads
    cases[row, TAPEGPU] = tapegpu_step

    if fw.get("torch"):
        torch = fw["torch"]
        qp = [_qt(fw, a, requires_grad=True) for a in ws + bs]
        qx, qy = _qt(fw, x), _qt(fw, labels.astype(np.int64))

        def torch_step():
            h = qx
            for i in range(3):
                h = h @ qp[i] + qp[3 + i]
                if i < 2:
                    h = torch.relu(h)
            loss = torch.nn.functional.cross_entropy(h, qy)
            grads = torch.autograd.grad(loss, qp)
            with torch.no_grad():
                for p, g in zip(qp, grads):
                    p.sub_(g * lr)
            return grads
        cases[row, "pytorch"] = torch_step
    if fw.get("jax"):
        jax, jnp = fw["jax"], fw["jax"].numpy

        def loss_j(p, x, y):
            h = x
            for i in range(3):
                h = h @ p[i] + p[3 + i]
                if i < 2:
                    h = jax.nn.relu(h)
            logp = jax.nn.log_softmax(h)
            return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))

        @jax.jit
        def step_j(p, x, y):
            grads = jax.grad(loss_j)(p, x, y)
            return grads, [a - lr * g for a, g in zip(p, grads)]
        state = [[jnp.asarray(a) for a in ws + bs]]
        xj, yj = jnp.asarray(x), jnp.asarray(labels)

        def jax_step():
            grads, state[0] = step_j(state[0], xj, yj)
            return jax.block_until_ready(grads)
        cases[row, "jax"] = jax_step
    if fw.get("tf"):
        tf = fw["tf"]
        fp = [tf.Variable(a) for a in ws + bs]
        xf, yf = tf.constant(x), tf.constant(labels)

        def tf_step():
            with tf.GradientTape() as tape:
                h = xf
                for i in range(3):
                    h = h @ fp[i] + fp[3 + i]
                    if i < 2:
                        h = tf.nn.relu(h)
                loss = tf.reduce_mean(
                    tf.nn.sparse_softmax_cross_entropy_with_logits(yf, h))
            grads = tape.gradient(loss, fp)
            for v, g in zip(fp, grads):
                v.assign_sub(g * lr)
            return grads
        cases[row, "tensorflow"] = tf_step
    if fw.get("autograd"):
        ag, anp = fw["autograd"], fw["autograd"].numpy
        onehot = np.eye(10, dtype=F32)[labels]

        def loss_a(p):
            h = x
            for i in range(3):
                h = anp.dot(h, p[i]) + p[3 + i]
                if i < 2:
                    h = anp.maximum(h, 0.0)
            m = anp.max(h, axis=1, keepdims=True)  # any shift gives the same lse and gradient
            lse = anp.log(anp.sum(anp.exp(h - m), axis=1, keepdims=True)) + m
            return -anp.mean(anp.sum(onehot * (h - lse), axis=1))
        ga = ag.grad(loss_a)
        ap = [a.copy() for a in ws + bs]

        def autograd_step():
            grads = ga(ap)
            for p, g in zip(ap, grads):
                p -= lr * g
            return grads
        cases[row, "autograd"] = autograd_step
    return Workload("W2", "MLP training step: 784-1024-1024-10 ReLU, batch 256, softmax "
                    "cross-entropy, gradients + SGD update", cases, tol=(2e-3, 2e-5),
                    reference={row: TAPEGPU}, unchecked=((floor_row, FLOOR),))


# -- W3: Jacobians of a tanh MLP w.r.t. its input and its first kernel ----------------------------

def w3_jacobian(fw):
    rng = _rng(1)
    sizes = [256, 512, 512, 64]
    ws, bs = _dense(rng, sizes)
    x0 = rng.standard_normal((1, 256)).astype(F32)
    r_in, r_in_loop = "J wrt input (64x256), vectorized", "J wrt input (64x256), loop"
    r_k, r_k_loop = "J wrt W1 (64x256x512), vectorized", "J wrt W1 (64x256x512), loop"
    cases = {}

    # -- numpy by hand: J_x = D3 W3^T D2 W2^T D1 W1^T; J_W1[i, a, b] = x[a] * G1[i, b] ----------
    def numpy_g1():
        hs, h = [], x0
        for w, b in zip(ws, bs):
            h = np.tanh(h @ w + b)
            hs.append(h)
        g = np.eye(64, dtype=F32)
        g = g * (1 - hs[2] * hs[2])
        g = (g @ ws[2].T) * (1 - hs[1] * hs[1])
        g = (g @ ws[1].T) * (1 - hs[0] * hs[0])
        return g  # (64, 512): cotangents of the first pre-activation

    cases[r_in, FLOOR] = lambda: numpy_g1() @ ws[0].T
    cases[r_k, FLOOR] = lambda: x0[0][None, :, None] * numpy_g1()[:, None, :]

    # -- tapegpu --------------------------------------------------------------------------------
    tw = [tg.constant(w) for w in ws]
    tb = [tg.constant(b) for b in bs]
    xt = tg.constant(x0)

    def tg_jac(wrt_kernel, pfor):
        with tg.GradientTape(persistent=not pfor) as tape:  # the loop needs it, as in TF
            tape.watch(xt)
            tape.watch(tw[0])
            h = xt
            for w, b in zip(tw, tb):
                h = tg.tanh(tg.matmul(h, w) + b)
        j = tape.jacobian(h, tw[0] if wrt_kernel else xt, experimental_use_pfor=pfor)
        return tg.reshape(j, (64, 256, 512) if wrt_kernel else (64, 256))
    cases[r_in, TAPEGPU] = lambda: tg_jac(False, True)
    cases[r_in_loop, TAPEGPU] = lambda: tg_jac(False, False)
    cases[r_k, TAPEGPU] = lambda: tg_jac(True, True)
    cases[r_k_loop, TAPEGPU] = lambda: tg_jac(True, False)

    if fw.get("torch"):
        torch = fw["torch"]
        qw = [_qt(fw, w) for w in ws]
        qb = [_qt(fw, b) for b in bs]
        qx = _qt(fw, x0)

        def fq(x, w1):
            h = x
            for i in range(3):
                h = torch.tanh(h @ (w1 if i == 0 else qw[i]) + qb[i])
            return h.reshape(64)
        jac_xq = torch.func.jacrev(fq, argnums=0)
        jac_kq = torch.func.jacrev(fq, argnums=1)
        cases[r_in, "pytorch"] = lambda: jac_xq(qx, qw[0]).reshape(64, 256)
        cases[r_k, "pytorch"] = lambda: jac_kq(qx, qw[0])

        def torch_loop(wrt_kernel):
            src = (qw[0] if wrt_kernel else qx).detach().requires_grad_(True)
            y = fq(src, qw[0]) if not wrt_kernel else fq(qx, src)
            rows = [torch.autograd.grad(y[i], src, retain_graph=True)[0] for i in range(64)]
            return torch.stack(rows).reshape((64, 256, 512) if wrt_kernel else (64, 256))
        cases[r_in_loop, "pytorch"] = lambda: torch_loop(False)
        cases[r_k_loop, "pytorch"] = lambda: torch_loop(True)
    if fw.get("jax"):
        jax, jnp = fw["jax"], fw["jax"].numpy
        jw = [jnp.asarray(w) for w in ws]
        jb = [jnp.asarray(b) for b in bs]
        jx = jnp.asarray(x0)

        def fj(x, w1):
            h = x
            for i in range(3):
                h = jnp.tanh(h @ (w1 if i == 0 else jw[i]) + jb[i])
            return h.reshape(64)
        jac_xj = jax.jit(jax.jacrev(fj, argnums=0))
        jac_kj = jax.jit(jax.jacrev(fj, argnums=1))
        cases[r_in, "jax"] = lambda: jax.block_until_ready(
            jac_xj(jx, jw[0]).reshape(64, 256))
        cases[r_k, "jax"] = lambda: jax.block_until_ready(jac_kj(jx, jw[0]))
        eye = [jnp.asarray(np.eye(64, dtype=F32)[i]) for i in range(64)]

        def jax_loop(wrt_kernel):
            if wrt_kernel:
                _, vjp_fn = jax.vjp(lambda w1: fj(jx, w1), jw[0])
            else:
                _, vjp_fn = jax.vjp(lambda x: fj(x, jw[0]), jx)
            rows = [vjp_fn(e)[0] for e in eye]  # eager: a new vjp_fn would recompile under jit
            return jax.block_until_ready(
                jnp.stack(rows).reshape((64, 256, 512) if wrt_kernel else (64, 256)))
        cases[r_in_loop, "jax"] = lambda: jax_loop(False)
        cases[r_k_loop, "jax"] = lambda: jax_loop(True)
    if fw.get("tf"):
        tf = fw["tf"]
        fw_ = [tf.constant(w) for w in ws]
        fb = [tf.constant(b) for b in bs]
        fx = tf.constant(x0)

        def tf_jac(wrt_kernel, pfor):
            src = fw_[0] if wrt_kernel else fx
            with tf.GradientTape(persistent=not pfor) as tape:  # TF's loop needs persistent
                tape.watch(src)
                h = fx
                for i in range(3):
                    h = tf.tanh(h @ fw_[i] + fb[i])
            j = tape.jacobian(h, src, experimental_use_pfor=pfor)
            return tf.reshape(j, (64, 256, 512) if wrt_kernel else (64, 256))
        cases[r_in, "tensorflow"] = lambda: tf_jac(False, True)
        cases[r_in_loop, "tensorflow"] = lambda: tf_jac(False, False)
        cases[r_k, "tensorflow"] = lambda: tf_jac(True, True)
        cases[r_k_loop, "tensorflow"] = lambda: tf_jac(True, False)
    if fw.get("autograd"):
        ag, anp = fw["autograd"], fw["autograd"].numpy

        def fa(x, w1):
            h = x
            for i in range(3):
                h = anp.tanh(anp.dot(h, w1 if i == 0 else ws[i]) + bs[i])
            return anp.reshape(h, (64,))
        jx_a = ag.jacobian(fa, 0)  # autograd's jacobian is a Python loop of VJPs
        jk_a = ag.jacobian(fa, 1)
        cases[r_in_loop, "autograd"] = lambda: jx_a(x0, ws[0]).reshape(64, 256)
        cases[r_k_loop, "autograd"] = lambda: jk_a(x0, ws[0])
    return Workload("W3", "Jacobian of a 256-512-512-64 tanh MLP at a (1, 256) input, w.r.t. the "
                    "input and w.r.t. the first kernel; vectorized and as a loop of VJPs", cases,
                    tol=(2e-4, 1e-6), reference={r_in: FLOOR, r_in_loop: FLOOR, r_k: FLOOR,
                                                 r_k_loop: FLOOR})


# -- W4: batch_jacobian of an ELU MLP -------------------------------------------------------------

def w4_batch_jacobian(fw, batch=128):
    rng = _rng(4)
    sizes = [32, 64, 64, 16]
    ws, bs = _dense(rng, sizes)
    x0 = rng.standard_normal((batch, 32)).astype(F32)
    row = f"batch_jacobian ({batch},16,32), 32-64-64-16 ELU"
    cases = {}

    def numpy_by_hand():
        zs, h = [], x0
        for i in range(3):
            z = h @ ws[i] + bs[i]
            if i < 2:
                zs.append(z)
                h = np.where(z > 0, z, np.expm1(np.minimum(z, 0)))
            else:
                h = z
        # cotangents (16, batch, .): one basis vector per output coordinate, for every row
        g = np.broadcast_to(np.eye(16, dtype=F32)[:, None, :], (16, batch, 16))
        g = g @ ws[2].T
        g = g * np.where(zs[1] > 0, 1, np.exp(np.minimum(zs[1], 0))).astype(F32)
        g = g @ ws[1].T
        g = g * np.where(zs[0] > 0, 1, np.exp(np.minimum(zs[0], 0))).astype(F32)
        return (g @ ws[0].T).transpose(1, 0, 2)
    cases[row, FLOOR] = numpy_by_hand

    tw = [tg.constant(w) for w in ws]
    tb = [tg.constant(b) for b in bs]
    xt = tg.constant(x0)

    def tapegpu_bj():
        with tg.GradientTape() as tape:
            tape.watch(xt)
            h = xt
            for i in range(3):
                h = tg.matmul(h, tw[i]) + tb[i]
                if i < 2:
                    h = tg.nn.elu(h)
        return tape.batch_jacobian(h, xt)
    cases[row, TAPEGPU] = tapegpu_bj

    if fw.get("torch"):
        torch = fw["torch"]
        qw = [_qt(fw, w) for w in ws]
        qb = [_qt(fw, b) for b in bs]
        qx = _qt(fw, x0)

        def fq(x):
            for i in range(3):
                x = x @ qw[i] + qb[i]
                if i < 2:
                    x = torch.nn.functional.elu(x)
            return x
        bjq = torch.func.vmap(torch.func.jacrev(fq))
        cases[row, "pytorch"] = lambda: bjq(qx)
    if fw.get("jax"):
        jax, jnp = fw["jax"], fw["jax"].numpy
        jw = [jnp.asarray(w) for w in ws]
        jb = [jnp.asarray(b) for b in bs]
        jx = jnp.asarray(x0)

        def fj(x):
            for i in range(3):
                x = x @ jw[i] + jb[i]
                if i < 2:
                    x = jax.nn.elu(x)
            return x
        bjj = jax.jit(jax.vmap(jax.jacrev(fj)))
        cases[row, "jax"] = lambda: jax.block_until_ready(bjj(jx))
    if fw.get("tf"):
        tf = fw["tf"]
        fw_ = [tf.constant(w) for w in ws]
        fb = [tf.constant(b) for b in bs]
        fx = tf.constant(x0)

        def tf_bj():
            with tf.GradientTape() as tape:
                tape.watch(fx)
                h = fx
                for i in range(3):
                    h = h @ fw_[i] + fb[i]
                    if i < 2:
                        h = tf.nn.elu(h)
            return tape.batch_jacobian(h, fx)
        cases[row, "tensorflow"] = tf_bj
    if fw.get("autograd"):
        ag, anp = fw["autograd"], fw["autograd"].numpy

        def elu(z):
            return anp.where(z > 0, z, anp.exp(anp.minimum(z, 0.0)) - 1.0)

        def fa_sum(x):  # rows are independent: d(sum over the batch)/dx holds every row's J
            for i in range(3):
                x = anp.dot(x, ws[i]) + bs[i]
                if i < 2:
                    x = elu(x)
            return anp.sum(x, axis=0)
        ja = ag.jacobian(fa_sum)
        cases[row, "autograd"] = lambda: ja(x0).transpose(1, 0, 2)
    return Workload("W4", "batch_jacobian (128, 16, 32) of a 32-64-64-16 ELU MLP at a (128, 32) "
                    "input", cases, tol=(2e-4, 1e-6), reference={row: FLOOR})


# -- W5: Hessian-vector product of a tanh MLP, and its ratio to a gradient ------------------------

def w5_hvp(fw, batch=64):
    rng = _rng(5)
    sizes = [784, 256, 10]
    ws, bs = _dense(rng, sizes)
    params = [ws[0], bs[0], ws[1], bs[1]]
    vs = [rng.standard_normal(p.shape).astype(F32) for p in params]
    x = rng.standard_normal((batch, 784)).astype(F32)
    labels = rng.integers(0, 10, batch).astype(np.int32)
    onehot = np.eye(10, dtype=F32)[labels]
    r_g = "gradient w.r.t. all parameters"
    r_fr = "HVP, forward-over-reverse"
    r_rr = "HVP, reverse-over-reverse"
    cases = {}

    xt, yt = tg.constant(x), tg.constant(labels)
    tp = [tg.constant(p) for p in params]
    tv = [tg.constant(v) for v in vs]

    def loss_t(w1, b1, w2, b2):
        h = tg.tanh(tg.matmul(xt, w1) + b1)
        return tg.reduce_mean(tg.nn.sparse_softmax_cross_entropy_with_logits(
            yt, tg.matmul(h, w2) + b2))

    def tapegpu_grad():
        with tg.GradientTape() as tape:
            tape.watch(tp)
            loss = loss_t(*tp)
        return tape.gradient(loss, tp)

    def tapegpu_nested():
        with tg.GradientTape() as outer:
            outer.watch(tp)
            with tg.GradientTape() as inner:
                inner.watch(tp)
                loss = loss_t(*tp)
            gs = inner.gradient(loss, tp)
            dot = tg.add_n([tg.reduce_sum(g * v) for g, v in zip(gs, tv)])
        return outer.gradient(dot, tp)
    cases[r_g, TAPEGPU] = tapegpu_grad
    cases[r_rr, TAPEGPU] = tapegpu_nested
    if hasattr(tg, "autodiff") and hasattr(tg.autodiff, "hvp"):
        cases[r_fr, TAPEGPU] = lambda: tg.autodiff.hvp(loss_t, tp, tv)

    if fw.get("torch"):
        torch = fw["torch"]
        qx, qy = _qt(fw, x), _qt(fw, labels.astype(np.int64))
        qp = [_qt(fw, p, requires_grad=True) for p in params]
        qv = [_qt(fw, v) for v in vs]

        def loss_q(w1, b1, w2, b2):
            h = torch.tanh(qx @ w1 + b1)
            return torch.nn.functional.cross_entropy(h @ w2 + b2, qy)
        cases[r_g, "pytorch"] = lambda: torch.autograd.grad(loss_q(*qp), qp)

        def torch_rr():
            gs = torch.autograd.grad(loss_q(*qp), qp, create_graph=True)
            dot = sum((g * v).sum() for g, v in zip(gs, qv))
            return torch.autograd.grad(dot, qp)
        cases[r_rr, "pytorch"] = torch_rr
        grad_q = torch.func.grad(lambda p: loss_q(*p))
        pd = [p.detach() for p in qp]
        cases[r_fr, "pytorch"] = lambda: torch.func.jvp(grad_q, (pd,), (qv,))[1]
    if fw.get("jax"):
        jax, jnp = fw["jax"], fw["jax"].numpy
        jx, jy = jnp.asarray(x), jnp.asarray(labels)
        jp = [jnp.asarray(p) for p in params]
        jv = [jnp.asarray(v) for v in vs]

        def loss_j(p):
            h = jnp.tanh(jx @ p[0] + p[1])
            logp = jax.nn.log_softmax(h @ p[2] + p[3])
            return -jnp.mean(jnp.take_along_axis(logp, jy[:, None], axis=1))
        g_j = jax.jit(jax.grad(loss_j))
        fr_j = jax.jit(lambda p, v: jax.jvp(jax.grad(loss_j), (p,), (v,))[1])
        rr_j = jax.jit(lambda p, v: jax.grad(lambda q: sum(
            jnp.vdot(g, w) for g, w in zip(jax.grad(loss_j)(q), v)))(p))
        cases[r_g, "jax"] = lambda: jax.block_until_ready(g_j(jp))
        cases[r_fr, "jax"] = lambda: jax.block_until_ready(fr_j(jp, jv))
        cases[r_rr, "jax"] = lambda: jax.block_until_ready(rr_j(jp, jv))
    if fw.get("tf"):
        tf = fw["tf"]
        fx, fy = tf.constant(x), tf.constant(labels)
        fp = [tf.constant(p) for p in params]
        fv = [tf.constant(v) for v in vs]

        def loss_f(p):
            h = tf.tanh(fx @ p[0] + p[1])
            return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                fy, h @ p[2] + p[3]))

        def tf_grad():
            with tf.GradientTape() as tape:
                tape.watch(fp)
                loss = loss_f(fp)
            return tape.gradient(loss, fp)

        def tf_rr():
            with tf.GradientTape() as outer:
                outer.watch(fp)
                with tf.GradientTape() as inner:
                    inner.watch(fp)
                    loss = loss_f(fp)
                gs = inner.gradient(loss, fp)
                dot = tf.add_n([tf.reduce_sum(g * v) for g, v in zip(gs, fv)])
            return outer.gradient(dot, fp)

        def tf_fr():  # TF's documented HVP: an accumulator around a tape
            with tf.autodiff.ForwardAccumulator(fp, fv) as acc:
                with tf.GradientTape() as tape:
                    tape.watch(fp)
                    loss = loss_f(fp)
                gs = tape.gradient(loss, fp)
            return acc.jvp(gs)
        cases[r_g, "tensorflow"] = tf_grad
        cases[r_fr, "tensorflow"] = tf_fr
        cases[r_rr, "tensorflow"] = tf_rr
    if fw.get("autograd"):
        ag, anp = fw["autograd"], fw["autograd"].numpy

        def loss_a(p):
            h = anp.tanh(anp.dot(x, p[0]) + p[1])
            z = anp.dot(h, p[2]) + p[3]
            lse = anp.log(anp.sum(anp.exp(z), axis=1, keepdims=True))  # |z| is small here
            return -anp.mean(anp.sum(onehot * (z - lse), axis=1))
        g_a = ag.grad(loss_a)
        from autograd.misc import flatten
        flat, unflatten = flatten(params)
        vflat = flatten(vs)[0]
        hvp_a = ag.hessian_vector_product(lambda f: loss_a(unflatten(f)))  # reverse-over-reverse
        cases[r_g, "autograd"] = lambda: g_a(params)
        cases[r_rr, "autograd"] = lambda: unflatten(hvp_a(flat, vflat))
    return Workload("W5", "Hessian-vector product of a 784-256-10 tanh MLP's softmax "
                    "cross-entropy, batch 64, w.r.t. all parameters", cases, tol=(2e-3, 2e-5),
                    derived=[("HVP (fwd-over-rev) / gradient", r_fr, r_g),
                             ("HVP (rev-over-rev) / gradient", r_rr, r_g)],
                    reference={r_g: TAPEGPU, r_fr: TAPEGPU, r_rr: TAPEGPU})


# -- W6: per-example gradients --------------------------------------------------------------------

def w6_per_example(fw, batch=64):
    rng = _rng(6)
    ws, bs = _dense(rng, [100, 128, 10])
    params = [ws[0], bs[0], ws[1], bs[1]]
    x = rng.standard_normal((batch, 100)).astype(F32)
    labels = rng.integers(0, 10, batch).astype(np.int32)
    onehot = np.eye(10, dtype=F32)[labels]
    row = f"per-example gradients, 100-128-10 tanh, batch {batch}"
    cases = {}

    def numpy_by_hand():
        h = np.tanh(x @ ws[0] + bs[0])
        z = h @ ws[1] + bs[1]
        p = np.exp(z - z.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        d2 = p - onehot                                   # (b, 10)
        d1 = (d2 @ ws[1].T) * (1 - h * h)                 # (b, 128)
        return [x[:, :, None] * d1[:, None, :], d1, h[:, :, None] * d2[:, None, :], d2]
    cases[row, FLOOR] = numpy_by_hand

    vp = [tg.Variable(p) for p in params]
    xt, yt = tg.constant(x), tg.constant(labels)

    def tapegpu_pe():
        with tg.GradientTape() as tape:
            h = tg.tanh(tg.matmul(xt, vp[0]) + vp[1])
            losses = tg.nn.sparse_softmax_cross_entropy_with_logits(yt, tg.matmul(h, vp[2]) + vp[3])
        return tape.jacobian(losses, vp)
    cases[row, TAPEGPU] = tapegpu_pe

    # the same by tg.vectorized_map over one example's gradient (TensorFlow's per-example
    # recipe), beside PyTorch's and JAX's vmap(grad): the frameworks' own per-example routes
    vrow = f"per-example gradients by vectorized_map / vmap(grad), 100-128-10 tanh, batch {batch}"
    cases[vrow, FLOOR] = numpy_by_hand

    def tapegpu_one(example):  # as tf.vectorized_map's docstring: a batch of one example
        xi, yi = tg.expand_dims(example[0], 0), tg.expand_dims(example[1], 0)
        with tg.GradientTape() as tape:
            h = tg.tanh(tg.matmul(xi, vp[0]) + vp[1])
            loss = tg.nn.sparse_softmax_cross_entropy_with_logits(yi, tg.matmul(h, vp[2]) + vp[3])
        return tape.gradient(loss, vp)
    cases[vrow, TAPEGPU] = lambda: tg.vectorized_map(tapegpu_one, (xt, yt))

    if fw.get("torch"):
        torch = fw["torch"]
        qp = [_qt(fw, p) for p in params]
        qx, qy = _qt(fw, x), _qt(fw, labels.astype(np.int64))

        def loss1q(p, xi, yi):
            h = torch.tanh(xi @ p[0] + p[1])
            return torch.nn.functional.cross_entropy((h @ p[2] + p[3])[None], yi[None])
        peq = torch.func.vmap(torch.func.grad(loss1q), in_dims=(None, 0, 0))
        cases[row, "pytorch"] = lambda: peq(qp, qx, qy)
        cases[vrow, "pytorch"] = lambda: peq(qp, qx, qy)
    if fw.get("jax"):
        jax, jnp = fw["jax"], fw["jax"].numpy
        jp = [jnp.asarray(p) for p in params]
        jx, jy = jnp.asarray(x), jnp.asarray(labels)

        def loss1j(p, xi, yi):
            h = jnp.tanh(xi @ p[0] + p[1])
            return -jax.nn.log_softmax(h @ p[2] + p[3])[yi]
        pej = jax.jit(jax.vmap(jax.grad(loss1j), in_axes=(None, 0, 0)))
        cases[row, "jax"] = lambda: jax.block_until_ready(pej(jp, jx, jy))
        cases[vrow, "jax"] = lambda: jax.block_until_ready(pej(jp, jx, jy))
    if fw.get("tf"):
        tf = fw["tf"]
        fp = [tf.Variable(p) for p in params]
        fx, fy = tf.constant(x), tf.constant(labels)

        def tf_pe():
            with tf.GradientTape() as tape:
                h = tf.tanh(fx @ fp[0] + fp[1])
                losses = tf.nn.sparse_softmax_cross_entropy_with_logits(fy, h @ fp[2] + fp[3])
            return tape.jacobian(losses, fp)
        cases[row, "tensorflow"] = tf_pe
    if fw.get("autograd"):
        ag, anp = fw["autograd"], fw["autograd"].numpy

        def losses_a(p):
            h = anp.tanh(anp.dot(x, p[0]) + p[1])
            z = anp.dot(h, p[2]) + p[3]
            lse = anp.log(anp.sum(anp.exp(z), axis=1))
            return lse - anp.sum(onehot * z, axis=1)
        from autograd.misc import flatten
        flat, unflatten = flatten(params)
        # no vmap in autograd: its jacobian of the loss vector is a loop of 64 VJPs
        ja = ag.jacobian(lambda f: losses_a(unflatten(f)))
        sizes = [p.size for p in params]
        ends = np.cumsum(sizes)

        def autograd_pe():
            j = ja(flat)
            return [j[:, e - n:e].reshape((batch,) + p.shape)
                    for e, n, p in zip(ends, sizes, params)]
        cases[row, "autograd"] = autograd_pe
    return Workload("W6", "per-example gradients of a 100-128-10 tanh MLP's softmax "
                    "cross-entropy, batch 64", cases, tol=(2e-4, 1e-6),
                    reference={row: FLOOR, vrow: FLOOR})


ALL = {"W1": w1_overhead, "W2": w2_training, "W3": w3_jacobian, "W4": w4_batch_jacobian,
       "W5": w5_hvp, "W6": w6_per_example}
