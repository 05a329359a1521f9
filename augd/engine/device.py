"""Device and process set-up, done once per process before the first graph is built; the memory release
between jobs."""
from __future__ import annotations

import ctypes
import functools
import gc
import logging
import threading
from dataclasses import dataclass

from augd.engine.options import EngineOptions
from augd.lazycv import cv2
from augd.tfenv import prepare_environment

log = logging.getLogger("augd.engine")

__all__ = ["DeviceInfo", "prepare_environment", "release_memory", "setup_process"]

_lock = threading.Lock()
_info: "DeviceInfo | None" = None
_key: tuple | None = None


@dataclass(frozen=True)
class DeviceInfo:
    kind: str          # "GPU" or "CPU"
    name: str          # e.g. "GPU:0 (NVIDIA H200)" or "CPU"
    tf_version: str


_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3   # glibc mallopt() parameters


def tune_malloc() -> bool:
    """Keep freed image-sized buffers in the heap instead of returning them to the kernel.

    Per image the engine allocates a few buffers of several MB (decoded pixels, float planes). glibc
    serves those with mmap and unmaps them on free, so every image pays a page fault per page of each
    buffer. Raising the mmap threshold to its maximum (32 MB)
    and the trim threshold lets the same pages be reused (EngineOptions.tune_malloc). Returns whether it was
    applied."""
    libc = _glibc()
    return libc is not None and bool(libc.mallopt(_M_MMAP_THRESHOLD, 32 * 1024 * 1024)) and \
        bool(libc.mallopt(_M_TRIM_THRESHOLD, 256 * 1024 * 1024))


@functools.lru_cache(maxsize=1)
def _glibc():
    """glibc through ctypes, or None (musl, macOS: nothing to tune or trim)."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None
    except OSError:
        return None


def release_memory() -> None:
    """Between jobs: free the last job's graph and hand the freed heap back to the kernel.

    A job's traced graph lives in reference cycles, which only a full collection frees; glibc then keeps
    the freed pages (the thresholds above), so a long-lived process would drift upwards. Collecting and
    trimming after every job holds it flat; with TensorFlow's objects frozen out of the collector
    (setup_process) that is cheap."""
    gc.collect()
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)


def setup_process(options: EngineOptions) -> DeviceInfo:
    """The process-wide part of an engine, done once per process: TensorFlow's environment, malloc, OpenCV's
    threads, the device (the first GPU with memory growth or a cap, else the CPU) and Grappler. Logs the choice
    once. Never fails for lack of a GPU; raises ValueError when asked for other process settings than the first
    engine set (TensorFlow cannot change them once its devices exist)."""
    global _info, _key
    with _lock:
        if _info is not None:
            if options.process_key != _key:
                raise ValueError(
                    f"this process' engine was set up with {_describe(_key)}; an engine with {_describe(options.process_key)} "
                    f"needs a process of its own (these settings cannot change once TensorFlow has started)")
            return _info
        prepare_environment()
        if options.tune_malloc:
            tune_malloc()
        cv2.setNumThreads(options.opencv_threads)
        import tensorflow as tf

        tf.config.set_soft_device_placement(True)
        if options.tf_threads:
            tf.config.threading.set_intra_op_parallelism_threads(options.tf_threads)
            tf.config.threading.set_inter_op_parallelism_threads(options.tf_threads)
        gpus = []
        try:
            gpus = tf.config.list_physical_devices("GPU")
            if options.device == "cpu" and gpus:
                tf.config.set_visible_devices([], "GPU")
                gpus = []
            for gpu in gpus:
                if options.gpu_memory_mb:
                    tf.config.set_logical_device_configuration(
                        gpu, [tf.config.LogicalDeviceConfiguration(memory_limit=options.gpu_memory_mb)])
                else:
                    tf.config.experimental.set_memory_growth(gpu, True)
        except (RuntimeError, ValueError) as exc:  # already initialised, or a broken driver
            log.warning("GPU set-up failed (%s); continuing on what TensorFlow offers", exc)
        if options.device == "gpu" and not gpus:
            raise ValueError("engine option device=gpu, but TensorFlow sees no GPU (device: auto falls back to the CPU)")
        # TensorFlow's ~300k module objects never die: keep every collection from walking them again
        # (a full collection then takes ~3 ms instead of ~70 ms; see release_memory). A process that imported
        # TensorFlow through augd.tfenv.import_tensorflow (workers, `augd run`) froze them then: this collection
        # walks only what came after.
        gc.collect()
        gc.freeze()
        if gpus:
            details = tf.config.experimental.get_device_details(gpus[0]) or {}
            name = f"GPU:0 ({details.get('device_name', 'unknown')})"
            info = DeviceInfo("GPU", name, tf.__version__)
            log.info("using %s with %s; TensorFlow %s", name, f"a {options.gpu_memory_mb} MB cap"
                     if options.gpu_memory_mb else "memory growth", tf.__version__)
        else:
            info = DeviceInfo("CPU", "CPU", tf.__version__)
            log.info("no GPU visible: running on the CPU (TensorFlow %s)", tf.__version__)
        _skip_grappler(tf, options.grappler == "off" or (options.grappler == "auto" and info.kind == "CPU"))
        _info, _key = info, options.process_key
        return info


def _describe(key: tuple) -> str:
    names = ("grappler", "opencv_threads", "tune_malloc", "device", "gpu_memory_mb", "tf_threads")
    return ", ".join(f"{n}={v}" for n, v in zip(names, key))


def _skip_grappler(tf, skip: bool) -> None:
    """Instantiate job graphs without Grappler's rewrite passes (by default on CPU hosts). The job graph is a
    few codec, OpenCV and control-flow ops that Grappler cannot improve, and optimizing it is half of the first
    call's cost. GPU hosts keep it (layout and fusion passes)."""
    if skip:
        tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})
