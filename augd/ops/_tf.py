"""A lazy handle on TensorFlow: op modules can be imported (for validation, `augd ops`, `augd schema`)
without paying TF's multi-second import. The real module loads on first attribute access, which
only happens while a graph is being traced."""
import importlib

from augd.tfenv import prepare_environment


class _LazyTF:
    _mod = None

    def __getattr__(self, name):
        if _LazyTF._mod is None:
            prepare_environment()
            _LazyTF._mod = importlib.import_module("tensorflow")
        return getattr(_LazyTF._mod, name)


tf = _LazyTF()
