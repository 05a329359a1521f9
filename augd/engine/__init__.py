"""The engine: Engine(options) does the process set-up and compiles one finalized graph per job. Writes no
files."""
from augd.engine.compile import Compiled, Result
from augd.engine.device import DeviceInfo, prepare_environment, release_memory
from augd.engine.engine import Engine
from augd.engine.options import EngineOptions
from augd.ops.sampling import image_seed

__all__ = ["Compiled", "DeviceInfo", "Engine", "EngineOptions", "Result", "image_seed", "prepare_environment",
           "release_memory"]
