"""The stages of one image, in order: `timing.stage_seconds` in manifest.json and the `stage` label of
augd_stage_seconds. A leaf module, so that the metrics name them without importing the job (or TensorFlow)."""

__all__ = ["STAGES"]

STAGES = ("read", "decode", "augment", "encode", "write")
