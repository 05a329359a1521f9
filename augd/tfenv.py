"""Environment TensorFlow reads when it loads. A leaf: importing it loads nothing."""
import os


def prepare_environment() -> None:
    """Set augd's TF defaults; the user's own settings win."""
    # With arbitrary image sizes cuDNN would re-tune for every new shape.
    os.environ.setdefault("TF_CUDNN_USE_AUTOTUNE", "0")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
