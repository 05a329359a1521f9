"""augd: offline image augmentation into gfile-style TFRecord shards.

The public surface is small on purpose: load a pipeline spec, run a job.
TensorFlow is imported only when a job runs, never by importing this package.
"""
from augd.tfenv import prepare_environment
from augd.errors import AugdError, JobFailed, SpecError

# TF reads these when it loads, whichever module imports it first; the user's own settings win.
prepare_environment()

__version__ = "0.1.0"

__all__ = ["AugdError", "JobFailed", "SpecError", "__version__"]
