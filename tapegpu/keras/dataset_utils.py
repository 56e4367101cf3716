"""Keras 3's `keras.utils.image_dataset_from_directory`, `text_dataset_from_directory` and
`audio_dataset_from_directory`: a `tg.data.Dataset` of the files under a directory, labelled
by their subdirectory.

As Keras: with `labels="inferred"` the classes are the subdirectories in alphanumeric order
(or `class_names`, some of them, in its order; hidden ones skipped), each class's files found
recursively, folder by folder in sorted order; the list of all files is then shuffled (when
`shuffle`) with `np.random.RandomState(seed)` and cut for `validation_split` (the last
fraction is the validation subset); the dataset shuffles again with a buffer of
`8 * batch_size` and batches. Files are read and decoded lazily, as the dataset is iterated.
The dataset carries `class_names` and `file_paths`.

One difference, a fix: with a `validation_split` so small that no file goes to validation,
Keras' training subset comes out empty (`samples[:-0]`); here it keeps every file.

>>> import os, tempfile
>>> root = tempfile.mkdtemp()
>>> for cls, text in [("neg", "bad"), ("pos", "good")]:
...     os.makedirs(os.path.join(root, cls))
...     with open(os.path.join(root, cls, "a.txt"), "w") as f:
...         _ = f.write(text)
>>> ds = tg.keras.utils.text_dataset_from_directory(root, shuffle=False, verbose=False)
>>> ds.class_names
['neg', 'pos']
>>> [(x.numpy().tolist(), y.numpy().tolist()) for x, y in ds]
[([b'bad', b'good'], [0, 1])]
"""
import os

import numpy as np

from .. import image_codecs
from ..core.tensor import Tensor, convert_to_tensor
from ..data import Dataset
from ..ops import image as _image_ops

IMAGE_EXTENSIONS = (".bmp", ".gif", ".jpeg", ".jpg", ".png")
_LABEL_MODES = ("int", "categorical", "binary", None)


def _check_split(validation_split, subset, shuffle, seed, who):
    if validation_split and not 0 < validation_split < 1:
        raise ValueError(f"{who}: `validation_split` must be between 0 and 1, received: "
                         f"{validation_split}")
    if (validation_split or subset) and not (validation_split and subset):
        raise ValueError(f"{who}: if `subset` is set, `validation_split` must be set, and "
                         f"inversely; received validation_split={validation_split}, "
                         f"subset={subset!r}")
    if subset not in ("training", "validation", "both", None):
        raise ValueError(f'{who}: `subset` must be either "training", "validation" or "both", '
                         f"received: {subset!r}")
    if validation_split and shuffle and seed is None:
        raise ValueError(f"{who}: if using `validation_split` and shuffling the data, you must "
                         "provide a `seed` argument, to make sure that there is no overlap "
                         "between the training and validation subset")


def _walk(directory, extensions, follow_links):
    """The files under `directory` with one of `extensions`, recursively: folder by folder in
    the sorted order of their paths, each folder's files sorted (Keras' `iter_valid_files`)."""
    out = []
    for root, _, files in sorted(os.walk(directory, followlinks=follow_links),
                                 key=lambda entry: entry[0]):
        out.extend(os.path.join(root, f) for f in sorted(files)
                   if f.lower().endswith(extensions))
    return out


def _index_directory(directory, labels, extensions, class_names=None, shuffle=True, seed=None,
                    follow_links=False, verbose=True, who="index_directory"):
    """(file_paths, labels or None, class_names) of the files under `directory`, as Keras'
    `index_directory` (see the module docstring)."""
    if not os.path.isdir(directory):
        raise ValueError(f"{who}: directory {directory!r} does not exist or is not a directory")
    if _inferred(labels):
        subdirs = sorted(d for d in os.listdir(directory) if not d.startswith(".") and
                         os.path.isdir(os.path.join(directory, d)))
        if class_names is not None:
            if not set(class_names).issubset(subdirs):
                raise ValueError(f"{who}: the `class_names` passed did not match the names of "
                                 f"the subdirectories of the target directory. Expected: "
                                 f"{subdirs} (or a subset of it), but received: "
                                 f"class_names={list(class_names)}")
            subdirs = list(class_names)
        paths, label_list = [], []
        for i, d in enumerate(subdirs):
            found = _walk(os.path.join(directory, d), extensions, follow_links)
            paths.extend(found)
            label_list.extend([i] * len(found))
        names = list(subdirs)
    else:
        paths = _walk(directory, extensions, follow_links)
        names = None
        label_list = None
        if labels is not None:
            label_list = list(np.asarray(labels.numpy() if isinstance(labels, Tensor)
                                         else labels).tolist())
            if len(label_list) != len(paths):
                raise ValueError(f"{who}: expected the lengths of `labels` to match the number "
                                 f"of files in the target directory. len(labels) is "
                                 f"{len(label_list)} while we found {len(paths)} files in "
                                 f"directory {directory}")
            names = [str(c) for c in sorted(set(label_list))]
    if verbose:
        if labels is None:
            print(f"Found {len(paths)} files.")
        else:
            print(f"Found {len(paths)} files belonging to {len(names)} classes.")
    if shuffle:
        if seed is None:
            seed = np.random.randint(1e6)
        np.random.RandomState(seed).shuffle(paths)
        if label_list is not None:
            np.random.RandomState(seed).shuffle(label_list)
    return paths, label_list, names


def _split(paths, labels, validation_split, subset, verbose):
    if not validation_split:
        return paths, labels
    n_val = int(validation_split * len(paths))
    if subset == "training":
        if verbose:
            print(f"Using {len(paths) - n_val} files for training.")
        keep = slice(0, len(paths) - n_val)
    else:
        if verbose:
            print(f"Using {n_val} files for validation.")
        keep = slice(len(paths) - n_val, len(paths))
    return paths[keep], None if labels is None else labels[keep]


def _inferred(labels):
    return isinstance(labels, str) and labels == "inferred"


def _check_labels(labels, label_mode, class_names, who):
    if not (labels is None or _inferred(labels) or isinstance(labels, (list, tuple, np.ndarray,
                                                                Tensor))):
        raise ValueError(f"{who}: `labels` argument should be a list/tuple of integer labels, "
                         f"of the same size as the number of files in the target directory. If "
                         f"you wish to infer the labels from the subdirectory names in the "
                         f"target directory, pass `labels=\"inferred\"`. If you wish to get a "
                         f"dataset that only contains files (no labels), pass `labels=None`. "
                         f"Received: labels={labels}")
    if class_names is not None and labels is None:
        raise ValueError(f"{who}: when `labels=None` (no labels), argument `class_names` cannot "
                         "be specified.")
    if class_names is not None and not _inferred(labels):
        raise ValueError(f"{who}: when argument `labels` is specified, argument `class_names` "
                         "cannot be specified (the `class_names` will be the sorted list of "
                         "labels).")
    if label_mode not in _LABEL_MODES:
        raise ValueError(f"{who}: `label_mode` argument must be one of \"int\", "
                         f"\"categorical\", \"binary\", or None. Received: "
                         f"label_mode={label_mode!r}")
    return None if labels is None else label_mode


def _label_values(labels, label_mode, num_classes, who):
    a = np.asarray(labels, np.int64)
    if label_mode == "binary":
        if num_classes != 2:
            raise ValueError(f"{who}: when passing `label_mode=\"binary\"`, there must be "
                             f"exactly 2 classes. Found {num_classes} classes")
        return a.astype(np.float32).reshape(-1, 1)
    if label_mode == "categorical":
        return np.eye(num_classes, dtype=np.float32)[a] if len(a) else \
            np.zeros((0, num_classes), np.float32)
    return a.astype(np.int32)


def _dataset(paths, labels, label_mode, num_classes, load, shuffle, buffer, seed, who):
    """The dataset of `(load(path), label)` (or `load(path)` without labels), lazily loaded."""
    path_t = convert_to_tensor(np.array(paths, dtype=object).astype(bytes).astype(object)) \
        if paths else convert_to_tensor(np.zeros((0,), object))
    if label_mode is not None and labels is not None:
        ds = Dataset.from_tensor_slices((path_t, _label_values(labels, label_mode, num_classes,
                                                               who)))
        if shuffle:
            ds = ds.shuffle(buffer, seed=seed)
        return ds.map(lambda p, y: (load(p), y))
    ds = Dataset.from_tensor_slices(path_t)
    if shuffle:
        ds = ds.shuffle(buffer, seed=seed)
    return ds.map(load)


def _from_directory(directory, labels, label_mode, class_names, batch_size, shuffle, seed,
                    validation_split, subset, follow_links, verbose, extensions, load, batcher,
                    who):
    label_mode = _check_labels(labels, label_mode, class_names, who)
    _check_split(validation_split, subset, shuffle, seed, who)
    if seed is None:
        seed = np.random.randint(1e6)
    paths, label_list, names = _index_directory(
        directory, labels, extensions, class_names=class_names, shuffle=shuffle, seed=seed,
        follow_links=follow_links, verbose=verbose, who=who)
    num_classes = len(names) if names else 0
    if label_mode == "binary" and num_classes != 2:
        raise ValueError(f"{who}: when passing `label_mode=\"binary\"`, there must be exactly 2 "
                         f"class_names. Received: class_names={names}")
    buffer = batch_size * 8 if batch_size is not None else 1024

    def build(subset_name, shuffled):
        p, y = _split(paths, label_list, validation_split, subset_name, verbose)
        if not p:
            raise ValueError(f"{who}: no {'files' if not subset_name else subset_name + ' files'}"
                             f" found in directory {directory}. Allowed extensions are: "
                             f"{extensions}")
        ds = _dataset(p, y, label_mode, num_classes, load, shuffled, buffer, seed, who)
        if batch_size is not None:
            ds = batcher(ds, batch_size)
        ds.class_names = names
        ds.file_paths = list(p)
        return ds
    if subset == "both":
        return build("training", shuffle), build("validation", False)
    return build(subset, shuffle)


def _path_of(p):
    v = p.numpy() if isinstance(p, Tensor) else p
    v = v.item() if hasattr(v, "item") else v
    return v.decode("utf-8") if isinstance(v, bytes) else v


def _resize_image(img, image_size, interpolation, crop, pad):
    h, w = image_size
    if crop:
        top_h = max(min(img.shape[0], int(float(img.shape[1] * h) / w)), 1)
        crop_w = max(min(img.shape[1], int(float(img.shape[0] * w) / h)), 1)
        top = int(float(img.shape[0] - top_h) / 2)
        left = int(float(img.shape[1] - crop_w) / 2)
        img = img[top:top + top_h, left:left + crop_w]
    elif pad:
        ih, iw = img.shape[:2]
        ph, pw = max(ih, int(float(iw * h) / w)), max(iw, int(float(ih * w) / h))
        top, left = int(float(ph - ih) / 2), int(float(pw - iw) / 2)
        canvas = np.zeros((ph, pw, img.shape[2]), img.dtype)
        canvas[top:top + ih, left:left + iw] = img
        img = canvas
    return _image_ops.resize(convert_to_tensor(np.ascontiguousarray(img)), [h, w],
                             method=interpolation)


def image_dataset_from_directory(directory, labels="inferred", label_mode="int",
                                 class_names=None, color_mode="rgb", batch_size=32,
                                 image_size=(256, 256), shuffle=True, seed=None,
                                 validation_split=None, subset=None, interpolation="bilinear",
                                 follow_links=False, crop_to_aspect_ratio=False,
                                 pad_to_aspect_ratio=False, data_format=None, verbose=True):
    """A dataset of the images (BMP, GIF, JPEG, PNG) under `directory`, as Keras 3's: float32
    batches `(batch, height, width, channels)` resized to `image_size` (bilinear by default,
    as `tg.image.resize`; `crop_to_aspect_ratio` crops the largest central window of the
    target aspect ratio first, `pad_to_aspect_ratio` pads with zeros instead), `color_mode`
    "grayscale", "rgb" or "rgba"; labels int32 (`label_mode="int"`), one-hot float32
    ("categorical"), float32 `(batch, 1)` ("binary", two classes) or none (None). With
    `subset="both"` it returns `(training, validation)`. See the module docstring.

    >>> import os, tempfile
    >>> root = tempfile.mkdtemp()
    >>> for cls in ("cats", "dogs"):
    ...     os.makedirs(os.path.join(root, cls))
    ...     tg.io.write_file(os.path.join(root, cls, "x.png"),
    ...                      tg.io.encode_png(tg.zeros([4, 6, 3], tg.uint8)))
    >>> ds = tg.keras.utils.image_dataset_from_directory(root, image_size=(2, 3), seed=1,
    ...                                                  verbose=False)
    >>> x, y = next(iter(ds))
    >>> ds.class_names, x.shape, x.dtype, sorted(y.numpy().tolist())
    (['cats', 'dogs'], (2, 2, 3, 3), tg.float32, [0, 1])
    """
    who = "image_dataset_from_directory"
    channels = {"grayscale": 1, "rgb": 3, "rgba": 4}.get(color_mode)
    if channels is None:
        raise ValueError(f'{who}: `color_mode` must be one of {{"rgb", "rgba", "grayscale"}}. '
                         f"Received: color_mode={color_mode!r}")
    if crop_to_aspect_ratio and pad_to_aspect_ratio:
        raise ValueError(f"{who}: only one of `crop_to_aspect_ratio`, `pad_to_aspect_ratio` can "
                         f"be True")
    if data_format not in (None, "channels_last"):
        raise ValueError(f"{who}: tapegpu's images are channels_last; received "
                         f"data_format={data_format!r}")
    interpolation = {"area": "area", "bilinear": "bilinear", "nearest": "nearest",
                     "bicubic": "bicubic"}.get(interpolation, interpolation)
    image_size = tuple(int(v) for v in image_size)

    def load(path):
        data = open(_path_of(path), "rb").read()
        img = image_codecs.decode_image(data, channels=channels,
                                        expand_animations=False).numpy()
        return _resize_image(img, image_size, interpolation, crop_to_aspect_ratio,
                             pad_to_aspect_ratio)
    return _from_directory(directory, labels, label_mode, class_names, batch_size, shuffle,
                           seed, validation_split, subset, follow_links, verbose,
                           IMAGE_EXTENSIONS, load, lambda ds, n: ds.batch(n), who)


def text_dataset_from_directory(directory, labels="inferred", label_mode="int",
                                class_names=None, batch_size=32, max_length=None, shuffle=True,
                                seed=None, validation_split=None, subset=None,
                                follow_links=False, verbose=True):
    """A dataset of the `.txt` files under `directory` as scalar strings (their bytes, cut to
    `max_length` bytes when given), labelled as in `image_dataset_from_directory` (Keras 3's
    `text_dataset_from_directory`; see the module docstring)."""
    who = "text_dataset_from_directory"

    def load(path):
        with open(_path_of(path), "rb") as f:
            data = f.read()
        return convert_to_tensor(data if max_length is None else data[:max_length])
    return _from_directory(directory, labels, label_mode, class_names, batch_size, shuffle,
                           seed, validation_split, subset, follow_links, verbose, (".txt",),
                           load, lambda ds, n: ds.batch(n), who)


def audio_dataset_from_directory(directory, labels="inferred", label_mode="int",
                                 class_names=None, batch_size=32, sampling_rate=None,
                                 output_sequence_length=None, ragged=False, shuffle=True,
                                 seed=None, validation_split=None, subset=None,
                                 follow_links=False, verbose=True):
    """A dataset of the 16-bit PCM `.wav` files under `directory` as float32 audio
    `(samples, channels)` (`tg.audio.decode_wav`), cut or zero-padded to
    `output_sequence_length` when given, else zero-padded to the longest of each batch;
    labelled as in `image_dataset_from_directory` (Keras 3's `audio_dataset_from_directory`).
    `sampling_rate` (resampling) and `ragged=True` are not supported and raise."""
    who = "audio_dataset_from_directory"
    if sampling_rate is not None:
        raise ValueError(f"{who}: sampling_rate={sampling_rate!r}: resampling is not supported "
                         "by tapegpu (Keras needs tensorflow-io for it); pass "
                         "sampling_rate=None and resample the files beforehand")
    if ragged:
        raise ValueError(f"{who}: ragged=True is not supported by tapegpu; use "
                         "output_sequence_length or the default padding to the longest file")
    if output_sequence_length is not None and output_sequence_length <= 0:
        raise ValueError(f"{who}: `output_sequence_length` must be a positive integer, got "
                         f"{output_sequence_length}")

    def load(path):
        with open(_path_of(path), "rb") as f:
            data = f.read()
        n = -1 if output_sequence_length is None else output_sequence_length
        return image_codecs.decode_wav(data, desired_samples=n)[0]

    def batcher(ds, n):
        return ds.padded_batch(n) if output_sequence_length is None else ds.batch(n)
    return _from_directory(directory, labels, label_mode, class_names, batch_size, shuffle,
                           seed, validation_split, subset, follow_links, verbose, (".wav",),
                           load, batcher, who)
