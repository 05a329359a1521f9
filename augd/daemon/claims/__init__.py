"""Claiming a job, in one home: who runs each job, and how a job folder moves between the rooms.

- folders.py: the renames (inbox -> work/ -> done/ | failed/, or back to the inbox), the claim file written into
  the job (CLAIM_FILE, named with the drop folder's other files in augd/jobfolder.py), its failure report, its log;
- records.py: the claim records in `work/.claims/<job>/` (Leases): who holds each job, renewed while it runs;
- recovery.py: taking a ready job, taking over one whose holder is gone, and what becomes of it (run again,
  dead-lettered, or lost to another daemon).

The job worker (augd/daemon/worker.py) and the daemon (service.py) ask this package; nothing here runs a job.
"""
from augd.daemon.claims.folders import (CLAIM_FILE, JOB_LOG, Claimed, claim, fail, finish, folder_state, job_log,
                                        last_log_lines, open_job_log, requeue, still_ready)
from augd.daemon.claims.records import CLAIMS_DIR, Leases, Lost, Record
from augd.daemon.claims.recovery import (Recovery, Taken, Verdict, next_attempt, recover, sweep_leftovers, take,
                                         take_over)

__all__ = ["CLAIMS_DIR", "CLAIM_FILE", "JOB_LOG", "Claimed", "Leases", "Lost", "Record", "Recovery", "Taken",
           "Verdict", "claim", "fail", "finish", "folder_state", "job_log", "last_log_lines", "next_attempt",
           "open_job_log", "recover", "requeue", "still_ready", "sweep_leftovers", "take", "take_over"]
