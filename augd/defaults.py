"""Every default in one place, so docs, config and CLI cannot drift apart."""

#: Pillow's decompression-bomb limit: (1024 * 1024 * 1024 // 4 // 3) pixels.
MAX_PIXELS = 89_478_485
#: Aim of `shards: auto`: bytes per TFRecord shard (TF's own input guides suggest 100-200 MB).
TARGET_SHARD_BYTES = 128 * 1024 * 1024
#: Images in flight per worker: bounds memory while keeping every core busy.
INFLIGHT_PER_WORKER = 4
#: Default JPEG quality of augmented variants.
JPEG_QUALITY = 90
