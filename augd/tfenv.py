"""Environment TensorFlow reads when it loads. A leaf: importing it loads nothing."""
import os


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
