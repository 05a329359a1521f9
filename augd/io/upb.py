"""tf.train.Example by protobuf's own parser (upb, C; ~10x augd.io.lite's reader), for augd.io.lite: its answer is
taken only where the reader's would be the same (parsed()), and the reader decides everything else."""
from __future__ import annotations

import functools

from google.protobuf.message import DecodeError   # 0.5 ms: protobuf's parser is built on first use (example_class)

from augd.io import wire
from augd.io.wire import varint

__all__ = ["example_class", "forget", "parsed"]


@functools.lru_cache(maxsize=None)
def example_class():
    """tf.train.Example's schema as a message class of protobuf's own parser (upb, C), built here from its
    fields (example.proto's, in a pool of augd's own) so that nothing imports TensorFlow; None where protobuf's
    parser is not upb (its pure-Python one is no faster than the reader below)."""
    try:
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
        from google.protobuf.internal import api_implementation
    except ImportError:  # pragma: no cover - protobuf comes with TensorFlow
        return None
    if api_implementation.Type() != "upb":
        return None
    F = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(name="augd/lite/example.proto", package="augd.lite", syntax="proto3")

    def message(name: str, *fields: tuple) -> descriptor_pb2.DescriptorProto:
        m = file.message_type.add(name=name)
        for name_, number, kind, type_name, oneof in fields:
            f = m.field.add(name=name_, number=number, type=kind, label=F.LABEL_REPEATED if not type_name and
                            name_ == "value" else F.LABEL_OPTIONAL)
            if type_name:
                f.type_name = f".augd.lite.{type_name}"
            if oneof:
                f.oneof_index = 0
        return m

    message("BytesList", ("value", 1, F.TYPE_BYTES, "", False))
    message("FloatList", ("value", 1, F.TYPE_FLOAT, "", False))      # proto3: packed
    message("Int64List", ("value", 1, F.TYPE_INT64, "", False))
    message("Feature", ("bytes_list", 1, F.TYPE_MESSAGE, "BytesList", True),
            ("float_list", 2, F.TYPE_MESSAGE, "FloatList", True),
            ("int64_list", 3, F.TYPE_MESSAGE, "Int64List", True)).oneof_decl.add(name="kind")
    features = message("Features", ("feature", 1, F.TYPE_MESSAGE, "Features.FeatureEntry", False))
    features.field[0].label = F.LABEL_REPEATED
    entry = features.nested_type.add(name="FeatureEntry", options=descriptor_pb2.MessageOptions(map_entry=True))
    entry.field.add(name="key", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=F.TYPE_MESSAGE, type_name=".augd.lite.Feature",
                    label=F.LABEL_OPTIONAL)
    message("Example", ("features", 1, F.TYPE_MESSAGE, "Features", False))
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("augd.lite.Example"))


def parsed(serialized: bytes):
    """The record parsed by protobuf's C parser (~10x augd.io.lite's own reader), or None: that reader then
    decides, with its own limits and errors. Its answer is taken only for a record it writes back byte for byte,
    its feature map's entries in any order: no unknown, repeated or unpacked fields, no varint written long, no key
    twice (the callers also leave a record of more values than the reader's budget to it). The reader's verdict on
    anything else is unchanged. A map's order is no part of its meaning, and writers keep none: TensorFlow's Python
    writes the OD API's features in an order of its own, which no parse writes back as it was."""
    global _last
    cls = example_class()
    if cls is None or not isinstance(serialized, bytes):
        return None
    last = _last
    if last[0] is serialized:   # decode_example, then value_offsets of the same record
        return last[1]
    try:
        message = cls.FromString(serialized)
    except DecodeError:
        return None
    # more entries than the bound holds at 5 fields each (an entry, its key, its value, its kind, a value: a real
    # entry's least): left to the reader, which says whether it is over, and the walk below, in Python, is not
    # made over millions of entries first
    if 5 * len(message.features.feature) + 1 > wire.MAX_RECORD_FIELDS:
        return None
    message.DiscardUnknownFields()   # kept, they would be written back where the reader reads them as values
    again = message.SerializeToString(deterministic=True)
    if again != serialized and not _same_entries(serialized, again):
        return None
    _last = (serialized, message)   # one tuple, swapped whole: a thread sees the old record's or this one's
    return message


#: The last record parsed() took protobuf's answer for (its bytes, the identical object) and that answer, until
#: value_offsets of that record (its last use by the records reader) clears it.
_last: tuple = (None, None)


def forget(serialized: bytes) -> None:
    """Let the slot go if it holds `serialized` (its last use)."""
    global _last
    if _last[0] is serialized:
        _last = (None, None)


def _same_entries(serialized: bytes, again: bytes) -> bool:
    """Whether `again` holds `serialized`'s feature map entries, each as written, in another order (upb writes a
    map in an order of its own): the same framing, the same keys once each, each entry the same bytes. Only
    framing is read here, a few varints an entry; anything else is not the same (False)."""
    if len(serialized) != len(again):
        return False
    mine, theirs = _entries(serialized), _entries(again)
    if mine is None or theirs is None or len(mine) != len(theirs):
        return False
    # slices of bytes compare by memcmp (a memoryview's compare item by item: ~1 us a KB)
    return all(key in theirs and serialized[i:j] == again[theirs[key][0]:theirs[key][1]]
               for key, (i, j) in mine.items())


def _entries(buf: bytes) -> dict | None:
    """{key: (start, end) of its map entry in buf} of an Example framed as one features field of map entries, each
    key first; None for any other framing or a key written twice. (A length under 128 is one byte: read inline, the
    walk costs ~0.3 us an entry.)"""
    try:
        if buf[0] != 0x0A:   # Example.features (1, length-delimited), the message's one field
            return None
        size, pos = varint(buf, 1)
        end = len(buf)
        if pos + size != end:
            return None
        out: dict = {}
        while pos < end:   # Features.feature (1): map entries, their key (1) first
            n = buf[pos + 1]
            at = pos + 2
            if n >= 0x80:
                n, at = varint(buf, pos + 1)
            k = buf[at + 1]
            key_at = at + 2
            if k >= 0x80:
                k, key_at = varint(buf, at + 1)
            if buf[pos] != 0x0A or buf[at] != 0x0A or at + n > end:
                return None
            key = buf[key_at:key_at + k]
            if key in out:
                return None
            out[key], pos = (pos, at + n), at + n
    except (IndexError, ValueError):
        return None
    return out
