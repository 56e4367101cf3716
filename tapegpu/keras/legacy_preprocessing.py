"""Keras' image, text and sequence helpers that real programs still call:
`keras.utils.img_to_array` / `array_to_img` / `load_img` / `save_img`, `keras.utils.get_file`,
and Keras 2's `keras.preprocessing.text` (`Tokenizer`, `text_to_word_sequence`, `one_hot`,
`hashing_trick`) and `keras.preprocessing.sequence` (`pad_sequences`, `skipgrams`,
`make_sampling_table`), with Keras' signatures and results. Images are numpy arrays (H, W, C);
`load_img`, `array_to_img` and `save_img` need Pillow, as in Keras (ImportError without it).

>>> tok = tg.keras.preprocessing.text.Tokenizer()
>>> tok.fit_on_texts(["the cat sat", "the dog"])
>>> tok.word_index["the"], tok.texts_to_sequences(["the dog sat"])
(1, [[1, 4, 3]])
"""
import collections
import json
import os

import numpy as np

from ..core.floatx import floatx

# -- images -------------------------------------------------------------------------------------


def _pil():
    try:
        from PIL import Image
    except ImportError:
        raise ImportError("Could not import PIL.Image. The use of `load_img`, `array_to_img` "
                          "and `save_img` requires PIL (pip install pillow).") from None
    return Image


def img_to_array(img, data_format=None, dtype=None):
    """An image (a PIL image or an array (H, W) / (H, W, C)) as a float array (H, W, C)
    of `dtype` (floatx by default); 'channels_first' gives (C, H, W).

    >>> tg.keras.utils.img_to_array(np.zeros((2, 3), np.uint8)).shape
    (2, 3, 1)
    """
    data_format = data_format or "channels_last"
    if data_format not in ("channels_first", "channels_last"):
        raise ValueError(f"img_to_array: unknown data_format: {data_format!r}")
    x = np.asarray(img, dtype=dtype or floatx())
    if x.ndim == 2:
        x = x.reshape(x.shape + (1,))
    elif x.ndim != 3:
        raise ValueError(f"img_to_array: unsupported image shape: {x.shape} (expected (H, W) "
                         f"or (H, W, C))")
    return np.transpose(x, (2, 0, 1)) if data_format == "channels_first" else x


def array_to_img(x, data_format=None, scale=True, dtype=None):
    """A PIL image of an array (H, W, C) with 1, 3 or 4 channels; `scale` maps the values'
    range onto 0..255 first (as Keras). Needs Pillow."""
    image = _pil()
    x = np.asarray(x, dtype=dtype or floatx())
    if x.ndim != 3:
        raise ValueError(f"array_to_img: expected an image array of rank 3, got shape "
                         f"{x.shape}")
    if (data_format or "channels_last") == "channels_first":
        x = x.transpose(1, 2, 0)
    if scale:
        x = x - np.min(x)
        peak = np.max(x)
        if peak != 0:
            x = x / peak
        x = x * 255
    channels = x.shape[2]
    if channels == 4:
        return image.fromarray(x.astype("uint8"), "RGBA")
    if channels == 3:
        return image.fromarray(x.astype("uint8"), "RGB")
    if channels == 1:
        return image.fromarray(x[:, :, 0].astype("uint8"), "L")
    raise ValueError(f"array_to_img: unsupported channel number: {channels}")


def load_img(path, color_mode="rgb", target_size=None, interpolation="nearest",
             keep_aspect_ratio=False):
    """The image file at `path` as a PIL image ('grayscale', 'rgb' or 'rgba'), resized to
    `target_size` (height, width) if given. Needs Pillow."""
    image = _pil()
    if color_mode not in ("grayscale", "rgb", "rgba"):
        raise ValueError(f"load_img: color_mode must be 'grayscale', 'rgb' or 'rgba', got "
                         f"{color_mode!r}")
    with open(os.fspath(path), "rb") as f:
        img = image.open(f)
        img.load()
    img = img.convert({"grayscale": "L", "rgb": "RGB", "rgba": "RGBA"}[color_mode])
    if target_size is not None:
        size = (target_size[1], target_size[0])
        if img.size != size:
            img = img.resize(size, getattr(image, interpolation.upper(), image.NEAREST))
    return img


def save_img(path, x, data_format=None, file_format=None, scale=True, **kwargs):
    """Writes the array `x` (H, W, C) as an image file (Pillow)."""
    img = array_to_img(x, data_format=data_format, scale=scale)
    if img.mode == "RGBA" and (file_format == "jpg" or str(path).endswith((".jpg", ".jpeg"))):
        img = img.convert("RGB")
    img.save(path, format=file_format, **kwargs)


# -- get_file -----------------------------------------------------------------------------------


def _hash_file(path, algorithm="sha256"):
    import hashlib
    h = hashlib.md5() if algorithm == "md5" else hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _extract_into(path, datadir, archive_format):
    """Extracts the archive at `path` into `datadir` (as Keras 2): first into a temporary
    folder beside, then each entry moved into place, so a failed extraction leaves nothing."""
    import shutil
    import tempfile
    tmpdir = tempfile.mkdtemp(dir=datadir, prefix=".extract.")
    try:
        if not _extract(path, tmpdir, archive_format):
            return False
        for entry in os.listdir(tmpdir):
            dest = os.path.join(datadir, entry)
            if os.path.isdir(dest) and not os.path.islink(dest):
                shutil.rmtree(dest)
            elif os.path.exists(dest):
                os.remove(dest)
            os.replace(os.path.join(tmpdir, entry), dest)
        return True
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)


def _extract(path, into, archive_format):
    import tarfile
    import zipfile
    formats = {"auto": ("tar", "zip"), "tar": ("tar",), "zip": ("zip",), None: ()}
    for kind in formats.get(archive_format, (archive_format,) if archive_format else ()):
        if kind == "tar" and tarfile.is_tarfile(path):
            with tarfile.open(path) as t:
                t.extractall(into, filter="data")
            return True
        if kind == "zip" and zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as z:
                z.extractall(into)
            return True
    return False


def get_file(fname=None, origin=None, untar=False, md5_hash=None, file_hash=None,
             cache_subdir="datasets", hash_algorithm="auto", extract=False,
             archive_format="auto", cache_dir=None, force_download=False):
    """Keras' `get_file`: the local path of `origin`'s file, downloaded into
    `cache_dir/cache_subdir` (default `~/.keras/datasets`) unless already there (and matching
    `file_hash`, sha256 or md5, when given). `extract=True` extracts a tar or zip archive into
    the same folder and returns the archive's path; Keras 2's `untar=True` downloads
    `fname + '.tar.gz'`, extracts it and returns `cache_dir/cache_subdir/fname`. The download
    is written to a temporary file and moved into place, so an interrupted one leaves nothing.

    >>> import tempfile, pathlib
    >>> d = tempfile.mkdtemp(); src = pathlib.Path(d, "a.txt"); _ = src.write_text("hi")
    >>> p = tg.keras.utils.get_file("a.txt", src.as_uri(), cache_dir=d, cache_subdir="c")
    >>> open(p).read()
    'hi'
    """
    import shutil  # here, not at import: `import tapegpu` stays fast
    import tempfile
    import urllib.parse
    import urllib.request
    if origin is None:
        raise ValueError('get_file: please specify the "origin" argument (URL of the file to '
                         'download).')
    if not fname:
        fname = os.path.basename(urllib.parse.urlparse(origin).path)
        if not fname:
            raise ValueError(f"get_file: can't parse the file name from the origin provided: "
                             f"{origin!r}. Please specify the `fname` argument.")
    fname = os.fspath(fname)
    cache_dir = os.path.expanduser(cache_dir or os.environ.get("KERAS_HOME", "~/.keras"))
    datadir = os.path.join(cache_dir, cache_subdir)
    try:
        os.makedirs(datadir, exist_ok=True)
    except OSError:
        datadir = os.path.join(tempfile.gettempdir(), ".keras", cache_subdir)
        os.makedirs(datadir, exist_ok=True)
    if untar:
        extract = True
        archive_format = "tar"
        if fname.endswith(".tar.gz"):
            fname = fname[:-len(".tar.gz")]
        fpath = os.path.join(datadir, fname + ".tar.gz")
    else:
        fpath = os.path.join(datadir, fname)
    if md5_hash is not None and file_hash is None:
        file_hash, hash_algorithm = md5_hash, "md5"
    algorithm = hash_algorithm if hash_algorithm in ("md5", "sha256") else \
        ("sha256" if file_hash is not None and len(file_hash) == 64 else "md5")
    download = force_download or not os.path.exists(fpath)
    if not download and file_hash is not None and _hash_file(fpath, algorithm) != file_hash:
        download = True  # an outdated or corrupt copy
    if download:
        fd, tmp = tempfile.mkstemp(dir=datadir, prefix=".get_file.")
        os.close(fd)
        try:
            with urllib.request.urlopen(origin) as r, open(tmp, "wb") as f:
                shutil.copyfileobj(r, f)
            if file_hash is not None and _hash_file(tmp, algorithm) != file_hash:
                raise ValueError(f"get_file: the file downloaded from {origin!r} does not "
                                 f"match the expected {algorithm} hash {file_hash!r}")
            os.replace(tmp, fpath)
        except Exception as e:
            if os.path.exists(tmp):
                os.remove(tmp)
            if isinstance(e, ValueError):
                raise
            raise Exception(f"URL fetch failure on {origin}: {e}") from e
    if untar:
        target = os.path.join(datadir, fname)
        if download or not os.path.exists(target):
            _extract_into(fpath, datadir, "tar")
        return target
    if extract:
        _extract_into(fpath, datadir, archive_format)
    return fpath


# -- keras.preprocessing.text (Keras 2) ----------------------------------------------------------

_FILTERS = '!"#$%&()*+,-./:;<=>?@[\\]^_`{|}~\t\n'


def text_to_word_sequence(input_text, filters=_FILTERS, lower=True, split=" "):
    """The words of `input_text`: lowercased, `filters` characters replaced by `split`.

    >>> tg.keras.preprocessing.text.text_to_word_sequence("Hello, World!")
    ['hello', 'world']
    """
    if lower:
        input_text = input_text.lower()
    input_text = input_text.translate(str.maketrans({c: split for c in filters}))
    return [w for w in input_text.split(split) if w]


def hashing_trick(text, n, hash_function=None, filters=_FILTERS, lower=True, split=" ",
                  analyzer=None):
    """Each word of `text` as an index in [1, n) by `hash_function` (default: Python's hash;
    'md5' is stable across runs).

    >>> h = tg.keras.preprocessing.text.hashing_trick("a b a", 10, "md5")
    >>> h[0] == h[2], all(1 <= i < 10 for i in h)
    (True, True)
    """
    if hash_function is None:
        hash_function = hash
    elif hash_function == "md5":
        import hashlib

        def hash_function(w):
            return int(hashlib.md5(w.encode()).hexdigest(), 16)
    words = analyzer(text) if analyzer else text_to_word_sequence(text, filters, lower, split)
    return [(hash_function(w) % (n - 1) + 1) for w in words]


def one_hot(input_text, n, filters=_FILTERS, lower=True, split=" ", analyzer=None):
    """`hashing_trick(input_text, n)` with Python's hash (Keras 2's `one_hot`: word indices).

    >>> len(tg.keras.preprocessing.text.one_hot("a b c", 5))
    3
    """
    return hashing_trick(input_text, n, hash, filters, lower, split, analyzer)


class Tokenizer:
    """Keras 2's text tokenizer: `fit_on_texts` builds `word_index` (1 = most frequent; ties in
    first-seen order) and `word_counts`; `texts_to_sequences` maps texts to index lists (only
    the `num_words - 1` most frequent words when `num_words` is set; unknown words dropped, or
    `oov_token`'s index); `texts_to_matrix` gives 'binary', 'count', 'tfidf' or 'freq' rows;
    `sequences_to_texts` goes back; `to_json` / `tokenizer_from_json` save and restore it.

    >>> tok = tg.keras.preprocessing.text.Tokenizer(num_words=3, oov_token="<unk>")
    >>> tok.fit_on_texts(["a a b", "c"])
    >>> tok.texts_to_sequences(["a b c d"])
    [[2, 1, 1, 1]]
    """

    def __init__(self, num_words=None, filters=_FILTERS, lower=True, split=" ",
                 char_level=False, oov_token=None, analyzer=None, document_count=0, **kwargs):
        if kwargs:
            raise TypeError(f"Tokenizer: unrecognized keyword arguments: {sorted(kwargs)}")
        self.num_words, self.filters, self.lower, self.split = num_words, filters, lower, split
        self.char_level, self.oov_token, self.analyzer = char_level, oov_token, analyzer
        self.document_count = document_count
        self.word_counts = collections.OrderedDict()
        self.word_docs = collections.defaultdict(int)
        self.index_docs = collections.defaultdict(int)
        self.word_index, self.index_word = {}, {}

    def _words(self, text):
        if self.char_level or isinstance(text, list):
            return [t.lower() for t in text] if self.lower and not isinstance(text, list) \
                else list(text)
        if self.analyzer is not None:
            return self.analyzer(text)
        return text_to_word_sequence(text, self.filters, self.lower, self.split)

    def fit_on_texts(self, texts):
        for text in texts:
            self.document_count += 1
            seq = self._words(text)
            for w in seq:
                self.word_counts[w] = self.word_counts.get(w, 0) + 1
            for w in set(seq):
                self.word_docs[w] += 1
        wcounts = sorted(self.word_counts.items(), key=lambda kv: kv[1], reverse=True)
        vocab = ([] if self.oov_token is None else [self.oov_token]) + [w for w, _ in wcounts]
        self.word_index = dict(zip(vocab, range(1, len(vocab) + 1)))
        self.index_word = {i: w for w, i in self.word_index.items()}
        self.index_docs = collections.defaultdict(int)
        for w, c in self.word_docs.items():
            self.index_docs[self.word_index[w]] = c

    def fit_on_sequences(self, sequences):
        self.document_count += len(sequences)
        for seq in sequences:
            for i in set(seq):
                self.index_docs[i] += 1

    def texts_to_sequences(self, texts):
        return list(self.texts_to_sequences_generator(texts))

    def texts_to_sequences_generator(self, texts):
        oov = self.word_index.get(self.oov_token) if self.oov_token is not None else None
        for text in texts:
            out = []
            for w in self._words(text):
                i = self.word_index.get(w)
                if i is not None and (not self.num_words or i < self.num_words):
                    out.append(i)
                elif oov is not None:
                    out.append(oov)
            yield out

    def sequences_to_texts(self, sequences):
        return list(self.sequences_to_texts_generator(sequences))

    def sequences_to_texts_generator(self, sequences):
        oov = self.word_index.get(self.oov_token) if self.oov_token is not None else None
        for seq in sequences:
            words = []
            for i in seq:
                w = self.index_word.get(i)
                if w is not None and (not self.num_words or i < self.num_words):
                    words.append(w)
                elif oov is not None:
                    words.append(self.index_word[oov])
            yield " ".join(words)

    def texts_to_matrix(self, texts, mode="binary"):
        return self.sequences_to_matrix(self.texts_to_sequences(texts), mode=mode)

    def sequences_to_matrix(self, sequences, mode="binary"):
        if mode not in ("binary", "count", "tfidf", "freq"):
            raise ValueError(f"Tokenizer.sequences_to_matrix: unknown vectorization mode: "
                             f"{mode!r} (valid: 'binary', 'count', 'tfidf', 'freq')")
        n = self.num_words or (len(self.word_index) + 1)
        if not self.num_words and not self.word_index:
            raise ValueError("Tokenizer: specify a dimension (num_words argument), or fit on "
                             "some text data first.")
        if mode == "tfidf" and not self.document_count:
            raise ValueError("Tokenizer: fit the Tokenizer on some data before using tfidf mode.")
        x = np.zeros((len(sequences), n))
        for row, seq in enumerate(sequences):
            if not seq:
                continue
            counts = collections.Counter(i for i in seq if i < n)
            for j, c in counts.items():
                if mode == "count":
                    x[row, j] = c
                elif mode == "freq":
                    x[row, j] = c / len(seq)
                elif mode == "binary":
                    x[row, j] = 1
                else:
                    tf = 1 + np.log(c)
                    idf = np.log(1 + self.document_count / (1 + self.index_docs.get(j, 0)))
                    x[row, j] = tf * idf
        return x

    def get_config(self):
        return {"num_words": self.num_words, "filters": self.filters, "lower": self.lower,
                "split": self.split, "char_level": self.char_level,
                "oov_token": self.oov_token, "document_count": self.document_count,
                "word_counts": json.dumps(self.word_counts),
                "word_docs": json.dumps(self.word_docs),
                "index_docs": json.dumps(self.index_docs),
                "index_word": json.dumps(self.index_word),
                "word_index": json.dumps(self.word_index)}

    def to_json(self, **kwargs):
        return json.dumps({"class_name": self.__class__.__name__,
                           "config": self.get_config()}, **kwargs)


def tokenizer_from_json(json_string):
    """The Tokenizer `Tokenizer.to_json()` described.

    >>> t = tg.keras.preprocessing.text.Tokenizer(); t.fit_on_texts(["x y"])
    >>> tg.keras.preprocessing.text.tokenizer_from_json(t.to_json()).word_index
    {'x': 1, 'y': 2}
    """
    config = dict(json.loads(json_string)["config"])
    parts = {k: json.loads(config.pop(k)) for k in ("word_counts", "word_docs", "index_docs",
                                                      "word_index", "index_word")}
    tok = Tokenizer(**config)
    tok.word_counts = collections.OrderedDict(parts["word_counts"])
    tok.word_docs = collections.defaultdict(int, parts["word_docs"])
    tok.index_docs = collections.defaultdict(int, {int(k): v for k, v in
                                                   parts["index_docs"].items()})
    tok.word_index = parts["word_index"]
    tok.index_word = {int(k): v for k, v in parts["index_word"].items()}
    return tok


# -- keras.preprocessing.sequence (Keras 2) ------------------------------------------------------


def make_sampling_table(size, sampling_factor=1e-5):
    """Keras 2's word-rank sampling probabilities (Zipf's law; for `skipgrams`).

    >>> tg.keras.preprocessing.sequence.make_sampling_table(3).shape
    (3,)
    """
    gamma = 0.577
    rank = np.arange(size)
    rank[0] = 1
    inv_fq = rank * (np.log(rank) + gamma) + 0.5 - 1.0 / (12.0 * rank)
    f = sampling_factor * inv_fq
    return np.minimum(1.0, f / np.sqrt(f))


def skipgrams(sequence, vocabulary_size, window_size=4, negative_samples=1.0, shuffle=True,
              categorical=False, sampling_table=None, seed=None):
    """Keras 2's skip-gram pairs of `sequence` (word indices, 0 skipped): ([word, context]
    couples, labels) with 1 for a context within `window_size`, 0 for random negatives.

    >>> couples, labels = tg.keras.preprocessing.sequence.skipgrams([1, 2], 3, window_size=1,
    ...                                                            negative_samples=0)
    >>> sorted(couples), labels
    ([[1, 2], [2, 1]], [1, 1])
    """
    import random
    couples, labels = [], []
    for i, wi in enumerate(sequence):
        if not wi:
            continue
        if sampling_table is not None and sampling_table[wi] < random.random():
            continue
        for j in range(max(0, i - window_size), min(len(sequence), i + window_size + 1)):
            if j != i and sequence[j]:
                couples.append([wi, sequence[j]])
                labels.append([0, 1] if categorical else 1)
    if negative_samples > 0:
        n = int(len(labels) * negative_samples)
        words = [c[0] for c in couples]
        random.shuffle(words)
        couples += [[words[i % len(words)], random.randint(1, vocabulary_size - 1)]
                    for i in range(n)]
        labels += [[1, 0] if categorical else 0] * n
    if shuffle:
        if seed is None:
            seed = random.randint(0, 10_000_000)
        random.seed(seed)
        random.shuffle(couples)
        random.seed(seed)
        random.shuffle(labels)
    return couples, labels
