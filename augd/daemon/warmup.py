"""Warm-up before ready: run each configured pipeline's graph once on a small image.

TensorFlow 2.21's wheels carry machine code up to compute capability 8.9 and PTX for 9.0: on Hopper and newer
the driver compiles every kernel the first time it is used (the demo took 16 s for 20 images on a fresh H200).
Run before the daemon says READY=1, that compilation is paid by start-up, not by the first job, and the driver
keeps what it compiled in its disk cache (CUDA_CACHE_PATH, which the deploy files point at the daemon's state
folder) for worker processes and restarts. `warm_up: auto` does it on GPU hosts only: on a CPU there is nothing
to compile.
"""
from __future__ import annotations

import logging
import os
import time

from augd.daemon.logs import event
from augd.lazycv import cv2

log = logging.getLogger("augd.daemon")

__all__ = ["configured_pipelines", "warm_up", "wanted"]

#: A 640x480 scene: large enough that the chain's downscales take their prefilter branch. Variants 0-3: the
#: original (decode and encode only) and three draws of the chain's coins.
_SIZE, _VARIANTS = (480, 640), 4


def wanted(setting: str, device_kind: str) -> bool:
    return setting == "on" or (setting == "auto" and device_kind == "GPU")


def configured_pipelines(default: str, pipelines_dir: str) -> list[str]:
    """The pipelines jobs get without naming one (default_pipeline), then every pipeline in pipelines_dir."""
    names = [default]
    try:
        names += sorted(f.rsplit(".", 1)[0] for f in os.listdir(pipelines_dir) if f.endswith((".yaml", ".yml")))
    except OSError:   # no pipelines_dir: the default alone
        pass
    return list(dict.fromkeys(names))


def _image() -> bytes:
    import numpy as np
    h, w = _SIZE
    y, x = np.mgrid[0:h, 0:w]
    img = np.stack([x * 255 // w, y * 255 // h, (x + y) % 256], -1).astype(np.uint8)
    img[h // 4:h // 2, w // 4:w // 2] = (200, 40, 40)
    return cv2.imencode(".jpg", img)[1].tobytes()


def warm_up(engine, names: list[str], search_dirs, should_stop=lambda: False, notify=lambda *lines: None) -> list[dict]:
    """Compile and run each pipeline once; one row per pipeline ({"pipeline", "seconds"} or {"pipeline", "error"}).
    A pipeline that fails here is logged and skipped: its jobs will say what is wrong with it. notify: sd_notify,
    told before each pipeline (systemd's start timeout is extended by a generous 2 minutes each)."""
    from augd.schema import find_pipeline, load_pipeline
    data, rows = _image(), []
    for name in names:
        if should_stop():
            break
        notify(f"STATUS=warming up pipeline {name}", "EXTEND_TIMEOUT_USEC=120000000", "WATCHDOG=1")
        t0 = time.perf_counter()
        try:
            compiled = engine.compile(load_pipeline(find_pipeline(name, search_dirs)))
            try:
                results = compiled.process_many([(data, "warm-up.jpg", v, None) for v in range(_VARIANTS)])
            finally:
                compiled.close()
            failed = next((r for r in results if isinstance(r, Exception)), None)
            if failed is not None:
                raise failed
        except Exception as exc:  # noqa: BLE001 - a warm-up never stops the daemon
            rows.append({"pipeline": name, "error": f"{type(exc).__name__}: {exc}"[:300]})
            event("warm_up_failed", "warm-up of pipeline %s failed (%s); its jobs will report it", name,
                  rows[-1]["error"], level=logging.WARNING, pipeline=name, error=rows[-1]["error"])
            continue
        rows.append({"pipeline": name, "seconds": round(time.perf_counter() - t0, 3)})
        event("warmed_up", "warmed up pipeline %s in %.2f s (%s)", name, rows[-1]["seconds"], engine.device.name,
              pipeline=name, seconds=rows[-1]["seconds"], device=engine.device.name)
    return rows
