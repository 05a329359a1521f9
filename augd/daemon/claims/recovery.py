"""Taking a job: a ready one from the inbox (`take`), or one in work/ whose holder is gone (`take_over`, then
`recover` says what becomes of it). The rules live here; the job worker (augd/daemon/worker.py) only acts on
what they decide: runs the job, fails it, dead-letters it or gives it up.

A job taken over ended its holder's process: what that process left is swept first (its temp output, its
scratch); a job whose holder died `max_attempts` times is a poison job, dead-lettered instead of run again, unless
its own commit had already landed (then the run only moves it to done/); otherwise one more attempt is counted,
durably, before it runs, so a crash during it counts too.
"""
from __future__ import annotations

import dataclasses
import enum
import os
from dataclasses import dataclass

from augd.daemon.claims.folders import Claimed, claim, claim_meta, now_iso
from augd.daemon.claims.records import Leases, Lost
from augd.daemon.watcher import JobReady
from augd.io import clean_stale_temps, is_complete
from augd.io.jobfs import folder_identity
from augd.io.scratch import sweep_scratch
from augd.owner import Owner

__all__ = ["Recovery", "Taken", "Verdict", "next_attempt", "recover", "sweep_leftovers", "take", "take_over"]


@dataclass(frozen=True)
class Taken:
    """A ready job claimed from the inbox: None when it was gone (another daemon claimed it, or it was removed or
    replaced before the claim); `clash`: a complete output of its name already exists, so it may not run."""
    claimed: Claimed | None
    clash: bool = False


def take(job: JobReady, leases: Leases, out: str) -> Taken:
    """Claim a ready job into work/, noting whether its output's name is taken already (it then fails as
    output_exists rather than run: augd never overwrites an output)."""
    clash = is_complete(f"{out}/{job.name}")
    return Taken(claim(job, leases, output_checked=not clash), clash)


def take_over(leases: Leases) -> Claimed | None:
    """One job in work/ whose holder is gone (a crash, `kill -9`, another daemon's lapsed lease), now held by
    this daemon; None when there is none. One at a time: other idle daemons take the next ones. A job another
    live daemon holds is left to it."""
    for key, rec in leases.orphans():
        if leases.take(key, rec) is None:
            continue   # another daemon took it first
        path = os.path.join(leases.work, key)
        identity = folder_identity(path)
        if identity is None:   # it left work/ while it was looked at
            leases.release(key)
            continue
        attempts = rec.attempts if rec is not None else 1
        was = rec.owner.label if rec is not None and rec.owner is not None else None
        meta = claim_meta(path)
        if meta is None:   # claimed by hand, or the claim file was lost: a plain job, its output checked again
            meta = {"name": key, "route": None, "inbox_relpath": key, "claimed_at": now_iso(), "output_checked": False}
        return Claimed(path=path, recovered=True, attempts=attempts, identity=identity, taken_from=was,
                       holder=rec.owner if rec is not None else None, **meta)
    return None


def next_attempt(c: Claimed, leases: Leases) -> Claimed:
    """Count one more attempt of a job taken over, durably, before it runs (a crash during it counts). Raises
    Lost when another daemon took it over meanwhile."""
    return dataclasses.replace(c, attempts=leases.count_attempt(c.key))


def sweep_leftovers(out_root: str, holder: Owner | None = None) -> list[str]:
    """What dead processes left, swept by whichever daemon takes a job over or starts: temp outputs in `out_root`
    of this machine's dead processes and of `holder` (gone: its job was taken over), and this machine's scratch
    folders whose process is gone (inflated shards). Their paths."""
    return clean_stale_temps(out_root, holder) + sweep_scratch()


class Verdict(str, enum.Enum):
    RUN = "run"                    # one more attempt counted: run it again
    DEAD_LETTER = "dead_letter"    # it ended its holders max_attempts times, or its attempts cannot be counted
    LOST = "lost"                  # another daemon took it over meanwhile


@dataclass(frozen=True)
class Recovery:
    """What becomes of a job taken over: the verdict, the job (its attempt counted when it runs), the leftovers
    swept and, for a dead letter, why (None: the usual reason)."""
    verdict: Verdict
    claimed: Claimed
    swept: tuple[str, ...] = ()
    why: str | None = None


def recover(c: Claimed, leases: Leases, out: str, max_attempts: int) -> Recovery:
    """The rule for a job taken over (see the module's doc). OSError from the sweep goes to the caller."""
    swept = tuple(sweep_leftovers(out, c.holder))
    committed = c.output_checked and is_complete(f"{out}/{c.name}")   # its run moves it to done/
    if c.attempts >= max_attempts and not committed:
        return Recovery(Verdict.DEAD_LETTER, c, swept)
    try:
        return Recovery(Verdict.RUN, next_attempt(c, leases), swept)
    except Lost:
        return Recovery(Verdict.LOST, c, swept)
    except OSError as exc:
        return Recovery(Verdict.DEAD_LETTER, c, swept, f"its attempts cannot be counted ({exc})")
