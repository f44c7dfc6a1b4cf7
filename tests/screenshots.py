"""Headless Chromium screenshots of the HTML fleetnap writes, and a stdlib PNG reader to check them."""

from __future__ import annotations

import os
import struct
import subprocess
import zlib


def screenshot(html_file, png, tmp_path, size=(1400, 900)):
    """Render ``html_file`` with Debian's chromium into ``png``; raise with chromium's log if it fails."""
    cmd = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
           "--no-first-run", "--disable-background-networking", "--disable-component-update",
           "--disable-sync", "--user-data-dir=%s" % (tmp_path / "chromium-profile"),
           "--screenshot=%s" % png, "--window-size=%d,%d" % size, html_file.resolve().as_uri()]
    log = tmp_path / "chromium.log"
    with open(log, "wb") as out:
        # output to a file, not a pipe: chromium's helper processes may outlive it
        subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, timeout=120,
                       env=dict(os.environ, HOME=str(tmp_path)))
    assert png.exists(), log.read_text(errors="replace")[-2000:]
    return png


def png_pixels(path):
    """(width, height, set of distinct RGB colours) of an 8-bit RGB/RGBA PNG, stdlib only."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, ctype = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and ctype in (2, 6)
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * bpp
    prev = bytearray(stride)
    colours = set()
    i = 0
    for _ in range(height):
        f = raw[i]
        line = bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            if f == 1:
                line[x] = (line[x] + a) & 255
            elif f == 2:
                line[x] = (line[x] + b) & 255
            elif f == 3:
                line[x] = (line[x] + ((a + b) >> 1)) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pr = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[x] = (line[x] + pr) & 255
        for x in range(0, stride, bpp * 4):  # every 4th pixel is plenty
            colours.add(bytes(line[x:x + 3]))
        prev = line
    return width, height, colours


