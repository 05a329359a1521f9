"""Device set-up: done once per process, before the first graph is built."""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from augd.tfenv import prepare_environment

log = logging.getLogger("augd.engine")

__all__ = ["DeviceInfo", "prepare_environment", "setup_device"]

_lock = threading.Lock()
_info: "DeviceInfo | None" = None


@dataclass(frozen=True)
class DeviceInfo:
    kind: str          # "GPU" or "CPU"
    name: str          # e.g. "GPU:0 (NVIDIA H200)" or "CPU"
    tf_version: str


def setup_device(gpu_memory_mb: int | None = None) -> DeviceInfo:
    """Pick the device: the first GPU with memory growth (or a cap), else the CPU. Logs the choice once.
    Never fails for lack of a GPU."""
    global _info
    with _lock:
        if _info is not None:
            return _info
        prepare_environment()
        import tensorflow as tf

        tf.config.set_soft_device_placement(True)
        gpus = []
        try:
            gpus = tf.config.list_physical_devices("GPU")
            for gpu in gpus:
                if gpu_memory_mb:
                    tf.config.set_logical_device_configuration(
                        gpu, [tf.config.LogicalDeviceConfiguration(memory_limit=gpu_memory_mb)])
                else:
                    tf.config.experimental.set_memory_growth(gpu, True)
        except (RuntimeError, ValueError) as exc:  # already initialised, or a broken driver
            log.warning("GPU set-up failed (%s); continuing on what TensorFlow offers", exc)
        if gpus:
            details = tf.config.experimental.get_device_details(gpus[0]) or {}
            name = f"GPU:0 ({details.get('device_name', 'unknown')})"
            _info = DeviceInfo("GPU", name, tf.__version__)
            log.info("using %s with %s; TensorFlow %s", name,
                     f"a {gpu_memory_mb} MB cap" if gpu_memory_mb else "memory growth", tf.__version__)
        else:
            _info = DeviceInfo("CPU", "CPU", tf.__version__)
            log.info("no GPU visible: running on the CPU (TensorFlow %s)", tf.__version__)
        return _info
