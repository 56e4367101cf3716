"""Image and audio file codecs of `tg.io`, `tg.image` and `tg.audio`, as TensorFlow's ops:
`decode_png`, `decode_gif`, `decode_bmp`, `decode_jpeg`, `decode_image`, `encode_png`,
`encode_jpeg`, `decode_wav`.

PNG (every colour type and bit depth, interlaced or not), GIF (LZW, every frame) and BMP
(24 and 32 bits) are decoded here with the standard library and numpy, bit-exactly as
libpng / giflib / TF's BMP kernel would under TF's settings (png_io.cc): palettes expand to
RGB(A); low bit depths scale to 8 bits (`x * 255 / (2**d - 1)`); a 16-bit PNG read as uint8 keeps
the high byte (libpng's `png_set_strip_16`); RGB to gray is libpng's fixed point for TF's
Rec. 601 weights, `(9797 R + 19234 G + 3737 B) >> 15` (rounded for 16-bit samples; a gAMA
chunk's gamma correction of it is not applied); tRNS gives alpha only when alpha is asked
for; dropping alpha discards it (no compositing). GIF frames after the first start from the
previous frame, and transparent pixels keep it (black in the first frame), on a canvas as
large as the largest frame, as TF.

JPEG uses Pillow (libjpeg, as TF; its accurate integer DCT, where TF defaults to the fast one,
so pixels can differ from TF's by a few levels) when it is installed; without it the JPEG
functions raise ImportError saying `pip install pillow`. The results are uint8 tensors in host
memory; decoding has no gradient.

>>> import zlib, struct
>>> def chunk(kind, data):
...     return struct.pack(">I", len(data)) + kind + data + struct.pack(
...         ">I", zlib.crc32(kind + data))
>>> png = (b"\\x89PNG\\r\\n\\x1a\\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 2, 1, 8, 0, 0, 0, 0))
...        + chunk(b"IDAT", zlib.compress(bytes([0, 10, 200]))) + chunk(b"IEND", b""))
>>> tg.io.decode_png(png)[..., 0].numpy()
array([[ 10, 200]], dtype=uint8)
"""
import io as _pyio
import struct
import zlib

import numpy as np

from .core import dtypes
from .core.tensor import Tensor, convert_to_tensor
from .ops.registry import InvalidArgumentError

__all__ = ["decode_png", "decode_gif", "decode_bmp", "decode_jpeg", "decode_and_crop_jpeg",
           "extract_jpeg_shape", "decode_image", "encode_png", "encode_jpeg", "is_jpeg",
           "decode_wav", "encode_wav"]

_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _contents(contents, who):
    if isinstance(contents, Tensor):
        if not contents.dtype.is_string or contents.ndim != 0:
            raise ValueError(f"{who}: contents must be a scalar string tensor (the file's "
                             f"bytes), got {contents.dtype.name} of shape {contents.shape}")
        contents = contents.numpy()
    if isinstance(contents, np.ndarray) and contents.ndim == 0:
        contents = contents.item()
    if isinstance(contents, str):
        contents = contents.encode("latin-1")
    if not isinstance(contents, (bytes, bytearray, memoryview)):
        raise TypeError(f"{who}: contents must be bytes or a scalar string tensor, got "
                        f"{type(contents).__name__}")
    return bytes(contents)


def _image_dtype(dtype, allowed, who):
    if isinstance(dtype, str) or isinstance(dtype, type) and issubclass(dtype, np.generic):
        name = np.dtype(dtype).name
    else:
        name = dtypes.as_dtype(dtype).name
    if name == "uint16":
        raise ValueError(f"{who}: dtype uint16: tapegpu has no uint16 tensors; decode as uint8, "
                         "or with tg.io.decode_image(..., dtype=tg.float32), which keeps a "
                         "16-bit PNG's 16 bits (values / 65535)")
    if name not in allowed:
        raise ValueError(f"{who}: dtype must be one of {allowed}, got {name}")
    return name


def _check_channels(channels, allowed, who):
    if channels is None:
        return 0
    if channels not in allowed:
        raise ValueError(f"{who}: channels must be one of {allowed}, got {channels!r}")
    return int(channels)


# -- PNG ----------------------------------------------------------------------------------------

_ADAM7 = ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2),
          (0, 1, 1, 2))
_PNG_CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}
_PNG_DEPTHS = {0: (1, 2, 4, 8, 16), 2: (8, 16), 3: (1, 2, 4, 8), 4: (8, 16), 6: (8, 16)}


def _png_chunks(data, who):
    if not data.startswith(_PNG_MAGIC):
        raise InvalidArgumentError(f"{who}: Invalid PNG header, data size {len(data)}")
    pos, chunks = 8, []
    while pos + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if len(body) != length or pos + 12 + length > len(data):
            raise InvalidArgumentError(f"{who}: Invalid PNG data, size {len(data)}: chunk "
                                       f"{kind!r} is truncated")
        crc = struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])[0]
        if zlib.crc32(kind + body) != crc:
            raise InvalidArgumentError(f"{who}: Invalid PNG data: CRC error in chunk {kind!r}")
        chunks.append((kind, body))
        pos += 12 + length
        if kind == b"IEND":
            break
    return chunks


def _paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def _unfilter(raw, height, stride, bpp, who):
    """The filtered scanlines of one (sub)image, unfiltered: (height, stride) uint8."""
    out = np.zeros((height, stride), np.uint8)
    prior = np.zeros(stride, np.uint8)
    if len(raw) < height * (stride + 1):
        raise InvalidArgumentError(f"{who}: Invalid PNG data: image data is truncated")
    for y in range(height):
        start = y * (stride + 1)
        ftype, line = raw[start], np.frombuffer(raw, np.uint8, stride, start + 1)
        if ftype == 0:
            cur = line.copy()
        elif ftype == 1:
            pad = (-stride) % bpp
            lanes = np.concatenate([line, np.zeros(pad, np.uint8)]).reshape(-1, bpp)
            cur = np.cumsum(lanes, axis=0, dtype=np.uint8).reshape(-1)[:stride]
        elif ftype == 2:
            cur = line + prior
        elif ftype in (3, 4):
            cur = bytearray(line.tobytes())
            up = prior.tobytes()
            for i in range(stride):
                left = cur[i - bpp] if i >= bpp else 0
                if ftype == 3:
                    cur[i] = (cur[i] + ((left + up[i]) >> 1)) & 0xFF
                else:
                    upleft = up[i - bpp] if i >= bpp else 0
                    cur[i] = (cur[i] + _paeth(left, up[i], upleft)) & 0xFF
            cur = np.frombuffer(bytes(cur), np.uint8)
        else:
            raise InvalidArgumentError(f"{who}: Invalid PNG data: bad filter type {ftype}")
        out[y] = cur
        prior = out[y]
    return out


def _samples(rows, width, channels, depth):
    """Unfiltered rows as integer samples (height, width, channels)."""
    h = rows.shape[0]
    if depth == 16:
        s = rows.reshape(h, -1).view(">u2").astype(np.uint16)
    elif depth == 8:
        s = rows
    else:
        shifts = np.arange(8 - depth, -1, -depth, dtype=np.uint8)
        s = ((rows[..., None] >> shifts) & ((1 << depth) - 1)).reshape(h, -1)
    return s[:, :width * channels].reshape(h, width, channels)


def _png_pixels(data, who):
    """(samples (h, w, c) at the file's bit depth, header dict, palette, trns) of a PNG."""
    chunks = _png_chunks(data, who)
    if not chunks or chunks[0][0] != b"IHDR" or len(chunks[0][1]) != 13:
        raise InvalidArgumentError(f"{who}: Invalid PNG data: missing IHDR")
    w, h, depth, ctype, comp, filt, interlace = struct.unpack(">IIBBBBB", chunks[0][1])
    if ctype not in _PNG_CHANNELS or depth not in _PNG_DEPTHS[ctype] or comp or filt or \
            interlace > 1 or w == 0 or h == 0:
        raise InvalidArgumentError(f"{who}: Invalid PNG header: color type {ctype}, bit depth "
                                   f"{depth}, interlace {interlace}, size {w}x{h}")
    palette = trns = None
    idat = []
    for kind, body in chunks[1:]:
        if kind == b"PLTE":
            palette = np.frombuffer(body, np.uint8).reshape(-1, 3)
        elif kind == b"tRNS":
            trns = body
        elif kind == b"IDAT":
            idat.append(body)
    if ctype == 3 and palette is None:
        raise InvalidArgumentError(f"{who}: Invalid PNG data: palette image without PLTE")
    try:
        raw = zlib.decompress(b"".join(idat))
    except zlib.error as e:
        raise InvalidArgumentError(f"{who}: Invalid PNG data: {e}") from None
    c = _PNG_CHANNELS[ctype]
    bpp = max(1, c * depth // 8)
    if not interlace:
        stride = (w * c * depth + 7) // 8
        img = _samples(_unfilter(raw, h, stride, bpp, who), w, c, depth)
    else:
        img = np.zeros((h, w, c), np.uint16 if depth == 16 else np.uint8)
        pos = 0
        for xs, ys, dx, dy in _ADAM7:
            pw, ph = (w - xs + dx - 1) // dx, (h - ys + dy - 1) // dy
            if pw <= 0 or ph <= 0:
                continue
            stride = (pw * c * depth + 7) // 8
            part = raw[pos:pos + ph * (stride + 1)]
            pos += ph * (stride + 1)
            img[ys::dy, xs::dx] = _samples(_unfilter(part, ph, stride, bpp, who), pw, c, depth)
    return img, depth, ctype, palette, trns


# libpng's fixed-point weights for png_set_rgb_to_gray(png, 1, 0.299, 0.587), which TF asks
# for: floor(0.299 * 32768), floor(0.587 * 32768) and the rest of 32768
_GRAY_R, _GRAY_G, _GRAY_B = 9797, 19234, 3737


def _rgb_to_gray(rgb, depth):
    """libpng's RGB -> gray without gamma: 8-bit samples truncate (and grays stay), 16-bit
    ones round."""
    r, g, b = (rgb[..., i].astype(np.int64) for i in range(3))
    mixed = _GRAY_R * r + _GRAY_G * g + _GRAY_B * b
    if depth == 16:
        return ((mixed + 16384) >> 15).astype(rgb.dtype)
    return np.where((r == g) & (r == b), r, mixed >> 15).astype(rgb.dtype)


def _png_array(data, channels, bits, who):
    """The PNG's pixels as a numpy array of `bits` (8: uint8, 16: uint16) per sample, with
    TF's libpng set-up (tensorflow/core/lib/png/png_io.cc) in libpng's order: palette and
    low-depth gray expanded, alpha kept / made from tRNS / added when an even number of
    channels is wanted and stripped otherwise, RGB -> gray when 1 or 2 are wanted (at the
    file's depth), 16 -> 8 bits by the high byte, gray -> RGB, 8 -> 16 bits by x * 257.
    `channels` 0 means the file's: palettes 3 (4 with tRNS), else its channel count (a tRNS
    chunk of a gray or RGB file is then ignored, as TF)."""
    img, depth, ctype, palette, trns = _png_pixels(data, who)
    file_depth = depth
    if channels == 0:
        channels = (4 if trns is not None else 3) if ctype == 3 else _PNG_CHANNELS[ctype]
    want_alpha = channels % 2 == 0
    alpha = None
    if ctype == 3:
        idx = img[..., 0].astype(np.intp)
        if idx.max(initial=0) >= len(palette):
            raise InvalidArgumentError(f"{who}: Invalid PNG data: palette index out of range")
        color = palette[idx]
        if trns is not None and want_alpha:
            table = np.full(len(palette), 255, np.uint8)
            t = np.frombuffer(trns, np.uint8)[:len(palette)]
            table[:len(t)] = t
            alpha = table[idx][..., None]
        depth = 8
    else:
        has_alpha = ctype in (4, 6)
        color = img[..., :-1] if has_alpha else img
        if has_alpha and want_alpha:
            alpha = img[..., -1:]
        elif trns is not None and want_alpha:
            key = np.frombuffer(trns, ">u2").astype(np.int64)[:color.shape[-1]]
            opaque = ~np.all(color.astype(np.int64) == key, axis=-1)
            alpha = (opaque * (65535 if depth == 16 else 255)).astype(img.dtype)[..., None]
        if depth < 8:
            color = (color.astype(np.uint16) * (255 // ((1 << depth) - 1))).astype(np.uint8)
            depth = 8
    if channels < 3 and color.shape[-1] == 3:
        color = _rgb_to_gray(color, depth)[..., None]
    if bits == 8 and depth == 16:
        color = (color >> 8).astype(np.uint8)
        alpha = None if alpha is None else (alpha >> 8).astype(np.uint8)
    if channels >= 3 and color.shape[-1] == 1:
        color = np.repeat(color, 3, -1)
    if want_alpha and alpha is None:
        # libpng's filler (1 << file bit depth) - 1, as TF sets it: 255 or 65535, but 1, 3 or
        # 15 for 1-, 2- and 4-bit files (TF's own quirk)
        filler = ((1 << file_depth) - 1) & (0xFFFF if depth == 16 and bits == 16 else 0xFF)
        alpha = np.full(color.shape[:-1] + (1,), filler, color.dtype)
    out = np.concatenate([color, alpha], -1) if want_alpha else color
    if bits == 16 and depth == 8:
        out = out.astype(np.uint16) * 257
    return np.ascontiguousarray(out)


def decode_png(contents, channels=0, dtype=dtypes.uint8, name=None):
    """Decodes a PNG image into a `(height, width, channels)` uint8 tensor, as
    `tf.io.decode_png` (`dtype=uint16` raises: tapegpu has no uint16 tensors;
    `decode_image(..., dtype=tg.float32)` keeps 16 bits): `channels` 0 (as the file: gray 1,
    gray+alpha 2, RGB 3, RGBA 4; palettes give RGB, or RGBA with a tRNS chunk), 1, 3 or
    4. Every bit depth and colour type, interlaced or not; see the module docstring for the
    conversions. As TF's kernel, it also decodes JPEG files and one-frame GIFs (not BMP).

    >>> img = tg.io.decode_png(tg.io.encode_png(tg.zeros([2, 3, 3], tg.uint8)))
    >>> img.shape, img.dtype
    ((2, 3, 3), tg.uint8)
    """
    _image_dtype(dtype, ("uint8",), "decode_png")
    return convert_to_tensor(_decode(contents, "decode_png", channels))


def _png_bytes(img, compression=-1):
    h, w, c = img.shape
    depth = 16 if img.dtype == np.uint16 else 8
    ctype = {1: 0, 2: 4, 3: 2, 4: 6}[c]
    rows = img.astype(">u2").view(np.uint8) if depth == 16 else img
    rows = rows.reshape(h, -1)
    raw = np.concatenate([np.zeros((h, 1), np.uint8), rows], 1).tobytes()

    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(
            ">I", zlib.crc32(kind + body))
    ihdr = struct.pack(">IIBBBBB", w, h, depth, ctype, 0, 0, 0)
    return _PNG_MAGIC + chunk(b"IHDR", ihdr) + chunk(
        b"IDAT", zlib.compress(raw, 6 if compression < 0 else compression)) + chunk(b"IEND", b"")


def encode_png(image, compression=-1, name=None):
    """Encodes a `(height, width, channels)` uint8 or uint16 image (1 to 4 channels) as PNG
    bytes (a scalar string tensor), as `tf.io.encode_png`; `compression` -1 (default) or 0-9.

    >>> png = tg.io.encode_png(tg.constant([[[255]]], tg.uint8))
    >>> tg.io.decode_png(png).numpy().tolist()
    [[[255]]]
    """
    a = convert_to_tensor(image).numpy()
    if a.ndim != 3 or a.shape[-1] not in (1, 2, 3, 4) or a.dtype not in (np.uint8, np.uint16):
        raise ValueError(f"encode_png: image must be a uint8 or uint16 tensor of shape "
                         f"(height, width, 1..4), got {a.dtype.name} of shape {a.shape}")
    if not -1 <= compression <= 9:
        raise ValueError(f"encode_png: compression must be in [-1, 9], got {compression}")
    return convert_to_tensor(_png_bytes(a, compression))


# -- GIF ----------------------------------------------------------------------------------------

def _lzw(data, min_size, npixels, who):
    """GIF's LZW decompression (variable-width codes, least significant bit first)."""
    clear, end = 1 << min_size, (1 << min_size) + 1
    out = bytearray()
    table = [bytes([i]) for i in range(clear)] + [b"", b""]
    size = min_size + 1
    prev = None
    bits = nbits = 0
    for byte in data:
        bits |= byte << nbits
        nbits += 8
        while nbits >= size:
            code = bits & ((1 << size) - 1)
            bits >>= size
            nbits -= size
            if code == clear:
                table = table[:clear + 2]
                size, prev = min_size + 1, None
                continue
            if code == end:
                return bytes(out)
            if prev is None:
                if code >= len(table):
                    raise InvalidArgumentError(f"{who}: invalid GIF data: bad LZW code")
                entry = table[code]
            elif code < len(table):
                entry = table[code]
                table.append(prev + entry[:1])
            elif code == len(table):
                entry = prev + prev[:1]
                table.append(entry)
            else:
                raise InvalidArgumentError(f"{who}: invalid GIF data: bad LZW code {code}")
            out += entry
            prev = entry
            if len(table) == (1 << size) and size < 12:
                size += 1
            if len(out) >= npixels:
                return bytes(out)
    return bytes(out)


def _gif_images(data, who):
    """The images of a GIF: [(left, top, indices (h, w), colour map, transparent index)]."""
    if data[:6] not in (b"GIF87a", b"GIF89a"):
        raise InvalidArgumentError(f"{who}: invalid GIF header")
    flags = data[10]
    pos = 13
    global_map = None
    if flags & 0x80:
        n = 2 << (flags & 7)
        global_map = np.frombuffer(data, np.uint8, 3 * n, pos).reshape(n, 3)
        pos += 3 * n
    images, transparent = [], None
    while pos < len(data):
        block = data[pos]
        pos += 1
        if block == 0x3B:
            break
        if block == 0x21:
            label = data[pos]
            pos += 1
            if label == 0xF9 and data[pos] >= 4:
                packed, index = data[pos + 1], data[pos + 4]
                transparent = index if packed & 1 else None
            while data[pos] != 0:
                pos += data[pos] + 1
            pos += 1
            continue
        if block != 0x2C:
            raise InvalidArgumentError(f"{who}: invalid GIF data: unknown block {block:#x}")
        left, top, w, h, iflags = struct.unpack("<HHHHB", data[pos:pos + 9])
        pos += 9
        cmap = global_map
        if iflags & 0x80:
            n = 2 << (iflags & 7)
            cmap = np.frombuffer(data, np.uint8, 3 * n, pos).reshape(n, 3)
            pos += 3 * n
        if cmap is None:
            raise InvalidArgumentError(f"{who}: missing color map for frame {len(images)}")
        min_size = data[pos]
        pos += 1
        parts = []
        while data[pos] != 0:
            parts.append(data[pos + 1:pos + 1 + data[pos]])
            pos += data[pos] + 1
        pos += 1
        idx = np.frombuffer(_lzw(b"".join(parts), min_size, w * h, who), np.uint8)
        if len(idx) < w * h:
            idx = np.concatenate([idx, np.zeros(w * h - len(idx), np.uint8)])
        idx = idx[:w * h].reshape(h, w)
        if iflags & 0x40:  # interlaced: rows stored by passes 0::8, 4::8, 2::4, 1::2
            order = np.concatenate([np.arange(s, h, d) for s, d in
                                    ((0, 8), (4, 8), (2, 4), (1, 2))]).astype(np.intp)
            rows = np.empty_like(idx)
            rows[order] = idx
            idx = rows
        images.append((left, top, idx, cmap, transparent))
        transparent = None
    if not images:
        raise InvalidArgumentError(f"{who}: gif file does not contain any image")
    return images


def _gif_frames(data, who, all_frames=True):
    """TF's composition of a GIF's frames: the canvas is as large as the largest image (TF's
    choice, not the logical screen); each frame starts from the previous one (black for the
    first), draws its image clipped to the canvas, and leaves its transparent pixels."""
    images = _gif_images(data, who)
    height = max(idx.shape[0] for _, _, idx, _, _ in images)
    width = max(idx.shape[1] for _, _, idx, _, _ in images)
    frames = []
    canvas = np.zeros((height, width, 3), np.uint8)
    for left, top, idx, cmap, transparent in images[:None if all_frames else 1]:
        frame = canvas.copy()
        bottom, right = min(top + idx.shape[0], height), min(left + idx.shape[1], width)
        sub = idx[:max(bottom - top, 0), :max(right - left, 0)]
        if sub.size and sub.max() >= len(cmap):  # checked before transparency, as TF
            raise InvalidArgumentError(f"{who}: found color index {int(sub.max())} outside "
                                       f"of color map range {len(cmap)}")
        colors = cmap[sub]
        if transparent is not None:
            keep = sub == transparent
            colors = np.where(keep[..., None], frame[top:bottom, left:right], colors)
        frame[top:bottom, left:right] = colors
        frames.append(frame)
        canvas = frame
    return np.stack(frames)


def decode_gif(contents, name=None):
    """Decodes every frame of a GIF into a `(frames, height, width, 3)` uint8 tensor, as
    `tf.io.decode_gif`: the canvas is as large as the largest frame image (TF's rule); each
    frame starts from the previous one and its transparent pixels keep the previous frame's
    (black in the first); a colour index outside the colour table raises, transparent or not.
    As TF's kernel, PNG and JPEG files decode too, as one 3-channel frame.

    >>> from tapegpu.image_codecs import _gif_bytes_for_doc
    >>> tg.io.decode_gif(_gif_bytes_for_doc()).shape
    (1, 1, 2, 3)
    """
    return convert_to_tensor(_decode(contents, "decode_gif"))


def _gif_bytes_for_doc():
    """A 2x1 GIF (red, blue) for the docstring examples."""
    return (b"GIF89a" + struct.pack("<HHBBB", 2, 1, 0x80, 0, 0) + bytes([255, 0, 0, 0, 0, 255])
            + b"\x2c" + struct.pack("<HHHHB", 0, 0, 2, 1, 0) + b"\x02\x02\x44\x0a\x00\x3b")


# -- BMP ----------------------------------------------------------------------------------------

def _bmp_array(data, channels, who):
    """TF's BMP kernel: 8-bit (the bytes as gray, no palette), 24- and 32-bit files, bottom-up
    or top-down, the compression field not read; the file must be exactly the pixel offset
    plus the padded rows."""
    if len(data) < 32:
        raise InvalidArgumentError(f"{who}: Incomplete bmp content, requires at least 32 bytes "
                                   f"to find the header size, width, height, and bpp, got "
                                   f"{len(data)} bytes")
    offset = struct.unpack("<i", data[10:14])[0]
    width, height = struct.unpack("<ii", data[18:26])
    bpp = struct.unpack("<h", data[28:30])[0]
    have = bpp // 8
    if have not in (1, 3, 4):
        raise InvalidArgumentError(f"{who}: Number of channels inherent in the image must be "
                                   f"1, 3 or 4, was {have}")
    if width <= 0:
        raise InvalidArgumentError(f"{who}: Width must be positive")
    if height == 0:
        raise InvalidArgumentError(f"{who}: Height must be nonzero")
    if offset < 0:
        raise InvalidArgumentError(f"{who}: header size must be nonnegative")
    h = abs(height)
    stride = (have * width + 3) // 4 * 4
    if len(data) - offset - stride * h != 0:
        raise InvalidArgumentError(f"{who}: Input size should match (header_size + row_size * "
                                   f"abs_height) but they differ by "
                                   f"{len(data) - offset - stride * h}")
    rows = np.frombuffer(data, np.uint8, stride * h, offset).reshape(h, stride)
    px = rows[:, :width * have].reshape(h, width, have)
    if height > 0:  # bottom-up
        px = px[::-1]
    want = channels or have
    color = np.repeat(px, 3, -1) if have == 1 else px[..., [2, 1, 0]]  # BGR(A) -> RGB
    if want == 1:
        return np.ascontiguousarray(px)
    if want == 3:
        return np.ascontiguousarray(color)
    alpha = px[..., 3:] if have == 4 else np.full((h, width, 1), 255, np.uint8)
    return np.ascontiguousarray(np.concatenate([color, alpha], -1))


def decode_bmp(contents, channels=0, name=None):
    """Decodes a BMP into a `(height, width, channels)` uint8 tensor, as `tf.io.decode_bmp`:
    24-bit (RGB), 32-bit (RGBA) and 8-bit files (whose bytes are read as gray, their palette
    ignored, as TF); `channels` 0 (as the file), 3 or 4. Other formats raise, as TF's kernel.

    >>> import struct
    >>> bmp = (b"BM" + struct.pack("<IHHI", 58, 0, 0, 54) + struct.pack("<IiiHHIIiiII",
    ...        40, 1, 1, 1, 24, 0, 4, 0, 0, 0, 0) + bytes([1, 2, 3, 0]))
    >>> tg.io.decode_bmp(bmp).numpy().tolist()
    [[[3, 2, 1]]]
    """
    return convert_to_tensor(_decode(contents, "decode_bmp", channels))


# -- JPEG (Pillow) ------------------------------------------------------------------------------

def _pil(who):
    try:
        from PIL import Image
    except ImportError:
        raise ImportError(f"{who}: JPEG needs Pillow, which is not installed; "
                          "`pip install pillow`") from None
    return Image


def is_jpeg(contents, name=None):
    """Whether `contents` (bytes or a scalar string tensor) start as a JPEG file does
    (`tf.io.is_jpeg`), as a bool tensor.

    >>> bool(tg.io.is_jpeg(b"\\xff\\xd8\\xff\\xe0"))
    True
    """
    return convert_to_tensor(_contents(contents, "is_jpeg")[:3] == b"\xff\xd8\xff")


def _jpeg_options(ratio, fancy_upscaling, try_recover_truncated, dct_method, who):
    if ratio not in (1, 2, 4, 8):
        raise InvalidArgumentError(f"{who}: ratio must be 1, 2, 4, or 8, got {ratio!r}")
    if dct_method not in ("", "INTEGER_FAST", "INTEGER_ACCURATE"):
        raise InvalidArgumentError(f"{who}: dct_method must be one of {{'', 'INTEGER_FAST', "
                                   f"'INTEGER_ACCURATE'}}, got {dct_method!r}")
    if not fancy_upscaling:
        raise ValueError(f"{who}: fancy_upscaling=False is not supported (Pillow's libjpeg "
                         "always upsamples chroma smoothly); pass fancy_upscaling=True")
    if try_recover_truncated:
        raise ValueError(f"{who}: try_recover_truncated=True is not supported (Pillow does not "
                         "report how many lines of a truncated file it decoded, so "
                         "acceptable_fraction cannot be honoured); pass "
                         "try_recover_truncated=False")
    return ratio


def _jpeg_array(data, channels, ratio, who):
    """A JPEG's pixels (h, w, 1 or 3) through Pillow's libjpeg."""
    Image = _pil(who)
    try:
        im = Image.open(_pyio.BytesIO(data))
        mode = {0: None, 1: "L", 3: "RGB"}[channels]
        if mode is None:
            mode = "L" if im.mode == "L" else "RGB"
        w, h = im.size
        im.draft(mode, ((w + ratio - 1) // ratio, (h + ratio - 1) // ratio))
        im = im.convert(mode) if im.mode != mode else im
        a = np.asarray(im, np.uint8)
    except (OSError, SyntaxError) as e:
        raise InvalidArgumentError(f"{who}: jpeg::Uncompress failed. Invalid JPEG data or "
                                   f"crop window ({e})") from None
    return np.ascontiguousarray(a[..., None] if a.ndim == 2 else a)


def decode_jpeg(contents, channels=0, ratio=1, fancy_upscaling=True,
                try_recover_truncated=False, acceptable_fraction=1, dct_method="", name=None):
    """Decodes a JPEG into a `(height, width, channels)` uint8 tensor, as
    `tf.io.decode_jpeg`, with Pillow's libjpeg: `channels` 0 (as the file), 1 (the luma, as
    libjpeg's grayscale output) or 3; `ratio` 1, 2, 4 or 8 downscales while decoding. As TF's
    kernel, it also decodes PNG files and one-frame GIFs (not BMP). `dct_method` is a hint,
    as TF documents it: Pillow always uses libjpeg's accurate integer DCT (TF's
    'INTEGER_ACCURATE'), where TF's default is 'INTEGER_FAST', so pixels can differ from TF's
    default decoding by a few levels. `fancy_upscaling=False` and
    `try_recover_truncated=True` raise ValueError.

    With Pillow installed (the examples skip without it):

    >>> gray = tg.fill([8, 8, 3], tg.constant(128, tg.uint8))
    >>> img = tg.io.decode_jpeg(tg.io.encode_jpeg(gray))  # doctest: +SKIP
    >>> img.shape, int(img.numpy().mean())  # doctest: +SKIP
    ((8, 8, 3), 128)
    """
    ratio = _jpeg_options(ratio, fancy_upscaling, try_recover_truncated, dct_method,
                          "decode_jpeg")
    return convert_to_tensor(_decode(contents, "decode_jpeg", channels, ratio=ratio))


def decode_and_crop_jpeg(contents, crop_window, channels=0, ratio=1, fancy_upscaling=True,
                         try_recover_truncated=False, acceptable_fraction=1, dct_method="",
                         name=None):
    """`decode_jpeg` then the window `crop_window = [y, x, height, width]` of the result, as
    `tf.io.decode_and_crop_jpeg` (JPEG files only); a window outside the image raises
    InvalidArgumentError.

    >>> jpg = tg.io.encode_jpeg(tg.zeros([8, 8, 3], tg.uint8))  # doctest: +SKIP
    >>> tg.io.decode_and_crop_jpeg(jpg, [2, 1, 4, 3]).shape  # doctest: +SKIP
    (4, 3, 3)
    """
    who = "decode_and_crop_jpeg"
    ratio = _jpeg_options(ratio, fancy_upscaling, try_recover_truncated, dct_method, who)
    win = np.asarray(crop_window.numpy() if isinstance(crop_window, Tensor) else crop_window)
    if win.shape != (4,):
        raise InvalidArgumentError(f"{who}: crop_window must be 1-D with four elements "
                                   f"[y, x, height, width], got {win.tolist()}")
    img = _decode(contents, who, channels, ratio=ratio)
    y, x, h, w = (int(v) for v in win)
    if y < 0 or x < 0 or h <= 0 or w <= 0 or y + h > img.shape[0] or x + w > img.shape[1]:
        raise InvalidArgumentError(f"{who}: jpeg::Uncompress failed. Invalid JPEG data or crop "
                                   f"window: window {win.tolist()} for an image of "
                                   f"{img.shape[0]}x{img.shape[1]}")
    return convert_to_tensor(np.ascontiguousarray(img[y:y + h, x:x + w]))


def extract_jpeg_shape(contents, output_type=dtypes.int32, name=None):
    """`[height, width, channels]` of a JPEG, read from its frame header without decoding, as
    `tf.io.extract_jpeg_shape` (int32, or `output_type` int64).

    >>> jpg = tg.io.encode_jpeg(tg.zeros([5, 7, 3], tg.uint8))  # doctest: +SKIP
    >>> tg.io.extract_jpeg_shape(jpg).numpy()  # doctest: +SKIP
    array([5, 7, 3], dtype=int32)
    """
    who = "extract_jpeg_shape"
    data = _contents(contents, who)
    out = _image_dtype(output_type, ("int32", "int64"), who)
    pos = 2 if data[:2] == b"\xff\xd8" else None
    while pos is not None and pos + 4 <= len(data):
        if data[pos] != 0xFF:
            break
        marker = data[pos + 1]
        if marker == 0xFF:
            pos += 1
            continue
        size = struct.unpack(">H", data[pos + 2:pos + 4])[0]
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            h, w = struct.unpack(">HH", data[pos + 5:pos + 9])
            return convert_to_tensor(np.array([h, w, data[pos + 9]], out))
        pos += 2 + size
    raise InvalidArgumentError(f"{who}: Invalid JPEG data, size {len(data)}")


def encode_jpeg(image, format="", quality=95, progressive=False, optimize_size=False,
                chroma_downsampling=True, density_unit="in", x_density=300, y_density=300,
                xmp_metadata="", name=None):  # noqa: A002
    """Encodes a `(height, width, channels)` uint8 image (1 or 3 channels; `format`
    'grayscale' or 'rgb' to insist) as JPEG bytes, as `tf.io.encode_jpeg`, with Pillow's
    libjpeg: `quality` 0-100, `progressive`, `optimize_size`, `chroma_downsampling` (4:2:0,
    else 4:4:4), the JFIF density.

    >>> jpg = tg.io.encode_jpeg(tg.zeros([4, 4, 1], tg.uint8))  # doctest: +SKIP
    >>> jpg.numpy()[:3]  # doctest: +SKIP
    b'\\xff\\xd8\\xff'
    """
    who = "encode_jpeg"
    a = convert_to_tensor(image).numpy()
    if a.dtype != np.uint8 or a.ndim != 3 or a.shape[-1] not in (1, 3):
        raise ValueError(f"{who}: image must be a uint8 tensor of shape (height, width, 1 or "
                         f"3), got {a.dtype.name} of shape {a.shape}")
    want = {"": a.shape[-1], "grayscale": 1, "rgb": 3}.get(format)
    if want is None:
        raise ValueError(f"{who}: format must be '', 'grayscale' or 'rgb', got {format!r}")
    if want != a.shape[-1]:
        raise ValueError(f"{who}: format {format!r} needs {want} channels, got {a.shape[-1]}")
    if not 0 <= quality <= 100:
        raise ValueError(f"{who}: quality must be in [0, 100], got {quality}")
    if density_unit not in ("in", "cm"):
        raise ValueError(f"{who}: density_unit must be 'in' or 'cm', got {density_unit!r}")
    if xmp_metadata:
        raise ValueError(f"{who}: xmp_metadata is not supported by tapegpu, got "
                         f"{xmp_metadata!r}")
    Image = _pil(who)
    im = Image.fromarray(a[..., 0] if a.shape[-1] == 1 else a, "L" if a.shape[-1] == 1 else "RGB")
    dpi = (x_density, y_density) if density_unit == "in" else \
        (x_density * 2.54, y_density * 2.54)
    buf = _pyio.BytesIO()
    im.save(buf, "JPEG", quality=int(quality), progressive=bool(progressive),
            optimize=bool(optimize_size), subsampling=0 if not chroma_downsampling else 2,
            dpi=dpi)
    return convert_to_tensor(buf.getvalue())


# -- decode_image -------------------------------------------------------------------------------

def _format(data):
    if data[:3] == b"\xff\xd8\xff":
        return "JPEG"
    if data[:8] == _PNG_MAGIC:
        return "PNG"
    if data[:3] == b"GIF":
        return "GIF"
    if data[:2] == b"BM":
        return "BMP"
    if data[:4] == b"RIFF" and len(data) > 12 and data[8:12] == b"WEBP":
        return "WebP"
    if data[:2] == b"\xff\x0a" or data[:12] == b"\x00\x00\x00\x0cJXL \r\n\x87\n":
        return "JPEG XL"
    return None


def _decode(contents, op, channels=0, bits=8, expand_animations=True, ratio=1):
    """TF's one image kernel (DecodeImageV2) behind decode_jpeg / png / gif / bmp / image /
    and_crop_jpeg: the format is read from the first bytes, and JPEG, PNG and GIF files decode
    through each other's ops (a GIF through decode_jpeg / decode_png only with one frame),
    BMP only through decode_bmp and decode_image. A numpy array: (h, w, c), or
    (frames, h, w, 3) for decode_gif; PNG at `bits` 8 or 16 per sample."""
    data = _contents(contents, op)
    if not data:
        raise InvalidArgumentError(f"{op}: Input is empty.")
    channels = 0 if channels is None else channels
    if op != "decode_gif":
        channels = _check_channels(channels, (0, 1, 3, 4), op)
    fmt = _format(data)
    if fmt is None:
        raise InvalidArgumentError(f"{op}: Unknown image file format. One of JPEG, PNG, GIF, "
                                   "BMP required (tapegpu does not decode JPEG XL or WebP).")
    if fmt in ("WebP", "JPEG XL"):
        raise InvalidArgumentError(f"{op}: {fmt} is not supported by tapegpu; decode it with "
                                   "Pillow and pass the array to tg.constant")
    if op == "decode_and_crop_jpeg" and fmt != "JPEG":
        raise InvalidArgumentError(f"{op}: DecodeAndCropJpeg operation can run on JPEG only, "
                                   f"but detected {fmt}.")
    if fmt == "BMP":
        if channels == 1:
            raise InvalidArgumentError(f"{op}: `channels` must be 0, 3 or 4 for BMP, but got 1")
        if op not in ("decode_bmp", "decode_image"):
            raise InvalidArgumentError(f"{op}: Trying to decode BMP format using a wrong op. "
                                       "Use `decode_bmp` or `decode_image` instead.")
        return _bmp_array(data, channels, op)
    if op == "decode_bmp":
        raise InvalidArgumentError(f"{op}: Trying to decode {fmt} format using DecodeBmp op. "
                                   f"Use `decode_{fmt.lower()}` or `decode_image` instead.")
    if fmt == "GIF":
        if channels not in (0, 3):
            raise InvalidArgumentError(f"{op}: channels must be 0 or 3 for GIF, got {channels}")
        many = op == "decode_gif" or op == "decode_image" and expand_animations
        frames = _gif_frames(data, op, all_frames=many or op != "decode_image")
        if many:
            return frames
        if op != "decode_image" and len(frames) != 1:
            raise InvalidArgumentError(f"{op}: Got {len(frames)} frames, but animated gifs can "
                                       "only be decoded by tf.io.decode_gif or "
                                       "tf.io.decode_image")
        return frames[0]
    if fmt == "JPEG":
        if op == "decode_gif":
            channels = 3
        if channels == 4:
            raise InvalidArgumentError(f"{op}: JPEG does not support 4 channels")
        img = _jpeg_array(data, channels, ratio, op)
    else:
        img = _png_array(data, 3 if op == "decode_gif" else channels, bits, op)
    return img[None] if op == "decode_gif" else img


def decode_image(contents, channels=None, dtype=dtypes.uint8, name=None,
                 expand_animations=True):
    """Decodes a BMP, GIF, JPEG or PNG file, found by its first bytes, as
    `tf.io.decode_image`: a `(height, width, channels)` tensor, or `(frames, height, width, 3)`
    for a GIF with `expand_animations=True` (its first frame otherwise). `dtype` uint8 or
    float32 (values in [0, 1]: a PNG read at 16 bits / 65535, as TF, the others / 255).

    >>> png = tg.io.encode_png(tg.constant([[[0], [255]]], tg.uint8))
    >>> tg.io.decode_image(png, dtype=tg.float32)[..., 0].numpy()
    array([[0., 1.]], dtype=float32)
    """
    out_dtype = _image_dtype(dtype, ("uint8", "float32"), "decode_image")
    img = _decode(contents, "decode_image", channels, 16 if out_dtype == "float32" else 8,
                  expand_animations)
    if out_dtype == "float32":
        img = img.astype(np.float32) / np.float32(65535.0 if img.dtype == np.uint16 else 255.0)
    return convert_to_tensor(np.ascontiguousarray(img))


# -- WAV ----------------------------------------------------------------------------------------

def decode_wav(contents, desired_channels=-1, desired_samples=-1, name=None):
    """Decodes a 16-bit PCM WAV file into `(audio, sample_rate)`, as `tf.audio.decode_wav`:
    `audio` float32 of shape `(samples, channels)` with values `sample / 32768` in [-1, 1),
    `sample_rate` a scalar int32. `desired_channels` keeps the first channels or repeats the
    last one; `desired_samples` cuts or pads with zeros.

    >>> import struct
    >>> body = struct.pack("<2h", 16384, -32768)
    >>> wav = (b"RIFF" + struct.pack("<I", 36 + len(body)) + b"WAVEfmt " +
    ...        struct.pack("<IHHIIHH", 16, 1, 1, 8000, 16000, 2, 16) + b"data" +
    ...        struct.pack("<I", len(body)) + body)
    >>> audio, rate = tg.audio.decode_wav(wav)
    >>> audio.numpy()[:, 0], int(rate)
    (array([ 0.5, -1. ], dtype=float32), 8000)
    """
    who = "decode_wav"
    data = _contents(contents, who)
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise InvalidArgumentError(f"{who}: Header mismatch: expected RIFF....WAVE")
    pos, fmt, samples = 12, None, None
    while pos + 8 <= len(data):
        kind, size = data[pos:pos + 4], struct.unpack("<I", data[pos + 4:pos + 8])[0]
        body = data[pos + 8:pos + 8 + size]
        if kind == b"fmt ":
            fmt = struct.unpack("<HHIIHH", body[:16])
        elif kind == b"data":
            samples = body
            break
        pos += 8 + size + (size & 1)
    if fmt is None or samples is None:
        raise InvalidArgumentError(f"{who}: no 'fmt ' or 'data' chunk found")
    audio_format, n_channels, rate, _, _, bits = fmt
    if audio_format not in (1, 0xFFFE) or bits != 16:
        raise InvalidArgumentError(f"{who}: can only read 16-bit PCM WAV files, got format "
                                   f"{audio_format} with {bits} bits per sample")
    if n_channels < 1:
        raise InvalidArgumentError(f"{who}: bad number of channels {n_channels}")
    n = len(samples) // (2 * n_channels)
    pcm = np.frombuffer(samples, "<i2", n * n_channels).reshape(n, n_channels)
    audio = pcm.astype(np.float32) / 32768.0
    if desired_channels > 0 and desired_channels != n_channels:
        idx = np.minimum(np.arange(desired_channels), n_channels - 1)
        audio = audio[:, idx]
    if desired_samples >= 0:
        if desired_samples <= len(audio):
            audio = audio[:desired_samples]
        else:
            audio = np.concatenate([audio, np.zeros((desired_samples - len(audio),
                                                     audio.shape[1]), np.float32)])
    return (convert_to_tensor(np.ascontiguousarray(audio)),
            convert_to_tensor(np.int32(rate)))


def encode_wav(audio, sample_rate, name=None):
    """Encodes float32 audio of shape `(samples, channels)` as a 16-bit PCM WAV file (a scalar
    string tensor), as `tf.audio.encode_wav`: each value becomes `round(x * 32768)` clipped to
    [-32768, 32767].

    >>> wav = tg.audio.encode_wav(tg.constant([[0.5], [-1.0]]), 8000)
    >>> tg.audio.decode_wav(wav)[0].numpy()[:, 0]
    array([ 0.5, -1. ], dtype=float32)
    """
    a = convert_to_tensor(audio).numpy()
    if a.ndim != 2 or a.dtype != np.float32:
        raise ValueError(f"encode_wav: audio must be float32 of shape (samples, channels), got "
                         f"{a.dtype.name} of shape {a.shape}")
    rate = int(convert_to_tensor(sample_rate).numpy())
    scaled = np.trunc(a.astype(np.float64) * 32768.0 + np.copysign(0.5, a))
    pcm = np.clip(scaled, -32768, 32767).astype("<i2")
    body = pcm.tobytes()
    ch = a.shape[1]
    header = (b"RIFF" + struct.pack("<I", 36 + len(body)) + b"WAVEfmt " +
              struct.pack("<IHHIIHH", 16, 1, ch, rate, rate * ch * 2, ch * 2, 16) + b"data" +
              struct.pack("<I", len(body)))
    return convert_to_tensor(header + body)
