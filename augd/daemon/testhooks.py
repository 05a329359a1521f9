"""Test-only fault injection, off unless $AUGD_DEBUG_HOLD_DIR is set.

With that variable set, the daemon blocks at a named point while the file of that name exists in that folder:
`startup` (before TensorFlow loads: /readyz stays 503) and `loop` (inside the work loop's tick: /healthz turns
503 and systemd WATCHDOG=1 pings stop, as with a real hang). Never set it in production.
"""
from __future__ import annotations

import logging
import os
import time
from typing import Callable

ENV = "AUGD_DEBUG_HOLD_DIR"

log = logging.getLogger("augd.daemon")


def hold(point: str, should_stop: Callable[[], bool] = lambda: False) -> None:
    folder = os.environ.get(ENV)
    if not folder:
        return
    path = os.path.join(folder, point)
    if not os.path.exists(path):
        return
    log.warning("test hook: holding at %r while %s exists", point, path)
    while os.path.exists(path) and not should_stop():
        time.sleep(0.05)
    log.warning("test hook: released at %r", point)
