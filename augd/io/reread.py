"""A scanned image read again when its job runs it, and held to what the scan saw: a file swapped after the scan
(say, for a decompression bomb) is never decoded on the old header's word. TensorFlow-free."""
from __future__ import annotations

from augd.errors import Rejected, RejectReason, undecodable_pixels
from augd.formats import jpeg_ends_before_scan, read_header
from augd.io.inputs import InputImage, RejectedInput
from augd.io.jobfs import read_bytes, vanished

__all__ = ["read_scanned"]


def read_scanned(img: InputImage) -> tuple[bytes | None, RejectedInput | None]:
    """(the image's bytes, None), or (the bytes read or None, why it is rejected): it cannot be read (`missing`
    when it vanished: not a reason of the image's own, the job fails), it changed since the scan (size, format,
    dimensions, orientation), or a JPEG ends before its first scan (TF's libjpeg would print on stderr)."""
    try:
        data = read_bytes(img)
    except OSError as exc:
        if vanished(exc):
            return None, RejectedInput(img.relpath, RejectReason.MISSING,
                                       f"listed when the job was scanned, gone when read: {exc}")
        return None, RejectedInput(img.relpath, RejectReason.UNREADABLE, f"cannot read: {exc}")
    changed = _changed_since_scan(img, data)
    if changed:
        return data, RejectedInput(img.relpath, RejectReason.UNREADABLE, changed)
    if img.header.format == "jpeg" and jpeg_ends_before_scan(data):
        return data, RejectedInput(img.relpath, RejectReason.UNDECODABLE, undecodable_pixels("jpeg"))
    return data, None


def _changed_since_scan(img: InputImage, data: bytes) -> str | None:
    """Why the bytes read are not the file the scan checked, or None."""
    try:
        header = read_header(data)
    except Rejected as exc:
        header, why = None, str(exc)
    if len(data) == img.size and header == img.header:
        return None
    now = f"{len(data)} bytes, " + (f"{header.width}x{header.height} {header.format}" if header else why)
    return (f"the file changed after the job was scanned (was {img.size} bytes, {img.header.width}x"
            f"{img.header.height} {img.header.format}; now {now}); drop the job again")
