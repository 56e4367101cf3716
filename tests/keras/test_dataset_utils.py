"""tg.keras.utils.image/text/audio_dataset_from_directory on directories built here."""
import os
import struct

import numpy as np
import pytest

import tapegpu as tg


def _write_png(path, img):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(tg.io.encode_png(img).numpy())


def _image_tree(root, sizes=((4, 6),), per_class=(3, 2, 1)):
    """classes a/b/c with per_class images; image k of class i is filled with 10*i + k."""
    truth = {}
    for i, (name, n) in enumerate(zip("abc", per_class)):
        for k in range(n):
            h, w = sizes[k % len(sizes)]
            img = np.full((h, w, 3), 10 * i + k, np.uint8)
            sub = "deep" if k == 2 else ""
            path = os.path.join(root, name, sub, f"img{k}.png")
            _write_png(path, img)
            truth[path] = (i, 10 * i + k)
    os.makedirs(os.path.join(root, ".hidden"))
    with open(os.path.join(root, "a", "notes.md"), "w") as f:
        f.write("not an image")
    return truth


def test_image_dataset_labels_order_and_values(tmp_path):
    truth = _image_tree(str(tmp_path))
    ds = tg.keras.utils.image_dataset_from_directory(str(tmp_path), image_size=(2, 3),
                                                     batch_size=4, shuffle=False,
                                                     verbose=False)
    assert ds.class_names == ["a", "b", "c"]
    # each class's files folder by folder, in the sorted order of the folders' paths
    assert [os.path.relpath(p, tmp_path) for p in ds.file_paths] == [
        os.path.join("a", "img0.png"), os.path.join("a", "img1.png"),
        os.path.join("a", "deep", "img2.png"), os.path.join("b", "img0.png"),
        os.path.join("b", "img1.png"), os.path.join("c", "img0.png")]
    batches = list(ds)
    assert [tuple(x.shape) for x, _ in batches] == [(4, 2, 3, 3), (2, 2, 3, 3)]
    xs = np.concatenate([x.numpy() for x, _ in batches])
    ys = np.concatenate([y.numpy() for _, y in batches])
    assert batches[0][0].dtype == tg.float32 and batches[0][1].dtype == tg.int32
    for path, x, y in zip(ds.file_paths, xs, ys):
        label, value = truth[path]
        assert y == label
        np.testing.assert_allclose(x, value)  # a constant image resizes to itself


def test_image_dataset_label_modes_and_color_modes(tmp_path):
    _image_tree(str(tmp_path), per_class=(2, 1, 1))
    ds = tg.keras.utils.image_dataset_from_directory(
        str(tmp_path), label_mode="categorical", color_mode="grayscale", image_size=(3, 3),
        shuffle=False, verbose=False)
    x, y = next(iter(ds))
    assert x.shape == (4, 3, 3, 1)
    np.testing.assert_array_equal(y.numpy(), np.eye(3)[[0, 0, 1, 2]])
    rgba = tg.keras.utils.image_dataset_from_directory(
        str(tmp_path), label_mode=None, color_mode="rgba", image_size=(3, 3), shuffle=False,
        verbose=False)
    only = next(iter(rgba))
    assert only.shape == (4, 3, 3, 4)
    np.testing.assert_allclose(only.numpy()[..., 3], 255.0)
    with pytest.raises(ValueError, match="exactly 2"):
        tg.keras.utils.image_dataset_from_directory(str(tmp_path), label_mode="binary",
                                                    verbose=False)
    two = tg.keras.utils.image_dataset_from_directory(
        str(tmp_path), label_mode="binary", class_names=["c", "a"], image_size=(2, 2),
        shuffle=False, verbose=False)
    _, yb = next(iter(two))
    assert two.class_names == ["c", "a"]
    np.testing.assert_array_equal(yb.numpy(), [[0.0], [1.0], [1.0]])
    with pytest.raises(ValueError, match="class_names"):
        tg.keras.utils.image_dataset_from_directory(str(tmp_path), class_names=["zz"],
                                                    verbose=False)
    with pytest.raises(ValueError, match="color_mode"):
        tg.keras.utils.image_dataset_from_directory(str(tmp_path), color_mode="cmyk")


def test_image_dataset_resize_bilinear_crop_and_pad(tmp_path):
    img = np.arange(4 * 8 * 3, dtype=np.uint8).reshape(4, 8, 3)
    _write_png(os.path.join(str(tmp_path), "x", "i.png"), img)
    kw = dict(image_size=(2, 2), shuffle=False, verbose=False, label_mode=None)
    plain = next(iter(tg.keras.utils.image_dataset_from_directory(str(tmp_path), **kw)))
    np.testing.assert_allclose(plain.numpy()[0], tg.image.resize(img, (2, 2)).numpy())
    crop = next(iter(tg.keras.utils.image_dataset_from_directory(
        str(tmp_path), crop_to_aspect_ratio=True, **kw)))
    # the central 4x4 window (columns 2..5), then resized
    np.testing.assert_allclose(crop.numpy()[0],
                               tg.image.resize(img[:, 2:6], (2, 2)).numpy())
    pad = next(iter(tg.keras.utils.image_dataset_from_directory(
        str(tmp_path), pad_to_aspect_ratio=True, **kw)))
    canvas = np.zeros((8, 8, 3), np.uint8)
    canvas[2:6] = img
    np.testing.assert_allclose(pad.numpy()[0], tg.image.resize(canvas, (2, 2)).numpy())


def test_validation_split_subsets_partition_the_shuffled_files(tmp_path):
    _image_tree(str(tmp_path), per_class=(3, 3, 4))
    kw = dict(image_size=(2, 2), seed=42, validation_split=0.3, verbose=False)
    train, val = tg.keras.utils.image_dataset_from_directory(str(tmp_path), subset="both", **kw)
    assert len(val.file_paths) == 3 and len(train.file_paths) == 7
    assert not set(train.file_paths) & set(val.file_paths)
    again = tg.keras.utils.image_dataset_from_directory(str(tmp_path), subset="training", **kw)
    assert again.file_paths == train.file_paths
    # Keras' global shuffle: np.random.RandomState(seed) over the sorted list
    ordered = tg.keras.utils.image_dataset_from_directory(
        str(tmp_path), image_size=(2, 2), shuffle=False, verbose=False).file_paths
    expect = list(ordered)
    np.random.RandomState(42).shuffle(expect)
    assert train.file_paths + val.file_paths == expect
    with pytest.raises(ValueError, match="seed"):
        tg.keras.utils.image_dataset_from_directory(str(tmp_path), validation_split=0.2,
                                                    subset="training")
    with pytest.raises(ValueError, match="subset"):
        tg.keras.utils.image_dataset_from_directory(str(tmp_path), validation_split=0.2,
                                                    seed=1)


def test_text_dataset(tmp_path):
    texts = {"neg": ["awful film", "bad"], "pos": ["great"]}
    for cls, docs in texts.items():
        os.makedirs(tmp_path / cls)
        for k, doc in enumerate(docs):
            (tmp_path / cls / f"{k}.txt").write_text(doc)
    (tmp_path / "pos" / "skip.csv").write_text("x")
    ds = tg.keras.utils.text_dataset_from_directory(str(tmp_path), shuffle=False, max_length=5,
                                                    verbose=False)
    x, y = next(iter(ds))
    assert x.numpy().tolist() == [b"awful", b"bad", b"great"] and y.numpy().tolist() == [0, 0, 1]
    explicit = tg.keras.utils.text_dataset_from_directory(
        str(tmp_path), labels=[5, 6, 7], shuffle=False, batch_size=None, verbose=False)
    assert [int(y) for _, y in explicit] == [5, 6, 7]
    assert explicit.class_names == ["5", "6", "7"]  # Keras: the sorted labels, as str
    with pytest.raises(ValueError, match="sorted list of labels"):
        tg.keras.utils.text_dataset_from_directory(str(tmp_path), labels=[5, 6, 7],
                                                   class_names=["x"], verbose=False)
    with pytest.raises(ValueError, match="lengths of `labels`"):
        tg.keras.utils.text_dataset_from_directory(str(tmp_path), labels=[1], verbose=False)
    shuffled = tg.keras.utils.text_dataset_from_directory(str(tmp_path), seed=3,
                                                          verbose=False)
    xs, ys = next(iter(shuffled))
    pairs = sorted(zip(xs.numpy().tolist(), ys.numpy().tolist()))
    assert pairs == [(b"awful film", 0), (b"bad", 0), (b"great", 1)]
    vec = tg.keras.layers.TextVectorization(output_sequence_length=2)
    vec.adapt(ds.map(lambda x, y: x))
    assert set(vec.get_vocabulary()) == {"", "[UNK]", "awful", "bad", "great"}


def _wav(path, samples, rate=8000):
    body = np.asarray(samples, "<i2").tobytes()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(b"RIFF" + struct.pack("<I", 36 + len(body)) + b"WAVEfmt " +
                struct.pack("<IHHIIHH", 16, 1, 1, rate, rate * 2, 2, 16) + b"data" +
                struct.pack("<I", len(body)) + body)


def test_audio_dataset_pads_to_longest_or_fixed_length(tmp_path):
    _wav(str(tmp_path / "no" / "a.wav"), [16384, -16384, 8192])
    _wav(str(tmp_path / "yes" / "b.wav"), [32767])
    ds = tg.keras.utils.audio_dataset_from_directory(str(tmp_path), shuffle=False,
                                                     verbose=False)
    x, y = next(iter(ds))
    np.testing.assert_allclose(x.numpy()[..., 0], [[0.5, -0.5, 0.25], [32767 / 32768, 0, 0]])
    assert y.numpy().tolist() == [0, 1] and ds.class_names == ["no", "yes"]
    fixed = tg.keras.utils.audio_dataset_from_directory(
        str(tmp_path), shuffle=False, output_sequence_length=2, verbose=False)
    assert next(iter(fixed))[0].shape == (2, 2, 1)
    with pytest.raises(ValueError, match="sampling_rate"):
        tg.keras.utils.audio_dataset_from_directory(str(tmp_path), sampling_rate=16000)


def test_verbose_messages_as_keras(tmp_path, capsys):
    for cls, n in (("x", 2), ("y", 2)):
        os.makedirs(tmp_path / cls)
        for k in range(n):
            (tmp_path / cls / f"{k}.txt").write_text("t")
    tg.keras.utils.text_dataset_from_directory(str(tmp_path), validation_split=0.25,
                                               subset="training", seed=0)
    assert capsys.readouterr().out.splitlines() == [
        "Found 4 files belonging to 2 classes.", "Using 3 files for training."]
    tg.keras.utils.text_dataset_from_directory(str(tmp_path), labels=None, shuffle=False)
    assert capsys.readouterr().out.splitlines() == ["Found 4 files."]
