"""`Dataset.cache(filename)`'s file: a checksum per record (a damaged file raises DataLossError
naming the file and the element, and no damaged value is served), the element spec in the
header (a cache written by a pipeline of other dtypes, shapes or components raises
InvalidArgumentError naming the file, as tf.data's iterator does on such elements), and no
allocation sized by what a damaged file claims."""
import json
import struct
import tracemalloc
import zlib

import numpy as np
import pytest

import tapegpu as tg
from tapegpu.data import cache_file

Dataset = tg.data.Dataset


def _pairs(n=4):
    return Dataset.range(n).map(lambda x: (x, tg.cast(x, tg.float32) * 0.5 + 0.25))


def _values(ds):
    return [(int(a), float(b)) for a, b in ds]


def _served_until_error(ds):
    """The values served before the iteration raised, and the error."""
    served = []
    try:
        for a, b in ds:
            served.append((int(a), float(b)))
    except Exception as e:  # noqa: BLE001 - the test looks at which one
        return served, e
    return served, None


def test_every_flipped_bit_raises_data_loss_and_serves_nothing_damaged(tmp_path):
    prefix = str(tmp_path / "c")
    want = _values(_pairs().cache(prefix))
    path = cache_file.path_of(prefix)
    data = open(path, "rb").read()
    assert _values(_pairs().cache(prefix)) == want  # read from the file
    for at in range(len(data)):
        damaged = bytearray(data)
        damaged[at] ^= 1 << (at % 8)
        open(path, "wb").write(bytes(damaged))
        served, error = _served_until_error(_pairs().cache(prefix))
        assert isinstance(error, tg.errors.DataLossError), (at, served, error)
        assert repr(path) in str(error) and served == want[:len(served)], (at, error)


def _records(data):
    """(tag, start, end) of each record after the magic, the end marker last."""
    out, at = [], len(cache_file.MAGIC)
    while data[at:at + 1] != b"Z":
        length, _ = struct.unpack_from("<QI", data, at + 1)
        out.append((data[at:at + 1], at, at + 13 + length))
        at += 13 + length
    return out + [(b"Z", at, len(data))]


def test_a_damaged_element_names_the_file_and_the_element(tmp_path):
    prefix = str(tmp_path / "c")
    want = _values(_pairs().cache(prefix))
    path = cache_file.path_of(prefix)
    original = open(path, "rb").read()
    data = bytearray(original)
    records = _records(original)
    assert [r[0] for r in records] == [b"H"] + [b"E"] * 4 + [b"Z"]
    _, start, end = records[1 + 2]  # element 2's record
    data[end - 1] ^= 0x10  # the last byte of its float32 value
    open(path, "wb").write(bytes(data))
    served, error = _served_until_error(_pairs().cache(prefix))
    assert served == want[:2]
    assert isinstance(error, tg.errors.DataLossError)
    assert f"the cache file {path!r} is damaged: checksum does not match for the record of " \
           "element 2" in str(error)
    # a truncated file: the last complete element is served, the cut one named
    open(path, "wb").write(original[:records[4][1] + 20])
    served, error = _served_until_error(_pairs().cache(prefix))
    assert served == want[:3] and isinstance(error, tg.errors.DataLossError)
    assert "the record of element 3 claims" in str(error) and repr(path) in str(error)


def test_a_cache_of_other_shapes_or_components_is_refused_naming_the_file(tmp_path):
    prefix = str(tmp_path / "c")
    path = cache_file.path_of(prefix)
    list(Dataset.range(3).map(lambda x: tg.fill([3], x)).cache(prefix))
    four = Dataset.range(3).map(lambda x: tg.fill([4], x))
    with pytest.raises(tg.errors.InvalidArgumentError,
                       match=f"the cache file {path!r} was written by a pipeline whose elements "
                             r"differ from this dataset's: incompatible shapes at component 0: "
                             r"expected \[4\] but the file has \[3\]"):
        list(four.cache(prefix))
    with pytest.raises(tg.errors.InvalidArgumentError,
                       match="number of components does not match: expected 2 but the file "
                             "has 1"):
        list(Dataset.range(3).map(lambda x: (tg.fill([3], x), x)).cache(prefix))
    # unknown dimensions match anything; the elements read are then checked one by one
    assert [list(v.numpy()) for v in Dataset.range(3).map(
        lambda x: tg.fill([3], x)).batch(1).unbatch().cache(prefix)] == \
        [[0, 0, 0], [1, 1, 1], [2, 2, 2]]


def test_elements_of_a_partly_known_spec_are_checked_one_by_one(tmp_path):
    prefix = str(tmp_path / "r")
    path = cache_file.path_of(prefix)
    ragged = Dataset.range(3).map(lambda x: tg.range(x + 1)).padded_batch(1).unbatch()
    assert ragged.element_spec.shape == (None,)
    list(ragged.cache(prefix))  # elements of shapes [1], [2], [3] under the spec [None]
    twos = Dataset.range(3).map(lambda x: tg.fill([2], tg.cast(x, tg.int32)))
    served = []
    with pytest.raises(tg.errors.InvalidArgumentError,
                       match=f"element 0 of the cache file {path!r} does not match the "
                             r"dataset: component 0 is int32 of shape \[1\], expected int32 of "
                             r"shape \[2\]"):
        for x in twos.cache(prefix):
            served.append(x)
    assert served == []


def _crafted(path, leaves, payloads):
    """A cache file with correct checksums: what a damaged length or header could claim."""
    def record(tag, payload):
        return tag + struct.pack("<QI", len(payload), zlib.crc32(payload)) + payload
    with open(path, "wb") as f:
        f.write(cache_file.MAGIC + record(b"H", json.dumps({"leaves": leaves}).encode()))
        for p in payloads:
            f.write(record(b"E", p))
        f.write(b"Z" + struct.pack("<Q", len(payloads)))


def _npy_header(shape, dtype="<f8"):
    d = repr({"descr": dtype, "fortran_order": False, "shape": shape}).encode()
    d += b" " * (-(len(d) + 11) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(d)) + d


def test_no_allocation_is_sized_by_what_the_file_claims(tmp_path):
    prefix = str(tmp_path / "c")
    path = cache_file.path_of(prefix)
    ds = Dataset.range(2).map(lambda x: tg.cast(tg.range(x + 1), tg.float64)).padded_batch(
        1).unbatch()
    assert ds.element_spec.shape == (None,)
    _crafted(path, [["float64", [None]]], [_npy_header((10 ** 12,)) + b"\0" * 64])
    tracemalloc.start()
    try:
        with pytest.raises(tg.errors.DataLossError,
                           match="component 0 of element 0: the header claims 8000000000000 "
                                 "bytes"):
            list(ds.cache(prefix))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2 ** 20
    # a record length beyond the file's end is refused before it is read
    data = bytearray(open(path, "rb").read())
    start = _records(bytes(data))[1][1]
    data[start + 1:start + 9] = struct.pack("<Q", 2 ** 60)
    open(path, "wb").write(bytes(data))
    with pytest.raises(tg.errors.DataLossError, match="the record of element 0 claims "
                                                      f"{2 ** 60} bytes"):
        list(ds.cache(prefix))
    # an object array is never unpickled, even under a correct checksum
    _crafted(path, [["float64", [None]]], [_npy_header((1,), "|O") + b"\0" * 8])
    with pytest.raises(tg.errors.DataLossError, match="is not an array .*only bool, integer"):
        list(ds.cache(prefix))


def test_a_cache_of_another_format_version_is_refused(tmp_path):
    prefix = str(tmp_path / "c")
    path = cache_file.path_of(prefix)
    open(path, "wb").write(b"TGDATA-CACHE 1\n" + b'{"leaves": ["int64"]}\n')
    with pytest.raises(tg.errors.DataLossError, match="another version of tapegpu's cache "
                                                      "format"):
        list(Dataset.range(2).cache(prefix))
    # the header's spec and each element's arrays are what the dataset gets
    path2 = str(tmp_path / "d")
    got = list(Dataset.range(3).map(lambda x: tg.fill([2, 2], tg.cast(x, tg.float16)))
               .cache(path2))
    again = list(Dataset.range(3).map(lambda x: tg.fill([2, 2], tg.cast(x, tg.float16)))
                 .cache(path2))
    assert all(a.dtype == tg.float16 and a.shape == (2, 2) and
               np.array_equal(a.numpy(), b.numpy()) for a, b in zip(got, again))
