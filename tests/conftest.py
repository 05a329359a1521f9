import os

# Quiet TensorFlow's C++ logging in test output; must be set before TensorFlow is first imported.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
