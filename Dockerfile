# augd as a container: GPU when the host offers one (--gpus all / compose GPU reservation), CPU otherwise.
# Build:  docker build -t augd .
# Run:    docker run --gpus all -p 7464:7464 -v $PWD/augd-data:/data augd
#
# The base is pinned to the exact TensorFlow release augd is tested with; its CUDA/cuDNN match that release.
FROM tensorflow/tensorflow:2.21.0-gpu

ARG AUGD_UID=10001
ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    TF_CPP_MIN_LOG_LEVEL=2 \
    TF_CUDNN_USE_AUTOTUNE=0 \
    CUDA_CACHE_PATH=/data/.cuda-cache \
    CUDA_CACHE_MAXSIZE=4294967296
# CUDA_CACHE_*: the kernels the GPU driver compiles from PTX (Hopper and newer) kept on the data volume, across
# restarts and worker processes (docs/operations.md, "The first job on a GPU host").

# tini as PID 1: forwards SIGTERM to augd (graceful shutdown) and reaps zombies.
RUN apt-get update \
 && apt-get install -y --no-install-recommends tini \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/augd
COPY pyproject.toml README.md ./
COPY augd ./augd
COPY pipelines ./pipelines
# tensorflow is already in the image at the pinned version; pip keeps it (it satisfies augd's range).
# Byte-compiled here: the augd user cannot write __pycache__ at run time, and every worker process would
# otherwise compile augd's modules from source (~0.4 CPU-s each; bench/README.md).
RUN python3 -m pip install . \
 && python3 -c "import augd, cv2, watchdog, prometheus_client; print('augd', augd.__version__)"

COPY deploy/docker/augd.yaml /etc/augd/augd.yaml
RUN useradd --system --uid ${AUGD_UID} --user-group --home-dir /data --shell /usr/sbin/nologin augd \
 && mkdir -p /data/inbox /data/work /data/done /data/failed /data/out \
 && chown -R augd:augd /data
VOLUME ["/data"]

USER augd:augd
EXPOSE 7464
# CUDA start-up and the first TF import can take a minute on a cold GPU host.
HEALTHCHECK --interval=30s --timeout=5s --start-period=120s --retries=3 \
  CMD python3 -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:7464/healthz', timeout=4).status == 200 else 1)"

ENTRYPOINT ["/usr/bin/tini", "--", "augd"]
CMD ["serve", "--config", "/etc/augd/augd.yaml"]
