"""One job end to end; the same code for `augd run`, the daemon and a Beam runner."""
from augd.job.manifest import STAGES, labels_txt
from augd.job.run import ImageOutcome, JobProgress, JobResult, process_images, run_job, variants_of

__all__ = ["STAGES", "ImageOutcome", "JobProgress", "JobResult", "labels_txt", "process_images", "run_job",
           "variants_of"]
