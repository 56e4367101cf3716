"""Gradients with respect to intermediate tensors.

Any tensor computed under the tape can be a source: `tape.gradient(loss, [h1, h2])` gives the
gradient of the loss with respect to hidden activations (saliency, gradient checks, debugging
vanishing gradients). Use a persistent tape to ask for several gradients.
"""
import numpy as np

import tapegpu as tg

# the checks below compare float32 products at float32's tolerance: TF32, on by default on
# GPUs of compute capability 8.0+ (as in TensorFlow), rounds their inputs to 10 bits
tg.config.experimental.enable_tensor_float_32_execution(False)
tg.random.set_seed(0)
dense1 = tg.layers.Dense(16, activation="tanh")
dense2 = tg.layers.Dense(3)
x = tg.random.normal((4, 8))
labels = tg.constant([0, 2, 1, 2])
loss_fn = tg.losses.SparseCategoricalCrossentropy(from_logits=True)

with tg.GradientTape(persistent=True) as tape:
    hidden = dense1(x)
    logits = dense2(hidden)
    loss = loss_fn(labels, logits)

d_hidden, d_logits = tape.gradient(loss, [hidden, logits])
d_kernel2 = tape.gradient(loss, dense2.kernel)
print("d loss / d hidden:", d_hidden.shape, " d loss / d logits:", d_logits.shape)

# the intermediate gradients compose: dL/dW2 = hiddenᵀ dL/dlogits, dL/dh = dL/dlogits W2ᵀ
np.testing.assert_allclose(d_kernel2.numpy(), hidden.numpy().T @ d_logits.numpy(), rtol=1e-5)
np.testing.assert_allclose(d_hidden.numpy(), d_logits.numpy() @ dense2.kernel.numpy().T,
                           rtol=1e-5)
# the logits' gradient is (softmax - onehot) / batch
p = np.exp(logits.numpy()) / np.exp(logits.numpy()).sum(1, keepdims=True)
np.testing.assert_allclose(d_logits.numpy(), (p - np.eye(3)[labels.numpy()]) / 4, rtol=1e-5,
                           atol=1e-7)
del tape
