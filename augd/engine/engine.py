"""Engine(options): the process set-up done once, then compile(spec) -> one finalized graph per job.

A process may hold several engines (a job's, a preview's) as long as they agree on the process-wide options
(EngineOptions.process_key); their per-graph options (kernels, crop_decode) may differ. Each engine counts the
graphs it built and traced, which the job's manifest and `augd_graph_builds_total` report."""
from __future__ import annotations

import threading

from augd.engine.compile import Compiled
from augd.engine.device import DeviceInfo, release_memory, setup_process
from augd.engine.kept import KeptGraphs
from augd.engine.kernels import select_kernels
from augd.engine.options import EngineOptions

__all__ = ["Engine"]


class Engine:
    def __init__(self, options: EngineOptions | None = None):
        self.options = options or EngineOptions()
        self.device: DeviceInfo = setup_process(self.options)
        self.kernel = select_kernels(self.options.kernels, self.device.kind)
        self.builds = 0
        self.traces = 0
        self._lock = threading.Lock()
        #: the last job's graph, for the next job of the same pipeline (the daemon's threads, a worker process)
        self.kept = KeptGraphs(self, release_memory)

    def compile(self, spec, *, as_gpu_host: bool = False):
        """One traced, finalized graph for `spec` (augd.engine.compile.Compiled). as_gpu_host: trace it as a GPU
        host would (TF kernels, the augment stage placed on the GPU) whatever this host has, to read its
        placement (Compiled.stage_devices, placement.gpu_stage); without a GPU, soft placement runs it on the CPU."""
        compiled = Compiled(spec, self, as_gpu_host=as_gpu_host)
        with self._lock:
            self.builds += 1
        return compiled

    def _traced(self) -> None:  # called by a graph's trace (never per image)
        with self._lock:
            self.traces += 1

    def __repr__(self) -> str:
        return f"Engine({self.options}, device={self.device.name}, kernel={self.kernel}, builds={self.builds})"
