"""`tile:` (augd/schema/tile.py, augd/job/tiles.py), judged by the pixels: scenes of small solid squares on white
(PNG in and out, so a tile as cut is the source's pixels exactly), each record's boxes against the squares its
pixels show, every object whole in at least one tile, the empty tiles kept at their share, the keys that map a
record back to its source, and the same bytes on every executor."""
from __future__ import annotations

import collections
import hashlib
import json

import cv2
import numpy as np
import pytest

from augd.defaults import ExecutorKind
from augd.errors import SpecError
from augd.io.lite import iter_records
from augd.io.records import parse_example
from augd.job import JobOptions, run_job
from augd.job.executors import traits
from augd.schema import parse_pipeline
from augd.schema.tile import TileSpec, tiles_of
from tests.annotated import Img, Shape, scattered_squares, voc_job

COLOURS = {"red": (230, 30, 30), "green": (30, 210, 30), "blue": (30, 30, 230)}
MIN_VISIBILITY = 0.3
SIZES = ((800, 1000), (520, 700))   # (h, w) of the scenes' images


def _scenes(root, n_objects: int = 12, seed: int = 0) -> dict:
    """VOC scenes of squares 16-60 px that never touch (each square its own connected region); {relpath: (h, w,
    [(class, (x0, y0, x1, y1)), ...])}."""
    rng = np.random.default_rng(seed)
    images, truth = [], {}
    for i, (h, w) in enumerate(SIZES):
        shapes = scattered_squares(rng, n_objects, h, w, (16, 60), 4, COLOURS)
        images.append(Img(f"im{i}.png", h, w, shapes))
        truth[f"JPEGImages/im{i}.png"] = (h, w, [(t.cls, t.geom) for t in shapes])
    voc_job(str(root), images)
    return truth


def _records(folder) -> list[dict]:
    out = []
    for path in sorted(folder.glob("*.tfrecord*")):
        for raw in iter_records(str(path)):
            r = parse_example(raw)
            r["pixels"] = cv2.imdecode(np.frombuffer(r["image/encoded"], np.uint8), cv2.IMREAD_COLOR)[:, :, ::-1]
            out.append(r)
    return out


def _boxes(r) -> list:
    """A record's (class, box in its pixels) list."""
    h, w = r["pixels"].shape[:2]
    return [(c, (x0 * w, y0 * h, x1 * w, y1 * h)) for c, x0, y0, x1, y1 in zip(
        r["image/object/class/text"], r["image/object/bbox/xmin"], r["image/object/bbox/ymin"],
        r["image/object/bbox/xmax"], r["image/object/bbox/ymax"])]


def _regions(pixels, colour) -> list:
    """The extents (x0, y0, x1, y1) and areas of the colour's connected regions (hue kept, levels not)."""
    c = int(np.argmax(colour))
    x = pixels.astype(np.int32)
    lead = (x[:, :, c] - np.maximum(x[:, :, (c + 1) % 3], x[:, :, (c + 2) % 3])) > 80
    n, _, stats, _ = cv2.connectedComponentsWithStats(lead.astype(np.uint8), connectivity=8)
    return [((s[0], s[1], s[0] + s[2], s[1] + s[3]), s[4]) for s in stats[1:n]]


def _each_box_is_its_square(pixels, boxes) -> bool:
    """Each box is its object, judged by its own pixels where objects of a class may touch: its colour fills the
    box, and on each side the line just outside is not all its colour unless another box of its class lies there."""
    def lead(cls):
        c = int(np.argmax(COLOURS[cls]))
        x = pixels.astype(np.int32)
        return (x[:, :, c] - np.maximum(x[:, :, (c + 1) % 3], x[:, :, (c + 2) % 3])) > 80
    h, w = pixels.shape[:2]
    for cls, box in boxes:
        x0, y0, x1, y1 = (int(round(v)) for v in box)
        mine = lead(cls)
        if not mine[y0:y1, x0:x1].all():
            return False
        for side in ((x0, y0 - 1, x1, y0), (x0, y1, x1, y1 + 1), (x0 - 1, y0, x0, y1), (x1, y0, x1 + 1, y1)):
            a0, b0, a1, b1 = side
            if a0 < 0 or b0 < 0 or a1 > w or b1 > h or not mine[b0:b1, a0:a1].all():
                continue
            if not any(c == cls and o[0] <= a0 and a1 <= o[2] and o[1] <= b0 and b1 <= o[3] for c, o in boxes):
                return False
    return True


def _pipeline(tile: str, ops: str = "", variants: int = 1) -> str:
    return (f"name: tiles\nseed: 3\nvariants: {variants}\noutput: {{format: png, shards: 1}}\n"
            f"annotations: {{min_visibility: {MIN_VISIBILITY}}}\ntile: {tile}\nops:\n{ops or '  []'}\n")


TILE = "{size: 256, overlap: 0.25, empty: 0.3, full_image: 300}"
OPS = "  - random_flip_left_right: {}\n  - random_rotation: {degrees: 10, fill: 255}\n"


# -- where the tiles lie ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("h, w, tile", [
    (3000, 4000, "{size: 640, overlap: 0.2}"), (800, 1000, "{size: 256, overlap: 0.25}"),
    (520, 700, "{size: [200, 300], overlap: 0}"), (100, 120, "{size: 640}"), (3000, 4000, "{grid: [3, 4]}"),
    (999, 1001, "{grid: [2, 5], overlap: 0.5}")])
def test_tiles_cover_the_image_overlap_as_asked_and_the_last_is_flush(h, w, tile):
    spec = parse_pipeline(_pipeline(tile)).tile
    tiles = [t for t in tiles_of(spec, h, w) if not t.full]
    cover = np.zeros((h, w), np.int32)
    for t in tiles:
        assert 0 <= t.x0 < t.x1 <= w and 0 <= t.y0 < t.y1 <= h and (t.out_h, t.out_w) == (t.y1 - t.y0, t.x1 - t.x0)
        cover[t.y0:t.y1, t.x0:t.x1] += 1
    assert cover.min() >= 1, "a pixel no tile covers"
    assert {t.x1 for t in tiles} >= {w} and {t.y1 for t in tiles} >= {h}
    assert [t.index for t in tiles] == list(range(len(tiles)))
    if spec.size is not None:
        th, tw = (min(s, n) for s, n in zip(spec.sides, (h, w)))
        assert all((t.y1 - t.y0, t.x1 - t.x0) == (th, tw) for t in tiles)
    # neighbours share at least `overlap` of a side (rounding aside), so an object that small is whole in one
    xs = sorted({t.x0 for t in tiles})
    side = tiles[0].x1 - tiles[0].x0
    assert all(side - (b - a) >= spec.overlap * side - 1 for a, b in zip(xs, xs[1:]))
    rng = np.random.default_rng(1)
    small = int(spec.overlap * min(t.x1 - t.x0 for t in tiles)) - 1
    for _ in range(200 if small > 0 else 0):
        x, y = int(rng.integers(0, w - small)), int(rng.integers(0, h - small))
        assert any(t.x0 <= x and x + small <= t.x1 and t.y0 <= y and y + small <= t.y1 for t in tiles)


def test_the_whole_image_is_one_more_tile_shrunk_never_enlarged():
    big = tiles_of(TileSpec(size=256, full_image=300), 800, 1000)[-1]
    assert big.full and (big.out_h, big.out_w) == (240, 300) and big.scale == pytest.approx(0.3)
    small = tiles_of(TileSpec(size=256, full_image=3000), 800, 1000)[-1]
    assert (small.out_h, small.out_w) == (800, 1000) and small.scale == 1.0
    one = tiles_of(TileSpec(size=1024, full_image=512), 800, 1000)
    assert [t.full for t in one] == [False, True] and one[1].out_w == 512
    assert [t.full for t in tiles_of(TileSpec(size=1024, full_image=1024), 800, 1000)] == [False], \
        "an image that is its one tile gets no second, identical record"


@pytest.mark.parametrize("block, says", [
    ("{}", "give exactly one of size (pixels) and grid"), ("{size: 8}", "size must be 16 to 16384"),
    ("{size: 64, grid: [2, 2]}", "got size: 64, grid: [2, 2]"), ("{grid: [0, 2]}", "grid must be 1 to 64"),
    ("{size: 64, overlap: 0.95}", "tile.overlap"), ("{size: 64, empty: 2}", "tile.empty"),
    ("{size: 64, rows: 2}", "unknown key 'rows'")])
def test_a_bad_tile_block_names_its_key_and_what_is_allowed(block, says):
    with pytest.raises(SpecError) as err:
        parse_pipeline(_pipeline(block), "p.yaml")
    assert "p.yaml:6: tile" in str(err.value) and says in str(err.value), str(err.value)


def test_a_partner_op_other_than_copy_paste_and_tile_are_refused_together():
    with pytest.raises(SpecError) as err:
        parse_pipeline(_pipeline("{size: 256}", "  - mosaic: {size: [256, 256]}\n"), "p.yaml")
    assert "mosaic and tile cannot be combined" in str(err.value) and "ops[0].mosaic" in str(err.value)
    assert "copy_paste is the partner op that works on tiles" in str(err.value)


# -- a detection job, tiled ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiled(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiles")
    truth = _scenes(root / "voc")
    spec = parse_pipeline(_pipeline(TILE, OPS), "tiles.yaml")
    from augd.job import tiles as tiles_module
    decodes = collections.Counter()
    real = tiles_module.decode_upright

    def counted(data, header):   # a spy: the real decode, counted per image (by its bytes' hash)
        decodes[hashlib.sha256(data).hexdigest()] += 1
        return real(data, header)
    tiles_module.decode_upright = counted
    try:
        run_job(str(root / "voc"), spec, str(root / "threads"), JobOptions(workers=2, executor="threads"))
    finally:
        tiles_module.decode_upright = real
    run_job(str(root / "voc"), spec, str(root / "processes"), JobOptions(workers=2, executor="processes"))
    manifest = json.loads((root / "threads" / "voc" / "manifest.json").read_text())
    return root, truth, _records(root / "threads" / "voc"), manifest, decodes


def test_each_image_is_decoded_once_for_all_its_tiles_and_every_executor_writes_the_same_bytes(tiled):
    root, truth, _, _, decodes = tiled
    assert len(decodes) == len(truth) and set(decodes.values()) == {1}   # each image once (each its own bytes)
    for shard in (root / "threads" / "voc").glob("*.tfrecord*"):
        assert shard.read_bytes() == (root / "processes" / "voc" / shard.name).read_bytes()


def test_a_tile_as_cut_is_its_sources_pixels_and_its_keys_say_where(tiled):
    root, truth, records, _, _ = tiled
    sources = {rel: cv2.imread(str(root / "voc" / rel))[:, :, ::-1] for rel in truth}
    seen = 0
    for r in records:
        rel, h, w = r["image/filename"], *truth[r["image/filename"]][:2]
        assert (r["augd/tile/source_height"], r["augd/tile/source_width"]) == (h, w)
        if r["augd/variant"] != 0:
            continue
        px, x, y = r["pixels"], r["augd/tile/x"], r["augd/tile/y"]
        if r["augd/tile/index"] >= 0:
            assert r["augd/tile/scale"] == 1.0
            assert np.array_equal(px, sources[rel][y:y + px.shape[0], x:x + px.shape[1]])
            seen += 1
        else:   # the whole image, shrunk to 300 px on its longer side
            assert (x, y) == (0, 0) and max(px.shape[:2]) == 300
            assert r["augd/tile/scale"] == pytest.approx(300 / w)
    assert seen


def test_every_box_of_a_tile_is_the_square_its_pixels_show_and_every_object_is_whole_in_one(tiled):
    _, truth, records, _, _ = tiled
    whole = collections.defaultdict(set)
    for r in records:
        rel = r["image/filename"]
        tol = 0 if r["augd/variant"] == 0 and r["augd/tile/index"] >= 0 else 2
        for cls, box in _boxes(r):
            regions = [e for e, _ in _regions(r["pixels"], COLOURS[cls])]
            assert any(np.abs(np.subtract(e, box)).max() <= tol for e in regions), \
                f"{rel} tile {r['augd/tile/index']} variant {r['augd/variant']}: {cls} box {box} shows in no " \
                f"square of its colour {regions}"
        if r["augd/variant"] == 0 and r["augd/tile/index"] >= 0:
            x, y = r["augd/tile/x"], r["augd/tile/y"]
            for cls, (x0, y0, x1, y1) in _boxes(r):
                whole[rel].add((cls, (round(x0) + x, round(y0) + y, round(x1) + x, round(y1) + y)))
    for rel, (_, _, objects) in truth.items():
        for cls, box in objects:
            assert (cls, tuple(box)) in whole[rel], f"{rel}: {cls} {box} is whole in no tile"


def test_a_tile_keeps_the_objects_it_shows_enough_of_and_ignores_those_it_cuts_below_min_visibility(tiled):
    """An object the tile's edge cuts keeps its part inside: kept when it shows at least min_visibility of itself,
    else ignored (weight 0: it shows, a tile never makes part of an object background), dropped only when what is
    inside is thinner than min_size."""
    _, truth, records, _, _ = tiled
    checked = collections.Counter()
    for r in records:
        if r["augd/variant"] != 0 or r["augd/tile/index"] < 0:
            continue
        x, y = r["augd/tile/x"], r["augd/tile/y"]
        th, tw = r["pixels"].shape[:2]
        why = r.get("augd/object/ignored") or [""] * len(r["image/object/class/text"])
        boxes = [(c, b, bool(i)) for (c, b), i in zip(_boxes(r), why)]
        for cls, (x0, y0, x1, y1) in truth[r["image/filename"]][2]:
            vx0, vy0, vx1, vy1 = max(x0, x), max(y0, y), min(x1, x + tw), min(y1, y + th)
            if vx1 <= vx0 or vy1 <= vy0:
                continue
            share = (vx1 - vx0) * (vy1 - vy0) / ((x1 - x0) * (y1 - y0))
            want = (vx0 - x, vy0 - y, vx1 - x, vy1 - y)
            got = [ig for c, b, ig in boxes if c == cls and np.allclose(b, want, atol=1e-3)]
            fate = "dropped" if not got else "ignored" if got[0] else "kept"
            expected = "kept" if share >= MIN_VISIBILITY else "dropped" if min(vx1 - vx0, vy1 - vy0) < 2 else "ignored"
            assert fate == expected, f"{r['image/filename']} tile {r['augd/tile/index']}: {cls} {share:.2f} shown"
            checked[fate] += 1
    assert checked["kept"] and checked["ignored"], checked


def test_the_counts_add_up_and_empty_tiles_are_kept_at_their_share(tiled, tmp_path):
    root, truth, records, m, _ = tiled
    t = m["tiles"]
    firsts = [r for r in records if r["augd/variant"] == 0]
    tile_firsts = [r for r in firsts if r["augd/tile/index"] >= 0]
    assert t["kept"] == len(tile_firsts) == t["tiles"] - t["empty"] + t["empty_kept"]
    assert t["full_images"] == len(truth) == len(firsts) - len(tile_firsts)
    assert len(records) == m["records"]["written"] == 2 * len(firsts)
    assert sum(not len(r["image/object/bbox/xmin"]) for r in tile_firsts) == t["empty_kept"]
    assert t["objects_in_kept_tiles"] == sum(len(r["image/object/bbox/xmin"]) for r in tile_firsts)
    assert 0 < t["empty_kept"] < t["empty"]
    print(f"tiles: {t}; objects in {m['annotations']['objects']['in']}, records {len(records)}")
    for share, kept in ((0.0, lambda e: 0), (1.0, lambda e: e)):
        spec = parse_pipeline(_pipeline(TILE.replace("empty: 0.3", f"empty: {share}")), "tiles.yaml")
        run_job(str(root / "voc"), spec, str(tmp_path / str(share)), JobOptions(workers=1, executor="threads"))
        got = json.loads((tmp_path / str(share) / "voc" / "manifest.json").read_text())["tiles"]
        assert got["empty"] == t["empty"] and got["empty_kept"] == kept(t["empty"])


# -- a classification job, tiled -------------------------------------------------------------------------------

def test_a_classification_job_keeps_every_tile_of_a_grid(tmp_path):
    rng = np.random.default_rng(2)
    for cls in ("a", "b"):
        (tmp_path / "job" / cls).mkdir(parents=True)
        cv2.imwrite(str(tmp_path / "job" / cls / "x.png"), rng.integers(0, 255, (300, 410, 3), np.uint8))
    spec = parse_pipeline("name: t\nvariants: 1\noutput: {format: png, shards: 1}\n"
                          "tile: {grid: [2, 3], overlap: 0.1, empty: 0, full_image: 128}\n"
                          "ops:\n  - random_flip_left_right: {}\n", "t.yaml")
    run_job(str(tmp_path / "job"), spec, str(tmp_path / "out"), JobOptions(workers=1, executor="threads"))
    records = _records(tmp_path / "out" / "job")
    m = json.loads((tmp_path / "out" / "job" / "manifest.json").read_text())
    assert m["tiles"] == {"tiles": 12, "kept": 12, "empty": 0, "empty_kept": 0, "objects_in_kept_tiles": 0,
                          "full_images": 2}
    assert len(records) == 2 * (6 + 1) * 2
    by = collections.Counter((r["image/class/text"], r["augd/tile/index"]) for r in records)
    assert set(by.values()) == {2} and {i for _, i in by} == {-1, 0, 1, 2, 3, 4, 5}
    for r in records:
        if r["augd/variant"] == 0 and r["augd/tile/index"] >= 0:
            src = cv2.imread(str(tmp_path / "job" / r["image/filename"]))[:, :, ::-1]
            x, y, (th, tw) = r["augd/tile/x"], r["augd/tile/y"], r["pixels"].shape[:2]
            assert np.array_equal(r["pixels"], src[y:y + th, x:x + tw])


def test_the_preview_of_a_tiled_pipeline_shows_the_tiles_and_the_records_augd_run_writes(tmp_path):
    from augd.preview.sheet import MAX_TILES, preview_rows
    (tmp_path / "job").mkdir()
    cv2.imwrite(str(tmp_path / "job" / "x.png"), np.random.default_rng(3).integers(0, 255, (600, 1300, 3), np.uint8))
    spec = parse_pipeline("name: t\nvariants: 2\noutput: {format: png, shards: 1}\n"
                          "tile: {size: 256, overlap: 0.25, full_image: 300}\n"
                          "ops:\n  - random_flip_left_right: {}\n  - random_rotation: {degrees: 10}\n", "t.yaml")
    run_job(str(tmp_path / "job"), spec, str(tmp_path / "out"), JobOptions(workers=1, executor="threads"))
    records = {(r["augd/tile/index"], r["augd/variant"]): r["pixels"] for r in _records(tmp_path / "out" / "job")}
    rows = preview_rows(spec, [str(tmp_path / "job" / "x.png")])
    overview = rows[0].tiles[0]
    assert overview.image.shape[:2] == (600, 1300) and "21 tiles of 256×256" in " ".join(overview.lines)
    assert len(rows) == 1 + MAX_TILES + 1   # the overview, tiles spread over the image, the whole image
    for row in rows[1:]:
        index = -1 if row.tiles[0].title.startswith("whole") else int(row.tiles[0].title.split()[1])
        assert np.array_equal(row.tiles[0].image, records[index, 0])
        for cell in row.tiles[1:]:
            assert np.array_equal(cell.image, records[index, cell.variant]), (index, cell.variant)
            assert any(line.startswith("rot ") for line in cell.lines), cell.lines


def test_small_objects_pasted_onto_tiles_keep_every_box_true_to_its_pixels(tmp_path):
    """copy_paste on tiles: each tile gets small objects of partner images at free places, never of its own source
    image (an object pasted beside itself: issue 57); every box of every record is the square its pixels show, and
    the tile's own objects are all still there."""
    truth = _scenes(tmp_path / "voc", seed=5)
    spec = parse_pipeline(_pipeline("{size: 256, overlap: 0.25, empty: 1.0}",
                                    "  - copy_paste: {objects: [2, 2], size: small, copies: [2, 2], place: free, "
                                    "scale: [1, 1]}\n", variants=2), "tiles.yaml")
    run_job(str(tmp_path / "voc"), spec, str(tmp_path / "out"), JobOptions(workers=1, executor="threads"))
    records = _records(tmp_path / "out" / "voc")
    firsts = {(r["image/filename"], r["augd/tile/index"]): len(_boxes(r)) for r in records if r["augd/variant"] == 0}
    pasted = 0
    for r in records:
        assert _each_box_is_its_square(r["pixels"], _boxes(r)), (r["image/filename"], r["augd/tile/index"])
        if r["augd/variant"]:
            extra = len(_boxes(r)) - firsts[r["image/filename"], r["augd/tile/index"]]
            assert extra >= 0, "place: free hides none of the tile's objects"
            assert all(b[2] - b[0] < 32 for _, b in _boxes(r)[-extra:] if extra), "small ones only"
            pasted += extra
            assert len(r["augd/partners"]) == extra
            assert r["image/source_id"] not in r["augd/partners"], (r["image/filename"], r["augd/tile/index"])
    assert pasted >= len(records) // 2 * 2, f"{pasted} pasted in {len(records) // 2} augmented tile records"
    m = json.loads((tmp_path / "out" / "voc" / "manifest.json").read_text())
    assert m["annotations"]["objects"]["out"] == sum(len(_boxes(r)) for r in records)
    assert truth and m["tiles"]["kept"] == m["tiles"]["tiles"]


def test_a_semantic_mask_is_cut_with_its_tile(tmp_path):
    """A segmentation job: each tile's record carries its window of the class mask, as cut (variant 0)."""
    import tensorflow as tf

    from tests.annotated import draw
    imgs = [Img("m.png", 300, 400, (Shape("red", (30, 40, 150, 120), COLOURS["red"]),
                                    Shape("blue", (220, 150, 380, 290), COLOURS["blue"])))]
    voc_job(str(tmp_path / "voc"), imgs, masks="P")
    spec = parse_pipeline(_pipeline("{grid: [2, 2], overlap: 0.2, empty: 1.0}", variants=0), "tiles.yaml")
    run_job(str(tmp_path / "voc"), spec, str(tmp_path / "out"), JobOptions(workers=1, executor="threads"))
    _, mask = draw(imgs[0], ["red", "blue"])
    records = _records(tmp_path / "out" / "voc")
    assert len(records) == 4
    for r in records:
        got = tf.io.decode_png(r["image/segmentation/class/encoded"]).numpy()[..., 0]
        x, y, (th, tw) = r["augd/tile/x"], r["augd/tile/y"], r["pixels"].shape[:2]
        assert np.array_equal(got, mask[y:y + th, x:x + tw]), r["augd/tile/index"]


def test_the_preview_of_tiles_with_pasted_objects_shows_the_records_augd_run_writes(tmp_path):
    from augd.preview.sheet import preview_rows
    _scenes(tmp_path / "voc", seed=5)
    spec = parse_pipeline(_pipeline("{size: 400, overlap: 0.25, empty: 1.0}",
                                    "  - copy_paste: {objects: [2, 2], size: small, copies: [2, 2], place: free}\n"
                                    "  - random_flip_left_right: {}\n", variants=2), "tiles.yaml")
    run_job(str(tmp_path / "voc"), spec, str(tmp_path / "out"), JobOptions(workers=1, executor="threads"))
    rel = "JPEGImages/im0.png"
    records = {(r["augd/tile/index"], r["augd/variant"]): r["pixels"] for r in _records(tmp_path / "out" / "voc")
               if r["image/filename"] == rel}
    rows = preview_rows(spec, [str(tmp_path / "voc" / rel)], relpaths=[rel], root=tmp_path / "voc")
    named = 0
    for row in rows[1:]:
        index = int(row.tiles[0].title.split()[1])
        for cell in row.tiles[1:]:
            assert np.array_equal(cell.image, records[index, cell.variant]), (index, cell.variant)
            named += any(line.startswith("+ ") for line in cell.lines)   # its partners, named
    assert named >= 2


def test_the_daemons_sheet_of_a_tiled_job_shows_its_first_tile_from_that_tiles_plan(tmp_path):
    """The status page's row (augd/preview/records.py) is drawn from the records: a tiled image's first kept tile,
    its variants described from the tile's own seed and size."""
    from augd.engine import Engine
    from augd.formats import read_header
    from augd.io import InputImage
    from augd.job.images import process_images
    from augd.preview.records import row_from_outcome
    path = tmp_path / "x.png"
    cv2.imwrite(str(path), np.random.default_rng(3).integers(0, 255, (300, 500, 3), np.uint8))
    spec = parse_pipeline("name: t\nvariants: 2\noutput: {format: png}\ntile: {size: 256, overlap: 0.25}\n"
                          "ops:\n  - random_rotation: {degrees: 10}\n", "t.yaml")
    data = path.read_bytes()
    img = InputImage("x.png", str(path), len(data), -1, "", read_header(data))
    compiled = Engine().compile(spec)
    outcome, = process_images(compiled, spec, [img])
    row = row_from_outcome(spec, outcome)
    assert row.tiles[0].title == "x.png tile 0" and row.tiles[0].image is not None
    from augd.preview.sheet import format_decisions
    cells = row.tiles[1:]
    assert [c.variant for c in cells] == [1, 2]
    for cell in cells:
        assert cell.lines == format_decisions(compiled.explain("x.png#tile0", cell.variant, 256, 256))
    assert any(c.lines != format_decisions(compiled.explain("x.png", c.variant, 300, 500)) for c in cells), \
        "the whole image's plan would say otherwise"
    compiled.close()


@pytest.fixture(scope="module")
def tiled_threads(tmp_path_factory):
    """A tiled detection job with small objects pasted onto its tiles, run on threads: (job folder, spec, shard
    bytes by name, manifest)."""
    root = tmp_path_factory.mktemp("tiled-executors")
    _scenes(root / "voc", seed=7)
    spec = parse_pipeline(_pipeline("{size: 320, overlap: 0.2, empty: 0.5, full_image: 256}",
                                    "  - copy_paste: {objects: [1, 2], size: small, copies: [1, 2], place: free}\n"
                                    + OPS, variants=2), "tiles.yaml")
    run_job(str(root / "voc"), spec, str(root / "threads"), JobOptions(workers=2, executor="threads"))
    out = root / "threads" / "voc"
    return root / "voc", spec, {p.name: p.read_bytes() for p in out.glob("*.tfrecord*")}, \
        json.loads((out / "manifest.json").read_text())


@pytest.mark.parametrize("kind", [k.value for k in ExecutorKind
                                  if k.value not in ("auto", "threads")])
def test_every_executor_writes_a_tiled_jobs_bytes(tiled_threads, tmp_path, kind):
    """Seeds per tile: the tiles, their variants and the objects pasted onto them are the same on every executor
    (the registry's: an executor added to ExecutorKind runs here too)."""
    why = traits(kind).missing(kind)
    if why:
        pytest.skip(why)
    job, spec, shards, manifest = tiled_threads
    run_job(str(job), spec, str(tmp_path), JobOptions(workers=2, executor=kind))
    out = tmp_path / "voc"
    assert {p.name: p.read_bytes() for p in out.glob("*.tfrecord*")} == shards
    got = json.loads((out / "manifest.json").read_text())
    assert (got["tiles"], got["annotations"]) == (manifest["tiles"], manifest["annotations"])


def test_an_image_none_of_whose_tiles_is_kept_is_listed_as_a_negative_with_the_reason(tmp_path):
    imgs = [Img("full.png", 300, 400, (Shape("red", (40, 40, 80, 80), COLOURS["red"]),)), Img("empty.png", 300, 400)]
    voc_job(str(tmp_path / "voc"), imgs)
    spec = parse_pipeline(_pipeline("{size: 256, overlap: 0.2, empty: 0}"), "tiles.yaml")
    res = run_job(str(tmp_path / "voc"), spec, str(tmp_path / "out"), JobOptions(workers=1, executor="threads"))
    (gone,) = res.report.inputs.rejected_files
    assert (gone.relpath, gone.reason) == ("JPEGImages/empty.png", "negative")
    assert "none of its 4 tiles holds an object" in gone.message and "tile.empty (0" in gone.message
    m = json.loads((tmp_path / "out" / "voc" / "manifest.json").read_text())
    assert (m["tiles"]["tiles"], m["tiles"]["kept"], m["tiles"]["empty"], m["tiles"]["empty_kept"]) == (8, 2, 6, 0)
    assert m["records"]["written"] == 2 * 2   # its 2 kept tiles, each as cut and augmented once


def test_the_preview_of_a_tiled_job_outlines_the_boxes_and_oriented_boxes_each_record_holds(tmp_path):
    """With the job's annotations (`--root`), each tile's cells outline the objects of the record `augd run` writes
    for it, as the untiled preview does: every kept object's oriented box along its sides, in the kept colour, the
    pixels away from the outlines the record's own."""
    from augd.io.lite import OBB_KEYS
    from augd.preview.sheet import KEPT_COLOUR, preview_rows
    from tests.exports import dota_job
    from tests.test_oriented_boxes import big_scenes
    dota_job(str(tmp_path / "dota"), big_scenes(1))
    spec = parse_pipeline(_pipeline("{size: 256, overlap: 0.25, empty: 1.0}",
                                    "  - random_rotation: {degrees: 20}\n", variants=1), "tiles.yaml")
    run_job(str(tmp_path / "dota"), spec, str(tmp_path / "out"), JobOptions(workers=1, executor="threads"))
    records = {(r["augd/tile/index"], r["augd/variant"]): r for r in _records(tmp_path / "out" / "dota")}
    rows = preview_rows(spec, [str(tmp_path / "dota" / "images" / "big0.png")], relpaths=["images/big0.png"],
                        root=tmp_path / "dota")
    sides = 0
    for row in rows[1:]:
        index = int(row.tiles[0].title.split()[1])
        for variant, cell in enumerate(row.tiles):
            r = records[index, variant]
            h, w = r["pixels"].shape[:2]
            obb = np.stack([np.atleast_1d(r[k]) for k in OBB_KEYS], 1).reshape(-1, 4, 2) * (w, h)
            near = np.zeros((h, w), np.uint8)   # where an outline may be drawn: around each box and oriented box
            for k, quad in enumerate(obb):
                x0, y0, x1, y1 = (np.atleast_1d(r[f"image/object/bbox/{s}"])[k] * f
                                  for s, f in zip(("xmin", "ymin", "xmax", "ymax"), (w, h, w, h)))
                for q in (quad, [(x0, y0), (x1, y0), (x1, y1), (x0, y1)]):
                    cv2.polylines(near, [np.round(np.array(q)).astype(np.int32)], True, 1, 7)
                if r.get("image/object/weight", [1.0] * len(obb))[k] == 0:
                    continue   # ignored: dashed in the other colour
                for a, b in zip(quad, np.roll(quad, -1, axis=0)):
                    x, y = np.clip(np.round((a + b) / 2).astype(int), 0, (w - 1, h - 1))
                    spot = cell.image[max(y - 1, 0):y + 2, max(x - 1, 0):x + 2].reshape(-1, 3).astype(int)
                    assert np.abs(spot - KEPT_COLOUR).sum(axis=1).min() <= 90, (index, variant, k, (x, y))
                    sides += 1
            changed = np.any(cell.image != r["pixels"], axis=-1)
            assert not (changed & (near == 0)).any(), (index, variant, "drawn away from the record's boxes")
    assert sides >= 40
