"""Msgpack bytes checked before a decoder sizes anything by them.

ormsgpack before 1.13 (the newest release for Python 3.10) allocates each container at the
length its bytes declare, and crashes the process (a segfault) when that fails: an array
nested in another and declaring four billion elements, in a stored value of a corrupt or
hostile row, would end the reading process. `check_lengths` refuses such bytes first: no
container declares more elements than bytes are left, no string, binary or extension more
bytes than there are. It reads headers only, and is needed only with those releases
(`NEEDED`); 1.13 and later refuse the same bytes themselves.
"""

from __future__ import annotations

from typing import Final

import ormsgpack

_VERSION: Final = tuple(int(part) for part in ormsgpack.__version__.split(".")[:2] if part.isdigit())
NEEDED: Final = _VERSION < (1, 13)

# Headers of a fixed size: nil, false, true, floats, unsigned and signed ints.
_FIXED: Final = {0xC0: 1, 0xC2: 1, 0xC3: 1, 0xCA: 5, 0xCB: 9, 0xCC: 2, 0xCD: 3, 0xCE: 5, 0xCF: 9, 0xD0: 2, 0xD1: 3, 0xD2: 5, 0xD3: 9}
_SIZED: Final = {0xC4: 1, 0xC5: 2, 0xC6: 4, 0xD9: 1, 0xDA: 2, 0xDB: 4}  # bin and str: the width of their length
_EXT: Final = {0xC7: 1, 0xC8: 2, 0xC9: 4}  # ext 8/16/32: the width of their length
_ARRAY: Final = {0xDC: 2, 0xDD: 4}
_MAP: Final = {0xDE: 2, 0xDF: 4}
_MSGPACK_EXTS: Final = range(0, 7)  # LangGraph's extension codes: their payload is msgpack too
_MAX_DEPTH: Final = 32


def check_lengths(data: bytes, depth: int = 0) -> None:
    """ValueError when an object in `data` declares more than the bytes left; nothing else is
    judged (the decoder reports the rest)."""
    if depth > _MAX_DEPTH:
        raise ValueError("msgpack extensions nested too deep")
    end, i, pending = len(data), 0, 1
    while pending > 0 and i < end:
        pending -= 1
        b = data[i]
        count = 0
        if b <= 0x7F or b >= 0xE0:  # fixints
            i += 1
            continue
        if b <= 0x8F:  # fixmap
            count, i = 2 * (b & 0x0F), i + 1
        elif b <= 0x9F:  # fixarray
            count, i = b & 0x0F, i + 1
        elif b <= 0xBF:  # fixstr
            i += 1 + (b & 0x1F)
        elif b in _FIXED:
            i += _FIXED[b]
        elif b in _SIZED:
            width = _SIZED[b]
            i += 1 + width + int.from_bytes(data[i + 1 : i + 1 + width], "big")
        elif b in _EXT or 0xD4 <= b <= 0xD8:
            width = _EXT.get(b, 0)
            size = int.from_bytes(data[i + 1 : i + 1 + width], "big") if width else 1 << (b - 0xD4)
            code = int.from_bytes(data[i + 1 + width : i + 2 + width], "big", signed=True)
            start = i + 2 + width
            if start + size > end:
                raise ValueError("a msgpack extension declares more bytes than there are")
            if code in _MSGPACK_EXTS:
                check_lengths(data[start : start + size], depth + 1)
            i = start + size
        elif b in _ARRAY or b in _MAP:
            width = _ARRAY.get(b) or _MAP[b]
            declared = int.from_bytes(data[i + 1 : i + 1 + width], "big")
            count, i = declared * (2 if b in _MAP else 1), i + 1 + width
        else:  # 0xC1, never used
            raise ValueError("a msgpack value holds the byte 0xc1")
        if i > end:
            raise ValueError("a msgpack value declares more bytes than there are")
        pending += count
        if pending > end - i:  # every element takes a byte at least
            raise ValueError("a msgpack container declares more elements than there are bytes")
