"""A lazy handle on OpenCV, as augd/ops/_tf.py is on TensorFlow: a module that uses OpenCV can be imported
(`augd --help`, a spawned worker's start, the op registry, the daemon's parent) without loading it. The real module
loads on first attribute access; its names are then copied onto the handle, so later lookups cost what a module's
do."""
import importlib

__all__ = ["cv2"]


class _LazyCV2:
    def __getattr__(self, name):
        mod = importlib.import_module("cv2")
        self.__dict__.update(vars(mod))
        return getattr(mod, name)


cv2 = _LazyCV2()
