"""Environment TensorFlow reads when it loads, and a quiet way to load it. A leaf: importing it loads nothing."""
import contextlib
import gc
import os
import re
import sys
import threading


def prepare_environment() -> None:
    """Set augd's TF defaults; the user's own settings win."""
    # With arbitrary image sizes cuDNN would re-tune for every new shape.
    os.environ.setdefault("TF_CUDNN_USE_AUTOTUNE", "0")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    # oneDNN's CPU kernels pick code paths by CPU feature, so float results may differ between machines
    # (TF says so at start-up), and it logs a spurious uint8 "error" on CPUs without AVX-512. augd's hot
    # path is codecs and OpenCV, so the plain Eigen kernels cost nothing and keep output bytes the same
    # on every runner.
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")


def prepare_own_process() -> None:
    """In a process augd starts and owns (the `augd` command, a pool's worker), before NumPy loads: one OpenBLAS
    thread for NumPy's and OpenCV's (each wheel bundles one), the user's own setting winning. augd's matrix products
    are small (3 x 3, or 3 x N points) and each worker thread runs one image; OpenBLAS starts a thread per core at
    import, and the extra ones spin ~0.1 CPU-s before they sleep (bench/README.md, "Measurements behind the code").
    Not done on `import augd`: a user's own process keeps its BLAS threads. A worker spawned from a program whose
    main module loads NumPy has it loaded before this runs (spawn imports that module first): it then keeps them."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


# Lines TensorFlow's native libraries print to stderr while loading on a host without a GPU: absl's notice that
# it logs before being initialised, CUDA stubs not finding a driver, cuInit failing, CPU feature notes. They
# bypass TF_CPP_MIN_LOG_LEVEL and say nothing a user can act on; `augd -v` shows them.
_NOISE = re.compile(r"absl::InitializeLog|cudart_stub\.cc|cuda_platform\.cc.*cuInit|cpu_feature_guard\.cc|"
                    r"^To enable the following instructions|oneDNN custom operations|Unable to register cu\w+ factory|"
                    r"computation placer already registered|TF-TRT Warning|cuda_executor\.cc.*NUMA")


@contextlib.contextmanager
def quiet_native_stderr():
    """Filter what native code writes to file descriptor 2 in the block: each line is passed on as it comes
    (a crash inside loses nothing a user needs), only the known noise is dropped. Does nothing where fd 2 is
    closed. Meant for start-up, before other threads log."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):
        yield
        return
    read_end, write_end = os.pipe()
    os.dup2(write_end, 2)
    os.close(write_end)

    def forward() -> None:
        gone = False   # the reader of stderr went away: keep draining, or native writers would block on the pipe
        with os.fdopen(read_end, "rb") as pipe:
            for line in pipe:
                if not gone and not _NOISE.search(line.decode("utf-8", "replace")):
                    try:
                        os.write(saved, line)
                    except OSError:
                        gone = True

    thread = threading.Thread(target=forward, name="augd-stderr", daemon=True)
    thread.start()
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)  # the pipe's last write end closes: the reader sees its end and stops
        thread.join(5.0)
        os.close(saved)


def import_tensorflow():
    """TensorFlow for augd's own processes (its workers, `augd run`, `augd serve`), which never use Keras: imported
    without Keras (without_keras) and with the cyclic garbage collector off, then its objects frozen out of every
    later collection (they live as long as the process). The collector, left on, walks the ~270k objects the
    import makes again and again as they grow, and then each of augd's own imports after it: 0.3-0.4 CPU-s of
    each process' start (bench/README.md). What the import left unreachable (~2300 objects) is frozen with the
    rest, once per process. Where TensorFlow is loaded already, it as it is."""
    if "tensorflow" in sys.modules:
        return sys.modules["tensorflow"]
    enabled = gc.isenabled()
    gc.disable()
    try:
        with without_keras():
            import tensorflow as tf
        gc.freeze()
    finally:
        if enabled:
            gc.enable()
    return tf


@contextlib.contextmanager
def without_keras():
    """TensorFlow's import, inside this, loads no Keras. It loads Keras' optimizers eagerly (to register them for
    SavedModels, which augd never loads): Keras 3's unless TF_USE_LEGACY_KERAS points it at tf_keras, tf_keras'
    then, and it skips the load where that import fails (its own try/except ImportError). So: legacy Keras, and
    tf_keras unimportable for the import's length (the OD API's users have it installed: 0.4-0.6 CPU-s of a
    ~2.6 s import). Left alone where the user set TF_USE_LEGACY_KERAS; unset again after it, so that tf.keras,
    should anything ask for it, is Keras 3 as without this."""
    if "TF_USE_LEGACY_KERAS" in os.environ:
        yield
        return
    os.environ["TF_USE_LEGACY_KERAS"] = "1"
    blocked = "tf_keras" not in sys.modules
    if blocked:
        sys.modules["tf_keras"] = None   # an import of it raises ImportError
    try:
        yield
    finally:
        os.environ.pop("TF_USE_LEGACY_KERAS", None)
        if blocked and sys.modules.get("tf_keras", 0) is None:
            del sys.modules["tf_keras"]


def load_tensorflow_quietly() -> None:
    """Import TensorFlow and find its devices (where the noise is printed) with the noise held back."""
    prepare_environment()
    with quiet_native_stderr():
        import_tensorflow().config.list_physical_devices("GPU")
