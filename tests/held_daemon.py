"""`augd serve` for tests that need to stall the daemon on purpose, through its `pause` seam:

    python -m tests.held_daemon --config augd.yaml --hold-dir HOLDS

The daemon blocks at a named point while the file of that name exists in HOLDS: `startup` (before TensorFlow
finds its device: /readyz stays 503), `loop` (inside the work loop's tick: /healthz turns 503 and the
systemd WATCHDOG=1 pings stop, as with a real hang) and `beat` (a job's beat outside its images: it stalls in its
scan, at a record, while it holds its claim), which a stop signal releases; and `image` (a running job, after
each image it writes: the job stays mid-way however fast or slow the machine), which the job's cancel releases (a
second SIGTERM, a timeout). Each hold logs "test hook: holding at 'POINT'" when it starts.
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from typing import Callable

log = logging.getLogger("augd.daemon")


def hold_while_file(folder: str):
    """A Pause that blocks at `point` while folder/point exists, until should_stop()."""
    def pause(point: str, should_stop: Callable[[], bool]) -> None:
        path = os.path.join(folder, point)
        if not os.path.exists(path):
            return
        log.warning("test hook: holding at %r while %s exists", point, path)
        while os.path.exists(path) and not should_stop():
            time.sleep(0.05)
        log.warning("test hook: released at %r", point)
    return pause


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.held_daemon")
    p.add_argument("--config", required=True)
    p.add_argument("--hold-dir", required=True)
    args = p.parse_args(argv)
    from augd.daemon.config import load_settings
    from augd.daemon.logs import setup_logging
    from augd.daemon.service import Daemon
    from augd.tfenv import load_tensorflow_quietly
    settings = load_settings(args.config)
    setup_logging(settings.log_format, settings.log_level)
    load_tensorflow_quietly()  # as `augd serve` does before it starts the daemon
    return Daemon(settings, args.config, pause=hold_while_file(args.hold_dir)).serve()


if __name__ == "__main__":
    sys.exit(main())
