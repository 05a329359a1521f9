"""The protobuf wire format, read with bounds (augd.io.lite's reader and its fast path, augd.io.upb): each varint
at most MAX_VARINT_BYTES, each record at most MAX_RECORD_FIELDS fields and values, counted as they are read."""
from __future__ import annotations

from typing import Iterator

__all__ = ["MAX_RECORD_FIELDS", "MAX_VARINT_BYTES", "Budget", "fields", "length_delimited", "signed", "varint"]

#: The most bytes of one varint, as protobuf's own parser reads them (64 bits): past them a record is malformed,
#: and each byte costs the same (an unbounded shift made 320 KB of 0xFF take seconds, quadratically).
MAX_VARINT_BYTES = 10


#: The most fields and values one record may hold, counted as they are read (packed floats, masks included, are
#: read in one piece and count once). A real record holds a few dozen fields and a value or a few per object; a
#: hostile one of nothing but 2-byte fields would cost ~0.5 s of Python per MB, and ~20x its size in objects.
MAX_RECORD_FIELDS = 1_000_000


class Budget:
    """What is left of MAX_RECORD_FIELDS for one record."""
    __slots__ = ("left",)

    def __init__(self, n: int | None = None):
        self.left = MAX_RECORD_FIELDS if n is None else n

    def take(self, n: int = 1) -> None:
        self.left -= n
        if self.left < 0:
            raise ValueError(f"it holds more than {MAX_RECORD_FIELDS} fields and values (MAX_RECORD_FIELDS)")


def varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = 0
    for k in range(MAX_VARINT_BYTES):
        if pos >= len(buf):
            raise ValueError("the message ends inside a varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << (7 * k)
        if b < 0x80:
            if result >> 64:
                raise ValueError(f"a varint of {result} does not fit 64 bits")
            return result, pos
    raise ValueError(f"a varint runs past {MAX_VARINT_BYTES} bytes")


def fields(buf, pos: int = 0, end: int | None = None, budget: Budget | None = None) \
        -> Iterator[tuple[int, int, object, int]]:
    """(field number, wire type, value, where the value starts in `buf`) of the protobuf message in buf[pos:end]:
    ints for varints, bytes (memoryview slices of a memoryview) for the rest; each field taken from `budget`."""
    end = len(buf) if end is None else end
    while pos < end:
        if budget is not None:
            budget.take()
        key, pos = varint(buf, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise ValueError("a field numbered 0 (protobuf numbers fields from 1)")
        if wire == 0:
            at = pos
            value, pos = varint(buf, pos)
        elif wire == 2:
            n, pos = varint(buf, pos)
            if pos + n > end:
                raise ValueError("a field runs past the end of its message")
            at, value, pos = pos, buf[pos:pos + n], pos + n
        elif wire == 5:
            at, value, pos = pos, buf[pos:pos + 4], pos + 4
        elif wire == 1:
            at, value, pos = pos, buf[pos:pos + 8], pos + 8
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        if pos > end:
            raise ValueError("a field runs past the end of its message")
        yield number, wire, value, at


def length_delimited(wire: int, v):
    """`v`, a length-delimited field's bytes; ValueError for a field of another wire type where a message or
    bytes must be (a varint there is no length: taken as one, it could ask for gigabytes)."""
    if wire != 2:
        raise ValueError(f"wire type {wire} where a message or bytes field must be")
    return v


def signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v
