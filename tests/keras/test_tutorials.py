"""TensorFlow's guides and tutorials run with `import tapegpu as tf`: the "basic training
loops" guide, the FGSM adversarial-example tutorial, the DCGAN and the CVAE tutorials.

The tutorials' code is kept as written (plotting, downloads and GIFs left out); the data are
small synthetic arrays instead of MNIST or a downloaded photo, and models are small where the
tutorial loads a pretrained network. Each test checks what could go wrong: the values the
guide's code computes where they are deterministic (against numpy), shapes, and that training
lowers the loss.
"""
import re

import numpy as np
import pytest

import tapegpu as tf


# -- "Basic training loops" (site/en/guide/basic_training_loops) --------------------------------

TRUE_W = 3.0
TRUE_B = 2.0
NUM_EXAMPLES = 201


def f(x):
    return x * TRUE_W + TRUE_B


class MyModel(tf.Module):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        # Initialize the weights to `5.0` and the bias to `0.0`
        self.w = tf.Variable(5.0)
        self.b = tf.Variable(0.0)

    def __call__(self, x):
        return self.w * x + self.b


def loss(target_y, predicted_y):
    return tf.reduce_mean(tf.square(target_y - predicted_y))


def train(model, x, y, learning_rate):
    with tf.GradientTape() as t:
        current_loss = loss(y, model(x))
    dw, db = t.gradient(current_loss, [model.w, model.b])
    model.w.assign_sub(learning_rate * dw)
    model.b.assign_sub(learning_rate * db)


def report(model, loss):
    return f"W = {model.w.numpy():1.2f}, b = {model.b.numpy():1.2f}, loss={loss:2.5f}"


def training_loop(model, x, y, weights, biases, epochs=range(10)):
    for epoch in epochs:
        train(model, x, y, learning_rate=0.1)
        weights.append(model.w.numpy())
        biases.append(model.b.numpy())
        current_loss = loss(y, model(x))
        print(f"Epoch {epoch:2d}:")
        print("    ", report(model, current_loss))


class MyModelKeras(tf.keras.Model):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.w = tf.Variable(5.0)
        self.b = tf.Variable(0.0)

    def call(self, x):
        return self.w * x + self.b


def numpy_gradient_descent(x, y, steps, lr=0.1):
    """The guide's loop in float64 numpy: (w, b, loss) before the first step and after each."""
    x, y = x.astype(np.float64), y.astype(np.float64)
    w, b = 5.0, 0.0
    out = [(w, b, np.mean((y - w * x - b) ** 2))]
    for _ in range(steps):
        r = y - w * x - b
        w, b = w + lr * 2 * np.mean(r * x), b + lr * 2 * np.mean(r)
        out.append((w, b, np.mean((y - w * x - b) ** 2)))
    return out


def test_basic_training_loops_guide(capsys, tmp_path):
    x = tf.linspace(-2, 2, NUM_EXAMPLES)
    x = tf.cast(x, tf.float32)
    noise = tf.random.normal(shape=[NUM_EXAMPLES])
    y = f(x) + noise
    assert x.dtype == tf.float32 and y.shape == (NUM_EXAMPLES,)

    model = MyModel()
    print("Variables:", model.variables)
    assert model(3.0).numpy() == 15.0  # the guide's own check
    assert [v.numpy() for v in model.variables] == [5.0, 0.0]

    model = MyModel()
    weights, biases = [], []
    current_loss = loss(y, model(x))
    print("Starting:")
    print("    ", report(model, current_loss))
    training_loop(model, x, y, weights, biases)

    want = numpy_gradient_descent(x.numpy(), y.numpy(), 10)
    np.testing.assert_allclose(weights, [w for w, _, _ in want[1:]], rtol=1e-5)
    np.testing.assert_allclose(biases, [b for _, b, _ in want[1:]], rtol=1e-5, atol=1e-6)
    # the printed report: one line per epoch with W, b and the loss after the step
    lines = [ln.strip() for ln in capsys.readouterr().out.splitlines() if "W = " in ln]
    assert len(lines) == 11
    for line, (w, b, mse) in zip(lines, want):
        got = re.fullmatch(r"W = (\S+), b = (\S+), loss=(\S+)", line).groups()
        # the printed digits, to their last place (float32 against float64 may round apart)
        errors = np.abs(np.array([float(v) for v in got]) - [w, b, mse])
        assert (errors <= [0.0051, 0.0051, 2e-5]).all(), (line, w, b, mse)
    # W and b move towards the true line (the data's least-squares fit)
    assert abs(weights[-1] - TRUE_W) < abs(5.0 - TRUE_W) / 2
    assert abs(biases[-1] - TRUE_B) < abs(0.0 - TRUE_B) / 2

    keras_model = MyModelKeras()
    training_loop(keras_model, x, y, [], [])
    np.testing.assert_allclose(keras_model.w.numpy(), want[-1][0], rtol=1e-5)
    keras_model.save_weights(str(tmp_path / "my_checkpoint"))

    # compile/fit: one batch of 201 per epoch, SGD(0.1) on the MSE: the same steps
    keras_model = MyModelKeras()
    keras_model.compile(run_eagerly=False,
                        optimizer=tf.keras.optimizers.SGD(learning_rate=0.1),
                        loss=tf.keras.losses.mean_squared_error)
    assert x.shape[0] == 201
    history = keras_model.fit(x, y, epochs=10, batch_size=1000, verbose=0)
    # each epoch's loss is the loss before its step
    np.testing.assert_allclose(history.history["loss"], [m for _, _, m in want[:10]],
                               rtol=1e-5)
    np.testing.assert_allclose([keras_model.w.numpy(), keras_model.b.numpy()],
                               want[-1][:2], rtol=1e-5)
    restored = MyModelKeras()
    restored.load_weights(str(tmp_path / "my_checkpoint"))
    np.testing.assert_allclose(restored.w.numpy(), want[-1][0], rtol=1e-5)


# -- FGSM (site/en/tutorials/generative/adversarial_fgsm) ---------------------------------------
# A small classifier of 8x8 RGB images trained here stands in for the pretrained MobileNetV2
# (no ImageNet weights can be downloaded here); images are synthetic.

NUM_CLASSES = 10


def preprocess(image):
    image = tf.cast(image, tf.float32)
    image = tf.image.resize(image, (8, 8))  # the tutorial's (224, 224)
    image = tf.keras.applications.mobilenet_v2.preprocess_input(image)
    image = image[None, ...]
    return image


TEMPLATES = np.random.default_rng(42).uniform(0, 255, size=(NUM_CLASSES, 16, 16, 3))


def _raw_images(n, rng):
    """uint8 16x16 RGB images: a class template plus noise, and their classes."""
    labels = rng.integers(0, NUM_CLASSES, n)
    images = np.clip(TEMPLATES[labels] + rng.normal(0, 40, size=(n, 16, 16, 3)), 0, 255)
    return images.astype(np.uint8), labels


def _pretrained_model(rng):
    tf.random.set_seed(0)
    raw, labels = _raw_images(200, rng)
    x = np.concatenate([preprocess(im).numpy() for im in raw])
    model = tf.keras.Sequential([
        tf.keras.Input((8, 8, 3)),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(32, activation="relu"),
        tf.keras.layers.Dense(NUM_CLASSES, activation="softmax")])
    model.compile(optimizer=tf.keras.optimizers.Adam(0.01),
                  loss=tf.keras.losses.SparseCategoricalCrossentropy(), metrics=["accuracy"])
    history = model.fit(x, labels, epochs=3, batch_size=32, verbose=0)
    assert history.history["accuracy"][-1] > 0.9
    return model


def _numpy_input_gradient(model, image, label):
    """d CE(label, model(image)) / d image for Flatten -> Dense(ReLU) -> Dense(softmax), by
    hand: the logits' gradient is p - label."""
    w1, b1, w2, b2 = (v.numpy().astype(np.float64) for v in model.variables)
    x = image.reshape(1, -1).astype(np.float64)
    a1 = x @ w1 + b1
    z = np.maximum(a1, 0) @ w2 + b2
    p = np.exp(z - z.max()) / np.exp(z - z.max()).sum()
    g = ((p - label) @ w2.T) * (a1 > 0) @ w1.T
    return g.reshape(image.shape)


def test_fgsm_tutorial():
    rng = np.random.default_rng(0)
    pretrained_model = _pretrained_model(rng)
    pretrained_model.trainable = False
    assert pretrained_model.trainable_variables == []

    raw, classes = _raw_images(1, np.random.default_rng(1))
    image = preprocess(raw[0])
    assert image.shape == (1, 8, 8, 3) and image.dtype == tf.float32
    assert -1.0 <= image.numpy().min() and image.numpy().max() <= 1.0  # MobileNetV2's range
    image_probs = pretrained_model.predict(image, verbose=0)

    loss_object = tf.keras.losses.CategoricalCrossentropy()

    def create_adversarial_pattern(input_image, input_label):
        with tf.GradientTape() as tape:
            tape.watch(input_image)
            prediction = pretrained_model(input_image)
            loss = loss_object(input_label, prediction)
        # Get the gradients of the loss w.r.t to the input image.
        gradient = tape.gradient(loss, input_image)
        # Get the sign of the gradients to create the perturbation
        signed_grad = tf.sign(gradient)
        return signed_grad

    label_index = int(classes[0])
    label = tf.one_hot(label_index, image_probs.shape[-1])
    label = tf.reshape(label, (1, image_probs.shape[-1]))
    perturbations = create_adversarial_pattern(image, label)

    assert perturbations.shape == image.shape
    want = _numpy_input_gradient(pretrained_model, image.numpy(), label.numpy())
    clear = np.abs(want) > 1e-4 * np.abs(want).max()  # signs not decided by rounding
    assert clear.mean() > 0.9
    np.testing.assert_array_equal(perturbations.numpy()[clear], np.sign(want)[clear])

    def confidence_and_loss(x):
        probs = pretrained_model.predict(x, verbose=0)
        return probs[0, label_index], float(loss_object(label, probs))

    epsilons = [0, 0.01, 0.1, 0.15]
    results = []
    for eps in epsilons:
        adv_x = image + eps * perturbations
        adv_x = tf.clip_by_value(adv_x, -1, 1)
        # the perturbation is eps * sign(gradient), then clipped to the valid range
        np.testing.assert_allclose(
            adv_x.numpy(), np.clip(image.numpy() + eps * perturbations.numpy(), -1, 1),
            rtol=1e-6)
        assert np.abs(adv_x.numpy() - image.numpy()).max() <= eps + 1e-6
        results.append(confidence_and_loss(adv_x))
    confidences, losses = zip(*results)
    assert np.argmax(image_probs) == label_index  # the model gets the clean image right
    # each step along the gradient's sign raises the loss and lowers the true class's share
    assert all(a < b for a, b in zip(losses, losses[1:])), losses
    assert all(a > b for a, b in zip(confidences, confidences[1:])), confidences


def test_fit_through_function_matches_eager_with_probabilities_and_sparse_labels():
    """The FGSM stand-in's training: softmax outputs, SparseCategoricalCrossentropy on
    probabilities (one_hot of the labels), several batches. The traced step must see each
    batch's labels (one_hot was once baked into the trace as a constant)."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(96, 6)).astype(np.float32)
    labels = rng.integers(0, 3, 96)
    histories = []
    for run_eagerly in (True, False):
        tf.random.set_seed(0)
        model = tf.keras.Sequential([tf.keras.Input((6,)),
                                     tf.keras.layers.Dense(3, activation="softmax")])
        model.compile(optimizer=tf.keras.optimizers.SGD(0.1), run_eagerly=run_eagerly,
                      loss=tf.keras.losses.SparseCategoricalCrossentropy())
        histories.append(model.fit(x, labels, epochs=3, batch_size=32, shuffle=False,
                                   verbose=0).history["loss"])
    np.testing.assert_allclose(histories[1], histories[0], rtol=1e-5)

    @tf.function
    def encode(labels):
        return tf.one_hot(labels, 3)
    encode(tf.constant([0, 1]))
    np.testing.assert_array_equal(encode(tf.constant([2, 0])).numpy(), np.eye(3)[[2, 0]])


# -- DCGAN (site/en/tutorials/generative/dcgan) -------------------------------------------------
# The tutorial's models, layer for layer, with 1/16 of its channels (256, 128, 64 -> 16, 8, 4);
# 28x28 synthetic "digits" (bright bars on a dark ground) instead of MNIST.

# the tutorial's `from tensorflow.keras import layers`
from tapegpu.keras import layers  # noqa: E402

G1, G2, G3 = 16, 8, 4   # the tutorial's 256, 128, 64
D1, D2 = 4, 8           # the tutorial's 64, 128
noise_dim = 100


def make_generator_model():
    model = tf.keras.Sequential()
    model.add(layers.Dense(7*7*G1, use_bias=False, input_shape=(100,)))
    model.add(layers.BatchNormalization())
    model.add(layers.LeakyReLU())

    model.add(layers.Reshape((7, 7, G1)))
    assert model.output_shape == (None, 7, 7, G1)  # Note: None is the batch size

    model.add(layers.Conv2DTranspose(G2, (5, 5), strides=(1, 1), padding='same', use_bias=False))
    assert model.output_shape == (None, 7, 7, G2)
    model.add(layers.BatchNormalization())
    model.add(layers.LeakyReLU())

    model.add(layers.Conv2DTranspose(G3, (5, 5), strides=(2, 2), padding='same', use_bias=False))
    assert model.output_shape == (None, 14, 14, G3)
    model.add(layers.BatchNormalization())
    model.add(layers.LeakyReLU())

    model.add(layers.Conv2DTranspose(1, (5, 5), strides=(2, 2), padding='same', use_bias=False,
                                     activation='tanh'))
    assert model.output_shape == (None, 28, 28, 1)

    return model


def make_discriminator_model():
    model = tf.keras.Sequential()
    model.add(layers.Conv2D(D1, (5, 5), strides=(2, 2), padding='same',
                            input_shape=[28, 28, 1]))
    model.add(layers.LeakyReLU())
    model.add(layers.Dropout(0.3))

    model.add(layers.Conv2D(D2, (5, 5), strides=(2, 2), padding='same'))
    model.add(layers.LeakyReLU())
    model.add(layers.Dropout(0.3))

    model.add(layers.Flatten())
    model.add(layers.Dense(1))

    return model


def _synthetic_digits(n, rng):
    """uint8 28x28 images: a bright vertical or horizontal bar at a random place."""
    images = np.zeros((n, 28, 28), np.uint8)
    for img in images:
        at = rng.integers(4, 20)
        if rng.random() < 0.5:
            img[4:24, at:at + 4] = 255
        else:
            img[at:at + 4, 4:24] = 255
    return images


def test_dcgan_tutorial(tmp_path):
    tf.random.set_seed(0)
    rng = np.random.default_rng(0)
    train_images = _synthetic_digits(24, rng)
    train_images = train_images.reshape(train_images.shape[0], 28, 28, 1).astype('float32')
    train_images = (train_images - 127.5) / 127.5  # Normalize the images to [-1, 1]
    BUFFER_SIZE = 60000
    BATCH_SIZE = 8
    train_dataset = tf.data.Dataset.from_tensor_slices(train_images).shuffle(
        BUFFER_SIZE).batch(BATCH_SIZE)

    generator = make_generator_model()
    noise = tf.random.normal([1, 100])
    generated_image = generator(noise, training=False)
    assert generated_image.shape == (1, 28, 28, 1)
    assert np.abs(generated_image.numpy()).max() <= 1.0  # tanh

    discriminator = make_discriminator_model()
    decision = discriminator(generated_image)
    assert decision.shape == (1, 1)

    cross_entropy = tf.keras.losses.BinaryCrossentropy(from_logits=True)

    def discriminator_loss(real_output, fake_output):
        real_loss = cross_entropy(tf.ones_like(real_output), real_output)
        fake_loss = cross_entropy(tf.zeros_like(fake_output), fake_output)
        total_loss = real_loss + fake_loss
        return total_loss

    def generator_loss(fake_output):
        return cross_entropy(tf.ones_like(fake_output), fake_output)

    generator_optimizer = tf.keras.optimizers.Adam(1e-4)
    discriminator_optimizer = tf.keras.optimizers.Adam(1e-4)

    checkpoint_prefix = str(tmp_path / "ckpt")
    checkpoint = tf.train.Checkpoint(generator_optimizer=generator_optimizer,
                                     discriminator_optimizer=discriminator_optimizer,
                                     generator=generator,
                                     discriminator=discriminator)
    seed = tf.random.normal([16, noise_dim])
    losses = []

    @tf.function
    def train_step(images):
        noise = tf.random.normal([BATCH_SIZE, noise_dim])

        with tf.GradientTape() as gen_tape, tf.GradientTape() as disc_tape:
            generated_images = generator(noise, training=True)

            real_output = discriminator(images, training=True)
            fake_output = discriminator(generated_images, training=True)

            gen_loss = generator_loss(fake_output)
            disc_loss = discriminator_loss(real_output, fake_output)

        gradients_of_generator = gen_tape.gradient(gen_loss, generator.trainable_variables)
        gradients_of_discriminator = disc_tape.gradient(disc_loss,
                                                        discriminator.trainable_variables)

        generator_optimizer.apply_gradients(zip(gradients_of_generator,
                                                generator.trainable_variables))
        discriminator_optimizer.apply_gradients(zip(gradients_of_discriminator,
                                                    discriminator.trainable_variables))
        return gen_loss, disc_loss

    def snapshot(model):
        return [v.numpy().copy() for v in model.variables]

    gen0, disc0 = snapshot(generator), snapshot(discriminator)
    first_batch = next(iter(train_dataset))
    assert first_batch.shape == (BATCH_SIZE, 28, 28, 1)
    losses.append([float(v) for v in train_step(first_batch)])
    # Adam's first step moves every weight with a nonzero gradient by lr * g / (|g| + eps):
    # at most lr; both optimizers have stepped, each on its own model only
    for before, var in zip(gen0 + disc0, generator.variables + discriminator.variables):
        moved = np.abs(var.numpy() - before)
        if var.trainable:
            assert moved.max() <= 1e-4 * (1 + 1e-3) and moved.max() > 0.5e-4, var.name
    assert int(generator_optimizer.iterations) == 1
    assert int(discriminator_optimizer.iterations) == 1
    # BatchNormalization's moving statistics moved (training=True) and are not trained
    bn = generator.layers[1]
    assert not np.array_equal(bn.moving_mean.numpy(), np.zeros_like(bn.moving_mean.numpy()))
    assert all(v is not bn.moving_mean for v in generator.trainable_variables)

    EPOCHS = 3
    for epoch in range(EPOCHS):
        for image_batch in train_dataset:
            losses.append([float(v) for v in train_step(image_batch)])
        if (epoch + 1) % 3 == 0:
            checkpoint.save(file_prefix=checkpoint_prefix)
    assert int(generator_optimizer.iterations) == 1 + 3 * EPOCHS
    assert np.isfinite(losses).all()
    predictions = generator(seed, training=False)
    assert predictions.shape == (16, 28, 28, 1)

    # the checkpoint holds both models and optimizers: restoring undoes later changes
    trained = snapshot(generator)
    for v in generator.trainable_variables:
        v.assign(tf.zeros_like(v))
    checkpoint.restore(tf.train.latest_checkpoint(str(tmp_path)))
    for before, var in zip(trained, generator.variables):
        np.testing.assert_array_equal(var.numpy(), before)


def test_dcgan_each_step_lowers_its_own_loss():
    """The tutorial's two losses, each network trained alone for a few steps (Adam 1e-3) with
    the other held fixed: the discriminator's loss on fixed real and fake batches falls from
    about 2 ln 2, then the generator's loss against that discriminator falls."""
    tf.random.set_seed(1)
    images = (_synthetic_digits(8, np.random.default_rng(1))[..., None] - 127.5) / 127.5
    images = tf.constant(images.astype(np.float32))
    noise = tf.random.normal([8, noise_dim])
    generator, discriminator = make_generator_model(), make_discriminator_model()
    cross_entropy = tf.keras.losses.BinaryCrossentropy(from_logits=True)

    def disc_loss(training):
        fake_output = discriminator(generator(noise, training=True), training=training)
        real_output = discriminator(images, training=training)
        return cross_entropy(tf.ones_like(real_output), real_output) + \
            cross_entropy(tf.zeros_like(fake_output), fake_output)

    def gen_loss(training):
        fake_output = discriminator(generator(noise, training=True), training=training)
        return cross_entropy(tf.ones_like(fake_output), fake_output)

    for loss_fn, model in ((disc_loss, discriminator), (gen_loss, generator)):
        optimizer = tf.keras.optimizers.Adam(1e-3)
        start = float(loss_fn(False))
        for _ in range(10):
            with tf.GradientTape() as tape:
                loss = loss_fn(True)
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
        end = float(loss_fn(False))
        if loss_fn is disc_loss:
            assert abs(start - 2 * np.log(2)) < 0.3, start
        assert end < start - 0.1, (loss_fn.__name__, start, end)


# -- CVAE (site/en/tutorials/generative/cvae) ---------------------------------------------------
# The tutorial's model with 1/8 of its filters (32, 64 -> 4, 8) and a 7x7x4 decoder start
# (7x7x32 in the tutorial); synthetic binarized 28x28 images instead of MNIST.

E1, E2, DC = 4, 8, 4  # the tutorial's 32, 64 and the decoder's 32


class CVAE(tf.keras.Model):
    """Convolutional variational autoencoder."""

    def __init__(self, latent_dim):
        super(CVAE, self).__init__()
        self.latent_dim = latent_dim
        self.encoder = tf.keras.Sequential(
            [
                tf.keras.layers.InputLayer(input_shape=(28, 28, 1)),
                tf.keras.layers.Conv2D(
                    filters=E1, kernel_size=3, strides=(2, 2), activation='relu'),
                tf.keras.layers.Conv2D(
                    filters=E2, kernel_size=3, strides=(2, 2), activation='relu'),
                tf.keras.layers.Flatten(),
                # No activation
                tf.keras.layers.Dense(latent_dim + latent_dim),
            ]
        )

        self.decoder = tf.keras.Sequential(
            [
                tf.keras.layers.InputLayer(input_shape=(latent_dim,)),
                tf.keras.layers.Dense(units=7*7*DC, activation=tf.nn.relu),
                tf.keras.layers.Reshape(target_shape=(7, 7, DC)),
                tf.keras.layers.Conv2DTranspose(
                    filters=E2, kernel_size=3, strides=2, padding='same',
                    activation='relu'),
                tf.keras.layers.Conv2DTranspose(
                    filters=E1, kernel_size=3, strides=2, padding='same',
                    activation='relu'),
                # No activation
                tf.keras.layers.Conv2DTranspose(
                    filters=1, kernel_size=3, strides=1, padding='same'),
            ]
        )

    @tf.function
    def sample(self, eps=None):
        if eps is None:
            eps = tf.random.normal(shape=(100, self.latent_dim))
        return self.decode(eps, apply_sigmoid=True)

    def encode(self, x):
        mean, logvar = tf.split(self.encoder(x), num_or_size_splits=2, axis=1)
        return mean, logvar

    def reparameterize(self, mean, logvar):
        eps = tf.random.normal(shape=mean.shape)
        return eps * tf.exp(logvar * .5) + mean

    def decode(self, z, apply_sigmoid=False):
        logits = self.decoder(z)
        if apply_sigmoid:
            probs = tf.sigmoid(logits)
            return probs
        return logits


def log_normal_pdf(sample, mean, logvar, raxis=1):
    log2pi = tf.math.log(2. * np.pi)
    return tf.reduce_sum(
        -.5 * ((sample - mean) ** 2. * tf.exp(-logvar) + logvar + log2pi),
        axis=raxis)


def compute_loss(model, x):
    mean, logvar = model.encode(x)
    z = model.reparameterize(mean, logvar)
    x_logit = model.decode(z)
    cross_ent = tf.nn.sigmoid_cross_entropy_with_logits(logits=x_logit, labels=x)
    logpx_z = -tf.reduce_sum(cross_ent, axis=[1, 2, 3])
    logpz = log_normal_pdf(z, 0., 0.)
    logqz_x = log_normal_pdf(z, mean, logvar)
    return -tf.reduce_mean(logpx_z + logpz - logqz_x)


@tf.function
def cvae_train_step(model, x, optimizer):
    """Executes one training step and returns the loss."""
    with tf.GradientTape() as tape:
        loss = compute_loss(model, x)
    gradients = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(gradients, model.trainable_variables))


def preprocess_images(images):
    images = images.reshape((images.shape[0], 28, 28, 1)) / 255.
    return np.where(images > .5, 1.0, 0.0).astype('float32')


def _numpy_elbo_loss(x, mean, logvar, eps, x_logit):
    """-ELBO written out in float64: Bernoulli log-likelihood of x under the decoder's logits,
    log N(z; 0, 1) and log N(z; mean, exp(logvar)) at z = mean + eps * exp(logvar / 2)."""
    z = mean + eps * np.exp(logvar / 2)
    log_px = -np.sum(np.maximum(x_logit, 0) - x_logit * x + np.log1p(np.exp(-np.abs(x_logit))),
                     axis=(1, 2, 3))

    def log_normal(s, m, lv):
        return np.sum(-0.5 * ((s - m) ** 2 * np.exp(-lv) + lv + np.log(2 * np.pi)), axis=1)
    return -np.mean(log_px + log_normal(z, 0.0, 0.0) - log_normal(z, mean, logvar))


def test_cvae_tutorial():
    tf.random.set_seed(0)
    rng = np.random.default_rng(2)
    train_images = preprocess_images(_synthetic_digits(64, rng).astype(np.float32))
    test_images = preprocess_images(_synthetic_digits(32, rng).astype(np.float32))
    assert set(np.unique(train_images)) == {0.0, 1.0}
    train_size, batch_size, test_size = 64, 32, 32
    train_dataset = (tf.data.Dataset.from_tensor_slices(train_images)
                     .shuffle(train_size).batch(batch_size))
    test_dataset = (tf.data.Dataset.from_tensor_slices(test_images)
                    .shuffle(test_size).batch(batch_size))

    optimizer = tf.keras.optimizers.Adam(3e-3)  # the tutorial's 1e-4 needs its 10 MNIST epochs
    epochs = 4
    latent_dim = 2
    num_examples_to_generate = 16
    random_vector_for_generation = tf.random.normal(
        shape=[num_examples_to_generate, latent_dim])
    model = CVAE(latent_dim)

    for test_batch in test_dataset.take(1):
        test_sample = test_batch[0:num_examples_to_generate, :, :, :]
    assert test_sample.shape == (16, 28, 28, 1)
    mean, logvar = model.encode(test_sample)
    assert mean.shape == logvar.shape == (16, latent_dim)
    z = model.reparameterize(mean, logvar)
    predictions = model.sample(z)
    assert predictions.shape == (16, 28, 28, 1)
    assert 0.0 <= predictions.numpy().min() and predictions.numpy().max() <= 1.0  # sigmoid
    assert model.sample(random_vector_for_generation).shape == (16, 28, 28, 1)
    assert model.sample().shape == (100, 28, 28, 1)  # eps drawn inside the tf.function

    # the loss is -ELBO as written out in numpy, with the same eps (same seed)
    x = tf.constant(test_images[:8])
    tf.random.set_seed(7)
    got = float(compute_loss(model, x))
    tf.random.set_seed(7)
    mean, logvar = model.encode(x)
    eps = tf.random.normal(shape=mean.shape).numpy()
    z = mean.numpy() + eps * np.exp(logvar.numpy() / 2)
    x_logit = model.decode(tf.constant(z.astype(np.float32))).numpy()
    want = _numpy_elbo_loss(test_images[:8].astype(np.float64), mean.numpy().astype(np.float64),
                            logvar.numpy().astype(np.float64), eps, x_logit)
    np.testing.assert_allclose(got, want, rtol=1e-4)

    def test_elbo():
        loss = tf.keras.metrics.Mean()
        for test_x in test_dataset:
            loss(compute_loss(model, test_x))
        return float(-loss.result())

    tf.random.set_seed(3)
    elbos = [test_elbo()]
    for epoch in range(1, epochs + 1):
        for train_x in train_dataset:
            cvae_train_step(model, train_x, optimizer)
        elbos.append(test_elbo())
    assert int(optimizer.iterations) == epochs * 2
    # training raises the test set's ELBO (a bound on the log-likelihood, so negative)
    assert all(e < 0 for e in elbos)
    assert all(a < b for a, b in zip(elbos, elbos[1:])), elbos
    assert elbos[-1] > elbos[0] + 0.03 * abs(elbos[0]), elbos


# -- "Customizing what happens in fit()" (Keras 3 guide, TensorFlow backend) ---------------------

class _CustomModel(tf.keras.Model):
    """The guide's first model: its own train_step, metrics updated by hand, logs returned."""

    def train_step(self, data):
        x, y = data
        with tf.GradientTape() as tape:
            y_pred = self(x, training=True)
            loss = self.compute_loss(y=y, y_pred=y_pred)
        trainable_vars = self.trainable_variables
        gradients = tape.gradient(loss, trainable_vars)
        self.optimizer.apply(gradients, trainable_vars)
        for metric in self.metrics:
            if metric.name == "loss":
                metric.update_state(loss)
            else:
                metric.update_state(y, y_pred)
        return {m.name: m.result() for m in self.metrics}


def _regression_data():
    rng = np.random.default_rng(0)
    return rng.random((256, 8)), rng.random((256, 1))  # float64, as np.random.random gives


def _functional(cls):
    tf.random.set_seed(0)
    inputs = tf.keras.Input(shape=(8,))
    outputs = tf.keras.layers.Dense(1)(inputs)
    return cls(inputs, outputs)


def test_customizing_fit_guide_train_step_override_logs_what_it_returns():
    """A Model subclass called with (inputs, outputs) is functional and keeps its train_step;
    the logs are those it returns, a new value every epoch (a metric's result inside the
    traced step is read at each call, not frozen at the trace), equal to the built-in
    train_step's on the same data; metrics are named as given ('mae')."""
    x, y = _regression_data()
    histories = []
    for cls in (_CustomModel, tf.keras.Model):
        model = _functional(cls)
        assert isinstance(model, cls) and isinstance(model, tf.keras.Model)
        model.compile(optimizer=tf.keras.optimizers.SGD(0.05), loss="mse", metrics=["mae"])
        with pytest.warns(UserWarning, match="float64.*cast to the model's float32"):
            histories.append(model.fit(x, y, epochs=3, batch_size=32, shuffle=False,
                                       verbose=0).history)
    custom, builtin = histories
    assert sorted(custom) == sorted(builtin) == ["loss", "mae"]
    assert len(set(custom["loss"])) == 3 and custom["loss"][-1] < custom["loss"][0]
    for k in custom:
        np.testing.assert_allclose(custom[k], builtin[k], rtol=1e-5)


def test_customizing_fit_guide_evaluate_with_a_test_step_override():
    class Evaluated(tf.keras.Model):
        def test_step(self, data):
            x, y = data
            y_pred = self(x, training=False)
            loss = self.compute_loss(y=y, y_pred=y_pred)
            for metric in self.metrics:
                if metric.name == "loss":
                    metric.update_state(loss)
                else:
                    metric.update_state(y, y_pred)
            return {m.name: m.result() for m in self.metrics}

    x, y = _regression_data()
    x, y = x.astype(np.float32), y.astype(np.float32)
    model, plain = _functional(Evaluated), _functional(tf.keras.Model)
    for m in (model, plain):
        m.compile(loss="mse", metrics=["mae"])
    got = model.evaluate(x, y, batch_size=64, verbose=0, return_dict=True)
    want = plain.evaluate(x, y, batch_size=64, verbose=0, return_dict=True)
    assert sorted(got) == ["loss", "mae"]
    for k in got:
        assert got[k] == pytest.approx(want[k], rel=1e-6)
    pred = np.asarray(model(tf.constant(x)))
    assert got["mae"] == pytest.approx(float(np.mean(np.abs(pred - y))), rel=1e-5)


def test_unpack_and_pack_x_y_sample_weight():
    u, p = tf.keras.utils.unpack_x_y_sample_weight, tf.keras.utils.pack_x_y_sample_weight
    assert u((1, 2)) == (1, 2, None) and u((1,)) == (1, None, None) and u(5) == (5, None, None)
    assert u([1, 2, 3]) == (1, 2, 3)
    assert p(1) == 1 and p((1, 2)) == ((1, 2),) and p(1, 2) == (1, 2) and p(1, 2, 3) == (1, 2, 3)
    assert u(p((1, 2))) == ((1, 2), None, None)
    with pytest.raises(ValueError, match="unpack_x_y_sample_weight"):
        u((1, 2, 3, 4))


# -- "Making new layers and models via subclassing" and "The Functional API" --------------------

def test_add_loss_keeps_the_last_calls_losses_and_trains_them():
    class ActivityRegularizationLayer(tf.keras.layers.Layer):
        def __init__(self, rate=1e-2):
            super().__init__()
            self.rate = rate

        def call(self, inputs):
            self.add_loss(self.rate * tf.reduce_sum(inputs))
            return inputs

    class OuterLayer(tf.keras.layers.Layer):
        def __init__(self):
            super().__init__()
            self.activity_reg = ActivityRegularizationLayer(1e-2)

        def call(self, inputs):
            return self.activity_reg(inputs)

    layer = OuterLayer()
    assert len(layer.losses) == 0
    _ = layer(tf.zeros((1, 1)))
    assert len(layer.losses) == 1
    _ = layer(tf.fill((1, 3), 2.0))
    assert len(layer.losses) == 1 and float(layer.losses[0]) == pytest.approx(0.06)
    # in a model, the added loss is part of compute_loss: it pulls the outputs down
    inputs = tf.keras.Input(shape=(4,))
    outputs = ActivityRegularizationLayer(1.0)(tf.keras.layers.Dense(4)(inputs))
    model = tf.keras.Model(inputs, outputs)
    x = tf.constant(np.random.default_rng(1).random((8, 4)).astype(np.float32))
    model(x)
    added = float(model.losses[0])
    assert added == pytest.approx(float(tf.reduce_sum(model(x))), rel=1e-6)
    model.compile(optimizer=tf.keras.optimizers.SGD(0.01), loss="mse")
    pred = model(x)
    mse = float(np.mean(np.square(pred.numpy())))
    total = model.compute_loss(y=tf.zeros((8, 4)), y_pred=pred)  # the compiled loss + added
    assert float(total) == pytest.approx(mse + float(tf.reduce_sum(pred)), rel=1e-5)
    model.fit(x, tf.zeros((8, 4)), epochs=5, verbose=0)
    model(x)
    assert float(model.losses[0]) < added


def test_functional_api_guide_multi_input_dict_is_matched_by_input_names():
    """The guide's ticket model: a dict of inputs is matched to the keras.Input names, not
    to the dict's order (a mismatch trained on the wrong inputs); merge helpers in
    lowercase (`layers.concatenate`)."""
    layers = tf.keras.layers
    num_tags, num_words, num_departments = 12, 100, 4
    tf.random.set_seed(0)
    title_input = tf.keras.Input(shape=(None,), name="title")
    body_input = tf.keras.Input(shape=(None,), name="body")
    tags_input = tf.keras.Input(shape=(num_tags,), name="tags")
    title_features = layers.LSTM(8)(layers.Embedding(num_words, 6)(title_input))
    body_features = layers.LSTM(4)(layers.Embedding(num_words, 6)(body_input))
    x = layers.concatenate([title_features, body_features, tags_input])
    priority_pred = layers.Dense(1, name="priority")(x)
    department_pred = layers.Dense(num_departments, name="department")(x)
    model = tf.keras.Model(inputs=[title_input, body_input, tags_input],
                           outputs={"priority": priority_pred, "department": department_pred})
    rng = np.random.default_rng(0)
    title = rng.integers(num_words, size=(16, 10))
    body = rng.integers(num_words, size=(16, 10))  # same shape as the titles: order matters
    tags = rng.integers(2, size=(16, num_tags)).astype("float32")
    by_list = model([tf.constant(title), tf.constant(body), tf.constant(tags)])
    by_dict = model({"tags": tf.constant(tags), "body": tf.constant(body),
                     "title": tf.constant(title)})
    swapped = model([tf.constant(body), tf.constant(title), tf.constant(tags)])
    for k in ("priority", "department"):
        np.testing.assert_array_equal(by_dict[k].numpy(), by_list[k].numpy())
    assert not np.array_equal(swapped["priority"].numpy(), by_list["priority"].numpy())
    with pytest.raises(ValueError, match=r"named \['title', 'body', 'tags'\].*missing \['tags'\]"):
        model({"title": tf.constant(title), "body": tf.constant(body)})
    model.compile(optimizer=tf.keras.optimizers.RMSprop(1e-3),
                  loss={"priority": tf.keras.losses.BinaryCrossentropy(from_logits=True),
                        "department": tf.keras.losses.CategoricalCrossentropy(from_logits=True)},
                  loss_weights={"priority": 1.0, "department": 0.2})
    history = model.fit({"title": title, "body": body, "tags": tags},
                        {"priority": rng.random((16, 1)).astype("float32"),
                         "department": rng.integers(2, size=(16, num_departments))},
                        epochs=2, batch_size=8, verbose=0)
    assert sorted(history.history) == ["department_loss", "loss", "priority_loss"]


def test_merge_functions_are_the_layers_applied():
    a, b = tf.constant([[1.0, 2.0]]), tf.constant([[3.0, 5.0]])
    L = tf.keras.layers
    assert L.add([a, b]).numpy().tolist() == [[4.0, 7.0]]
    assert L.subtract([a, b]).numpy().tolist() == [[-2.0, -3.0]]
    assert L.multiply([a, b]).numpy().tolist() == [[3.0, 10.0]]
    assert L.average([a, b]).numpy().tolist() == [[2.0, 3.5]]
    assert L.maximum([a, b]).numpy().tolist() == [[3.0, 5.0]]
    assert L.minimum([a, b]).numpy().tolist() == [[1.0, 2.0]]
    assert L.concatenate([a, b], axis=0).shape == (2, 2)
    assert L.dot([a, b], axes=1).numpy().tolist() == [[13.0]]


def test_fit_autocasts_float64_tensors_and_keeps_a_float64_model_float64():
    x, y = _regression_data()
    model = _functional(tf.keras.Model)
    model.compile(loss="mse")
    # float64 tensors: the float32 layers autocast them, as Keras'
    model.fit(tf.constant(x), tf.constant(y), epochs=1, verbose=0)
    tf.random.set_seed(0)
    inputs = tf.keras.Input(shape=(8,), dtype="float64")
    wide = tf.keras.Model(inputs, tf.keras.layers.Dense(1, dtype="float64")(inputs))
    wide.compile(loss="mse")
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # float64 arrays for a float64 model: no cast
        wide.fit(x, y, epochs=1, verbose=0)
    assert wide.predict(x, verbose=0).dtype == np.float64


# -- "Training & evaluation with the built-in methods" (Keras 3 guide) --------------------------

def _digits_model(activation="softmax"):
    tf.random.set_seed(0)
    inputs = tf.keras.Input(shape=(20,), name="digits")
    x = tf.keras.layers.Dense(16, activation="relu")(inputs)
    outputs = tf.keras.layers.Dense(10, activation=activation, name="predictions")(x)
    return tf.keras.Model(inputs=inputs, outputs=outputs)


def test_custom_metric_with_state_variables_counts_in_traced_fit():
    """The guide's CategoricalTruePositives, on Keras 3's Metric API (`add_variable`,
    `assign_add`, `result()` returning `variable.value`, the default `reset_state`): fit's
    traced step updates it at every batch and it restarts each epoch."""
    ops = tf.keras.ops

    class CategoricalTruePositives(tf.keras.metrics.Metric):
        def __init__(self, name="categorical_true_positives", **kwargs):
            super().__init__(name=name, **kwargs)
            self.true_positives = self.add_variable(shape=(), name="ctp", initializer="zeros")

        def update_state(self, y_true, y_pred, sample_weight=None):
            y_pred = ops.reshape(ops.argmax(y_pred, axis=1), (-1, 1))
            values = ops.cast(ops.cast(y_true, "int32") == ops.cast(y_pred, "int32"), "float32")
            self.true_positives.assign_add(ops.sum(values))

        def result(self):
            return self.true_positives.value

    rng = np.random.default_rng(0)
    x = rng.random((96, 20)).astype("float32")
    y = rng.integers(0, 10, (96, 1))
    model = _digits_model()
    model.compile(optimizer=tf.keras.optimizers.SGD(0.0),  # fixed weights: a known count
                  loss="sparse_categorical_crossentropy", metrics=[CategoricalTruePositives()])
    history = model.fit(x, y, batch_size=32, epochs=2, shuffle=False, verbose=0)
    hits = float(np.sum(np.argmax(model.predict(x, verbose=0), axis=1)[:, None] == y))
    assert history.history["categorical_true_positives"] == [hits, hits]
    metric = model.metrics[1]
    assert [v.name for v in metric.variables] == ["categorical_true_positives/ctp"]
    metric.reset_state()
    assert float(metric.result()) == 0.0


def test_a_softmax_or_logistic_output_layers_cross_entropy_is_computed_from_its_logits():
    """Keras on TensorFlow computes the cross-entropy of a softmax (logistic) activation's
    output from its logits: the same loss and gradients as the layer without the activation
    and `from_logits=True`, also where clipped probabilities would saturate at -log(1e-7)."""
    rng = np.random.default_rng(1)
    x = tf.constant(rng.standard_normal((6, 20)).astype("float32") * 30.0)  # saturating
    y = tf.constant(rng.integers(0, 10, 6))
    probs, logits = _digits_model(), _digits_model(None)
    cases = [(tf.keras.losses.SparseCategoricalCrossentropy(), y),
             (tf.keras.losses.CategoricalCrossentropy(), tf.one_hot(y, 10))]
    for loss, target in cases:
        exact = type(loss)(from_logits=True)
        with tf.GradientTape(persistent=True) as tape:
            a, b = loss(target, probs(x)), exact(target, logits(x))
        assert float(a) == pytest.approx(float(b), rel=1e-6) and float(a) > 16.2
        for ga, gb in zip(tape.gradient(a, probs.trainable_variables),
                          tape.gradient(b, logits.trainable_variables)):
            np.testing.assert_allclose(ga.numpy(), gb.numpy(), rtol=1e-5, atol=1e-6)
    binary, binary_logits = _digits_model("sigmoid"), _digits_model(None)
    target = tf.constant(rng.integers(0, 2, (6, 10)).astype("float32"))
    got = tf.keras.losses.BinaryCrossentropy()(target, binary(x))
    want = tf.keras.losses.BinaryCrossentropy(from_logits=True)(target, binary_logits(x))
    assert float(got) == pytest.approx(float(want), rel=1e-6)
    # a plain tensor of probabilities, or another kind's output, is clipped as before
    p = probs(x)
    assert float(tf.keras.losses.BinaryCrossentropy()(tf.ones_like(p), p)) <= 16.2
    clipped = tf.keras.losses.SparseCategoricalCrossentropy()(y, tf.constant(p.numpy()))
    assert float(clipped) <= 16.2


def test_keras_ops_has_numpy_names_activations_and_core_ops_with_keras_defaults():
    ops = tf.keras.ops
    x = tf.constant([[1.0, -2.0], [3.0, 0.5]])
    np.testing.assert_allclose(ops.mean(ops.square(x), axis=-1).numpy(), [2.5, 4.625])
    assert ops.one_hot(tf.constant([1, 0]), 3).numpy().tolist() == [[0, 1, 0], [1, 0, 0]]
    assert ops.one_hot(tf.constant([1]), 2).dtype == tf.float32
    assert float(ops.gelu(tf.constant(1.0))) == pytest.approx(0.841192, abs=1e-6)  # tanh form
    assert float(ops.gelu(tf.constant(1.0), approximate=False)) == pytest.approx(0.841345,
                                                                                abs=1e-6)
    assert float(ops.leaky_relu(tf.constant(-1.0), negative_slope=0.1)) == pytest.approx(-0.1)
    assert isinstance(ops.convert_to_numpy(x), np.ndarray)
    np.testing.assert_allclose(ops.logsumexp(x, axis=1).numpy(),
                               np.log(np.exp(x.numpy()).sum(axis=1)), rtol=1e-6)
    values, indices = ops.top_k(tf.constant([1.0, 3.0, 2.0]), 2)
    assert values.numpy().tolist() == [3.0, 2.0] and indices.numpy().tolist() == [1, 2]
    assert ops.cast(x, "int32").dtype == tf.int32
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = ops.sum(ops.stop_gradient(x) * x)
    np.testing.assert_array_equal(tape.gradient(y, x).numpy(), x.numpy())


def test_on_batch_end_is_called_by_the_train_batch_hook_as_keras():
    class LossHistory(tf.keras.callbacks.Callback):
        def on_train_begin(self, logs):
            self.per_batch_losses = []

        def on_batch_end(self, batch, logs):
            self.per_batch_losses.append(logs.get("loss"))

    rng = np.random.default_rng(0)
    model = _digits_model()
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
    history = LossHistory()
    model.fit(rng.random((80, 20)).astype("float32"), rng.integers(0, 10, 80), batch_size=16,
              epochs=1, callbacks=[history], verbose=0)
    assert len(history.per_batch_losses) == 5
    assert all(isinstance(v, float) for v in history.per_batch_losses)
