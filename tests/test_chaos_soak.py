"""The chaos soak (issue 23): 10,000 images through `augd serve` on worker processes, with workers, the resource
tracker and the daemon itself killed at random moments of the job; the output is the run without faults, byte
for byte. AUGD_SOAK_IMAGES and AUGD_SOAK_KILLS make it longer; bench/chaos.py runs it with its figures."""
import os

import pytest

from tests.chaos import soak
from tests.daemon_harness import no_leaked_children  # noqa: F401


@pytest.mark.slow
def test_a_job_survives_its_workers_tracker_and_daemon_killed_and_writes_the_same_bytes(tmp_path):
    figures = soak(tmp_path, images=int(os.environ.get("AUGD_SOAK_IMAGES", "10000")),
                   worker_kills=int(os.environ.get("AUGD_SOAK_KILLS", "3")),
                   seed=int(os.environ.get("AUGD_SOAK_SEED", "23")))
    print(figures)
    assert figures["kills"] == {"worker": figures["kills"]["worker"], "resource_tracker": 1, "daemon": 1}
    assert figures["kills"]["worker"] >= 3 and figures["identical"]
