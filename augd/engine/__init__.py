"""The engine: device set-up and one compiled, finalized graph per job. Writes no files."""
from augd.engine.compile import Compiled, Result, graph_builds
from augd.engine.device import DeviceInfo, prepare_environment, release_memory, setup_device
from augd.engine.seeds import image_seed

__all__ = ["Compiled", "DeviceInfo", "Result", "graph_builds", "image_seed",
           "prepare_environment", "release_memory", "setup_device"]
