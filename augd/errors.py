"""Exception types shared by every room. Messages are meant for the user as they are."""


class AugdError(Exception):
    """Base class of every error augd raises on purpose."""


class SpecError(AugdError):
    """A pipeline or config file is invalid. The message names file, YAML path, value and what is allowed."""

    def __init__(self, message: str, *, source: str = "", path: str = "", line: int | None = None):
        super().__init__(message)
        self.source = source
        self.path = path
        self.line = line


class JobFailed(AugdError):
    """A job could not produce its output. `reason` is a short machine-readable code."""

    def __init__(self, message: str, *, reason: str = "error"):
        super().__init__(message)
        self.reason = reason


class Rejected(AugdError):
    """One input file cannot be used. `reason` is one of augd.io.REJECT_REASONS; the message says why."""

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
