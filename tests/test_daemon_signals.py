"""Signals that would end a process without a word never end `augd serve` or its workers (SIGUSR1 writes a status
line, the others are ignored with one line each), and workers whose daemon is gone exit without a traceback."""
from __future__ import annotations

import os
import signal
import time

from augd.defaults import IGNORED_SIGNALS
from tests.daemon_harness import (Daemon, add_slow_pipeline, children_of, drop_job, no_leaked_children,  # noqa: F401
                                  no_leaked_children_module, resource_tracker_of, running_images, wait_for,
                                  write_config)


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_harmless_signals_to_the_whole_group_end_nothing_and_orphaned_workers_exit_quietly(tmp_path):
    add_slow_pipeline(tmp_path)
    d = Daemon(write_config(tmp_path, workers=1, executor="processes", settle_seconds=0.3))
    d.start(start_new_session=True)   # its own process group, as a service has
    try:
        d.wait_ready(120)
        wait_for(lambda: d.events("worker processes (pids"), 60, "the worker")
        drop_job(d.inbox, "slow/steady", n=6, seed=1)
        wait_for(lambda: running_images(d, "steady") >= 1, 120, "the job running", on_fail=d.log_tail)
        tracker = resource_tracker_of(d.proc.pid)
        workers = children_of(d.proc.pid) - {tracker}
        names = ["SIGUSR1", *(n for n in IGNORED_SIGNALS if hasattr(signal, n))]
        for name in names:   # to every process of the group: the daemon, its worker, the resource tracker
            os.killpg(d.proc.pid, getattr(signal, name))
            wait_for(lambda: d.events("SIGUSR1: running") if name == "SIGUSR1" else
                     d.events(f"{name} received: ignored"), 30, f"the line for {name}", on_fail=d.log_tail)
        d.wait_done("steady", timeout=120)
        assert d.get("/healthz")[0] == 200
        assert workers and all(not _gone(w) for w in workers), "the worker outlived every signal"
        assert tracker and not _gone(tracker), "so did multiprocessing's resource tracker"
        assert "died" not in d.log(), d.log_tail()
        for name in names[1:]:
            os.kill(d.proc.pid, getattr(signal, name))   # again: no second line (a profiler's 100 Hz SIGPROF)
        os.kill(d.proc.pid, signal.SIGUSR1)   # after them: its line shows the main loop has handled them
        wait_for(lambda: len(d.events("SIGUSR1: ")) >= 2, 30, "a second status line", on_fail=d.log_tail)
        for name in names[1:]:
            assert len(d.events(f"{name} received: ignored")) == 1, d.log_tail()
        dump = d.events("SIGUSR1: ")[0]
        assert "steady" in dump and "queue:" in dump, dump

        drop_job(d.inbox, "slow/orphaned", n=4, seed=2)
        wait_for(lambda: running_images(d, "orphaned") >= 1, 120, "the next job running", on_fail=d.log_tail)
        d.proc.kill()
        d.wait_exit()
        t0 = time.monotonic()
        wait_for(lambda: all(_gone(w) for w in workers), 60, "the orphaned worker to exit")
        print(f"\nthe worker exited {time.monotonic() - t0:.2f} s after kill -9 of its daemon")
    finally:
        d.stop()
    tail = d.log().split("SIGUSR1: ", 1)[-1]
    assert "Traceback" not in tail and "BrokenPipeError" not in tail, d.log_tail()
