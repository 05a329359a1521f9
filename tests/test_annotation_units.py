"""Label maps (label_map.pbtxt), COCO RLE and semantic mask PNGs: the annotation readers' building blocks,
checked against hand-made data and protobuf's own parser."""
from __future__ import annotations

import os

import cv2
import numpy as np
import pytest

from augd.annotations import AnnotationError
from augd.annotations.coco import rle_decode
from augd.annotations.labelmap import LabelMap, LabelMapError
from augd.annotations.masks import mask_png, read_mask
from tests.annotated import Img, draw, masks_job, rle_compress, rle_counts

RED, GREEN, BLUE = (220, 30, 30), (30, 200, 30), (30, 30, 220)

# Odd cases on purpose: a box on the first pixel row/column, one ending at the last, a full-image box, a triangle.
IMAGES = [
    Img("a.png", 60, 80, [("dog", (0, 0, 20, 15), RED), ("cat", ((40, 10), (79, 12), (60, 59)), BLUE)], split="train"),
    Img("b.png", 50, 64, [("cat", (30, 20, 64, 50), GREEN), ("dog", (5, 5, 12, 9), RED)], split="val"),
    Img("c.jpg", 48, 48, [("bird", (0, 0, 48, 48), BLUE)], split="train"),
]


# ---------------------------------------------------------------------------------------------------- label maps

def test_label_map_from_names_and_pbtxt_round_trip(tmp_path):
    lm = LabelMap.from_names(["dog", "it's", "back\\slash", "zebre à pois"])
    assert lm.ids == {"dog": 1, "it's": 2, "back\\slash": 3, "zebre à pois": 4}
    assert lm.names() == ("dog", "it's", "back\\slash", "zebre à pois")
    (tmp_path / "label_map.pbtxt").write_text(lm.to_pbtxt(), encoding="utf-8")
    assert LabelMap.read_pbtxt(tmp_path / "label_map.pbtxt") == lm
    assert "name: 'it\\'s'" in lm.to_pbtxt()


def test_label_map_pbtxt_as_the_object_detection_api_writes_it(tmp_path):
    (tmp_path / "m.pbtxt").write_text(
        "# COCO, abridged\nitem {\n  name: \"/m/01g317\"\n  id: 1\n  display_name: \"person\"\n}\n"
        "item {\n  id: 0\n  name: 'background'\n}\n"
        "item <\n  id: 90 ; name: 'tooth' 'brush'\n  keypoints { id: 0 label: 'tip' }\n>\n", encoding="utf-8")
    lm = LabelMap.read_pbtxt(tmp_path / "m.pbtxt")
    assert lm.ids == {"/m/01g317": 1, "toothbrush": 90}
    assert lm.names() == ("/m/01g317", "toothbrush")


def test_label_map_pbtxt_parses_with_protobuf_itself():
    """to_pbtxt is read by protobuf's own text parser into the API's StringIntLabelMap message."""
    pytest.importorskip("google.protobuf")   # TensorFlow's dependency: there wherever the suite runs
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, text_format
    fd = descriptor_pb2.FileDescriptorProto(name="label_map_test.proto", package="t", syntax="proto2")
    item = fd.message_type.add(name="StringIntLabelMapItem")
    for num, (name, typ) in enumerate([("name", 9), ("id", 5), ("display_name", 9)], 1):
        item.field.add(name=name, number=num, type=typ, label=1)
    top = fd.message_type.add(name="StringIntLabelMap")
    top.field.add(name="item", number=1, type=11, label=3, type_name=".t.StringIntLabelMapItem")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    msg = message_factory.GetMessageClass(pool.FindMessageTypeByName("t.StringIntLabelMap"))()
    lm = LabelMap({"it's": 3, "dog": 1, "naïve\\x": 7})
    text_format.Parse(lm.to_pbtxt(), msg)
    assert [(i.id, i.name) for i in msg.item] == [(1, "dog"), (3, "it's"), (7, "naïve\\x")]


@pytest.mark.parametrize("text, words", [
    ("item { id: 1 name: 'a' }\nitem { id: 1 name: 'b' }\n", "id 1 is given to both"),
    ("item { id: 1 name: 'a' }\nitem { id: 2 name: 'a' }\n", "listed twice"),
    ("item { id: -3 name: 'a' }\n", "ids are integers >= 1"),
    ("item { id: 0 name: 'cat' }\n", "ids are integers >= 1"),
    ("item { id: 1 }\n", "needs both `id` and `name`"),
    ("item { id: 1 name: 'a'\n\n", "missing '}'"),
    ("item { id: 1 name: 'a' } }\n", ":1: invalid label map"),
    ("", "has no item"),
])
def test_label_map_pbtxt_refusals(tmp_path, text, words):
    (tmp_path / "m.pbtxt").write_text(text)
    with pytest.raises(LabelMapError, match="m.pbtxt") as exc:
        LabelMap.read_pbtxt(tmp_path / "m.pbtxt")
    assert words in str(exc.value)


def test_label_map_id_of_names_the_object():
    lm = LabelMap.from_names(["dog"])
    assert lm.id_of("dog", "x") == 1
    with pytest.raises(AnnotationError, match=r"^Annotations/a.xml: object 2 \(cat\): class 'cat' is not in the "
                                              r"label map \(dog\)$"):
        lm.id_of("cat", "Annotations/a.xml: object 2 (cat)")
    with pytest.raises(LabelMapError, match="listed twice"):
        LabelMap.from_names(["a", "b", "a"])


# ---------------------------------------------------------------------------------------------------------- RLE

# A hand-made 3x4 mask (rows), and its COCO RLE worked out by hand: column-major runs starting with zeros.
HAND_MASK = np.array([[0, 1, 1, 0],
                      [0, 1, 0, 0],
                      [1, 1, 0, 1]], np.uint8)
# columns: [0,0,1] [1,1,1] [1,0,0] [0,0,1] -> 0,0,1,1,1,1,1,0,0,0,0,1 -> runs 2 zeros, 5 ones, 4 zeros, 1 one
HAND_COUNTS = [2, 5, 4, 1]
# compressed: 2 -> '2', 5 -> '5', 4 -> '4', then 1 - 5 = -4: 5-bit group 0b11100 (sign bit set) = 28 -> 'L'
HAND_STRING = "254L"


def test_rle_decodes_a_hand_made_mask_both_ways():
    assert np.array_equal(rle_decode({"size": [3, 4], "counts": HAND_COUNTS}), HAND_MASK)
    assert np.array_equal(rle_decode({"size": [3, 4], "counts": HAND_STRING}), HAND_MASK)
    assert rle_counts(HAND_MASK) == HAND_COUNTS and rle_compress(HAND_COUNTS) == HAND_STRING


def test_rle_long_runs_and_negative_deltas_round_trip():
    rng = np.random.default_rng(3)
    mask = np.zeros((97, 131), np.uint8)
    mask[10:90, 5:120] = 1
    mask[10:40, 5:50][rng.random((30, 45)) < 0.05] ^= 1
    counts = rle_counts(mask)
    assert max(counts) > 1000 and any(counts[i] < counts[i - 2] for i in range(3, len(counts)))
    assert np.array_equal(rle_decode({"size": [97, 131], "counts": rle_compress(counts)}), mask)


@pytest.mark.parametrize("rle, words", [
    ({"size": [3, 4], "counts": [2, 5, 4]}, "cover 11 pixels, not 3x4 = 12"),
    ({"size": [3, 4], "counts": "25"}, "cover 7 pixels"),
    ({"size": [3, 4], "counts": "2\x7f"}, "outside COCO's alphabet"),
    ({"size": [3, 4], "counts": "2m"}, "ends inside a count"),
    ({"size": [3], "counts": [12]}, "must be [height, width]"),
])
def test_rle_refusals(rle, words):
    with pytest.raises(AnnotationError, match="seg") as exc:
        rle_decode(rle, "seg")
    assert words in str(exc.value)


# -------------------------------------------------------------------------------------------------------- masks

@pytest.mark.parametrize("mode", ["P", "L"])
def test_read_mask_palette_and_grey_give_class_indices(tmp_path, mode):
    expect = masks_job(str(tmp_path), IMAGES[:2], mode=mode)
    for rel, mask in expect.items():
        path = str(tmp_path / "masks" / (os.path.splitext(rel.split("/", 1)[1])[0] + ".png"))
        got = read_mask(path, mask.shape, "m")
        assert got.dtype == np.uint8 and np.array_equal(got, mask) and len(np.unique(got)) == 3


def test_read_mask_refusals(tmp_path):
    m = np.zeros((10, 12), np.uint8)
    cv2.imwrite(str(tmp_path / "m.png"), m)
    with pytest.raises(AnnotationError, match=r"^masks/m.png: the mask is 12x10 but its image is 13x10"):
        read_mask(str(tmp_path / "m.png"), (10, 13), "masks/m.png")
    cv2.imwrite(str(tmp_path / "rgb.png"), np.zeros((10, 12, 3), np.uint8))
    with pytest.raises(AnnotationError, match="RGB PNG; save class indices"):
        read_mask(str(tmp_path / "rgb.png"), None, "rgb.png")
    (tmp_path / "bad.png").write_bytes(b"\x89PNG\r\n\x1a\nnot really")
    with pytest.raises(AnnotationError, match="bad.png: the mask PNG cannot be decoded"):
        read_mask(str(tmp_path / "bad.png"), None, "bad.png")


def test_mask_png_round_trips_and_is_deterministic():
    mask = draw(IMAGES[0])[1]
    data = mask_png(mask)
    assert data == mask_png(mask.copy())
    back = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_UNCHANGED)
    assert back.ndim == 2 and np.array_equal(back, mask)



def test_label_maps_compare_and_hash_by_content():
    assert LabelMap.from_names(["a", "b"]) == LabelMap({"b": 2, "a": 1})
    assert len({LabelMap.from_names(["a", "b"]), LabelMap({"b": 2, "a": 1})}) == 1
    assert LabelMap({}).names() == () and LabelMap({}).to_pbtxt() == ""
    with pytest.raises(LabelMapError, match="id 2 is given to both 'a' and 'b'"):
        LabelMap({"a": 2, "b": 2})
