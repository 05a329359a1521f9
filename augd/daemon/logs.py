"""Daemon logging: one line per event, as text or as JSON objects.

Call sites log a human message and pass the machine fields in `extra={"event": ..., **fields}` (see `event()`);
the text format appends the fields as key=value, the JSON format puts them beside the message.
"""
from __future__ import annotations

import datetime as _dt
import json
import logging
import sys

__all__ = ["event", "setup_logging"]

log = logging.getLogger("augd.daemon")

_STD = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime", "taskName"}


def _fields(record: logging.LogRecord) -> dict:
    return {k: v for k, v in vars(record).items() if k not in _STD and not k.startswith("_")}


class TextFormatter(logging.Formatter):
    def __init__(self):
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        fields = {k: v for k, v in _fields(record).items() if k != "event"}
        if fields:
            line += " [" + " ".join(f"{k}={_short(v)}" for k, v in fields.items()) + "]"
        return line


def _short(v) -> str:
    s = json.dumps(v, ensure_ascii=False, default=str) if not isinstance(v, str) else v
    return s if " " not in s else json.dumps(s, ensure_ascii=False)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        obj = {
            "time": _dt.datetime.fromtimestamp(record.created, _dt.timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        obj.update(_fields(record))
        if record.exc_info:
            obj["traceback"] = self.formatException(record.exc_info)
        return json.dumps(obj, ensure_ascii=False, default=str)


def setup_logging(fmt: str = "text", level: str = "info") -> None:
    """Replace the root handlers (the CLI's basicConfig included) with one stderr handler in `fmt`."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    root.addHandler(handler)
    root.setLevel(getattr(logging, level.upper()))


def event(name: str, message: str, *args, level: int = logging.INFO, **fields) -> None:
    """log.info(message % args) with event=name and fields attached for the JSON format."""
    log.log(level, message, *args, extra={"event": name, **fields})
