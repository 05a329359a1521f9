"""augd benchmarks: `python -m bench.bench` (throughput, ratios, sizes) and `python -m bench.soak`."""
