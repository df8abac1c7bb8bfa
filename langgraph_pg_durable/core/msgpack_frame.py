"""Where one msgpack object ends, without decoding it: so that each stored item decodes
from exactly its own bytes.

ormsgpack ignores bytes after the first object, so an item row holding two objects
would read back as the first one, and in a batch decode (items framed as one array)
would shift every later item by one. A row is checked with `is_one_object` first.
"""

from __future__ import annotations

# First byte -> (fixed bytes after the marker, bytes of a length that follows, child objects per
# unit of length). Containers: child objects = length (arrays) or 2 x length (maps).
_FIXED = {
    0xC0: 0,
    0xC2: 0,
    0xC3: 0,  # nil, false, true
    0xCA: 4,
    0xCB: 8,  # float 32/64
    0xCC: 1,
    0xCD: 2,
    0xCE: 4,
    0xCF: 8,  # uint 8-64
    0xD0: 1,
    0xD1: 2,
    0xD2: 4,
    0xD3: 8,  # int 8-64
    0xD4: 2,
    0xD5: 3,
    0xD6: 5,
    0xD7: 9,
    0xD8: 17,  # fixext 1-16: type byte + data
}
_SIZED = {  # marker -> (bytes of the length, extra bytes after it)
    0xC4: (1, 0),
    0xC5: (2, 0),
    0xC6: (4, 0),  # bin 8-32
    0xC7: (1, 1),
    0xC8: (2, 1),
    0xC9: (4, 1),  # ext 8-32 (a type byte after the length)
    0xD9: (1, 0),
    0xDA: (2, 0),
    0xDB: (4, 0),  # str 8-32
}
_CONTAINERS = {0xDC: (2, 1), 0xDD: (4, 1), 0xDE: (2, 2), 0xDF: (4, 2)}  # array 16/32, map 16/32


def object_end(data: bytes, offset: int = 0) -> int:
    """The offset just past the msgpack object that starts at `offset`; raises ValueError
    if the bytes end first or hold a byte msgpack never uses (0xC1)."""
    size = len(data)
    pending = 1  # objects still to skip
    while pending:
        if offset >= size:
            raise ValueError("msgpack ends inside an object")
        marker = data[offset]
        offset += 1
        pending -= 1
        if marker <= 0x7F or marker >= 0xE0:  # positive and negative fixint
            continue
        if marker <= 0x8F:  # fixmap
            pending += 2 * (marker & 0x0F)
        elif marker <= 0x9F:  # fixarray
            pending += marker & 0x0F
        elif marker <= 0xBF:  # fixstr
            offset += marker & 0x1F
        elif marker in _FIXED:
            offset += _FIXED[marker]
        elif marker in _SIZED:
            width, extra = _SIZED[marker]
            if offset + width > size:
                raise ValueError("msgpack ends inside a length")
            offset += width + extra + int.from_bytes(data[offset : offset + width], "big")
        elif marker in _CONTAINERS:
            width, per = _CONTAINERS[marker]
            if offset + width > size:
                raise ValueError("msgpack ends inside a length")
            pending += per * int.from_bytes(data[offset : offset + width], "big")
            offset += width
        else:
            raise ValueError(f"byte 0x{marker:02x} is not msgpack")
    if offset > size:
        raise ValueError("msgpack ends inside an object")
    return offset


def is_one_object(data: bytes) -> bool:
    """Whether `data` is exactly one msgpack object: nothing missing, nothing after it."""
    try:
        return object_end(data) == len(data)
    except ValueError:
        return False
