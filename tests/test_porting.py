"""The names real TF2 / Keras programs stop on (issue 27's list), each behaving as TensorFlow
and Keras document it, and Keras 2's spellings (docs/porting_from_tensorflow.md)."""
import hashlib
import io
import os
import tarfile
import unittest

import numpy as np
import pytest

import tapegpu as tg

SINGLE_DEVICE = True
keras = tg.keras


def test_tf_initializers_have_tfs_defaults():
    # tf.random_normal_initializer(mean=0.0, stddev=0.05), dtype float32 when called
    v = tg.random_normal_initializer(seed=1)((20000,)).numpy()
    assert v.dtype == np.float32 and abs(v.std() - 0.05) < 0.003 and abs(v.mean()) < 0.003
    u = tg.random_uniform_initializer(seed=1)((20000,)).numpy()
    assert u.min() >= -0.05 and u.max() < 0.05
    np.testing.assert_array_equal(tg.constant_initializer([1, 2])((2,)).numpy(), [1.0, 2.0])
    with pytest.raises(TypeError, match="constant_initializer"):
        tg.constant_initializer([1, 2, 3])((2,))
    # made with a seed: the same values each time, as TF
    a = tg.random_normal_initializer(seed=3)((4,)).numpy()
    b = tg.random_normal_initializer(seed=3)((4,)).numpy()
    np.testing.assert_array_equal(a, b)
    assert tg.Variable(tg.zeros_initializer()(shape=[2], dtype=tg.float64)).dtype == tg.float64


def test_keras_initializers_complete():
    init = keras.initializers
    assert init.glorot_uniform is init.GlorotUniform and init.zeros is init.Zeros
    v = init.TruncatedNormal(stddev=1.0, seed=0)((5000,)).numpy()
    assert np.abs(v).max() <= 2.0
    np.testing.assert_array_equal(init.Identity()((2, 2)).numpy(), np.eye(2))
    assert isinstance(init.deserialize(init.serialize(init.Constant(2.0))), init.Constant)
    assert tg.initializers.TruncatedNormal is init.TruncatedNormal  # tf.initializers too
    layer = keras.layers.Dense(2, kernel_initializer="truncated_normal")
    layer(np.ones((1, 3)))


def test_keras_random():
    r = keras.random
    np.testing.assert_array_equal(r.normal((3,), seed=5).numpy(), r.normal((3,), seed=5).numpy())
    gen = r.SeedGenerator(1)
    a, b = r.uniform((3,), seed=gen).numpy(), r.uniform((3,), seed=gen).numpy()
    assert not np.array_equal(a, b)
    gen2 = r.SeedGenerator(1)
    np.testing.assert_array_equal(r.uniform((3,), seed=gen2).numpy(), a)
    ints = r.randint((1000,), 2, 5, seed=0).numpy()
    assert ints.dtype == np.int32 and set(np.unique(ints)) == {2, 3, 4}
    d = r.dropout(tg.ones((1000,)), 0.5, seed=0).numpy()
    assert set(np.unique(d)) == {0.0, 2.0}
    with pytest.raises(ValueError, match="seed"):
        r.normal((2,), seed="x")


def test_image_helpers():
    a = keras.utils.img_to_array(np.arange(6, dtype=np.uint8).reshape(2, 3))
    assert a.shape == (2, 3, 1) and a.dtype == np.float32
    assert keras.utils.img_to_array(np.zeros((2, 3, 3)), data_format="channels_first").shape \
        == (3, 2, 3)
    assert keras.preprocessing.image.img_to_array is keras.utils.img_to_array
    try:
        import PIL  # noqa: F401
    except ImportError:  # as Keras without Pillow: an ImportError that says so
        with pytest.raises(ImportError, match="requires PIL"):
            keras.utils.array_to_img(np.zeros((2, 2, 3)))
        with pytest.raises(ImportError, match="requires PIL"):
            keras.utils.load_img("x.png")


def test_tokenizer_as_keras_documents():
    from tapegpu.keras.preprocessing.text import Tokenizer, text_to_word_sequence
    assert text_to_word_sequence("The quick, brown fox!") == ["the", "quick", "brown", "fox"]
    tok = Tokenizer(num_words=4, oov_token="<OOV>")
    tok.fit_on_texts(["the cat sat on the mat", "the dog"])
    # index 1 is the OOV token, then by frequency (ties in first-seen order)
    assert tok.word_index["<OOV>"] == 1 and tok.word_index["the"] == 2
    assert tok.word_index["cat"] == 3
    assert tok.texts_to_sequences(["the cat ate"]) == [[2, 3, 1]]
    m = tok.texts_to_matrix(["the the cat"], mode="count")
    np.testing.assert_array_equal(m, [[0, 0, 2, 1]])
    again = keras.preprocessing.text.tokenizer_from_json(tok.to_json())
    assert again.word_index == tok.word_index
    seq = keras.preprocessing.sequence.pad_sequences([[1, 2], [3]], maxlen=3)
    np.testing.assert_array_equal(seq, [[0, 1, 2], [0, 0, 3]])


def test_get_file_caches_checks_hash_and_extracts(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    payload = src / "data.txt"
    payload.write_text("hello")
    archive = src / "arch.tar.gz"
    with tarfile.open(archive, "w:gz") as t:
        t.add(payload, arcname="arch/data.txt")
    cache = tmp_path / "cache"
    sha = hashlib.sha256(b"hello").hexdigest()
    path = keras.utils.get_file("data.txt", payload.as_uri(), file_hash=sha, cache_dir=cache)
    assert open(path).read() == "hello" and path.startswith(str(cache / "datasets"))
    with pytest.raises(ValueError, match="hash"):
        keras.utils.get_file("bad.txt", payload.as_uri(), file_hash="0" * 64, cache_dir=cache)
    assert not os.path.exists(cache / "datasets" / "bad.txt")  # nothing half-written
    # Keras 2's untar=True: the archive's folder beside it, its path returned
    out = keras.utils.get_file("arch", archive.as_uri(), untar=True, cache_dir=cache)
    assert open(os.path.join(out, "data.txt")).read() == "hello"
    with pytest.raises(Exception, match="URL fetch failure"):
        keras.utils.get_file("none.txt", (src / "missing").as_uri(), cache_dir=cache)


def test_tf_metrics_and_tf_test():
    assert tg.metrics is keras.metrics and tg.metrics.Mean is keras.metrics.Mean
    assert tg.test.gpu_device_name() in ("", "/device:GPU:0")
    assert tg.test.is_gpu_available() == bool(tg.config.list_physical_devices("GPU"))

    class T(tg.test.TestCase):
        def test_close(self):
            self.assertAllClose(tg.constant([1.0, 2.0]), [1.0, 2.0])
            self.assertAllEqual(tg.constant([1, 2]), np.array([1, 2]))

        def test_fails(self):
            self.assertAllClose(tg.constant([1.0]), [1.5])

    result = unittest.TextTestRunner(stream=io.StringIO()).run(
        unittest.TestSuite([T("test_close"), T("test_fails")]))
    assert result.testsRun == 2 and len(result.failures) == 1


def test_compat_v1_bits():
    v1 = tg.compat.v1
    v1.logging.set_verbosity(v1.logging.ERROR)
    assert v1.logging.get_verbosity() == v1.logging.ERROR
    np.testing.assert_array_equal(
        v1.reduce_sum([[1.0, 2.0]], reduction_indices=1, keep_dims=True).numpy(), [[3.0]])
    assert int(v1.argmax([[1, 5, 2]], dimension=1)[0]) == 1
    v1.enable_eager_execution()
    assert v1.executing_eagerly() is True
    with pytest.raises(NotImplementedError, match="tf.compat.v1.disable_eager_execution"):
        v1.disable_eager_execution()


def test_function_accepts_tfs_deprecated_arguments():
    @tg.function(experimental_compile=True)
    def f(x):
        return x * 2.0

    @tg.function(experimental_relax_shapes=True)
    def g(x):
        return x + 1.0

    assert float(f(tg.constant(2.0))) == 4.0
    g(tg.ones(2)), g(tg.ones(3)), g(tg.ones(4))
    assert g.experimental_get_tracing_count() <= 2  # relaxed: not one trace per shape


def test_name_scope_and_executing_eagerly():
    with tg.name_scope("outer"):
        with tg.name_scope("inner") as scope:
            assert scope == "outer/inner/"
            assert tg.get_current_name_scope() == "outer/inner"
    assert tg.executing_eagerly()
    seen = []

    @tg.function
    def f(x):
        seen.append(tg.executing_eagerly())
        return x

    f(tg.ones(1))
    assert seen == [False]


def test_keras_variable_and_clone_model():
    v = keras.Variable("zeros", shape=(2, 3), name="w")
    assert isinstance(v, tg.Variable) and v.shape == (2, 3) and v.dtype == tg.float32
    assert keras.Variable(1.0).dtype == tg.float32
    x = keras.Input((4,), name="x")
    h = keras.layers.Dense(3, activation="relu", name="h")(x)
    out = keras.layers.Concatenate(name="cat")([h, x])
    model = keras.Model(x, out)
    clone = keras.models.clone_model(model)
    assert [layer.name for layer in clone.layers] == [layer.name for layer in model.layers]
    assert clone.layers[1] is not model.layers[1]
    # new weights: copying them makes the outputs agree
    data = np.random.default_rng(0).random((2, 4)).astype(np.float32)
    clone.set_weights(model.get_weights())
    np.testing.assert_allclose(clone(data).numpy(), model(data).numpy(), rtol=1e-6)
    seq = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    seq2 = keras.models.clone_model(seq)
    assert seq2.layers[0].kernel is not seq.layers[0].kernel
    assert seq2(np.ones((1, 3), np.float32)).shape == (1, 2)


def test_keras_ops_norm_matches_numpy():
    a = np.array([[1.0, -2.0, 3.0], [-4.0, 5.0, -6.0]], np.float32)
    ops = keras.ops
    for kwargs in ({}, {"axis": 1}, {"ord": 1, "axis": 0}, {"ord": np.inf, "axis": 1},
                   {"ord": 3, "axis": 1}, {"ord": "fro", "axis": (0, 1)},
                   {"ord": 1, "axis": (0, 1)}, {"ord": np.inf, "axis": (0, 1)},
                   {"axis": 1, "keepdims": True}):
        np.testing.assert_allclose(ops.norm(tg.constant(a), **kwargs).numpy(),
                                   np.linalg.norm(a, **kwargs), rtol=1e-5, err_msg=str(kwargs))
    x = tg.Variable([3.0, 4.0])
    with tg.GradientTape() as tape:
        n = ops.norm(x)
    np.testing.assert_allclose(tape.gradient(n, x).numpy(), [0.6, 0.8], rtol=1e-6)
    np.testing.assert_allclose(ops.hard_sigmoid(tg.constant([-4.0, 0.0, 4.0])).numpy(),
                               [0.0, 0.5, 1.0])
    np.testing.assert_allclose(ops.log_sigmoid(tg.constant([0.0])).numpy(), [np.log(0.5)],
                               rtol=1e-6)


def test_keras2_train_step_with_compiled_loss_and_metrics():
    class Net(keras.Model):
        def __init__(self):
            super().__init__()
            self.d = keras.layers.Dense(1)

        def call(self, x, training=False):
            return self.d(x)

        def train_step(self, data):
            x, y = data
            with tg.GradientTape() as tape:
                y_pred = self(x, training=True)
                loss = self.compiled_loss(y, y_pred, regularization_losses=self.losses)
            grads = tape.gradient(loss, self.trainable_variables)
            self.optimizer.apply_gradients(zip(grads, self.trainable_variables))
            self.compiled_metrics.update_state(y, y_pred)
            return {m.name: m.result() for m in self.metrics}

    rng = np.random.default_rng(0)
    x = rng.random((64, 3)).astype(np.float32)
    y = x @ np.array([[1.0], [2.0], [-1.0]], np.float32)
    net = Net()
    net.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse", metrics=["mae"])
    history = net.fit(x, y, epochs=5, batch_size=16, verbose=0).history
    assert set(history) == {"loss", "mae"}
    assert history["loss"][-1] < history["loss"][0]


def test_training_passed_positionally():
    model = keras.Sequential([keras.Input((100,)), keras.layers.Dropout(0.5)])
    x = np.ones((1, 100), np.float32)
    assert np.any(model(x, True).numpy() == 0)  # model(x, True): training=True, as Keras
    assert np.all(model(x, False).numpy() == 1)

    class Sub(keras.Model):
        def __init__(self):
            super().__init__()
            self.drop = keras.layers.Dropout(0.5)

        def call(self, inputs, training=None):
            return self.drop(inputs, training=training)

    sub = Sub()
    assert np.any(sub(x, True).numpy() == 0) and np.all(sub(x).numpy() == 1)


def test_keras2_spellings():
    assert keras.Input(2).shape == (None, 2)
    model = keras.Sequential([keras.layers.Dense(2, input_dim=3)])
    assert model.output_shape == (None, 2)
    opt = keras.optimizers.Adam(lr=0.01)
    assert opt.learning_rate == pytest.approx(0.01)
    keras.backend.set_value(opt.lr, 0.5)
    assert opt.learning_rate == pytest.approx(0.5)
    # Keras 2's decay: lr / (1 + decay * iterations)
    sgd = keras.optimizers.SGD(lr=0.1, decay=0.5)
    v = tg.Variable([1.0])
    for _ in range(2):
        sgd.apply_gradients([(tg.constant([1.0]), v)])
    assert sgd.learning_rate == pytest.approx(0.1 / (1 + 0.5 * 2))
    np.testing.assert_allclose(v.numpy(), [1.0 - 0.1 - 0.1 / 1.5], rtol=1e-6)
    assert keras.losses.Reduction.SUM == "sum"
    loss = keras.losses.MeanSquaredError(reduction=keras.losses.Reduction.SUM)
    assert float(loss(np.zeros((2, 1)), np.ones((2, 1)))) == 2.0
    # fit_generator / evaluate_generator / predict_generator, and fit on a generator
    m = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    m.compile("sgd", "mse")
    x, y = np.ones((8, 3), np.float32), np.ones((8, 1), np.float32)

    def gen():
        while True:
            yield x, y
    assert len(m.fit_generator(gen(), steps_per_epoch=2, epochs=2, verbose=0)
               .history["loss"]) == 2
    assert isinstance(m.evaluate_generator(gen(), steps=2, verbose=0), float)
    assert m.predict_generator((x for _ in range(3)), verbose=0).shape == (24, 1)
    with pytest.raises(ValueError, match="generator"):
        m.fit(gen(), y, steps_per_epoch=1, verbose=0)


def test_private_module_paths_map_to_public_objects():
    from tapegpu.python.keras.engine.base_layer import Layer
    from tapegpu.python.keras.engine.training import Model
    from tapegpu.python.keras.engine.functional import Functional
    from tapegpu.python.keras import backend as K
    from tapegpu.python.keras.layers import Dense
    from tapegpu.python.framework.ops import EagerTensor
    from tapegpu.python.client import device_lib
    from tapegpu.keras.engine.topology import Layer as Layer2
    from tapegpu.keras.utils.np_utils import to_categorical
    from tapegpu.keras.layers.merge import Concatenate
    assert Layer is keras.layers.Layer is Layer2 and Model is keras.Model
    assert Functional is keras.Functional and Dense is keras.layers.Dense
    assert K.floatx() == "float32" and isinstance(tg.zeros(1), EagerTensor)
    assert to_categorical is keras.utils.to_categorical
    assert Concatenate is keras.layers.Concatenate
    assert device_lib.list_local_devices()[0].device_type == "CPU"

    class Custom(Layer):  # real code subclasses the engine's base class
        def call(self, x):
            return x * 2.0
    assert float(Custom()(tg.constant(1.0))) == 2.0
    with pytest.raises(ModuleNotFoundError, match="private module"):
        import tapegpu.python.util.nest_secret  # noqa: F401


def test_sparse_and_ragged_import_when_first_used():
    import subprocess
    import sys
    code = ("import sys, tapegpu as tg; assert 'tapegpu.sparse' not in sys.modules; "
            "tg.SparseTensor; tg.RaggedTensor\n"
            "for f in (lambda: tg.sparse.cross([]), lambda: tg.ragged.boolean_mask(1, 2)):\n"
            "    try: f()\n"
            "    except NotImplementedError as e: assert 'tf.' in str(e), e\n"
            "    else: raise AssertionError('not refused')\n")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_sparse_tensors_as_tf_documents():
    st = tg.sparse.SparseTensor(indices=[[0, 0], [1, 2]], values=[1.0, 2.0], dense_shape=[3, 4])
    assert tg.SparseTensor is tg.sparse.SparseTensor and st.shape == (3, 4)
    dense = np.zeros((3, 4), np.float32)
    dense[0, 0], dense[1, 2] = 1.0, 2.0
    np.testing.assert_array_equal(tg.sparse.to_dense(st).numpy(), dense)
    np.testing.assert_array_equal(
        tg.sparse.to_dense(tg.SparseTensor([[1]], [3], [3]), default_value=-1).numpy(),
        [-1, 3, -1])
    back = tg.sparse.from_dense(tg.constant(dense))
    np.testing.assert_array_equal(back.indices.numpy(), [[0, 0], [1, 2]])
    np.testing.assert_array_equal(back.values.numpy(), [1.0, 2.0])
    b = np.arange(8, dtype=np.float32).reshape(4, 2)
    np.testing.assert_allclose(tg.sparse.sparse_dense_matmul(st, b).numpy(), dense @ b)
    np.testing.assert_array_equal(tg.sparse.reorder(
        tg.SparseTensor([[1], [0]], [1, 2], [2])).values.numpy(), [2, 1])
    np.testing.assert_allclose(tg.sparse.reduce_sum(st, axis=1).numpy(), [1.0, 2.0, 0.0])
    # gradients reach the values through to_dense and the matmul
    v = tg.Variable([1.0, 2.0])
    with tg.GradientTape() as tape:
        y = tg.reduce_sum(tg.sparse.sparse_dense_matmul(
            tg.SparseTensor([[0, 0], [1, 2]], v, [3, 4]), tg.constant(b)))
    np.testing.assert_allclose(tape.gradient(y, v).numpy(), [b[0].sum(), b[2].sum()])
    with pytest.raises(tg.errors.InvalidArgumentError, match="out of bounds"):
        tg.sparse.to_dense(tg.SparseTensor([[5]], [1], [3]))
    with pytest.raises(ValueError, match="one per index"):
        tg.SparseTensor([[0], [1]], [1.0], [3])
    with pytest.raises(NotImplementedError, match="tf.sparse.sparse_dense_matmul|tf.sparse.cross"):
        tg.sparse.cross([])


def test_ragged_tensors_as_tf_documents():
    rt = tg.ragged.constant([[3, 1, 4, 1], [], [5, 9, 2], [6], []])
    assert tg.RaggedTensor is tg.ragged.RaggedTensor
    assert rt.shape == (5, None) and rt.dtype == tg.int32 and rt.ragged_rank == 1
    np.testing.assert_array_equal(rt.row_splits.numpy(), [0, 4, 4, 7, 8, 8])
    np.testing.assert_array_equal(rt.row_lengths().numpy(), [4, 0, 3, 1, 0])
    np.testing.assert_array_equal(rt.value_rowids().numpy(), [0, 0, 0, 0, 2, 2, 2, 3])
    np.testing.assert_array_equal(rt[2].numpy(), [5, 9, 2])
    assert rt[1:3].to_list() == [[], [5, 9, 2]]
    np.testing.assert_array_equal(rt.to_tensor(default_value=-1).numpy()[:2],
                                  [[3, 1, 4, 1], [-1, -1, -1, -1]])
    np.testing.assert_array_equal(rt.bounding_shape().numpy(), [5, 4])
    # the guide's constructors
    values = [3, 1, 4, 1, 5, 9, 2]
    assert tg.RaggedTensor.from_value_rowids(values, [0, 0, 0, 0, 2, 2, 3]).to_list() == \
        [[3, 1, 4, 1], [], [5, 9], [2]]
    assert tg.RaggedTensor.from_row_lengths(values, [4, 0, 2, 1]).to_list() == \
        [[3, 1, 4, 1], [], [5, 9], [2]]
    assert tg.RaggedTensor.from_row_splits(values, [0, 4, 4, 6, 7]).to_list() == \
        [[3, 1, 4, 1], [], [5, 9], [2]]
    assert tg.RaggedTensor.from_tensor([[1, 2, 0], [3, 0, 0]], padding=0).to_list() == \
        [[1, 2], [3]]
    nested = tg.ragged.constant([[[1, 2], [3]], [[4]]])
    assert nested.ragged_rank == 2 and nested[0].to_list() == [[1, 2], [3]]
    assert tg.ragged.map_flat_values(tg.square, rt).to_list()[0] == [9, 1, 16, 1]
    assert tg.ragged.range([3, 1]).to_list() == [[0, 1, 2], [0]]
    with pytest.raises(ValueError, match="row_splits"):
        tg.RaggedTensor.from_row_splits(values, [1, 4])
    # differentiable in the values through to_tensor
    v = tg.Variable([1.0, 2.0, 3.0])
    with tg.GradientTape() as tape:
        y = tg.reduce_sum(tg.RaggedTensor.from_row_lengths(v, [2, 1]).to_tensor() *
                          tg.constant([[1.0, 2.0], [3.0, 4.0]]))
    np.testing.assert_allclose(tape.gradient(y, v).numpy(), [1.0, 2.0, 3.0])


def test_accuracy_spelled_acc_with_any_loss():
    # Keras 2 programs write metrics=['acc'] (and 'accuracy' with a mean-squared-error loss):
    # the metric is chosen from the shapes inside the traced step
    rng = np.random.default_rng(0)
    x = rng.random((16, 3)).astype(np.float32)
    y = (x.sum(axis=1, keepdims=True) > 1.5).astype(np.float32)
    for name in ("acc", "accuracy"):
        m = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1, activation="sigmoid")])
        m.compile("sgd", "mse", metrics=[name])
        history = m.fit(x, y, epochs=1, batch_size=8, verbose=0).history
        assert 0.0 <= history[name][0] <= 1.0
