"""One job end to end; the same code for `augd run`, the daemon and a Beam runner.

Its names load on first use: `augd.job.executors.choose` (which `augd run` calls before this process
loads TensorFlow, to start worker processes early) must not pull in the engine and TensorFlow."""
import importlib

_HOMES = {"ImageOutcome": "images", "process_images": "images", "JobProgress": "report", "JobReport": "report",
          "labels_txt": "report", "Cancel": "options", "JobOptions": "options", "JobResult": "options",
          "JobWatch": "options", "run_job": "run", "variants_of": "run"}

__all__ = sorted(_HOMES)


def __getattr__(name: str):
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
