"""A GIF "bomb" written byte by byte (issue 24 point 2): a tiny file whose logical screen (the
canvas every frame is decoded onto) is large, with many 1×1 frames — each frame costs the whole
canvas once decoded. `local=True` gives every frame its own palette, so Pillow decodes the
frames after the first in full colour (4 bytes a pixel instead of 1)."""

import io
import struct


def bomb_gif(canvas: tuple[int, int] = (2500, 2500), frames: int = 50, *, local: bool = False) -> bytes:
    width, height = canvas
    out = io.BytesIO()
    out.write(b"GIF89a" + struct.pack("<HHBBB", width, height, 0x80, 0, 0))  # a global table of 2 colours
    out.write(b"\x00\x00\x00\xff\xff\xff")
    out.write(b"\x21\xff\x0bNETSCAPE2.0\x03\x01\x00\x00\x00")  # loop forever
    for i in range(frames):
        out.write(b"\x21\xf9\x04\x00\x0a\x00\x00\x00")  # 100 ms a frame
        out.write(b"\x2c" + struct.pack("<HHHHB", 0, 0, 1, 1, 0x80 if local else 0))
        if local:
            out.write(bytes([i % 256, 0, 0, 255, 255, (i * 7) % 256]))
        # LZW, minimum code size 2, 3-bit codes: clear (4), the pixel (0 or 1), end (5).
        out.write(b"\x02\x02" + struct.pack("<H", 4 | ((i % 2) << 3) | (5 << 6)) + b"\x00")
    out.write(b"\x3b")
    return out.getvalue()
