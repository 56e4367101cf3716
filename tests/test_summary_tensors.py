"""tg.summary.histogram/image/audio/text: the tensor summaries TF 2 writes (TensorProto with
the TensorBoard plugin's metadata), read back field by field."""
import glob
import io
import os
import struct
import wave
import zlib

import numpy as np
import pytest

import tapegpu as tg
from tapegpu.testing.event_files import events, fields


def _values(logdir):
    """[(step, tag, plugin, data_class, dtype, shape, payload)] of the tensor summaries."""
    (path,) = glob.glob(os.path.join(logdir, "events.out.tfevents.*"))
    out = []
    for e in events(path)[1:]:
        value = fields(fields(e[5][0])[1][0])
        meta = fields(value[9][0])
        plugin = fields(meta[1][0])
        tensor = fields(value[8][0])
        shape = tuple(fields(d)[1][0] if 1 in fields(d) else 0
                      for d in fields(tensor[2][0]).get(2, []))
        payload = tensor.get(8) if tensor[1][0] == 7 else \
            np.frombuffer(tensor[4][0], "<f8").reshape(shape)
        out.append((e[2][0], value[1][0].decode(), plugin[1][0].decode(), meta[4][0],
                    tensor[1][0], shape, payload, plugin.get(2, [b""])[0]))
    return out


def test_histogram_buckets_as_tensorboard(tmp_path):
    data = np.array([0.0, 1.0, 1.5, 2.9, 3.0, 6.0])
    with tg.summary.create_file_writer(str(tmp_path)).as_default(step=7):
        assert bool(tg.summary.histogram("w", data, buckets=3))
        tg.summary.histogram("same", tg.constant([2.0, 2.0]), step=8, buckets=4)
        tg.summary.histogram("default", tg.random.normal([50]))
    (s, tag, plugin, dc, dt, shape, h, _), same, default = _values(str(tmp_path))
    assert (s, tag, plugin, dc, dt, shape) == (7, "w", "histograms", 2, 2, (3, 3))
    # equal widths over [0, 6]; the maximum counts in the last bucket
    np.testing.assert_allclose(h, [[0, 2, 3], [2, 4, 2], [4, 6, 1]])
    np.testing.assert_allclose(same[6], [[2, 2, 0], [2, 2, 0], [2, 2, 0], [2, 2, 2]])
    assert same[0] == 8 and default[5] == (30, 3) and default[6][:, 2].sum() == 50


def _png_pixels(png):
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    i, chunks = 8, {}
    while i < len(png):
        (n,) = struct.unpack(">I", png[i:i + 4])
        kind = png[i + 4:i + 8]
        chunks.setdefault(kind, b"")
        chunks[kind] += png[i + 8:i + 8 + n]
        assert struct.unpack(">I", png[i + 8 + n:i + 12 + n])[0] == \
            zlib.crc32(kind + png[i + 8:i + 8 + n])
        i += 12 + n
    w, h, depth, color = struct.unpack(">IIBB", chunks[b"IHDR"][:10])
    c = {0: 1, 4: 2, 2: 3, 6: 4}[color]
    raw = np.frombuffer(zlib.decompress(chunks[b"IDAT"]), np.uint8).reshape(h, 1 + w * c)
    assert (raw[:, 0] == 0).all()
    return raw[:, 1:].reshape(h, w, c)


def test_image_pngs_and_dimensions(tmp_path):
    imgs = np.random.default_rng(0).random((4, 3, 5, 3)).astype(np.float32)
    with tg.summary.create_file_writer(str(tmp_path)).as_default(step=1):
        tg.summary.image("img", imgs, max_outputs=2)
        with pytest.raises(ValueError, match=r"\[k, h, w, c\]"):
            tg.summary.image("bad", np.zeros((3, 5, 3)))
    (s, tag, plugin, dc, dt, shape, payload, _), = _values(str(tmp_path))
    assert (plugin, dc, dt, shape) == ("images", 3, 7, (4,))
    assert payload[:2] == [b"5", b"3"]  # width, height
    for png, img in zip(payload[2:], imgs):
        np.testing.assert_array_equal(_png_pixels(png), (img * 255.5).astype(np.uint8))


def test_audio_wav_and_text(tmp_path):
    clip = np.sin(np.linspace(0, 20, 400)).reshape(1, 400, 1).astype(np.float32)
    with tg.summary.create_file_writer(str(tmp_path)).as_default(step=2):
        tg.summary.audio("a", clip, sample_rate=16000)
        tg.summary.text("t", tg.constant([["x", "y"]]))
        with pytest.raises(TypeError, match="string tensor"):
            tg.summary.text("t", [1.0])
        with pytest.raises(ValueError, match="Unknown encoding"):
            tg.summary.audio("a", clip, 16000, encoding="mp3")
    audio, txt = _values(str(tmp_path))
    assert audio[2:6] == ("audio", 3, 7, (1, 2)) and audio[7] == bytes([0x10, 11])
    with wave.open(io.BytesIO(audio[6][0])) as w:
        assert (w.getframerate(), w.getnchannels(), w.getsampwidth()) == (16000, 1, 2)
        pcm = np.frombuffer(w.readframes(400), "<i2")
    np.testing.assert_array_equal(pcm, np.round(clip.ravel() * 32767).astype(np.int16))
    assert audio[6][1] == b""
    assert txt[2:6] == ("text", 2, 7, (1, 2)) and txt[6] == [b"x", b"y"]


def test_no_default_writer_and_inside_function(tmp_path):
    assert not bool(tg.summary.histogram("h", [1.0], step=0))
    writer = tg.summary.create_file_writer(str(tmp_path))

    @tg.function
    def f(x):
        tg.summary.histogram("h", x, step=0, buckets=2)
        return x + 1

    with writer.as_default():
        f(tg.constant([0.0, 1.0]))
        f(tg.constant([0.0, 3.0]))  # the graph writes at every call
    a, b = _values(str(tmp_path))
    np.testing.assert_allclose(a[6], [[0, 0.5, 1], [0.5, 1, 1]])
    np.testing.assert_allclose(b[6], [[0, 1.5, 1], [1.5, 3, 1]])
