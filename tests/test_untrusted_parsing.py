"""Issue 14, item 1: bounded parsing of everything a job supplies. YAML (pipelines, augd.yaml, daemon config)
is capped in bytes, nesting depth and alias-expanded size; JSON and XML annotations (augd.parsing.jsonxml) are
capped in bytes and depth, and XML may declare no DTD or entities. Every refusal names the file and the limit."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import pytest

from augd import defaults
from augd.daemon.routing import resolve_pipeline
from augd.errors import SpecError, UntrustedFileError
from augd.parsing.jsonxml import load_json, parse_xml
from augd.schema import load_pipeline, parse_pipeline
from tests.daemon_harness import TINY, RssSampler

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = {**os.environ, "PYTHONPATH": ROOT}

# Nine levels of nine aliases: 9^9 (387 million) "lol"s once expanded, 500 bytes on disk.
LOLS = "".join(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]\n" for i in range(1, 10))
BOMB = "l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + LOLS


def _bytes_read() -> int | None:
    """Bytes this process has read through read() so far (Linux), to prove a file was not read whole."""
    try:
        with open("/proc/self/io") as fh:
            return next(int(line.split()[1]) for line in fh if line.startswith("rchar:"))
    except OSError:
        return None


def _sparse(path, size: int):
    with open(path, "wb") as fh:
        fh.truncate(size)  # no disk used: a hole reads as zeros
    return path


# --- YAML ---------------------------------------------------------------------------------------------------

def test_a_yaml_alias_bomb_pipeline_is_refused_by_its_expanded_size(tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text("name: bomb\n" + BOMB + "ops: *l9\n")
    with pytest.raises(SpecError) as e:
        load_pipeline(path)
    assert str(e.value).startswith(f"{path}:")
    assert f"YAML aliases expand to more than {defaults.YAML_MAX_NODES} nodes (limit YAML_MAX_NODES)" in str(e.value)


@pytest.mark.parametrize("where", ["embedded", "pipeline file"])
def test_a_yaml_alias_bomb_in_a_jobs_augd_yaml_is_refused(tmp_path, where):
    if where == "embedded":
        (tmp_path / "augd.yaml").write_text(BOMB + "pipeline: {name: x, ops: *l9}\n")
    else:
        (tmp_path / "bomb.yaml").write_text("name: bomb\n" + BOMB + "ops: *l9\n")
        (tmp_path / "augd.yaml").write_text("pipeline: bomb.yaml\n")
    with pytest.raises(SpecError, match="YAML_MAX_NODES") as e:
        resolve_pipeline(str(tmp_path), None, "normalize")
    assert str(e.value).startswith(f"{tmp_path / 'augd.yaml'}:")
    assert where == "embedded" or f"{tmp_path / 'bomb.yaml'}:" in str(e.value)


def test_yaml_aliases_cannot_expand_scalar_text_without_bound():
    # Few nodes but each alias repeats a 500 KB string: an error message quoting the value would be 500 GB.
    big = "x" * 500_000
    text = f"name: a\nbig: &a {big}\nb: &b [{', '.join(['*a'] * 9)}]\nops: [{', '.join(['*b'] * 100)}]\n"
    with pytest.raises(SpecError, match=r"x.yaml:\d+: refused: .*characters of text \(limit YAML_MAX_CHARS\)"):
        parse_pipeline(text, "x.yaml")


def test_yaml_aliases_cannot_build_recursive_structures():
    for text in ("name: a\nops: &a [*a]\n", "name: a\nx: &a {<<: *a}\nops: []\n"):
        with pytest.raises(SpecError, match=r"x.yaml:2: refused: alias \*a refers to a node that contains it"):
            parse_pipeline(text, "x.yaml")


DEEP = {
    "flow sequences": "ops: " + "[" * 50_000 + "]" * 50_000,
    "flow mappings": "ops: " + "{a: " * 50_000 + "1" + "}" * 50_000,
    "block sequences": "ops:\n" + "- " * 50_000 + "x",
    # Block mappings indent one more column a level, so 1 MiB holds ~1400 levels: past Python's recursion limit.
    "block mappings": "ops:\n" + "".join(" " * i + "a:\n" for i in range(1, 1300)) + " " * 1300 + "a: 1",
    "aliases": "".join(f"d{i}: &d{i} [*d{i - 1}]\n" for i in range(1, 100)).replace("*d0", "1") + "ops: *d99",
}


@pytest.mark.parametrize("how", DEEP)
def test_deep_yaml_nesting_is_refused_before_python_recursion(tmp_path, how):
    path = tmp_path / "deep.yaml"
    path.write_text("name: deep\n" + DEEP[how] + "\n")
    with pytest.raises(SpecError) as e:  # not RecursionError
        load_pipeline(path)
    assert f"refused: nesting deeper than {defaults.YAML_MAX_DEPTH} levels" in str(e.value)
    assert "(limit YAML_MAX_DEPTH)" in str(e.value) and str(e.value).startswith(f"{path}:")


def test_an_oversized_yaml_file_is_refused_without_reading_it(tmp_path):
    over, head = tmp_path / "over.yaml", TINY.format(name="fits")
    over.write_text(head + "#" * (defaults.YAML_MAX_BYTES - len(head)) + "\n")  # one byte over
    with pytest.raises(SpecError, match=r"refused: \d+ bytes exceeds the 1 MiB limit for YAML files "
                                        r"\(YAML_MAX_BYTES\)"):
        load_pipeline(over)
    over.write_text(head + "#" * (defaults.YAML_MAX_BYTES - len(head) - 1) + "\n")
    assert os.path.getsize(over) == defaults.YAML_MAX_BYTES and load_pipeline(over).name == "fits"

    huge = _sparse(tmp_path / "huge.yaml", 10 << 30)
    before = _bytes_read()
    with pytest.raises(SpecError, match=r"huge.yaml: refused: 10 GiB \(10737418240 bytes\) exceeds the 1 MiB"):
        load_pipeline(huge)
    if before is not None:
        assert _bytes_read() - before <= defaults.YAML_MAX_BYTES + 1


def _without_blocking(fifo, call):
    """call() in a thread; if it blocks opening the FIFO, unblock it with a writer and fail."""
    result = {}

    def target():
        try:
            result["value"] = call()
        except Exception as exc:  # noqa: BLE001  (inspected by the caller)
            result["error"] = exc
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(10)
    if thread.is_alive():
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # the reader's open() returns, then reads EOF
        thread.join(10)
        pytest.fail(f"reading {fifo} blocked until a writer opened it")
    return result.get("error")


@pytest.mark.parametrize("reader", ["pipeline", "json", "xml"])
def test_a_fifo_is_refused_without_blocking(tmp_path, reader):
    fifo = tmp_path / f"pipe.{'yaml' if reader == 'pipeline' else reader}"
    os.mkfifo(fifo)
    call = {"pipeline": lambda: load_pipeline(fifo), "json": lambda: load_json(fifo),
            "xml": lambda: parse_xml(fifo)}[reader]
    error = _without_blocking(fifo, call)
    assert isinstance(error, (SpecError, UntrustedFileError))
    assert str(error) == f"{fifo}: refused: not a regular file (a FIFO)"


def _run_measured(args, timeout: float = 20.0):
    """(exit code, stdout, stderr, peak RSS in MB) of a subprocess, its RSS sampled every 10 ms (rusage's
    maxrss would start from this test process' own size, inherited at fork)."""
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV, cwd=ROOT)
    with RssSampler(proc.pid, interval=0.01) as rss:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            pytest.fail(f"{args} still running after {timeout} s (peak RSS {rss.peak / 2**20:.0f} MB)")
    return proc.returncode, out.decode(), err.decode(), rss.peak / 2**20


def test_validate_refuses_an_alias_bomb_with_a_message_small_memory_and_no_traceback(tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text("name: bomb\n" + BOMB + "ops: *l9\n")
    code, out, err, peak_mb = _run_measured([sys.executable, "-m", "augd", "validate", str(path)])
    assert code == 1, (out, err)
    assert err.startswith(f"FAIL {path}:") and "(limit YAML_MAX_NODES)" in err, err
    assert "Traceback" not in out + err
    assert peak_mb < 300, f"peak RSS {peak_mb:.0f} MB"


def test_a_small_legitimate_yaml_anchor_and_alias_still_validates(tmp_path):
    text = ("name: anchors\nops:\n  - random_hue: &hue {max_delta: 0.1}\n  - random_hue: *hue\n"
            "  - random_brightness: {<<: *hue, max_delta: 0.2}\n  - one_of: &pair\n"
            "      - random_flip_left_right: {}\n      - random_flip_up_down: {}\n  - some_of: {n: 1, ops: *pair}\n")
    spec = parse_pipeline(text, "anchors.yaml")
    assert [n.to_dict() for n in spec.ops[:3]] == [{"random_hue": {"p": 1.0, "max_delta": 0.1}}] * 2 + [
        {"random_brightness": {"p": 1.0, "max_delta": 0.2}}]
    assert spec.ops[3].children == spec.ops[4].children
    bad = text.replace("{max_delta: 0.1}", "{max_delta: 0.9}")  # still reported at the anchor's line
    with pytest.raises(SpecError, match=r"anchors.yaml:3: ops\[0\].random_hue.max_delta"):
        parse_pipeline(bad, "anchors.yaml")


# --- JSON ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("depth", [50_000, defaults.JSON_MAX_DEPTH + 1])
def test_json_nesting_deeper_than_the_limit_is_refused(tmp_path, depth):
    path = tmp_path / "deep.json"
    path.write_text("[" * depth + "]" * depth)
    with pytest.raises(UntrustedFileError) as e:  # past the recursion limit (C decoder) or just past ours
        load_json(path)
    assert str(e.value) == f"{path}: refused: JSON nesting deeper than 64 levels (limit JSON_MAX_DEPTH)"
    assert (e.value.path, e.value.limit) == (str(path), defaults.JSON_MAX_DEPTH)
    path.write_text("[" * 64 + "]" * 64)
    assert load_json(path) is not None


def test_an_oversized_json_file_is_refused_without_reading_it(tmp_path):
    huge = _sparse(tmp_path / "huge.json", 10 << 30)
    before = _bytes_read()
    with pytest.raises(UntrustedFileError) as e:
        load_json(huge)
    assert str(e.value) == f"{huge}: refused: 10 GiB (10737418240 bytes) exceeds the 512 MiB limit for JSON files"
    assert e.value.limit == defaults.JSON_MAX_BYTES
    if before is not None:
        assert _bytes_read() - before < 1 << 20
    small = tmp_path / "small.json"
    small.write_text(json.dumps({"annotations": list(range(100))}))
    with pytest.raises(UntrustedFileError, match=r"small.json: refused: \d+ bytes exceeds the 100 bytes limit"):
        load_json(small, max_bytes=100)


def test_invalid_json_names_the_file_line_and_column(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{\n  "images": [1,\n    2,,]\n}\n')
    with pytest.raises(UntrustedFileError) as e:
        load_json(path)
    assert str(e.value) == f"{path}:3: invalid JSON: Expecting value (line 3, column 7)"


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_json_nan_and_infinity_are_refused(tmp_path, constant):
    path = tmp_path / "nan.json"
    path.write_text(f'{{"bbox": [0, 0, {constant}, 4]}}')
    with pytest.raises(UntrustedFileError, match=f"nan.json: invalid JSON: non-standard constant {constant}"):
        load_json(path)


def test_a_small_coco_file_loads(tmp_path):
    coco = {"images": [{"id": 1, "file_name": "a.jpg", "width": 640, "height": 480}],
            "annotations": [{"id": 7, "image_id": 1, "category_id": 3, "bbox": [10.5, 20, 30, 40], "area": 1200.0,
                             "iscrowd": 0, "segmentation": [[10.5, 20, 40.5, 20, 40.5, 60]]}],
            "categories": [{"id": 3, "name": "cat", "supercategory": "animal"}]}
    path = tmp_path / "instances.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(coco, ensure_ascii=False).encode())  # with a UTF-8 BOM
    assert load_json(path) == coco


# --- XML ----------------------------------------------------------------------------------------------------

VOC = """<annotation>
  <folder>VOC2012</folder>
  <filename>2007_000027.jpg</filename>
  <size><width>486</width><height>500</height><depth>3</depth></size>
  <object>
    <name>person</name><difficult>0</difficult>
    <bndbox><xmin>174</xmin><ymin>101</ymin><xmax>349</xmax><ymax>351</ymax></bndbox>
  </object>
</annotation>
"""


def test_an_xml_entity_bomb_is_refused(tmp_path):
    entities = "".join(f'  <!ENTITY lol{i} "{f"&lol{i - 1};" * 10}">\n' for i in range(1, 10))
    path = tmp_path / "bomb.xml"
    path.write_text(f'<?xml version="1.0"?>\n<!DOCTYPE lolz [\n  <!ENTITY lol0 "lol">\n{entities}]>\n'
                    f"<annotation><filename>&lol9;</filename></annotation>\n")
    with pytest.raises(UntrustedFileError) as e:
        parse_xml(path)
    assert str(e.value) == (f"{path}: refused: a DTD (<!DOCTYPE lolz ...>); XML files may declare no DTD, "
                            f"entities or external references")


@pytest.mark.parametrize("target", ["/etc/passwd", "secret"])
def test_an_xml_external_entity_is_refused_and_never_read(tmp_path, target):
    secret = tmp_path / "secret"
    secret.write_text("augd-xxe-secret-7f3a\n")
    url = "file://" + (str(secret) if target == "secret" else target)
    path = tmp_path / "xxe.xml"
    path.write_text(f'<?xml version="1.0"?>\n<!DOCTYPE annotation [<!ENTITY x SYSTEM "{url}">]>\n'
                    f"<annotation><filename>&x;</filename></annotation>\n")
    with pytest.raises(UntrustedFileError, match=r"xxe.xml: refused: a DTD") as e:
        parse_xml(path)
    assert "augd-xxe-secret" not in str(e.value) and "root:" not in str(e.value)
    path.write_text(f'<?xml version="1.0"?>\n<!DOCTYPE annotation SYSTEM "{url}">\n<annotation/>\n')
    with pytest.raises(UntrustedFileError, match=r"xxe.xml: refused: a DTD"):
        parse_xml(path)


def test_a_pascal_voc_annotation_parses(tmp_path):
    path = tmp_path / "2007_000027.xml"
    path.write_text(VOC)
    root = parse_xml(path)
    assert root.tag == "annotation" and root.findtext("filename") == "2007_000027.jpg"
    box = root.find("object/bndbox")
    assert [int(box.findtext(k)) for k in ("xmin", "ymin", "xmax", "ymax")] == [174, 101, 349, 351]


def test_malformed_xml_names_the_file_and_line(tmp_path):
    path = tmp_path / "bad.xml"
    path.write_text(VOC.replace("<depth>3</depth>", "<depth>3</dept>"))
    with pytest.raises(UntrustedFileError) as e:
        parse_xml(path)
    assert str(e.value).startswith(f"{path}:4: invalid XML: mismatched tag: line 4, column ")


def test_an_oversized_xml_file_is_refused_without_reading_it(tmp_path):
    huge = _sparse(tmp_path / "huge.xml", 10 << 30)
    with pytest.raises(UntrustedFileError, match=r"huge.xml: refused: 10 GiB .* exceeds the 64 MiB limit for XML"):
        parse_xml(huge)
    path = tmp_path / "voc.xml"
    path.write_text(VOC)
    with pytest.raises(UntrustedFileError, match=r"refused: \d+ bytes exceeds the 100 bytes limit for XML files"):
        parse_xml(path, max_bytes=100)


def test_untrusted_readers_do_not_import_the_daemon():
    code = "import sys, augd.parsing.jsonxml; print(sorted(m for m in sys.modules if m.startswith('augd.daemon')))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=ENV, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("encoding, doctype", [("utf-16", True), ("utf-16-be", True), ("utf-16", False)])
def test_an_xml_dtd_in_a_wide_encoding_is_refused_too(tmp_path, encoding, doctype):
    # The C parser's fast path looks for the bytes b"<!DOCTYPE": a file where ASCII is not spelled as ASCII
    # must go to defusedxml, which refuses its DTD (or parses it when it has none).
    head = '<!DOCTYPE annotation [<!ENTITY e "x">]>\n' if doctype else ""
    path = tmp_path / "wide.xml"
    path.write_bytes(f'<?xml version="1.0" encoding="{encoding.upper()}"?>\n{head}{VOC}'.encode(encoding))
    if encoding == "utf-16-be":   # no byte order mark: pyexpat cannot read it (it raised ValueError, a crash)
        with pytest.raises(UntrustedFileError, match=r"wide.xml: invalid XML: multi-byte encodings are not"):
            parse_xml(path)
    elif doctype:
        with pytest.raises(UntrustedFileError, match=r"wide.xml: refused: a DTD \(<!DOCTYPE annotation"):
            parse_xml(path)
    else:
        assert parse_xml(path).findtext("filename") == "2007_000027.jpg"


@pytest.mark.parametrize("text, fast", [
    (VOC, True),
    ('<?xml version="1.0" encoding="ISO-8859-1"?>\n' + VOC, True),
    ('<?xml version="1.0" encoding="cp037"?>\n' + VOC, False),   # EBCDIC: no ASCII superset
    ("<?xml version='1.0' encoding='\xe9'?>\n" + VOC, False),   # not an encoding name
    ('<?xml version="1.0"?>\n<!DOCTYPE a SYSTEM "a.dtd">\n<annotation/>', False),
])
def test_only_files_that_cannot_hold_a_dtd_take_the_c_parser(text, fast):
    from augd.parsing import jsonxml
    assert jsonxml._plain(text.encode("latin-1")) is fast


def test_the_c_parser_and_defusedxml_read_the_same_tree(tmp_path):
    from xml.etree import ElementTree
    from defusedxml import ElementTree as SafeET
    path = tmp_path / "voc.xml"
    path.write_text(VOC.replace("<name>person</name>", "<name>caf\u00e9 &amp; person</name>"), encoding="utf-8")
    fast = parse_xml(path)
    assert fast.findtext("object/name") == "caf\u00e9 & person"
    assert ElementTree.tostring(fast) == ElementTree.tostring(SafeET.fromstring(path.read_bytes()))
    path.write_text("<annotation><filename>&x;</filename></annotation>\n")   # no DTD declares it
    with pytest.raises(UntrustedFileError, match=r"voc.xml:1: invalid XML: undefined entity"):
        parse_xml(path)
