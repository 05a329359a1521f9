"""One job end to end; the same code for `augd run`, the daemon and a Beam runner."""
from augd.job.images import ImageOutcome, process_images
from augd.job.report import JobProgress, JobReport, labels_txt
from augd.job.options import Cancel, JobOptions, JobResult, JobWatch
from augd.job.run import run_job, variants_of

__all__ = ["Cancel", "ImageOutcome", "JobOptions", "JobProgress", "JobReport", "JobResult", "JobWatch",
           "labels_txt", "process_images", "run_job", "variants_of"]
