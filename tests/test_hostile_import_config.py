"""Issue 56, item 7: `augd import-config` on hostile pipeline.configs. Every value is typed as the API's proto types
it (a finite number; an int32 where an integer goes; never NaN, infinity or a quoted number) and checked against the
op it becomes, so a bad one is exit 2 with the config's own file, line and field, never a traceback and never the
output's line. The parser is bounded: PBTXT_MAX_BYTES, PBTXT_MAX_DEPTH, line numbers found once, strings scanned
without a backtracking regex (the label map reader's too)."""
from __future__ import annotations

import os
import subprocess
import sys
import tracemalloc

import pytest

from augd import defaults
from augd.annotations.labelmap import LabelMap
from augd.parsing import pbtxt
from augd.parsing.pbtxt import PbtxtError
from augd.schema.odapi import import_config

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _config(step: str) -> str:
    return f"train_config {{\n  batch_size: 2\n  data_augmentation_options {{\n    {step}\n  }}\n}}\n"


#: A step (line 4 of the config) -> the error, after "x.config:LINE: ".
VALUES = {
    'random_horizontal_flip { probability: "abc" }': "random_horizontal_flip.probability: 'abc' is not a number",
    "random_black_patches { max_black_patches: 1e999 }":
        "random_black_patches.max_black_patches: inf is not finite (NaN and infinity are refused)",
    "random_black_patches { max_black_patches: nan }": "random_black_patches.max_black_patches: 'nan' is not finite",
    "random_black_patches { max_black_patches: 2.5 }": "random_black_patches.max_black_patches: 2.5 is not an integer",
    "random_pad_image { pad_color: 0 pad_color: nan pad_color: 0 }": "random_pad_image.pad_color: 'nan' is not finite",
    "random_resize_method { target_height: 1e999 target_width: 9 }": "random_resize_method.target_height: inf is not",
    "random_resize_method { target_height: 99999999999 target_width: 9 }":
        "random_resize_method.target_height: 99999999999 is not within +-2147483647 (int32)",
    'random_adjust_brightness { max_delta: "0.2" }': "random_adjust_brightness.max_delta: '0.2' is not a number",
    "random_horizontal_flip { probability: -inf }": "random_horizontal_flip.probability: '-inf' is not finite",
    "random_horizontal_flip { probability: nan }": "random_horizontal_flip.probability: 'nan' is not finite",
    "random_horizontal_flip { probability: -0.5 }": "random_horizontal_flip: its values make an op augd refuses: "
                                                    "ops[0].random_flip_left_right.probability",
    "random_crop_image { min_area: 2 }": "random_crop_image: its values make an op augd refuses: "
                                         "ops[0].random_crop.area[0]",
    "ssd_random_crop { operations { min_area: nan } }": "ssd_random_crop.min_area: 'nan' is not finite",
    "random_horizontal_flip { keypoint_flip_permutation: 1.5 }":
        "random_horizontal_flip.keypoint_flip_permutation: 1.5 is not an integer",
}


@pytest.mark.parametrize("step", list(VALUES))
def test_a_bad_value_is_the_configs_error_with_its_line_and_field(step):
    with pytest.raises(PbtxtError) as e:
        import_config(_config(step), "x.config")
    assert str(e.value).startswith("x.config:4: " + VALUES[step]), str(e.value)


@pytest.mark.parametrize("text, message", [
    ("train_config { " + "a { " * 1000 + "}" * 1000 + " }\n",
     f"x.config:1: messages nest deeper than {defaults.PBTXT_MAX_DEPTH} levels (PBTXT_MAX_DEPTH)"),
    ('train_config {\n  x: "never closed\n}\n', "x.config:2: a string that is not closed on its line"),
    ("train_config {\n  x: " + "9" * 5000 + "\n}\n", "x.config:2: a number of 5000 characters"),
    ("train_config {\n  x: " + "1" * 50_000 + "x\n}\n", "x.config:2: unexpected '"),
    ("#" * (defaults.PBTXT_MAX_BYTES + 1), "x.config: refused: 1048577 characters exceed the 1048576 limit"),
])
def test_hostile_text_is_refused_by_the_parser_with_its_limit(text, message):
    with pytest.raises(PbtxtError) as e:
        pbtxt.parse(text, "x.config")
    assert str(e.value).startswith(message), str(e.value)


def test_nesting_to_the_limit_parses():
    [f] = pbtxt.parse("a { " * defaults.PBTXT_MAX_DEPTH + "}" * defaults.PBTXT_MAX_DEPTH, "x.config")
    depth = 0
    while f.is_message and f.value:
        f, depth = f.value[0], depth + 1
    assert depth == defaults.PBTXT_MAX_DEPTH - 1


class _Scanned(str):
    """A text that counts the characters its readers scan through str methods (count, find, slices)."""
    scanned = 0

    def count(self, sub, start=0, end=None):
        _Scanned.scanned += (len(self) if end is None else end) - start
        return super().count(sub, start, end)

    def __getitem__(self, key):
        got = super().__getitem__(key)
        _Scanned.scanned += len(got)
        return got


def test_line_numbers_and_strings_cost_what_the_text_is_long():
    """40,000 fields: the parser scans each character a bounded number of times (it counted the newlines from the
    text's start at every field: 80,000 fields took 40 s), and a 200 KB string takes memory of its own size (a
    regex repeating a group per character kept a frame per character, ~170 bytes each: 50 MB took 8.5 GB)."""
    text = "train_config {\n" + "  b: 1\n" * 40_000 + "}\n"
    _Scanned.scanned = 0
    fields = pbtxt.parse(_Scanned(text), "x.config")
    assert fields[0].value[-1].line == 40_001
    assert _Scanned.scanned <= 2 * len(text), _Scanned.scanned
    for body in ('"' + "a" * 200_000 + '"', '"' + "\\n" * 100_000 + '"'):
        tracemalloc.start()
        [f] = pbtxt.parse(f"x: {body}\n", "x.config")
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert len(f.value) >= 100_000 and peak < 16 * len(body), peak


def test_a_label_maps_strings_and_escapes_cost_what_they_are_long(tmp_path):
    name = "\\101" * 50_000   # 200 KB of octal escapes: 50,000 A's
    (tmp_path / "m.pbtxt").write_text(f"item {{\n  id: 1\n  name: '{name}'\n}}\n")
    tracemalloc.start()
    m = LabelMap.read_pbtxt(tmp_path / "m.pbtxt")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert m.ids == {"A" * 50_000: 1} and peak < 16 * len(name), peak
    (tmp_path / "b.pbtxt").write_text("item {\n  id: 1\n  name: 'a" + "b" * 900_000 + "\n}\n")
    with pytest.raises(Exception, match=r"b.pbtxt:3: invalid label map: a string that is not closed on its line"):
        LabelMap.read_pbtxt(tmp_path / "b.pbtxt")


def test_augd_import_config_exits_2_with_the_configs_line_and_no_traceback(tmp_path):
    cfg = tmp_path / "pipeline.config"
    cfg.write_text(_config("random_black_patches { max_black_patches: 1e999 }"))
    big = tmp_path / "big.config"
    big.write_text(_config("random_horizontal_flip { }") + "# " + "c" * (2 << 20) + "\n")
    for path, message in ((cfg, f"{cfg}:4: random_black_patches.max_black_patches: inf is not finite"),
                          (big, f"{big}: refused: 2 MiB ")):
        p = subprocess.run([sys.executable, "-m", "augd", "import-config", str(path), "-o", str(tmp_path / "o.yaml")],
                           capture_output=True, text=True, env={**os.environ, "PYTHONPATH": REPO}, timeout=60)
        assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
        assert f"augd import-config: {message}" in p.stderr, p.stderr
        assert not (tmp_path / "o.yaml").exists()
