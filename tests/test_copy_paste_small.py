"""copy_paste for small objects (Kisantal et al. 2019), judged by the pixels: `size` picks objects of COCO's size
class from each partner, `copies` pastes each several times, `place: free` never covers an object of the image.
Scenes: squares of a colour each on white, PNG in and out, pasted at scale 1 (whole-pixel shifts: exact copies)."""
from __future__ import annotations

import collections

import numpy as np
import pytest

from augd.errors import SpecError
from augd.schema import parse_pipeline
from tests.annotated import Img, Shape, voc_job
from tests.test_mixing import records, run


def _scenes(root) -> dict:
    """6 images of 200x300, each with two small squares (12-24 px) and one large (100 px), every square its own
    colour; {colour: (class, side)}."""
    rng = np.random.default_rng(4)
    imgs, colours = [], {}
    for i in range(6):
        shapes = []
        for k, (cls, side, x, y) in enumerate((("dot", int(rng.integers(12, 25)), 20, 20),
                                               ("dot", int(rng.integers(12, 25)), 60, 150),
                                               ("slab", 100, 180, 60))):
            colour = (40 + 35 * i, 200 - 60 * k, 30 + 40 * k)
            shapes.append(Shape(cls, (x, y, x + side, y + side), colour))
            colours[colour] = (cls, side)
        imgs.append(Img(f"im{i}.png", 200, 300, tuple(shapes)))
    voc_job(str(root), imgs)
    return colours


def _colour_of(pixels, box) -> tuple:
    x0, y0, x1, y1 = (int(round(v)) for v in box)
    inside = pixels[y0:y1, x0:x1].reshape(-1, 3)
    values, counts = np.unique(inside, axis=0, return_counts=True)
    return tuple(int(v) for v in values[np.argmax(counts)])


def test_small_objects_pasted_in_copies_at_free_places(tmp_path):
    colours = _scenes(tmp_path / "job")
    spec = parse_pipeline("name: small\nseed: 2\nvariants: 4\nkeep_original: false\noutput: {format: png}\nops:\n"
                          "  - copy_paste: {objects: [2, 2], size: small, copies: [3, 3], place: free, "
                          "scale: [1, 1]}\n", "small.yaml")
    recs = records(run(tmp_path / "job", spec, tmp_path / "out", executor="threads"))
    assert len(recs) == 24
    copies = collections.Counter()
    for r in recs:
        h, w = r["pixels"].shape[:2]
        boxes = [(c, (x0 * w, y0 * h, x1 * w, y1 * h)) for c, x0, y0, x1, y1 in zip(
            r["image/object/class/text"], r["image/object/bbox/xmin"], r["image/object/bbox/ymin"],
            r["image/object/bbox/xmax"], r["image/object/bbox/ymax"])]
        own, pasted = boxes[:3], boxes[3:]
        assert [c for c, _ in own] == ["dot", "dot", "slab"], "place: free hides none of the image's objects"
        for cls, box in boxes:   # every box is exactly its square: its colour fills it, the class its colour's
            colour = _colour_of(r["pixels"], box)
            assert colours[colour][0] == cls and round(box[2] - box[0]) == colours[colour][1], (cls, box, colour)
        for k, (cls, box) in enumerate(pasted):
            assert cls == "dot", "size: small pastes no 100 px slab"
            assert not any(box[0] < b[2] and b[0] < box[2] and box[1] < b[3] and b[1] < box[3]
                           for _, b in own + pasted[:k] + pasted[k + 1:]), "free places: no overlap at all"
        per = collections.Counter(_colour_of(r["pixels"], b) for _, b in pasted)
        copies.update(per.values())
        assert len(r["augd/partners"]) == len(pasted)
    assert copies[3] >= 0.8 * sum(copies.values()), f"each picked object pasted 3 times: {copies}"
    print(f"pasted: {sum(k * n for k, n in copies.items())} copies of {sum(copies.values())} objects, {dict(copies)}")


@pytest.mark.parametrize("params, says", [
    ("copies: [3, 2]", "copies [3, 2]: min must not exceed max"), ("size: tiny", "copy_paste.size"),
    ("place: over", "copy_paste.place"), ("copies: [1, 9]", "copy_paste.copies")])
def test_copy_paste_refuses_bad_size_copies_and_place(params, says):
    with pytest.raises(SpecError) as err:
        parse_pipeline(f"name: t\nops:\n  - copy_paste: {{{params}}}\n", "p.yaml")
    assert "p.yaml:3" in str(err.value) and says in str(err.value), str(err.value)


def test_unset_size_copies_and_place_leave_a_pipelines_form_and_sha_as_they_were():
    spec = parse_pipeline("name: t\nops:\n  - copy_paste: {objects: [1, 3]}\n")
    assert set(spec.normalized()["ops"][0]["copy_paste"]) == {"p", "partners", "objects", "scale", "feather"}
