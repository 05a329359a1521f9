"""Daemon logging: one line per event, as text or as JSON objects.

Call sites log a human message and pass the machine fields in `extra={"event": ..., **fields}` (see `event()`);
the text format appends the fields as key=value, the JSON format puts them beside the message.

A log reader can go away (a pager, `| head`, a logger or journald restarting): the stream's writes then fail
(EPIPE, EBADF). The daemon's handler never lets that reach the code that logged: it moves to the other standard
stream, says so there once, and, where neither is left, drops lines and counts them for /status (`lost_streams`).
"""
from __future__ import annotations

import datetime as _dt
import json
import logging
import sys
import threading
import time

from augd.files import point_at_devnull

__all__ = ["event", "lost_streams", "setup_logging"]

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


_lost: dict[str, dict] = {}     # stream name -> {"error", "since"}
_dropped = [0]                  # lines with no stream left to take them
_lost_lock = threading.Lock()


def lost_streams() -> dict:
    """What /status shows: the standard streams the log could not be written to (each with its first error
    and since when) and the lines dropped since none was left; {} while the log is written."""
    with _lost_lock:
        return {"streams": {k: dict(v) for k, v in _lost.items()}, "dropped_lines": _dropped[0]} if _lost else {}


def _mark_lost(name: str, exc: Exception, stream) -> None:
    point_at_devnull(stream)   # its buffered rest, and native code's writes to it, fail no more
    with _lost_lock:
        _lost.setdefault(name, {"error": f"{type(exc).__name__}: {exc}", "since": round(time.time(), 3)})


class SurvivingHandler(logging.StreamHandler):
    """A StreamHandler on stderr that outlives its reader: on a failed write it goes on with stdout (saying
    why, once, there), and with neither left it drops lines and counts them. Other errors are logging's usual
    handleError."""

    def __init__(self):
        for n in ("stderr", "stdout"):   # `augd serve 2>&-`: Python has no such stream at all
            if getattr(sys, n) is None:
                with _lost_lock:
                    _lost.setdefault(n, {"error": "closed before the daemon started", "since": round(time.time(), 3)})
        with _lost_lock:   # a SIGHUP's new handler starts where the last one ended
            name = next((n for n in ("stderr", "stdout") if n not in _lost), None)
        super().__init__(getattr(sys, name) if name else None)
        self.name_ = name

    def emit(self, record: logging.LogRecord) -> None:
        if self.stream is None:
            with _lost_lock:
                _dropped[0] += 1
            return
        try:
            msg = self.format(record)
        except Exception:  # noqa: BLE001 - logging's own contract for a bad record
            self.handleError(record)
            return
        try:
            self.stream.write(msg + self.terminator)
            self.flush()
        except BlockingIOError:   # a reader that is slow, not gone: this line is lost, the stream is kept
            with _lost_lock:
                _dropped[0] += 1
        except (OSError, ValueError) as exc:   # EPIPE, EBADF, EIO; ValueError: the file object was closed
            try:
                self._lose(exc, msg)
            except Exception:  # noqa: BLE001 - no descriptor left even for /dev/null: drop the line
                self.stream = None
        except Exception:  # noqa: BLE001 - an encoding the stream refuses: logging's own contract
            self.handleError(record)

    def _lose(self, exc: Exception, msg: str) -> None:
        _mark_lost(self.name_, exc, self.stream)
        self.stream = None
        if self.name_ == "stderr" and sys.stdout is not None:
            try:  # the other stream, if it is still there, says so once and carries the log on
                sys.stdout.write(f"augd: the log can no longer be written to stderr ({type(exc).__name__}: {exc}); "
                                 f"it goes on here\n{msg}{self.terminator}")
                sys.stdout.flush()
                self.stream, self.name_ = sys.stdout, "stdout"
                return
            except (OSError, ValueError) as exc2:
                _mark_lost("stdout", exc2, sys.stdout)
        with _lost_lock:
            _dropped[0] += 1

    def flush(self) -> None:
        if self.stream is not None and hasattr(self.stream, "flush"):
            self.stream.flush()


def setup_logging(fmt: str = "text", level: str = "info") -> None:
    """Replace the root handlers (the CLI's basicConfig included) with one stderr handler in `fmt`."""
    handler = SurvivingHandler()
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    root.addHandler(handler)
    root.setLevel(getattr(logging, level.upper()))
    logging.captureWarnings(True)   # warnings (the resource tracker relaunched, say) are log lines too


def event(name: str, message: str, *args, level: int = logging.INFO, **fields) -> None:
    """log.info(message % args) with event=name and fields attached for the JSON format."""
    log.log(level, message, *args, extra={"event": name, **fields})
