"""tg.io / tg.image / tg.audio codecs: PNG, GIF and BMP files built byte by byte here (with
zlib and struct, filters and Adam7 interlacing written in the test), JPEG and GIF written by
Pillow where it is installed, WAV built by hand."""
import io
import struct
import zlib

import numpy as np
import pytest

import tapegpu as tg

rng = np.random.default_rng(0)


def _chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def _filter_rows(rows, bpp, ftypes):
    """PNG filtering of byte rows (encoder side, written independently of the decoder)."""
    out = bytearray()
    prior = bytes(len(rows[0])) if rows else b""
    for y, row in enumerate(rows):
        t = ftypes[y % len(ftypes)]
        out.append(t)
        for i, x in enumerate(row):
            a = row[i - bpp] if i >= bpp else 0
            b = prior[i]
            c = prior[i - bpp] if i >= bpp else 0
            if t == 0:
                pred = 0
            elif t == 1:
                pred = a
            elif t == 2:
                pred = b
            elif t == 3:
                pred = (a + b) // 2
            else:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
            out.append((x - pred) % 256)
        prior = row
    return bytes(out)


def _pack(samples, depth):
    """Rows of samples (h, w*c) packed at `depth` bits, big-endian."""
    rows = []
    for r in samples:
        if depth == 16:
            rows.append(b"".join(struct.pack(">H", int(v)) for v in r))
        elif depth == 8:
            rows.append(bytes(int(v) for v in r))
        else:
            bits = "".join(format(int(v), f"0{depth}b") for v in r)
            bits += "0" * (-len(bits) % 8)
            rows.append(bytes(int(bits[i:i + 8], 2) for i in range(0, len(bits), 8)))
    return rows


def _png(samples, depth, ctype, ftypes=(0, 1, 2, 3, 4), interlace=False, extra=b""):
    h, w, c = samples.shape
    bpp = max(1, c * depth // 8)
    if not interlace:
        raw = _filter_rows(_pack(samples.reshape(h, w * c), depth), bpp, ftypes)
    else:
        raw = b""
        for xs, ys, dx, dy in ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4),
                               (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)):
            sub = samples[ys::dy, xs::dx]
            if sub.size:
                raw += _filter_rows(_pack(sub.reshape(sub.shape[0], -1), depth), bpp, ftypes)
    ihdr = struct.pack(">IIBBBBB", w, h, depth, ctype, 0, 0, int(interlace))
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr) + extra +
            _chunk(b"IDAT", zlib.compress(raw)) + _chunk(b"IEND", b""))


@pytest.mark.parametrize("interlace", [False, True])
@pytest.mark.parametrize("ctype,c", [(0, 1), (2, 3), (4, 2), (6, 4)])
def test_png_8_bit_all_filters(ctype, c, interlace):
    img = rng.integers(0, 256, (11, 13, c), dtype=np.uint8)
    out = tg.io.decode_png(_png(img, 8, ctype, interlace=interlace))
    assert out.dtype == tg.uint8
    np.testing.assert_array_equal(out.numpy(), img)


@pytest.mark.parametrize("interlace", [False, True])
def test_png_16_bit(interlace):
    img = rng.integers(0, 65536, (9, 10, 3)).astype(np.uint16)
    data = _png(img, 16, 2, interlace=interlace)
    np.testing.assert_array_equal(tg.io.decode_png(data).numpy(), (img >> 8).astype(np.uint8))
    full = tg.io.decode_image(data, dtype=tg.float32).numpy()
    np.testing.assert_allclose(full, img / 65535.0, rtol=1e-6)
    with pytest.raises(ValueError, match="uint16"):
        tg.io.decode_png(data, dtype="uint16")


@pytest.mark.parametrize("depth", [1, 2, 4])
def test_png_low_bit_gray_scales_to_8_bits(depth):
    img = rng.integers(0, 1 << depth, (5, 11, 1))
    out = tg.io.decode_png(_png(img, depth, 0)).numpy()
    np.testing.assert_array_equal(out, img * (255 // ((1 << depth) - 1)))
    wide = tg.io.decode_image(_png(img, depth, 0), dtype=tg.float32).numpy()
    np.testing.assert_allclose(wide, img / ((1 << depth) - 1), rtol=1e-6)


def test_png_palette_with_trns():
    palette = np.array([[255, 0, 0], [0, 255, 0], [0, 0, 255]], np.uint8)
    idx = rng.integers(0, 3, (4, 6, 1))
    extra = _chunk(b"PLTE", palette.tobytes())
    rgb = tg.io.decode_png(_png(idx, 2, 3, extra=extra)).numpy()
    np.testing.assert_array_equal(rgb, palette[idx[..., 0]])
    extra += _chunk(b"tRNS", bytes([0, 128]))  # the third entry stays opaque
    rgba = tg.io.decode_png(_png(idx, 4, 3, extra=extra)).numpy()
    np.testing.assert_array_equal(rgba[..., 3], np.array([0, 128, 255])[idx[..., 0]])
    np.testing.assert_array_equal(tg.io.decode_png(_png(idx, 4, 3, extra=extra),
                                                   channels=3).numpy(), palette[idx[..., 0]])


def test_png_gray_trns_gives_alpha_only_when_asked():
    img = np.array([[[3], [7]]], np.uint8)
    data = _png(img, 8, 0, extra=_chunk(b"tRNS", struct.pack(">H", 7)))
    # channels=0: the file's channel count (1); TF ignores the tRNS chunk then
    np.testing.assert_array_equal(tg.io.decode_png(data).numpy(), img)
    np.testing.assert_array_equal(tg.io.decode_png(data, channels=4).numpy(),
                                  [[[3, 3, 3, 255], [7, 7, 7, 0]]])


def test_png_alpha_filler_is_tfs():
    # no alpha and no tRNS, 4 channels asked: libpng's filler (1 << bit depth) - 1, as TF
    # sets it: 255 for 8-bit files, 1 for 1-bit ones (TF's quirk, kept)
    eight = tg.io.decode_png(_png(np.array([[[9]]], np.uint8), 8, 0), channels=4)
    np.testing.assert_array_equal(eight.numpy(), [[[9, 9, 9, 255]]])
    one = tg.io.decode_png(_png(np.array([[[1], [0]]]), 1, 0), channels=4)
    np.testing.assert_array_equal(one.numpy(), [[[255, 255, 255, 1], [0, 0, 0, 1]]])


def test_png_channel_conversions():
    rgba = np.array([[[10, 20, 30, 40], [200, 100, 50, 250]]], np.uint8)
    data = _png(rgba, 8, 6)
    np.testing.assert_array_equal(tg.io.decode_png(data, channels=3).numpy(), rgba[..., :3])
    r, g, b = (rgba[..., i].astype(np.int64) for i in range(3))
    # TF asks libpng for Rec. 601 weights (0.299, 0.587): fixed point 9797, 19234, 3737,
    # truncated for 8-bit samples
    gray = (9797 * r + 19234 * g + 3737 * b) >> 15
    np.testing.assert_array_equal(tg.io.decode_png(data, channels=1).numpy()[..., 0], gray)
    assert gray.tolist() == [[18, 124]]  # 594760 >> 15, 4069650 >> 15
    wide = np.array([[[1000, 2000, 3000]]], np.uint16)
    w16 = (9797 * 1000 + 19234 * 2000 + 3737 * 3000 + 16384) >> 15  # 16 bits: rounded
    np.testing.assert_allclose(tg.io.decode_image(_png(wide, 16, 2), channels=1,
                                                  dtype=tg.float32).numpy().ravel(),
                               [w16 / 65535], rtol=1e-6)
    np.testing.assert_array_equal(tg.io.decode_png(_png(np.full((1, 1, 3), 77, np.uint8), 8, 2),
                                                   channels=1).numpy().ravel(), [77])
    gdata = _png(np.array([[[9], [250]]], np.uint8), 8, 0)
    np.testing.assert_array_equal(tg.io.decode_png(gdata, channels=4).numpy(),
                                  [[[9, 9, 9, 255], [250, 250, 250, 255]]])
    with pytest.raises(ValueError, match="channels"):
        tg.io.decode_png(data, channels=5)


def test_png_errors():
    img = np.zeros((2, 2, 1), np.uint8)
    data = bytearray(_png(img, 8, 0))
    data[-20] ^= 0xFF  # inside the IDAT chunk: its CRC no longer matches
    with pytest.raises(tg.errors.InvalidArgumentError, match="CRC"):
        tg.io.decode_png(bytes(data))
    with pytest.raises(tg.errors.InvalidArgumentError, match="Unknown image file format"):
        tg.io.decode_png(b"not a png")
    with pytest.raises(tg.errors.InvalidArgumentError, match="Input is empty"):
        tg.io.decode_png(b"")


def test_encode_png_round_trip_and_against_pillow():
    img = rng.integers(0, 256, (6, 5, 3), dtype=np.uint8)
    png = tg.io.encode_png(img)
    np.testing.assert_array_equal(tg.image.decode_png(png).numpy(), img)
    Image = pytest.importorskip("PIL.Image")
    np.testing.assert_array_equal(np.asarray(Image.open(io.BytesIO(png.numpy()))), img)
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, "PNG", optimize=True)  # Pillow's own filters
    np.testing.assert_array_equal(tg.io.decode_png(buf.getvalue()).numpy(), img)


def _gif(width, height, colors, frames, transparent=None, lzw_bits=None):
    """A GIF with one global colour table; frames are (left, top, indices) with indices
    coded by an LZW encoder that emits a clear code before every pixel (valid, simple);
    `lzw_bits` widens the codes (to write indices past the table)."""
    table_bits = max(2, int(np.ceil(np.log2(len(colors)))))
    bits = lzw_bits or table_bits
    table = np.zeros((1 << table_bits, 3), np.uint8)
    table[:len(colors)] = colors
    out = b"GIF89a" + struct.pack("<HHBBB", width, height, 0x80 | (table_bits - 1), 0, 0)
    out += table.tobytes()
    for left, top, idx in frames:
        if transparent is not None:
            out += b"\x21\xf9\x04" + bytes([1, 0, 0, transparent, 0])
        h, w = idx.shape
        out += b"\x2c" + struct.pack("<HHHHB", left, top, w, h, 0) + bytes([bits])
        clear, size, acc, n, stream = 1 << bits, bits + 1, 0, 0, bytearray()
        for code in [c for v in idx.ravel() for c in (clear, int(v))] + [clear + 1]:
            acc |= code << n
            n += size
            while n >= 8:
                stream.append(acc & 0xFF)
                acc >>= 8
                n -= 8
        if n:
            stream.append(acc)
        for i in range(0, len(stream), 255):
            out += bytes([len(stream[i:i + 255])]) + bytes(stream[i:i + 255])
        out += b"\x00"
    return out + b"\x3b"


def test_gif_frames_and_transparency():
    colors = np.array([[0, 0, 0], [255, 0, 0], [0, 255, 0], [0, 0, 255], [9, 9, 9]], np.uint8)
    first = rng.integers(0, 5, (4, 5))
    patch = np.array([[2, 4], [4, 3]])  # 4 is transparent: keeps the previous frame
    data = _gif(5, 4, colors, [(0, 0, first), (1, 2, patch)], transparent=4)
    out = tg.io.decode_gif(data)
    assert out.shape == (2, 4, 5, 3) and out.dtype == tg.uint8
    f0 = np.where((first == 4)[..., None], 0, colors[first])  # transparent in frame 0: black
    f1 = f0.copy()
    f1[2, 1], f1[3, 2] = colors[2], colors[3]
    np.testing.assert_array_equal(out.numpy(), np.stack([f0, f1]))
    assert tg.io.decode_image(data, expand_animations=False).shape == (4, 5, 3)


def test_gif_canvas_is_the_largest_frame_and_table_range_is_checked():
    colors = np.array([[0, 0, 0], [255, 0, 0], [0, 255, 0], [0, 0, 255]], np.uint8)
    # logical screen 5x4, but images of 2x3 at (1, 1) and 3x2 at (0, 0): TF's canvas is 3x3
    data = _gif(5, 4, colors, [(1, 1, np.array([[1, 2, 3], [3, 2, 1]])),
                               (0, 0, np.array([[2, 2], [2, 2], [2, 2]]))])
    out = tg.io.decode_gif(data).numpy()
    assert out.shape == (2, 3, 3, 3)
    f0 = np.zeros((3, 3, 3), np.uint8)
    f0[1, 1:3], f0[2, 1:3] = colors[[1, 2]], colors[[3, 2]]  # clipped to the canvas
    f1 = f0.copy()
    f1[:, :2] = colors[2]
    np.testing.assert_array_equal(out, np.stack([f0, f1]))
    # an index past the colour table raises even when it is the transparent one (as TF)
    bad = _gif(2, 1, colors, [(0, 0, np.array([[0, 6]]))], transparent=6, lzw_bits=3)
    with pytest.raises(tg.errors.InvalidArgumentError, match="outside of color map range 4"):
        tg.io.decode_gif(bad)


@pytest.mark.parametrize("interlace", [False, True])
def test_gif_written_by_pillow(interlace):
    Image = pytest.importorskip("PIL.Image")
    # five colours: Pillow's table has 8 entries, its transparent index (5, for the pixels a
    # frame keeps from the previous one) lies inside it
    pal = np.array([[0, 0, 0], [250, 10, 10], [10, 250, 10], [10, 10, 250], [200, 200, 0]],
                   np.uint8)
    frames = [pal[rng.integers(0, 5, (20, 30))] for _ in range(3)]
    ims = [Image.fromarray(f).quantize(palette=Image.fromarray(pal[None]).quantize(5))
           for f in frames]
    buf = io.BytesIO()
    ims[0].save(buf, "GIF", save_all=True, append_images=ims[1:], interlace=interlace)
    out = tg.image.decode_gif(buf.getvalue()).numpy()
    np.testing.assert_array_equal(out, np.stack(frames))


def _bmp(img, top_down=False):
    h, w, c = img.shape
    stride = (w * c + 3) // 4 * 4
    rows = img[..., [2, 1, 0] + ([3] if c == 4 else [])]
    body = b"".join(r.tobytes() + bytes(stride - w * c) for r in (rows if top_down else rows[::-1]))
    info = struct.pack("<IiiHHIIiiII", 40, w, -h if top_down else h, 1, 8 * c, 0, len(body),
                       2835, 2835, 0, 0)
    return b"BM" + struct.pack("<IHHI", 54 + len(body), 0, 0, 54) + info + body


@pytest.mark.parametrize("c", [3, 4])
@pytest.mark.parametrize("top_down", [False, True])
def test_bmp(c, top_down):
    img = rng.integers(0, 256, (3, 5, c), dtype=np.uint8)
    np.testing.assert_array_equal(tg.io.decode_bmp(_bmp(img, top_down)).numpy(), img)
    np.testing.assert_array_equal(tg.io.decode_image(_bmp(img, top_down)).numpy(), img)
    # the other channel count converts, as TF's kernel: alpha 255 added, or dropped
    other = tg.io.decode_bmp(_bmp(img, top_down), channels=7 - c).numpy()
    np.testing.assert_array_equal(other[..., :3], img[..., :3])
    if c == 3:
        assert (other[..., 3] == 255).all()
    with pytest.raises(tg.errors.InvalidArgumentError, match="0, 3 or 4 for BMP"):
        tg.io.decode_image(_bmp(img), channels=1)


def test_bmp_8_bit_size_rule_and_wrong_ops():
    # an 8-bit BMP: TF reads the bytes as gray (the palette is ignored)
    idx = np.array([[1, 2, 3], [4, 5, 6]], np.uint8)
    rows = b"".join(r.tobytes() + bytes(1) for r in idx[::-1])  # bottom-up, padded to 4
    palette = bytes(1024)
    info = struct.pack("<IiiHHIIiiII", 40, 3, 2, 1, 8, 0, len(rows), 0, 0, 256, 0)
    data = b"BM" + struct.pack("<IHHI", 54 + 1024 + len(rows), 0, 0, 54 + 1024) + info + \
        palette + rows
    np.testing.assert_array_equal(tg.io.decode_bmp(data).numpy()[..., 0], idx)
    np.testing.assert_array_equal(tg.io.decode_bmp(data, channels=4).numpy()[0, 0],
                                  [1, 1, 1, 255])
    with pytest.raises(tg.errors.InvalidArgumentError, match="differ by 2"):
        tg.io.decode_bmp(data + b"\0\0")  # TF wants the exact size
    with pytest.raises(tg.errors.InvalidArgumentError, match="wrong op"):
        tg.io.decode_png(data)
    png = tg.io.encode_png(np.zeros((2, 2, 3), np.uint8))
    with pytest.raises(tg.errors.InvalidArgumentError, match="DecodeBmp"):
        tg.io.decode_bmp(png)


def test_png_jpeg_gif_decode_through_each_others_ops():
    img = rng.integers(0, 256, (4, 5, 3), dtype=np.uint8)
    png = tg.io.encode_png(img)
    np.testing.assert_array_equal(tg.io.decode_jpeg(png).numpy(), img)  # as TF's kernel
    assert tg.io.decode_gif(png).shape == (1, 4, 5, 3)
    colors = np.array([[0, 0, 0], [255, 0, 0], [0, 255, 0], [0, 0, 255]], np.uint8)
    one = _gif(2, 1, colors, [(0, 0, np.array([[1, 2]]))])
    np.testing.assert_array_equal(tg.io.decode_png(one).numpy(), [colors[[1, 2]]])
    two = _gif(2, 1, colors, [(0, 0, np.array([[1, 2]])), (0, 0, np.array([[3, 3]]))])
    with pytest.raises(tg.errors.InvalidArgumentError, match="Got 2 frames"):
        tg.io.decode_jpeg(two)
    with pytest.raises(tg.errors.InvalidArgumentError, match="JPEG only"):
        tg.io.decode_and_crop_jpeg(png, [0, 0, 1, 1])


def test_jpeg_round_trip_and_options():
    pytest.importorskip("PIL.Image")
    y, x = np.mgrid[0:32, 0:48]
    img = np.stack([x * 5, y * 7, (x + y) * 3], -1).astype(np.uint8)
    jpg = tg.io.encode_jpeg(img, quality=95)
    assert bool(tg.io.is_jpeg(jpg)) and not bool(tg.image.is_jpeg(tg.io.encode_png(img)))
    out = tg.io.decode_jpeg(jpg)
    assert out.shape == (32, 48, 3) and out.dtype == tg.uint8
    assert np.abs(out.numpy().astype(int) - img).mean() < 2.0
    np.testing.assert_array_equal(tg.io.extract_jpeg_shape(jpg).numpy(), [32, 48, 3])
    gray = tg.io.decode_jpeg(jpg, channels=1).numpy()[..., 0].astype(float)
    luma = 0.299 * img[..., 0] + 0.587 * img[..., 1] + 0.114 * img[..., 2]  # JFIF's Y
    assert gray.shape == (32, 48) and np.abs(gray - luma).mean() < 2.0
    assert tg.io.decode_jpeg(jpg, ratio=2).shape == (16, 24, 3)
    crop = tg.io.decode_and_crop_jpeg(jpg, [4, 8, 10, 12])
    np.testing.assert_array_equal(crop.numpy(), out.numpy()[4:14, 8:20])
    np.testing.assert_array_equal(tg.image.decode_image(jpg).numpy(), out.numpy())
    np.testing.assert_array_equal(tg.io.decode_png(jpg).numpy(), out.numpy())  # TF's kernel
    assert tg.io.decode_gif(jpg).shape == (1, 32, 48, 3)
    with pytest.raises(tg.errors.InvalidArgumentError):
        tg.io.decode_and_crop_jpeg(jpg, [30, 0, 10, 10])
    with pytest.raises(ValueError, match="channels"):
        tg.io.decode_jpeg(jpg, channels=4)
    with pytest.raises(ValueError, match="try_recover_truncated"):
        tg.io.decode_jpeg(jpg, try_recover_truncated=True)
    with pytest.raises(ValueError, match="dct_method"):
        tg.io.decode_jpeg(jpg, dct_method="FLOAT")
    with pytest.raises(tg.errors.InvalidArgumentError, match="JPEG"):
        tg.io.decode_jpeg(jpg.numpy()[:40])
    g = tg.io.encode_jpeg(img[..., :1], format="grayscale")
    assert tg.io.decode_jpeg(g).shape == (32, 48, 1)
    with pytest.raises(ValueError, match="format"):
        tg.io.encode_jpeg(img, format="grayscale")


def test_decode_image_dtypes_and_unknown_format():
    img = np.array([[[0], [51], [255]]], np.uint8)
    png = tg.io.encode_png(img)
    np.testing.assert_allclose(tg.io.decode_image(png, dtype=tg.float32).numpy(), img / 255.0)
    assert tg.io.decode_image(png, channels=3).shape == (1, 3, 3)
    with pytest.raises(tg.errors.InvalidArgumentError, match="Unknown image file format"):
        tg.io.decode_image(b"hello world")


def _wav(samples, channels, rate, bits=16):
    body = np.asarray(samples, "<i2").tobytes()
    return (b"RIFF" + struct.pack("<I", 36 + len(body)) + b"WAVEfmt " +
            struct.pack("<IHHIIHH", 16, 1, channels, rate, rate * channels * bits // 8,
                        channels * bits // 8, bits) + b"data" + struct.pack("<I", len(body)) + body)


def test_decode_wav():
    data = _wav([[0, 32767], [-32768, 16384], [1, -1]], 2, 22050)
    audio, rate = tg.audio.decode_wav(data)
    assert audio.dtype == tg.float32 and rate.dtype == tg.int32 and int(rate) == 22050
    np.testing.assert_array_equal(audio.numpy(), np.array([[0, 32767], [-32768, 16384], [1, -1]])
                                  / 32768.0)
    mono, _ = tg.audio.decode_wav(data, desired_channels=1, desired_samples=5)
    np.testing.assert_array_equal(mono.numpy()[:, 0], np.array([0, -32768, 1, 0, 0]) / 32768.0)
    one, _ = tg.audio.decode_wav(_wav([[5], [6]], 1, 8000), desired_channels=3)
    assert one.shape == (2, 3) and (one.numpy() == one.numpy()[:, :1]).all()
    with pytest.raises(tg.errors.InvalidArgumentError, match="16-bit"):
        tg.audio.decode_wav(_wav([1, 2], 1, 8000, bits=8)[:-2])


def test_encode_wav_round_trip():
    x = (np.arange(-5, 5, dtype=np.float32) / 5.0).reshape(5, 2)
    wav = tg.audio.encode_wav(x, 16000)
    audio, rate = tg.audio.decode_wav(wav)
    np.testing.assert_allclose(audio.numpy(), np.round(x * 32768) / 32768, atol=0)
    assert int(rate) == 16000


def test_jpeg_without_pillow_says_how_to_get_it(monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "PIL", None)
    with pytest.raises(ImportError, match="pip install pillow"):
        tg.io.decode_jpeg(b"\xff\xd8\xff\xe0")
    with pytest.raises(ImportError, match="encode_jpeg"):
        tg.io.encode_jpeg(np.zeros((2, 2, 3), np.uint8))
    # PNG, GIF and BMP need no Pillow
    assert tg.io.decode_image(tg.io.encode_png(np.zeros((2, 2, 1), np.uint8))).shape == (2, 2, 1)
