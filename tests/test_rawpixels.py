"""Raw pixels (augd/engine/rawpixels.py), the way a tile or a mix's canvas reaches the job's graph (issue 60): the graph
decodes them to exactly the pixels the BMP it replaced decoded to, and a payload whose header does not fit its bytes
is that image's decode error, named, before anything is allocated: the other images of the call are unaffected."""
from __future__ import annotations

import struct

import cv2
import numpy as np
import pytest

from augd.engine import Engine
from augd.engine.hostdecode import as_raw, decode_scaled
from augd.engine.rawpixels import RAW_HEADER, RAW_MAGIC, RAW_MAX_SIDE, RawPixelsError, pack_bgr, unpack_rgb
from augd.errors import Rejected, tf_error_message
from augd.formats import read_header
from augd.ops._tf import tf
from augd.schema import parse_pipeline


@pytest.fixture(scope="module")
def decode():
    """The graph's own decode of one payload (augd.engine.decode.decode_full), traced once."""
    from augd.engine.decode import decode_full
    fn = tf.function(lambda d: decode_full(d, 1), input_signature=[tf.TensorSpec([], tf.string)])
    return lambda data: fn(tf.constant(data)).numpy()


def _canvas(h, w, seed=0):
    """A BGR canvas cut out of a larger one (strided, as a tile is), random pixels."""
    big = np.random.default_rng(seed).integers(0, 256, (h + 3, w + 5, 3), np.uint8)
    return big[1:h + 1, 2:w + 2]


@pytest.mark.parametrize("h, w", [(1, 1), (3, 5), (17, 641), (640, 640), (641, 383)])
def test_the_graph_decodes_raw_pixels_to_exactly_what_it_decoded_the_bmp_to(decode, h, w):
    """The proof that tiled and mixed jobs write the same bytes as before: same pixels into the chain (widths whose
    BMP rows carry padding included)."""
    canvas = _canvas(h, w)
    bmp = cv2.imencode(".bmp", np.ascontiguousarray(canvas))[1].tobytes()
    raw, header = as_raw(canvas)
    got = decode(raw)
    assert got.shape == (h, w, 3) and (header.height, header.width, header.format) == (h, w, "raw")
    np.testing.assert_array_equal(got, decode(bmp))
    np.testing.assert_array_equal(got, canvas[:, :, ::-1])
    np.testing.assert_array_equal(unpack_rgb(raw), canvas[:, :, ::-1])
    pixels, _ = decode_scaled(raw, header, np.eye(3))   # a partner op on a tile reads it back on the host
    np.testing.assert_array_equal(pixels, canvas)


def _raw(h, w, c=3, pixels=None):
    head = RAW_MAGIC + struct.pack("<III", h, w, c)
    return head.ljust(RAW_HEADER, b"\0") + (bytes(h * w * c) if pixels is None else pixels)


HOSTILE = {
    "truncated_header": (_raw(2, 2)[:RAW_HEADER - 1], "truncated header"),
    "magic_only": (RAW_MAGIC, "truncated header"),
    "pixels_cut_short": (_raw(4, 4)[:-1], "do not fit"),
    "bytes_past_the_pixels": (_raw(4, 4) + b"\0", "do not fit"),
    "four_channels": (_raw(4, 4, 4), "do not fit"),
    "zero_height": (_raw(0, 4), "do not fit"),
    "side_past_the_bound": (_raw(RAW_MAX_SIDE + 1, 1), "do not fit"),
    # 2**32 - 1 rows: negative as the graph's int32, never a huge allocation
    "side_past_int32": (_raw(2**32 - 1, 1, pixels=bytes(3)), "do not fit"),
    # a header claiming 3 TB over a few bytes: refused from the header, before any allocation
    "claims_terabytes": (_raw(RAW_MAX_SIDE, RAW_MAX_SIDE, pixels=b"abc"), "do not fit"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_raw_payload_whose_header_does_not_fit_its_bytes_is_a_named_decode_error(decode, name):
    data, says = HOSTILE[name]
    with pytest.raises(tf.errors.InvalidArgumentError) as err:
        decode(data)
    assert "raw pixels" in tf_error_message(err.value) and says in tf_error_message(err.value)
    with pytest.raises(RawPixelsError):   # the host's reader bounds them the same way
        unpack_rgb(data)


def test_a_bad_raw_payload_fails_only_its_own_image_in_a_graph_call():
    spec = parse_pipeline("name: raw\nvariants: 1\noutput: {format: png}\nops:\n  - random_flip_left_right: {}\n",
                          "raw.yaml")
    compiled = Engine().compile(spec)
    good, header = as_raw(_canvas(6, 9))
    bad = HOSTILE["claims_terabytes"][0]
    got = compiled.process_many([(good, "a.png", 0, header), (bad, "b.png", 1, header), (good, "c.png", 1, header)])
    assert isinstance(got[1], Exception) and "raw pixels" in tf_error_message(got[1])
    original = cv2.imdecode(np.frombuffer(got[0].payload, np.uint8), cv2.IMREAD_COLOR)
    np.testing.assert_array_equal(original, _canvas(6, 9))
    assert (got[2].height, got[2].width) == (6, 9)


def test_a_jobs_own_file_never_reads_as_raw_pixels():
    """Raw pixels are the host's hand-off only: the scan (augd.formats) refuses a file that starts like them."""
    with pytest.raises(Rejected) as err:
        read_header(pack_bgr(_canvas(4, 4)))
    assert err.value.reason == "unknown_format"


def test_pack_refuses_what_is_not_an_hxwx3_uint8_canvas():
    for bad in (np.zeros((4, 4), np.uint8), np.zeros((4, 4, 4), np.uint8), np.zeros((4, 4, 3), np.float32),
                np.zeros((0, 4, 3), np.uint8)):
        with pytest.raises(RawPixelsError):
            pack_bgr(bad)
