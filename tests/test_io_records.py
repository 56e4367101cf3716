"""TFRecord files: CRC-32C against published check values, the record framing byte by byte,
compression, corruption detection, tf_record_iterator."""
import gzip
import os
import struct
import zlib

import pytest

import tapegpu as tg
from tapegpu.io import records


def _read(path, mode="rb"):
    with open(path, mode) as f:
        return f.read()


def _write(path, data):
    with open(path, "wb" if isinstance(data, bytes) else "w") as f:
        f.write(data)


@pytest.mark.parametrize("data,crc", [
    (b"123456789", 0xE3069283),             # the CRC catalogue's check value of CRC-32C
    (b"\x00" * 32, 0x8A9136AA),             # RFC 3720 (iSCSI) B.4 test vectors
    (b"\xff" * 32, 0x62A8AB43),
    (bytes(range(32)), 0x46DD794E),
    (bytes(range(31, -1, -1)), 0x113FDB5C),
    (bytes([0x01, 0xC0] + [0] * 14 + [0x14] + [0] * 5 + [0x04] + [0] * 4 + [0x14] + [0] * 3 +
           [0x18, 0x28] + [0] * 7 + [0x02] + [0] * 7), 0xD9963A56),  # RFC 3720: a SCSI read
    (b"The quick brown fox jumps over the lazy dog", 0x22620404),
    (b"", 0x0),
])
def test_crc32c_check_values(data, crc):
    assert records.crc32c(data) == crc


@pytest.mark.parametrize("size", [1, 7, 16_384, 16_385, 100_003])
def test_crc32c_of_long_data_matches_the_bytewise_loop(size):
    data = os.urandom(size)  # from 16 KiB checksummed in numpy lanes
    assert records._crc_lanes(data, 0xFFFFFFFF) == records._crc_raw(data, 0xFFFFFFFF)


def _masked(c):
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def test_record_framing(tmp_path):
    path = str(tmp_path / "a.tfrecord")
    with tg.io.TFRecordWriter(path) as w:
        w.write(b"123456789")
        w.write(tg.constant(b""))
    raw = _read(path)
    length = struct.pack("<Q", 9)
    first = length + struct.pack("<I", _masked(records.crc32c(length))) + b"123456789" + \
        struct.pack("<I", _masked(0xE3069283))
    empty = struct.pack("<Q", 0)
    second = empty + struct.pack("<I", _masked(records.crc32c(empty))) + \
        struct.pack("<I", _masked(0))
    assert raw == first + second
    assert list(tg.compat.v1.io.tf_record_iterator(path)) == [b"123456789", b""]


@pytest.mark.parametrize("kind,decompress", [("GZIP", gzip.decompress),
                                             ("ZLIB", zlib.decompress)])
def test_compressed_files(tmp_path, kind, decompress):
    plain, packed = str(tmp_path / "p"), str(tmp_path / "c")
    recs = [b"x" * n for n in (0, 1, 1000)]
    for path, options in ((plain, None), (packed, tg.io.TFRecordOptions(kind))):
        with tg.io.TFRecordWriter(path, options) as w:
            for r in recs:
                w.write(r)
    assert decompress(_read(packed)) == _read(plain)
    got = [t.numpy() for t in tg.data.TFRecordDataset(packed, compression_type=kind)]
    assert got == recs


def test_corruption_raises_data_loss(tmp_path):
    path = str(tmp_path / "r")
    with tg.io.TFRecordWriter(path) as w:
        w.write(b"hello world")
    raw = bytearray(_read(path))
    bad = raw[:]
    bad[14] ^= 1  # a data byte
    _write(path, bytes(bad))
    with pytest.raises(tg.errors.DataLossError, match="checksum"):
        list(tg.data.TFRecordDataset(path))
    bad = raw[:]
    bad[0] ^= 1  # the length
    _write(path, bytes(bad))
    with pytest.raises(tg.errors.DataLossError):
        list(tg.data.TFRecordDataset(path))
    _write(path, bytes(raw[:-2]))  # truncated
    with pytest.raises(tg.errors.DataLossError, match="truncated"):
        list(tg.data.TFRecordDataset(path))


def test_options_and_errors(tmp_path):
    assert tg.io.TFRecordOptions.get_compression_type_string(None) == ""
    assert tg.io.TFRecordOptions(tg.constant("GZIP")).compression_type == "GZIP"
    assert tg.io.TFRecordOptions.get_compression_type_string(
        tg.compat.v1.io.TFRecordCompressionType.GZIP) == "GZIP"
    with pytest.raises(ValueError, match="compression_type"):
        tg.io.TFRecordOptions("LZ4")
    with pytest.raises(tg.errors.NotFoundError):
        tg.io.TFRecordWriter(str(tmp_path / "no" / "dir" / "f"))
    with pytest.raises(tg.errors.NotFoundError):
        list(tg.data.TFRecordDataset(str(tmp_path / "missing")))
    w = tg.io.TFRecordWriter(str(tmp_path / "f"))
    with pytest.raises(TypeError, match="bytes"):
        w.write(3)
    w.close()
    with pytest.raises(ValueError, match="closed"):
        w.write(b"x")


def test_flush_makes_gzip_records_readable_before_close(tmp_path):
    path = str(tmp_path / "g")
    w = tg.io.TFRecordWriter(path, "GZIP")
    w.write(b"abc")
    w.flush()
    d = zlib.decompressobj(16 + 15)
    assert d.decompress(_read(path)).endswith(b"abc" + struct.pack(
        "<I", _masked(records.crc32c(b"abc"))))
    w.close()


def test_iter_lines_across_chunks():
    import io
    data = b"ab\r\ncdef\n\nghi"
    for chunk in (1, 2, 3, 100):
        assert list(records.iter_lines(io.BytesIO(data), chunk)) == [b"ab", b"cdef", b"", b"ghi"]


def test_zlib_stream_reads_many_small_records(tmp_path):
    path = str(tmp_path / "z")
    recs = [bytes([i % 256]) * (i % 7) for i in range(3000)]
    with tg.io.TFRecordWriter(path, "ZLIB") as w:
        for r in recs:
            w.write(r)
    assert list(records.read_records(path, "ZLIB")) == recs
