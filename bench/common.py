"""What the bench's entry points share: the default worker count, the machine's facts, the result's header and
the JSON writer.

Light at import on purpose: bench.user_script imports it before it forks its pool, and the pools run before
TensorFlow loads, so nothing here imports OpenCV, TensorFlow or the augd package at module level.
"""
from __future__ import annotations

import datetime as _dt
import importlib.util
import json
import os
import platform
import sys

__all__ = ["REPO", "default_workers", "header", "machine", "usable_cpus", "write_json"]

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_HOST = os.path.join(REPO, "augd", "host.py")


def _host_module():
    """augd.host, the product's own CPU count. Loaded from its file when augd is not imported yet: `import
    augd.host` would run augd/__init__, whose prepare_environment() sets TensorFlow's variables in os.environ,
    and the user's script (a subprocess of bench.whole) must start without augd's settings, as before."""
    if "augd.host" in sys.modules:
        return sys.modules["augd.host"]
    spec = importlib.util.spec_from_file_location("bench._augd_host", _HOST)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # a leaf: math, os, resource
    return mod


def usable_cpus() -> int:
    """CPUs this process may keep busy: the affinity mask capped by a cgroup quota (augd.host.usable_cpus, what
    `augd run` defaults its workers to), not the machine's os.cpu_count()."""
    return _host_module().usable_cpus()


def default_workers() -> int:
    """--workers' default in every entry point: as many as augd itself would start here."""
    return usable_cpus()


def header(prog: str, argv) -> dict:
    """The first keys of a result file: when, and the command line that made it."""
    return {"created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "command": " ".join([prog, *(argv if argv is not None else sys.argv[1:])])}


def machine() -> dict:
    """Facts about the machine and the libraries, for the JSON figures (no TensorFlow: that loads only when augd
    runs; bench.augd_runs.environment adds its version and device)."""
    model = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            model = next((ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")), "")
    except OSError:
        pass
    import cv2
    import numpy

    info = {"cpu_count": os.cpu_count(), "usable_cpus": usable_cpus(), "cpu_model": model,
            "platform": platform.platform(), "augd_commit": git_commit(),
            "python": platform.python_version(), "opencv": cv2.__version__, "numpy": numpy.__version__,
            "load_average_at_start": os.getloadavg() if hasattr(os, "getloadavg") else None}
    try:
        import albumentations
        info["albumentations"] = albumentations.__version__
    except ImportError:
        info["albumentations"] = None
    return info


def git_commit() -> str:
    """HEAD of the checkout, with +dirty when augd/ or pipelines/ hold uncommitted changes."""
    import subprocess
    try:
        sha = subprocess.run(["git", "-C", REPO, "rev-parse", "HEAD"], capture_output=True, text=True,
                             check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--", "augd", "pipelines"],
                               capture_output=True, text=True, check=True).stdout.strip()
        return sha + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def write_json(path: str, obj) -> None:
    """Write `obj` as indented JSON with a final newline, making the folder first."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(obj, fh, indent=2)
        fh.write("\n")
