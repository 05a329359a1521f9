"""Exception types shared by every room, and the reasons a job fails. Messages are meant for the user as
they are."""
import enum
import re


class FailureReason(str, enum.Enum):
    """Why a job ended in failed/: `reason` in failure.json, the label of augd_job_failures_total.
    A contract (docs/daemon.md lists them): add values, never rename one."""
    BAD_PIPELINE = "bad_pipeline"          # the pipeline (or the job's augd.yaml) is invalid or refused
    NO_VALID_INPUT = "no_valid_input"      # no image could be decoded
    TIMEOUT = "timeout"                    # ran longer than job_timeout_seconds
    INPUT_MISSING = "input_missing"        # the job folder (or an input it listed) vanished or was replaced
    INPUT_UNREADABLE = "input_unreadable"  # the job folder cannot be listed
    OUTPUT_EXISTS = "output_exists"        # out/<job>/ already holds a complete output
    OUTPUT_ERROR = "output_error"          # cannot write the output (full, read-only, too little space)
    OUT_OF_MEMORY = "out_of_memory"        # over the job's memory limit
    CRASHED = "crashed"                    # augd raised, or the job ended the process max_attempts times
    CANCELLED = "cancelled"                # cancelled (shutdown requeues instead; seen by `augd run` only)
    TOO_MANY_REJECTED = "too_many_rejected"  # more of its inputs rejected than max_rejected allows
    BAD_LABELS = "bad_labels"              # a class folder not in the fixed label map, or a map that is invalid
    WORKER_LOST = "worker_lost"            # worker processes died on the same images MAX_ATTEMPTS times
    CHECK_FAILED = "check_failed"          # the dataset check before the job found what its fail_on names

    def __str__(self) -> str:  # the value in messages and logs, on every Python (3.11 changed the default)
        return self.value

    __format__ = str.__format__


class RejectReason(str, enum.Enum):
    """Why one input was left out of a job: `reason` of manifest.json's rejected list, the label of
    augd_images_rejected_total. A contract (docs/records.md lists them): add values, never rename one."""
    NOT_REGULAR_FILE = "not_regular_file"  # a device, a FIFO, a socket
    OUTSIDE_JOB = "outside_job"            # a link that leaves the job folder
    UNREADABLE = "unreadable"              # cannot be read (permissions, I/O), or changed after the scan
    EMPTY = "empty"                        # 0 bytes
    UNKNOWN_FORMAT = "unknown_format"      # not an image format augd reads
    BAD_HEADER = "bad_header"              # its header cannot be parsed
    TOO_MANY_PIXELS = "too_many_pixels"    # over max_pixels
    UNDECODABLE = "undecodable"            # the decoder refused it
    OUTSIDE_SPLITS = "outside_splits"      # outside the split folders of a job that has them
    BAD_ANNOTATION = "bad_annotation"      # its annotation cannot be read or used (AnnotationError only)
    NEGATIVE = "negative"                  # an image without objects, where negatives are rejected
    MISSING = "missing"                    # listed by the scan, gone when read: the job fails (input_missing)
    BAD_RECORD = "bad_record"              # a TFRecord input's record that cannot be used (corrupt, no image)
    BESIDE_RECORDS = "beside_records"      # an image or folder beside a records job's shards (it reads shards only)

    def __str__(self) -> str:
        return self.value

    __format__ = str.__format__


class AugdError(Exception):
    """Base class of every error augd raises on purpose."""


class SpecError(AugdError):
    """A pipeline or config file is invalid. The message names file, YAML path, value and what is allowed."""

    def __init__(self, message: str, *, source: str = "", path: str = "", line: int | None = None):
        super().__init__(message)
        self.source = source
        self.path = path
        self.line = line


class CancelCause(str, enum.Enum):
    """Why a running job was cancelled: what the daemon does with it next."""
    SHUTDOWN = "shutdown"  # the daemon is stopping: the job goes back to the inbox
    TIMEOUT = "timeout"    # it ran longer than job_timeout_seconds: it fails with FailureReason.TIMEOUT
    LOST = "lost"          # another daemon took the job over (this one's claim lapsed): it is left to that one

    def __str__(self) -> str:
        return self.value

    __format__ = str.__format__


class JobFailed(AugdError):
    """A job could not produce its output; `reason` says why."""

    def __init__(self, message: str, *, reason: FailureReason):
        super().__init__(message)
        self.reason = reason


class JobCancelled(JobFailed):
    """The job's cancel signal stopped it between two images (reason `cancelled`); `cause` says who asked."""

    def __init__(self, cause: CancelCause, where: str = ""):
        super().__init__(f"job cancelled before it finished ({cause})", reason=FailureReason.CANCELLED)
        self.cause = cause
        self.where = where   # where it stopped, when not between two images ("while it read its inputs")


class WorkerLost(AugdError):
    """A batch's worker processes died MAX_ATTEMPTS times, or none can start, or the pool failed
    (augd.job.workers.pool)."""


class WorkerError(AugdError):
    """A worker process raised on a batch (not bad input, which process_images rejects): its text and traceback."""


class Rejected(AugdError):
    """One input file cannot be used. `reason` is a RejectReason (or its value); the message says why."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason


class UntrustedFileError(AugdError):
    """A file a job supplied cannot be parsed safely. The message names the file, what is wrong, and the limit;
    `limit` is the limit's value (None when the file is simply invalid)."""

    def __init__(self, message: str, *, path: str = "", limit: int | None = None):
        super().__init__(message)
        self.path = path
        self.limit = limit


# A TF error's text wraps the kernel's message in graph plumbing: TF 2.1x+ puts "Graph execution error:",
# "Detected at node ... defined at (most recent call last):" and a "File ..." trace before it, and
# "[[{{node ...}}]] [Op:...]" after it; older releases prefix "{{function_node ...}}".
_TF_PLUMBING = re.compile(r"\{\{function_node [^}]*\}\}|\[\[\{\{node [^}]*\}\}\]\]|\[Op:[^\]]*\]")
_TF_NOISE = ("Graph execution error:", "Detected at node", 'File "')


#: What TensorFlow's image decoders say of data they cannot decode after a header that reads, by format.
_DECODERS = {"jpeg": ("Uncompress failed", "Premature end"), "png": ("Invalid PNG data",),
             "gif": ("Invalid GIF data",), "bmp": ("Input size should match",), "webp": ("Failed to decode WebP",)}


def undecodable_pixels(fmt: str) -> str:
    """The one wording of an image whose header reads and whose pixels do not decode (a truncated file): the job's
    rejection, augd check's and the preview's say the same."""
    return f"truncated or corrupt {fmt.upper()} data: its header reads, its pixels do not decode"


def tf_error_message(exc: Exception) -> str:
    """The human part of a TensorFlow error: the kernel's own message, first line; a decoder's failure on pixels
    after a readable header in undecodable_pixels' words (the job's and the preview's wording for an image
    TensorFlow could not decode)."""
    msg = getattr(exc, "message", None) or str(exc)
    lines = [ln.strip() for ln in _TF_PLUMBING.sub("", msg).splitlines()]
    lines = [ln for ln in lines if ln and not ln.startswith(_TF_NOISE)]
    first = lines[0] if lines else type(exc).__name__
    fmt = next((f for f, says in _DECODERS.items() if any(s in first for s in says)), None)
    return undecodable_pixels(fmt) if fmt else first
