"""Model.compile / fit / evaluate / predict, History, EarlyStopping, ModelCheckpoint and the
progress display."""
import io
import re

import numpy as np
import pytest

import tapegpu as tg

keras = tg.keras


def _blobs(n=400, classes=4, dim=6, seed=0):
    rng = np.random.default_rng(seed)
    centers = 3.0 * rng.normal(size=(classes, dim))
    y = rng.integers(0, classes, n)
    x = (centers[y] + rng.normal(size=(n, dim))).astype(np.float32)
    return x, y


def _model(classes=4, dim=6):
    tg.random.set_seed(0)
    return keras.Sequential([keras.Input(shape=(dim,)),
                             keras.layers.Dense(16, activation="relu"),
                             keras.layers.Dense(classes)])


def test_fit_on_arrays_reaches_accuracy_and_returns_history():
    x, y = _blobs()
    model = _model()
    model.compile(optimizer=keras.optimizers.Adam(0.01),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    history = model.fit(x, y, epochs=8, batch_size=32, validation_data=(x[:100], y[:100]),
                        verbose=0)
    assert isinstance(history, keras.callbacks.History) and model.history is history
    assert history.epoch == list(range(8))
    assert sorted(history.history) == ["accuracy", "loss", "val_accuracy", "val_loss"]
    assert history.history["loss"][-1] < history.history["loss"][0]
    assert history.history["accuracy"][-1] >= 0.95
    loss, acc = model.evaluate(x, y, verbose=0)
    assert acc >= 0.95 and loss < history.history["loss"][0]
    logs = model.evaluate(x, y, verbose=0, return_dict=True)
    assert logs == {"loss": pytest.approx(loss), "accuracy": pytest.approx(acc)}
    pred = model.predict(x, batch_size=64, verbose=0)
    assert isinstance(pred, np.ndarray) and pred.shape == (400, 4)
    np.testing.assert_allclose(pred, model(x).numpy(), rtol=1e-5, atol=1e-6)
    # the validation metrics are the evaluation of the validation data after the epoch
    val = model.evaluate(x[:100], y[:100], verbose=0, return_dict=True)
    assert history.history["val_loss"][-1] == pytest.approx(val["loss"], rel=1e-5)


def test_fit_on_a_dataset_with_string_names():
    x, y = _blobs(seed=1)
    onehot = keras.utils.to_categorical(y, 4)
    ds = tg.data.Dataset.from_tensor_slices((x, onehot)).shuffle(400, seed=0).batch(40)
    tg.random.set_seed(0)
    model = keras.Sequential([keras.layers.Dense(16, activation="relu", input_shape=(6,)),
                              keras.layers.Dense(4, activation="softmax")])
    model.compile(optimizer="adam", loss="categorical_crossentropy", metrics=["accuracy"])
    model.compile(optimizer=keras.optimizers.Adam(0.02), loss="categorical_crossentropy",
                  metrics=["accuracy", "mae"])
    history = model.fit(ds, epochs=6, verbose=0)
    assert sorted(history.history) == ["accuracy", "loss", "mae"]  # the names given (Keras 3)
    # 'accuracy' with categorical cross-entropy is categorical accuracy
    assert isinstance(model.metrics[1], keras.metrics.CategoricalAccuracy)
    assert history.history["accuracy"][-1] >= 0.9
    assert model.evaluate(ds, verbose=0)[1] >= 0.9


def test_fit_binary_and_regression():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(300, 3)).astype(np.float32)
    yb = (x[:, :1] + x[:, 1:2] > 0).astype(np.float32)
    tg.random.set_seed(0)
    model = keras.Sequential([keras.layers.Dense(1, activation="sigmoid", input_shape=(3,))])
    model.compile(optimizer=keras.optimizers.SGD(0.5), loss="binary_crossentropy",
                  metrics=["accuracy", keras.metrics.Precision(), keras.metrics.Recall()])
    h = model.fit(x, yb, epochs=10, batch_size=30, verbose=0)
    assert isinstance(model.metrics[1], keras.metrics.BinaryAccuracy)
    assert h.history["accuracy"][-1] >= 0.9
    assert h.history["precision"][-1] >= 0.85 and h.history["recall"][-1] >= 0.85
    yr = (x @ np.array([[1.0], [-2.0], [0.5]]) + 0.3).astype(np.float32)
    reg = keras.Sequential([keras.layers.Dense(1, input_shape=(3,))])
    reg.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    h = reg.fit(x, yr, epochs=20, batch_size=30, verbose=0)
    assert h.history["loss"][-1] < 1e-3
    assert isinstance(reg.evaluate(x, yr, verbose=0), float)


def test_fit_uses_training_true_and_sample_weight():
    class Probe(keras.Model):
        def __init__(self):
            super().__init__()
            self.d = keras.layers.Dense(1)
            self.flags = []

        def call(self, x, training=None):
            self.flags.append(training)
            return self.d(x)

    x = np.ones((8, 2), np.float32)
    y = np.ones((8, 1), np.float32)
    m = Probe()
    m.compile(optimizer="sgd", loss="mse")
    m.fit(x, y, batch_size=8, epochs=1, verbose=0)
    m.evaluate(x, y, verbose=0)
    m.predict(x, verbose=0)
    assert m.flags[-3:] == [True, False, False]
    # weights of zero remove examples from the loss
    w = np.array([1, 1, 1, 1, 0, 0, 0, 0], np.float32)
    y2 = np.concatenate([np.ones((4, 1)), 100 * np.ones((4, 1))]).astype(np.float32)
    full = m.evaluate(x, y2, verbose=0, sample_weight=w)
    pred = m.predict(x, verbose=0)
    assert full == pytest.approx(float(((pred[:4] - 1) ** 2).sum() / 8), rel=1e-5)


def test_early_stopping_stops_and_restores_best_weights():
    x, y = _blobs(n=64)
    model = _model()
    model.compile(optimizer=keras.optimizers.SGD(0.0), loss=keras.losses.
                  SparseCategoricalCrossentropy(from_logits=True))  # loss never improves
    stop = keras.callbacks.EarlyStopping(monitor="loss", patience=2)
    h = model.fit(x, y, epochs=20, batch_size=16, callbacks=[stop], verbose=0, shuffle=False)
    assert len(h.epoch) == 3 and stop.stopped_epoch == 2

    class Record(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            self.weights = getattr(self, "weights", []) + [self.model.get_weights()]

    rec = Record()
    model.compile(optimizer=keras.optimizers.SGD(5.0), loss=keras.losses.
                  SparseCategoricalCrossentropy(from_logits=True))  # diverges after a while
    stop = keras.callbacks.EarlyStopping(monitor="loss", patience=1,
                                         restore_best_weights=True)
    h = model.fit(x, y, epochs=30, batch_size=64, callbacks=[stop, rec], verbose=0)
    losses = h.history["loss"]
    best = int(np.argmin(losses))
    assert stop.stopped_epoch == len(losses) - 1 > best == stop.best_epoch
    for a, b in zip(model.get_weights(), rec.weights[best]):
        np.testing.assert_array_equal(a, b)
    assert not all(np.array_equal(a, b) for a, b in zip(model.get_weights(), rec.weights[-1]))


def test_model_checkpoint_saves_best(tmp_path):
    x, y = _blobs(n=64)
    model = _model()
    model.compile(optimizer=keras.optimizers.Adam(0.01),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    path = str(tmp_path / "ckpt-{epoch}.npz")
    model.fit(x, y, epochs=2, verbose=0,
              callbacks=[keras.callbacks.ModelCheckpoint(path, monitor="loss",
                                                         save_weights_only=True)])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt-1.npz", "ckpt-2.npz"]
    other = _model()
    other.load_weights(str(tmp_path / "ckpt-2.npz"))
    np.testing.assert_array_equal(other.predict(x, verbose=0), model.predict(x, verbose=0))


def test_model_checkpoint_as_the_save_and_load_tutorial_uses_it(tmp_path, capsys):
    """Its directory is made, `save_freq` counts batches, verbose=1 says what it saves, the
    best-only mode prints Keras' lines; a whole-model checkpoint (Keras' default) raises
    rather than saving weights under a model's name."""
    x, y = _blobs(n=64)
    model = _model()
    model.compile(optimizer=keras.optimizers.Adam(0.01),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    every = keras.callbacks.ModelCheckpoint(str(tmp_path / "run" / "cp-{epoch:04d}.weights.h5"),
                                            save_weights_only=True, save_freq=3, verbose=1)
    best = keras.callbacks.ModelCheckpoint(str(tmp_path / "best" / "b.weights.h5"),
                                           monitor="loss", save_best_only=True,
                                           save_weights_only=True, verbose=1)
    model.fit(x, y, epochs=2, batch_size=16, verbose=0, callbacks=[every, best])
    # 4 batches per epoch: saves after batches 3 (epoch 1), 6 (epoch 2)
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == \
        ["cp-0001.weights.h5", "cp-0002.weights.h5"]
    out = capsys.readouterr().out
    assert out.count("saving model to") == 4  # two periodic saves, two improvements
    assert "Epoch 1: loss improved from inf to " in out
    restored = _model()
    restored.load_weights(str(tmp_path / "best" / "b.weights.h5"))
    np.testing.assert_array_equal(restored.predict(x, verbose=0), model.predict(x, verbose=0))
    with pytest.raises(NotImplementedError, match="save_weights_only=True"):
        keras.callbacks.ModelCheckpoint(str(tmp_path / "model.keras"))
    with pytest.raises(ValueError, match="save_freq must be 'epoch' or a positive number"):
        keras.callbacks.ModelCheckpoint("x", save_weights_only=True, save_freq=0)


def test_progress_lines_when_not_a_tty(capsys):
    x, y = _blobs(n=64)
    model = _model()
    model.compile(optimizer="adam",
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    model.fit(x, y, epochs=2, batch_size=16, validation_data=(x, y))
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "Epoch 1/2" and out[2] == "Epoch 2/2" and len(out) == 4
    for line in (out[1], out[3]):
        assert re.match(r"4/4 ━{20} \d+s \d+(s|ms|us)/step - ", line)
        assert " - loss: " in line and " - accuracy: " in line and " - val_loss: " in line
    model.fit(x, y, epochs=1, batch_size=16, verbose=2)
    line = capsys.readouterr().out.splitlines()[1]
    assert line.startswith("4/4 - ") and "loss: " in line
    model.fit(x, y, epochs=1, verbose=0)
    assert capsys.readouterr().out == ""


def test_progress_bar_on_a_terminal_updates_in_place():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    def run(**kwargs):
        stream = Tty()
        bar = keras.callbacks.ProgbarLogger(stream=stream, **kwargs)
        bar.set_params({"epochs": 1, "steps": 4})
        bar.on_train_begin()
        bar.on_epoch_begin(0)
        for step in range(4):
            bar.on_train_batch_end(step, {"loss": 1.0 / (step + 1)})
        bar.on_epoch_end(0, {"loss": 0.25})
        return stream.getvalue()

    text = run(interval=0)  # every step redrawn, then the epoch's line
    assert text.count("\r") == 5 and "\r1/4 ━━━━━     " in text and text.endswith("\n")
    assert "\r2/4 ━━━━━━━━━━ " in text and "loss: 0.5000" in text
    # steps ending within `interval` of the last redraw are not drawn (their logs not read),
    # except the first and the last
    text = run(interval=60)
    assert text.count("\r") == 3 and "\r1/4 " in text and "\r2/4" not in text
    assert "\r3/4" not in text and text.count("\r4/4 ") == 2


def test_fit_argument_errors():
    x, y = _blobs(n=32)
    ds = tg.data.Dataset.from_tensor_slices((x, y)).batch(8)
    model = _model()
    model.compile(optimizer="adam",
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    with pytest.raises(ValueError, match="fit: y must not be given when x is a tg.data"):
        model.fit(ds, y, verbose=0)
    with pytest.raises(ValueError, match="fit: x has 32 rows but y has 31"):
        model.fit(x, y[:31], verbose=0)
    with pytest.raises(ValueError, match="fit: batch_size must be a positive integer"):
        model.fit(x, y, batch_size=0, verbose=0)
    with pytest.raises(ValueError, match="Could not interpret optimizer identifier"):
        model.compile(optimizer="nadamish", loss="mse")
    with pytest.raises(TypeError, match="fit: callbacks must be keras.callbacks.Callback"):
        model.fit(x, y, verbose=0, callbacks=[print])


def test_validation_split_and_on_batch_methods():
    x, y = _blobs(n=100)
    model = _model()
    model.compile(optimizer=keras.optimizers.Adam(0.01),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    h = model.fit(x, y, epochs=1, validation_split=0.2, verbose=0)
    val = model.evaluate(x[80:], y[80:], verbose=0, return_dict=True)
    assert h.history["val_loss"][0] == pytest.approx(val["loss"], rel=1e-5)
    loss, acc = model.train_on_batch(x[:10], y[:10])
    assert np.isfinite(loss) and 0 <= acc <= 1
    assert model.predict_on_batch(x[:3]).shape == (3, 4)


def test_fit_through_tg_function_matches_eager_fit():
    x, y = _blobs(n=200)
    histories = []
    for eager in (False, True):
        model = _model()
        model.compile(optimizer=keras.optimizers.Adam(0.01),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=["accuracy"], run_eagerly=eager)
        histories.append(model.fit(x, y, epochs=3, batch_size=32, shuffle=False,
                                   verbose=0).history)
        traced = hasattr(model.make_train_function().step, "experimental_get_tracing_count")
        assert traced is not eager
    assert histories[0]["accuracy"] == histories[1]["accuracy"]
    np.testing.assert_allclose(histories[0]["loss"], histories[1]["loss"], rtol=1e-6)


def test_models_with_seeded_dropout_are_traced_and_draw_a_new_mask_each_step():
    """fit traces a model with seeded dropout (Dropout, and LSTM's dropout): each step draws the
    next mask of the layer's seeded sequence (with a learning rate of 0 the loss of one batch
    changes from step to step only through the mask), and the same seeds repeat the run."""
    x = np.random.default_rng(0).standard_normal((8, 6)).astype(np.float32)
    y = np.random.default_rng(1).standard_normal((8, 2)).astype(np.float32)
    seq = np.random.default_rng(2).standard_normal((8, 3, 6)).astype(np.float32)
    runs = []
    for _ in range(2):
        model = keras.Sequential([keras.layers.Dense(4, kernel_initializer="ones"),
                                  keras.layers.Dropout(0.5, seed=1), keras.layers.Dense(2)])
        rnn = keras.Sequential([keras.layers.LSTM(4, dropout=0.5, seed=3),
                                keras.layers.Dense(2, kernel_initializer="ones")])
        losses = []
        for m, data in ((model, x), (rnn, seq)):
            m.compile(optimizer=keras.optimizers.SGD(0.0), loss="mse")
            assert m.make_train_function() != m.train_step  # traced
            m(data)
            m.set_weights([np.full(w.shape, 0.1, np.float32) for w in m.get_weights()])
            hist = m.fit(data, y, epochs=3, batch_size=8, shuffle=False, verbose=0)
            losses.append(hist.history["loss"])
            assert len(set(hist.history["loss"])) == 3, hist.history["loss"]
        runs.append(losses)
    np.testing.assert_array_equal(runs[0], runs[1])


def _compiled_model(lr=0.01, metrics=("accuracy",)):
    model = _model()
    model.compile(optimizer=keras.optimizers.SGD(lr),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=list(metrics))
    return model


def test_learning_rate_scheduler_sets_the_rate_each_epoch():
    x, y = _blobs(n=64)
    model = _compiled_model(lr=0.1)
    seen = []
    cb = keras.callbacks.LambdaCallback(
        on_epoch_begin=lambda e, logs: seen.append(float(model.optimizer.learning_rate)))
    sched = keras.callbacks.LearningRateScheduler(lambda epoch, lr: lr * 0.5 if epoch else lr)
    h = model.fit(x, y, epochs=3, verbose=0, callbacks=[sched, cb])
    assert seen == pytest.approx([0.1, 0.05, 0.025])
    assert h.history["learning_rate"] == pytest.approx([0.1, 0.05, 0.025])
    # the old one-argument form; the new rate is used by the compiled step (not a traced value)
    model = _compiled_model(lr=0.1)
    w0 = [v.numpy() for v in model.trainable_variables]
    model.fit(x, y, epochs=1, verbose=0, shuffle=False,
              callbacks=[keras.callbacks.LearningRateScheduler(lambda epoch: 0.0)])
    for a, v in zip(w0, model.trainable_variables):
        np.testing.assert_array_equal(a, v.numpy())
    with pytest.raises(ValueError, match="output of the `schedule` function should be a float"):
        model.fit(x, y, epochs=1, verbose=0,
                  callbacks=[keras.callbacks.LearningRateScheduler(lambda e, lr: "fast")])


def test_reduce_lr_on_plateau_follows_keras_rule():
    model = _compiled_model(lr=1.0)
    cb = keras.callbacks.ReduceLROnPlateau(monitor="loss", factor=0.5, patience=2, cooldown=1,
                                           min_lr=0.2)
    cb.set_model(model)
    cb.on_train_begin()
    rates = []
    for epoch, loss in enumerate([1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.5]):
        logs = {"loss": loss}
        cb.on_epoch_end(epoch, logs)
        rates.append(float(model.optimizer.learning_rate))
        assert logs["learning_rate"] == pytest.approx(rates[-2] if epoch else 1.0)
    # Keras' order: epoch 0 sets best; 1, 2 wait -> halve at 2 and start a cooldown of 1;
    # epoch 3 spends the cooldown first, then counts as a wait; 4 -> halve; 5 waits; 6 ->
    # max(0.125, min_lr) = 0.2; 7 waits; 8 improves (no change)
    assert rates == pytest.approx([1.0, 1.0, 0.5, 0.5, 0.25, 0.25, 0.2, 0.2, 0.2])
    with pytest.raises(ValueError, match="factor >= 1.0"):
        keras.callbacks.ReduceLROnPlateau(factor=1.5)
    acc = keras.callbacks.ReduceLROnPlateau(monitor="val_accuracy")
    acc.on_train_begin()
    assert acc._improved(0.5) and acc.best == -np.inf


def test_reduce_lr_on_plateau_in_fit_and_min_lr():
    x, y = _blobs(n=64)
    model = _compiled_model(lr=0.0)  # nothing improves: loss stays the same
    h = model.fit(x, y, epochs=4, verbose=0, callbacks=[
        keras.callbacks.ReduceLROnPlateau(monitor="loss", patience=1, min_lr=0.0)])
    assert h.history["learning_rate"] == [0.0] * 4
    model = _compiled_model(lr=1e-9)
    h = model.fit(x, y, epochs=3, verbose=0, callbacks=[
        keras.callbacks.ReduceLROnPlateau(monitor="loss", factor=0.5, patience=1,
                                          min_delta=10.0)])
    assert h.history["learning_rate"] == pytest.approx([1e-9, 1e-9, 5e-10])


def test_terminate_on_nan_stops_after_the_step(capsys):
    x, y = _blobs(n=64)
    weights = np.ones(64, np.float32)
    weights[40:] = np.nan  # batch 1 (rows 32..63) has a NaN loss
    model = _compiled_model()
    seen = []
    h = model.fit(x, y, sample_weight=weights, epochs=3, batch_size=32, shuffle=False,
                  verbose=0, callbacks=[
        keras.callbacks.TerminateOnNaN(),
        keras.callbacks.LambdaCallback(on_train_batch_end=lambda b, logs: seen.append(b))])
    assert seen == [0, 1] and h.epoch == [0]
    assert "Batch 1: Invalid loss, terminating training" in capsys.readouterr().out


def test_csv_logger_writes_rows_and_appends(tmp_path):
    x, y = _blobs(n=64)
    path = tmp_path / "log.csv"
    model = _compiled_model()
    h = model.fit(x, y, epochs=2, verbose=0, validation_data=(x, y),
                  callbacks=[keras.callbacks.CSVLogger(path)])
    rows = path.read_text().splitlines()
    assert rows[0] == "epoch,accuracy,loss,val_accuracy,val_loss" and len(rows) == 3
    assert rows[1].split(",")[0] == "0" and rows[2].split(",")[0] == "1"
    assert float(rows[2].split(",")[2]) == pytest.approx(h.history["loss"][1])
    model.fit(x, y, epochs=1, verbose=0, validation_data=(x, y),
              callbacks=[keras.callbacks.CSVLogger(path, append=True, separator=",")])
    rows = path.read_text().splitlines()
    assert len(rows) == 4 and rows.count(rows[0]) == 1  # no second header
    model.fit(x, y, epochs=1, verbose=0, callbacks=[keras.callbacks.CSVLogger(path,
                                                                              separator=";")])
    assert path.read_text().splitlines()[0] == "epoch;accuracy;loss"


def test_class_weight_is_sample_weight_by_class():
    x, y = _blobs(n=96)
    weights = {0: 2.0, 1: 0.5, 3: 3.0}  # class 2 not listed: weight 1
    per_example = np.array([weights.get(int(c), 1.0) for c in y], np.float32)
    histories = []
    for kwargs in (dict(class_weight=weights), dict(sample_weight=per_example)):
        model = _compiled_model()
        histories.append(model.fit(x, y, epochs=2, batch_size=32, shuffle=False, verbose=0,
                                   **kwargs).history)
    np.testing.assert_allclose(histories[0]["loss"], histories[1]["loss"], rtol=1e-6)
    plain = _compiled_model().fit(x, y, epochs=2, batch_size=32, shuffle=False,
                                  verbose=0).history
    assert not np.allclose(plain["loss"], histories[0]["loss"])
    # one-hot labels: the class is the argmax; a dataset applies it per batch
    onehot = keras.utils.to_categorical(y, 4)
    model = _model()
    model.compile(optimizer=keras.optimizers.SGD(0.01),
                  loss=keras.losses.CategoricalCrossentropy(from_logits=True))
    ds = tg.data.Dataset.from_tensor_slices((x, onehot)).batch(32)
    h = model.fit(ds, epochs=2, class_weight=weights, verbose=0).history
    np.testing.assert_allclose(h["loss"], histories[1]["loss"], rtol=1e-5)
    # both: multiplied
    model = _compiled_model()
    both = model.fit(x, y, epochs=1, batch_size=32, shuffle=False, verbose=0,
                     class_weight=weights, sample_weight=per_example).history
    model = _compiled_model()
    squared = model.fit(x, y, epochs=1, batch_size=32, shuffle=False, verbose=0,
                        sample_weight=per_example ** 2).history
    assert both["loss"] == pytest.approx(squared["loss"], rel=1e-6)
    with pytest.raises(TypeError, match="class_weight must be a dict"):
        _compiled_model().fit(x, y, class_weight=[1.0, 2.0], verbose=0)


def test_initial_epoch_and_steps_per_epoch():
    x, y = _blobs(n=64)
    model = _compiled_model()
    h = model.fit(x, y, epochs=4, initial_epoch=2, verbose=0)
    assert h.epoch == [2, 3]
    # steps_per_epoch: the iterator continues across epochs (Keras): 2 + 2 steps over 4
    # batches are one pass, and the third epoch starts a new one
    ds = tg.data.Dataset.range(4).map(
        lambda i: (tg.fill([8, 6], tg.cast(i, tg.float32)), tg.zeros([8, 4])))
    model = _model()
    model.compile(optimizer="sgd", loss="mse", run_eagerly=True)
    original, firsts, seen = model.train_step, [], []
    model.train_step = lambda data: firsts.append(float(data[0][0, 0])) or original(data)
    spy = keras.callbacks.LambdaCallback(on_train_batch_begin=lambda b, logs: seen.append(b))
    h = model.fit(ds, epochs=3, steps_per_epoch=2, verbose=0, callbacks=[spy])
    assert h.epoch == [0, 1, 2] and seen == [0, 1] * 3
    assert firsts == [0.0, 1.0, 2.0, 3.0, 0.0, 1.0]
    # running out during an epoch: a warning, the epoch ends, the next starts a new pass
    for short in (ds.take(3), ds.filter(lambda a, b: True).take(3)):  # known, unknown size
        firsts.clear()
        with pytest.warns(UserWarning, match="Your input ran out of data"):
            h = model.fit(short, epochs=3, steps_per_epoch=2, verbose=0)
        assert firsts == [0.0, 1.0, 2.0, 0.0, 1.0] and h.epoch == [0, 1, 2]
    with pytest.raises(ValueError, match="steps_per_epoch must be a positive integer"):
        model.fit(x, y, steps_per_epoch=0, verbose=0)


def _two_output_model():
    tg.random.set_seed(0)
    inputs = keras.Input(shape=(6,))
    hidden = keras.layers.Dense(8, activation="tanh", name="hidden")(inputs)
    a = keras.layers.Dense(1, name="reg")(hidden)
    b = keras.layers.Dense(4, name="cls")(hidden)
    return keras.Model(inputs, [a, b])


def test_loss_weights_for_a_model_with_two_outputs():
    x, y = _blobs(n=64)
    target = x[:, :1] * 2.0
    xent = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model = _two_output_model()
    model.compile(optimizer=keras.optimizers.SGD(0.05), loss=["mse", xent],
                  loss_weights=[0.5, 2.0])
    loss, reg_loss, cls_loss = model.evaluate(x, [target, y], batch_size=64, verbose=0)
    pa, pb = model(x)
    want_reg = 0.5 * float(keras.losses.MeanSquaredError()(target, pa))
    want_cls = 2.0 * float(xent(y, pb))
    assert reg_loss == pytest.approx(want_reg, rel=1e-5)
    assert cls_loss == pytest.approx(want_cls, rel=1e-5)
    assert loss == pytest.approx(want_reg + want_cls, rel=1e-5)
    # dicts keyed by output (layer) names give the same; fit logs each output's loss
    other = _two_output_model()
    other.compile(optimizer=keras.optimizers.SGD(0.05), loss={"reg": "mse", "cls": xent},
                  loss_weights={"reg": 0.5, "cls": 2.0})
    logs = other.evaluate(x, {"reg": target, "cls": y}, batch_size=64, verbose=0,
                          return_dict=True)
    assert logs == {"loss": pytest.approx(loss, rel=1e-6),
                    "reg_loss": pytest.approx(reg_loss, rel=1e-6),
                    "cls_loss": pytest.approx(cls_loss, rel=1e-6)}
    h = model.fit(x, [target, y], epochs=5, batch_size=16, verbose=0).history
    assert sorted(h) == ["cls_loss", "loss", "reg_loss"]
    assert h["loss"][-1] < h["loss"][0]
    np.testing.assert_allclose(h["loss"], np.add(h["reg_loss"], h["cls_loss"]), rtol=1e-5)
    # a weight of 0 leaves that output untrained
    frozen = _two_output_model()
    frozen.compile(optimizer=keras.optimizers.SGD(0.05), loss=["mse", xent],
                   loss_weights=[1.0, 0.0])
    cls, reg = [next(la for la in frozen.layers if la.name == n) for n in ("cls", "reg")]
    before = [v.numpy() for v in cls.trainable_variables + reg.trainable_variables]
    frozen.fit(x, [target, y], epochs=1, batch_size=16, verbose=0)
    after = [v.numpy() for v in cls.trainable_variables + reg.trainable_variables]
    for i, (a, b) in enumerate(zip(before, after)):
        assert np.array_equal(a, b) == (i < len(cls.trainable_variables))


def test_several_outputs_errors():
    x, y = _blobs(n=16)
    model = _two_output_model()
    model.compile(optimizer="sgd", loss=["mse"])
    with pytest.raises(ValueError, match=r"compile: loss has 1 entries but the model has 2 "
                                         r"outputs \['reg', 'cls'\]"):
        model.fit(x, [x[:, :1], y], verbose=0)
    model.compile(optimizer="sgd", loss="mse", loss_weights={"nope": 1.0})
    with pytest.raises(ValueError, match=r"loss_weights has keys \['nope'\] that are not"):
        model.fit(x, [x[:, :1], y], verbose=0)
    model.compile(optimizer="sgd", loss="mse")
    with pytest.raises(ValueError, match="the model has 2 outputs"):
        model.fit(x, y, verbose=0)
    model.compile(optimizer="sgd", loss="mse", metrics=["mae"])
    with pytest.raises(NotImplementedError, match="metrics for a model with several outputs"):
        model.fit(x, [x[:, :1], x[:, :4]], verbose=0)
    with pytest.raises(TypeError, match="compile: loss_weights must be a list or a dict"):
        model.compile(optimizer="sgd", loss="mse", loss_weights=0.5)


def test_fit_on_tensors_of_another_device_and_step_logs_for_callbacks():
    x, y = _blobs(n=64)
    with tg.device("cpu"):
        xt, yt = tg.constant(x), tg.constant(y)
    model = _compiled_model()
    seen = []

    def look(batch, logs):
        seen.append((sorted(logs), logs.copy()["loss"], dict(logs)["loss"]))

    model.fit(xt, yt, epochs=1, batch_size=32, verbose=0,
              callbacks=[keras.callbacks.LambdaCallback(on_train_batch_end=look)])
    assert [s[0] for s in seen] == [["accuracy", "loss"]] * 2
    assert all(np.isfinite(s[1]) and s[1] == s[2] for s in seen)
    # the batches were made on the current device, where the model's variables are
    assert model.trainable_variables[0].device == tg.zeros(1).device
    np.testing.assert_allclose(model.predict(xt, verbose=0), model(x).numpy(), rtol=1e-5,
                               atol=1e-6)


def test_get_layer_and_the_missing_whole_model_format(tmp_path):
    model = _model()
    first = model.layers[0]
    assert model.get_layer(first.name) is first and model.get_layer(index=-1) is model.layers[-1]
    with pytest.raises(ValueError, match="No such layer: nope. Existing layers are"):
        model.get_layer("nope")
    with pytest.raises(ValueError, match="either a layer name or a layer index"):
        model.get_layer()
    with pytest.raises(ValueError, match="only has 2 layers"):
        model.get_layer(index=5)
    with pytest.raises(NotImplementedError, match="model.save_weights"):
        model.save(tmp_path / "m.keras")
    with pytest.raises(NotImplementedError, match="load_weights"):
        keras.models.load_model(str(tmp_path / "m.keras"))
    assert not (tmp_path / "m.keras").exists()


def test_batch_normalization_moving_statistics_update_at_every_traced_step():
    """fit traces its step: BatchNormalization's moving mean and variance must move at every
    step (they moved at the trace only, so inference used almost the initial statistics),
    by Keras' rule over the batches in order; eager and traced updates agree."""
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((96, 4)) * 3.0 + 2.0).astype(np.float32)
    y = rng.integers(0, 3, 96)
    model = keras.Sequential([keras.Input((4,)), keras.layers.BatchNormalization(momentum=0.9),
                              keras.layers.Dense(3)])
    model.compile(optimizer=keras.optimizers.SGD(0.01),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0)
    mean, var = np.zeros(4), np.ones(4)
    for _ in range(2):
        for b in range(0, 96, 16):
            batch = x[b:b + 16].astype(np.float64)
            mean = mean * 0.9 + batch.mean(0) * 0.1
            var = var * 0.9 + batch.var(0) * 0.1
    bn = model.layers[0]
    np.testing.assert_allclose(bn.moving_mean.numpy(), mean, rtol=1e-5)
    np.testing.assert_allclose(bn.moving_variance.numpy(), var, rtol=1e-5)
    eager, traced = keras.layers.BatchNormalization(), keras.layers.BatchNormalization()
    step = tg.function(lambda t: traced(t, training=True))
    for _ in range(4):
        eager(tg.constant(x[:16]), training=True)
        step(tg.constant(x[:16]))
    np.testing.assert_allclose(traced.moving_mean.numpy(), eager.moving_mean.numpy(), rtol=1e-6)
    np.testing.assert_allclose(traced.moving_variance.numpy(), eager.moving_variance.numpy(),
                               rtol=1e-6)
