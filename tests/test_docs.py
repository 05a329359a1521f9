"""The docs cannot rot: every command they show runs, every link and cited file exists.

The fenced ```bash / ```sh / ```console and ```python blocks of README.md, docs/*.md and bench/README.md run
in page order, one scratch folder per page (a page's later blocks read what its earlier ones wrote), with the
venv's bin first on PATH and copies of augd/samples, pipelines/ and deploy/ in place. A block that cannot run
on a test machine carries `<!-- not run by tests: REASON -->` on the line above it; any other block runs.
Pipelines shown in ```yaml blocks go through `augd validate`.
"""
from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
PAGES = sorted([REPO / "README.md", REPO / "bench" / "README.md", *(REPO / "docs").glob("*.md")])
SHELL = {"bash", "sh", "shell", "console"}
RUNNABLE = SHELL | {"python"}
NOT_RUN = re.compile(r"^<!-- not run by tests: (?P<reason>\S.*\S) -->$")
#: What a page's scratch folder holds (copies: a doc command can never write into the checkout).
SCRATCH_COPIES = ("augd/samples", "pipelines", "deploy")
BLOCK_TIMEOUT_S = 300


@dataclasses.dataclass(frozen=True)
class Block:
    page: Path
    line: int            # 1-based line of the opening fence
    lang: str
    text: str
    not_run: str | None  # the marker's reason

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of a page, each with its language and the not-run marker right above it."""
    lines = page.read_text().splitlines()
    found, i = [], 0
    while i < len(lines):
        m = re.match(r"^(\s*)(```+)(.*)$", lines[i])
        if not m:
            i += 1
            continue
        indent, fence, lang = len(m[1]), m[2], m[3].strip()
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == fence), None)
        assert end is not None, f"{page.relative_to(REPO)}:{i + 1}: unclosed code fence"
        above = lines[i - 1].strip() if i else ""
        marker = NOT_RUN.match(above)
        body = "\n".join(ln[indent:] for ln in lines[i + 1:end])
        found.append(Block(page, i + 1, lang, body, marker["reason"] if marker else None))
        i = end + 1
    return found


def outside_fences(page: Path) -> str:
    """The page's text with its fenced blocks removed (headings and links are only read from prose)."""
    lines = page.read_text().splitlines()
    fenced = set()
    for b in blocks(page):
        fenced.update(range(b.line - 1, b.line + b.text.count("\n") + 2))
    return "\n".join(ln for k, ln in enumerate(lines) if k not in fenced)


# --- every block is run or marked ------------------------------------------------------------------------


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_block_has_a_known_language_and_markers_sit_on_command_blocks(page):
    known = RUNNABLE | {"yaml", "promql", "text", "json"}
    for b in blocks(page):
        assert b.lang in known, f"{b.where}: fenced block without a known language ({b.lang!r}): tag it " \
                                f"(```text for output) so the test knows whether to run it"
        if b.not_run is not None:
            assert b.lang in RUNNABLE, f"{b.where}: a not-run marker on a ```{b.lang} block means nothing"
    text = page.read_text()
    for m in re.finditer(r"<!--\s*not run.*?-->", text, re.S):
        assert NOT_RUN.match(m[0]), f"{page.relative_to(REPO)}: malformed marker {m[0]!r}: " \
                                    "write `<!-- not run by tests: REASON -->` on one line"
        line = text[:m.start()].count("\n") + 1
        assert any(b.line == line + 1 for b in blocks(page)), \
            f"{page.relative_to(REPO)}:{line}: a not-run marker must sit on the line right above a fence"


# --- every command block runs --------------------------------------------------------------------------


def _scratch(tmp_path_factory, page: Path) -> Path:
    work = tmp_path_factory.mktemp(page.stem.lower())
    for rel in SCRATCH_COPIES:
        shutil.copytree(REPO / rel, work / rel, symlinks=True)
    return work


def _env() -> dict:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # the venv's augd, python
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return env


def _shell_script(b: Block) -> str:
    if b.lang == "console":  # `$ command` lines; the rest is output
        text = "\n".join(ln[2:] for ln in b.text.splitlines() if ln.startswith("$ "))
    else:
        text = b.text
    return "set -euo pipefail\ntrap 'echo \"failed: $BASH_COMMAND\" >&2' ERR\n" + text + "\n"


def _run_block(b: Block, work: Path, snippets: Path) -> None:
    if b.lang == "python":
        # Run as a file outside the scratch folder: its copy of augd/samples must not shadow the package.
        script = snippets / f"{b.page.stem}-{b.line}.py"
        script.write_text(b.text + "\n")
        cmd = [sys.executable, str(script)]
    else:
        cmd = ["bash", "-c", _shell_script(b)]
    res = subprocess.run(cmd, cwd=work, env=_env(), capture_output=True, text=True, timeout=BLOCK_TIMEOUT_S)
    assert res.returncode == 0, f"{b.where}: ```{b.lang} block exited {res.returncode}\n" \
                                f"--- stdout\n{res.stdout[-3000:]}\n--- stderr\n{res.stderr[-3000:]}"


def _pipeline_docs(b: Block) -> list[dict]:
    """The pipelines a ```yaml block shows: a whole one, a job's augd.yaml embedding one, or an ops list."""
    doc = yaml.safe_load(b.text)
    assert isinstance(doc, dict), f"{b.where}: a ```yaml block that is not a mapping"
    if isinstance(doc.get("pipeline"), dict):
        doc = doc["pipeline"]
    if "ops" not in doc:
        return []
    return [doc if "name" in doc else {"name": "docs-snippet", **doc}]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_the_commands_of_each_page_run(page, tmp_path_factory):
    todo = [b for b in blocks(page) if b.lang in RUNNABLE and b.not_run is None]
    pipelines = [d for b in blocks(page) if b.lang == "yaml" for d in _pipeline_docs(b)]
    if not todo and not pipelines:
        pytest.skip(f"{page.relative_to(REPO)} shows no command to run")
    work, snippets = _scratch(tmp_path_factory, page), tmp_path_factory.mktemp("snippets")
    if pipelines:
        files = []
        for k, doc in enumerate(pipelines):
            files.append(snippets / f"{page.stem}-pipeline-{k}.yaml")
            files[-1].write_text(yaml.safe_dump(doc, sort_keys=False))
        res = subprocess.run(["augd", "validate", *map(str, files)], env=_env(), capture_output=True, text=True)
        assert res.returncode == 0, f"{page.relative_to(REPO)}: a pipeline shown is invalid\n{res.stdout}{res.stderr}"
    for b in todo:
        _run_block(b, work, snippets)


# --- links and cited files ------------------------------------------------------------------------------


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    return {_slug(m[1]) for m in re.finditer(r"^#{1,6}\s+(.+?)\s*$", outside_fences(page), re.M)}


LINKED_PAGES = sorted([REPO / "README.md", *(REPO / "docs").glob("*.md"), REPO / "bench" / "README.md",
                       REPO / "bench" / "HISTORY.md"])


@pytest.mark.parametrize("page", LINKED_PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_points_at_an_existing_file(page):
    links = re.findall(r"!?\[[^\]]*\]\(([^)\s]+)\)", outside_fences(page))
    for link in links:
        if re.match(r"^[a-z][a-z0-9+.-]*:", link):  # http:, https:, mailto:
            continue
        path, _, anchor = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        assert target.exists(), f"{page.relative_to(REPO)}: link {link!r} points at nothing"
        assert REPO in target.parents or target == REPO, f"{page.relative_to(REPO)}: {link!r} leaves the repo"
        if anchor and target.suffix == ".md":
            assert anchor in _anchors(target), \
                f"{page.relative_to(REPO)}: {link!r}: no heading #{anchor} in {target.relative_to(REPO)}"


CITED = re.compile(r"`((?:augd|tests|scripts|deploy|bench)/[\w./-]+\.(?:py|sh|yaml|yml|json|service|png))")


@pytest.mark.parametrize("page", LINKED_PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_cited_file_and_test_exists(page):
    """`augd/defaults.py`, `tests/test_x.py::test_y`, `::test_z`: a renamed file or test fails here."""
    text = page.read_text()
    for path in set(CITED.findall(text)):
        assert (REPO / path).exists(), f"{page.relative_to(REPO)} cites {path}, which is not in the repo"
    defined = {m for f in (REPO / "tests").glob("test_*.py")
               for m in re.findall(r"^\s*def (test_\w+)", f.read_text(), re.M)}
    for name in set(re.findall(r"::\s*(test_\w+)", text)):
        assert name in defined, f"{page.relative_to(REPO)} cites the test {name}, which no test file defines"


# --- the README's two commands are what CI and the demo run -------------------------------------------


def test_the_readme_two_commands_are_the_scripts_ci_and_the_demo_run():
    readme = REPO / "README.md"
    first = next(b for b in blocks(readme) if b.lang == "bash")
    commands = [ln.split("#")[0].strip() for ln in first.text.splitlines()]
    assert commands == ["./scripts/demo.sh", "./scripts/test.sh"], first.where
    for script in ("scripts/demo.sh", "scripts/test.sh"):
        assert os.access(REPO / script, os.X_OK), f"{script} is not executable"
    assert re.search(r"^exec scripts/test\.sh\b", (REPO / ".ci" / "run").read_text(), re.M)
    demo = (REPO / "scripts" / "demo.sh").read_text()
    job = next(b for b in blocks(readme) if b.lang == "bash" and "augd run" in b.text)
    assert job.not_run is None, "the README's job block must run"
    shown = re.search(r"augd run (augd/samples/demo --pipeline [\w-]+)", job.text)[1]
    assert f".venv/bin/augd run {shown} " in demo, "README's job and scripts/demo.sh run different jobs"


def test_the_op_list_names_every_registered_op():
    """docs/pipelines.md's table of ops by kind is where a reader learns an op exists: a new op joins it."""
    from augd.ops import REGISTRY
    text = (REPO / "docs" / "pipelines.md").read_text()
    missing = sorted(name for name in REGISTRY if f"`{name}`" not in text)
    assert not missing, f"docs/pipelines.md does not list the ops {missing}"
    assert f"{len(REGISTRY)} ops:" in text
    assert f"{len(REGISTRY)} ops:" in (REPO / "README.md").read_text(), "README counts the ops as the registry does"


def test_the_design_names_every_executor():
    """docs/design.md's `--executor` choices are ExecutorKind's, so a new executor joins the page that says how one
    is chosen."""
    from augd.defaults import ExecutorKind
    assert f"`--executor {'|'.join(k.value for k in ExecutorKind)}`" in (REPO / "docs" / "design.md").read_text()
