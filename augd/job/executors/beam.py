"""The Beam executor (`--executor beam`): every image a Beam work unit; the runner places the work, its workers
write the shards (augd/job/executors/beam_pipeline.py, which says how). Apache Beam is an extra."""
from __future__ import annotations

import logging

from augd.job.executors import Traits

#: what run_job, the CLI and the daemon ask of it (augd.job.executors.Traits): its workers build their own graphs
#: (in this process on the DirectRunner); it reports no progress as images finish (the runner holds them until the
#: pipeline ends); Beam's own pipeline options follow `--` (the daemon: its `beam:` block or
#: `executor_options: {beam: [...]}`)
TRAITS = Traits(watch=False, graph_here=True, options="Beam pipeline options, e.g. --runner=DataflowRunner --project=P "
                "--region=R --temp_location=gs://BUCKET/tmp (none: the DirectRunner in this process)",
                needs=("apache_beam", "beam"))

__all__ = ["TRAITS", "open_executor"]


def open_executor(launch):
    from augd.job.executors.beam_pipeline import Beam  # loads Apache Beam
    if not logging.getLogger().isEnabledFor(logging.DEBUG):   # Beam logs every worker's start and stop at INFO
        logging.getLogger("apache_beam").setLevel(logging.WARNING)
    return Beam(launch)
