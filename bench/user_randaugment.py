"""What a Keras user would run instead of augd's `randaugment`: Keras 3's RandAugment layer in a tf.data pipeline
(read, decode, augment, encode JPEG q90), each image's record written by a TFRecordWriter (image/encoded and its
size, as augd's records hold). Image-only: Keras' RandAugment moves no boxes. One process, tf.data's own
parallelism (AUTOTUNE), as the Keras guide writes it.

    python -m bench.user_randaugment IMAGES_DIR OUT.tfrecord
"""
from __future__ import annotations

import os
import sys


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    images, out = argv
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras
    import tensorflow as tf

    files = sorted(os.path.join(images, f) for f in os.listdir(images))
    layer = keras.layers.RandAugment(value_range=(0, 255), num_ops=2, factor=0.9, seed=60)

    def augment(path):
        image = tf.io.decode_jpeg(tf.io.read_file(path), channels=3)
        image = tf.cast(layer(tf.cast(image, tf.float32)), tf.float32)
        image = tf.cast(tf.clip_by_value(tf.round(image), 0, 255), tf.uint8)
        return tf.io.encode_jpeg(image, quality=90), tf.shape(image)

    ds = tf.data.Dataset.from_tensor_slices(files).map(augment, num_parallel_calls=tf.data.AUTOTUNE)
    with tf.io.TFRecordWriter(out) as writer:
        for encoded, shape in ds.prefetch(tf.data.AUTOTUNE):
            ex = tf.train.Example(features=tf.train.Features(feature={
                "image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(value=[encoded.numpy()])),
                "image/height": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(shape[0])])),
                "image/width": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(shape[1])]))}))
            writer.write(ex.SerializeToString())
    return 0


if __name__ == "__main__":
    sys.exit(main())
