"""Issue 18, item 4: the status page at `/`, read in a real browser (headless Chromium) against a real daemon.

One daemon serves the module: two jobs failed (a bad pipeline; one of them named like an HTML tag), a slow job
held running after its first images (test hook `loop`), a job queued behind it, a second queued job named like a
tag, and a job still settling (no _READY; settle_seconds is an hour). The browser tests skip, saying so, where no
Chromium is installed (.ci/run installs Debian's `chromium` when it runs as root).

The last tests need no daemon: the renderer on hostile and partial input, a /status that fails while the page
polls, a client resetting its connection. `scripts/status_screenshot.py` regenerates docs/status-page.png with
the helpers here (`scene`, `run_chromium`).
"""
from __future__ import annotations

import base64
import contextlib
import datetime
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import urllib.request
import tempfile
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tests.daemon_harness import (Daemon, add_slow_pipeline, drop_job, no_leaked_children,  # noqa: F401
                                  no_leaked_children_module, running_images, status, wait_for, write_config)

BROKEN = "broken-pipeline"
XSS_FAILED = "<img src=x onerror=alert(1)>"     # a job folder name (user-controlled) that is also markup
XSS_PIPELINE = "<b>no-such</b>"                 # named by that job's augd.yaml: lands in the failure message
XSS_QUEUED = "<svg onload=alert(2)>"
RUNNING = "running-job"
QUEUED = "queued-job"
SETTLING = "still-copying"
SLOW_IMAGES = 30

# -- Chromium ---------------------------------------------------------------------------------------------------

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium() -> str | None:
    """$AUGD_CHROMIUM, else the first Chromium on PATH."""
    for name in filter(None, (os.environ.get("AUGD_CHROMIUM"), *CHROMIUM_NAMES)):
        path = shutil.which(name)
        if path:
            return path
    return None


def run_chromium(url: str, *args: str, budget_ms: int = 3000, timeout: float = 90) -> str:
    """Load url in headless Chromium, let `budget_ms` of virtual time pass (the page polls /status every 2 s and
    virtual time waits for each fetch), and return stdout (the DOM with --dump-dom). Chromium runs in a process
    group of its own, which is killed once it returns, so none of its helpers outlive the call."""
    binary = find_chromium()
    assert binary, "no chromium"
    with tempfile.TemporaryDirectory(prefix="augd-chromium-") as profile:
        cmd = [binary, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
               "--no-first-run", "--no-default-browser-check", "--disable-extensions", "--disable-sync",
               "--disable-background-networking", "--disable-component-update", "--hide-scrollbars",
               f"--user-data-dir={profile}", f"--virtual-time-budget={budget_ms}", *args]
        proc = subprocess.Popen([*cmd, url], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True, cwd=profile)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            out, err = "", f"chromium did not finish in {timeout}s"
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0 and (out or "--screenshot" in " ".join(args)), \
        f"chromium failed ({proc.returncode}): {err[-3000:]}"
    return out


@pytest.fixture(scope="module")
def chromium():
    if not find_chromium():
        pytest.skip("no Chromium found (looked for $AUGD_CHROMIUM, " + ", ".join(CHROMIUM_NAMES) + "); install "
                    "Debian's `chromium` package (.ci/run does so as root) to test the status page in a browser")


# -- a tiny DOM for what Chromium dumps --------------------------------------------------------------------------

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class Node:
    def __init__(self, tag: str, attrs):
        self.tag, self.attrs, self.children = tag, dict(attrs), []

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def iter(self):
        yield self
        for c in self.children:
            if isinstance(c, Node):
                yield from c.iter()

    def by_id(self, ident: str) -> "Node":
        found = [n for n in self.iter() if n.attrs.get("id") == ident]
        assert len(found) == 1, f"{len(found)} elements with id={ident!r}"
        return found[0]

    def tags(self, tag: str) -> list["Node"]:
        return [n for n in self.iter() if n.tag == tag]


class _Parser(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", [])
        self.stack = [self.root]

    def handle_starttag(self, tag, attrs):
        node = Node(tag, attrs)
        self.stack[-1].children.append(node)
        if tag not in VOID:
            self.stack.append(node)

    def handle_startendtag(self, tag, attrs):
        self.stack[-1].children.append(Node(tag, attrs))

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return

    def handle_data(self, data):
        self.stack[-1].children.append(data)


def parse(markup: str) -> Node:
    p = _Parser()
    p.feed(markup)
    p.close()
    return p.root


def items(dom: Node, ident: str) -> list[str]:
    """The <li> texts of a list by id; [] where the page says "none"."""
    return [li.text() for li in dom.by_id(ident).tags("li")]


def result_rows(dom: Node) -> dict[str, dict[str, str]]:
    """{job: {column class: text}} of the last-results table."""
    rows = {}
    for tr in dom.by_id("results-rows").tags("tr"):
        cells = {td.attrs.get("class"): td.text() for td in tr.tags("td")}
        rows[cells["job"]] = cells
    return rows


# -- the scene --------------------------------------------------------------------------------------------------

def drop_ready(inbox: Path, rel: str, n: int = 1, seed: int = 0, augd_yaml: str | None = None) -> Path:
    """A job that is ready at once: built hidden, renamed in, its augd.yaml (if any) written, then _READY."""
    job = drop_job(inbox, rel, n=n, seed=seed)
    if augd_yaml is not None:
        (job / "augd.yaml").write_text(augd_yaml)
    (job / "_READY").write_text("")
    return job


@contextlib.contextmanager
def scene(root: Path, *, done: tuple[str, ...] = (),
          failed: tuple[tuple[str, str], ...] = ((BROKEN, "no-such-pipeline"), (XSS_FAILED, XSS_PIPELINE)),
          running: str = RUNNING, queued: tuple[str, ...] = (QUEUED, XSS_QUEUED), settling: str = SETTLING,
          progress_at: int = 1, slow_images: int = SLOW_IMAGES):
    """A daemon showing everything the page shows: jobs `done`, jobs `failed` (job, the missing pipeline its
    augd.yaml names), `running` (the slow pipeline), `queued` behind it, one `settling`. Jobs are ready only by
    _READY (settle_seconds: an hour), so `settling` stays settling; the running job is held (test hook `loop`)
    once it has done `progress_at` images, so it is still running, at a fixed place, whatever the machine's
    speed. Yields the Daemon; stops it (exit 0) on the way out."""
    add_slow_pipeline(root)
    holds = root / "holds"
    holds.mkdir()
    d = Daemon(write_config(root, settle_seconds=3600, grace_seconds=1, health_stale_seconds=3600),
               hold_dir=holds).start()
    try:
        d.wait_ready()
        for i, name in enumerate(done):
            drop_ready(d.inbox, name, n=3, seed=i)
            d.wait_done(name)
        for name, pipeline in failed:
            drop_ready(d.inbox, name, augd_yaml=f"pipeline: {json.dumps(pipeline)}\n")
            d.wait_failed(name)
        drop_ready(d.inbox, f"slow/{running}", n=slow_images, seed=7)
        wait_for(lambda: running_images(d, running) >= progress_at, 120, f"{running} to have done {progress_at} "
                 f"image(s)", on_fail=d.log_tail)
        (holds / "loop").write_text("")  # the runner stops at its next tick: after the image in progress
        for i, rel in enumerate(queued):  # one by one: the queue's order is the order of readiness
            drop_ready(d.inbox, rel, seed=i + 1)
            wait_for(lambda: rel in status(d)["queue"]["jobs"], 30, f"{rel} queued", on_fail=d.log_tail)
        drop_job(d.inbox, settling, n=1, seed=3)
        wait_for(lambda: status(d)["settling"] == [settling], 30, f"{settling} settling", on_fail=d.log_tail)
        yield d
    finally:
        for f in holds.iterdir():
            f.unlink()
        code = d.stop()
    assert code == 0, d.log_tail()


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    with scene(tmp_path_factory.mktemp("statuspage")) as d:
        yield d


def page_dom(d: Daemon, js: bool = True, **kw) -> tuple[Node, dict, dict]:
    """(DOM of / after Chromium ran its script, /status just before, /status just after). js=False: the page as
    served, parsed here: what a browser shows with scripts off (Chromium's --dump-dom needs scripts on)."""
    before = status(d)
    if js:
        dom = parse(run_chromium(d.url("/"), "--dump-dom", **kw))
    else:
        code, body, _ = d.get("/")
        assert code == 200
        dom = parse(body)
    return dom, before, status(d)


# -- tests ------------------------------------------------------------------------------------------------------

ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


def iso_of(t: float) -> str:
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_status_json_has_iso_utc_times_beside_the_unix_ones_and_settling_jobs_by_name(daemon):
    st = status(daemon)
    assert ISO.match(st["started_iso"]) and st["started_iso"] == iso_of(st["started"])
    assert ISO.match(st["time_iso"]) and st["time_iso"] == iso_of(st["time"])
    assert st["time"] - st["started"] == pytest.approx(st["uptime_seconds"], abs=0.2)
    cur = st["current"]
    assert cur["job"] == RUNNING and cur["started_iso"] == iso_of(cur["started"])
    assert {r["job"] for r in st["last_jobs"]} >= {BROKEN, XSS_FAILED}
    for r in st["last_jobs"]:
        assert r["finished_iso"] == iso_of(r["finished"])
    assert st["queue"] == {"ready": 2, "waiting": 1, "jobs": [QUEUED, XSS_QUEUED]}  # its keys stay as they were
    assert st["settling"] == [SETTLING]


def test_page_in_a_browser_shows_the_running_job_queue_device_and_last_failures(daemon, chromium):
    dom, before, after = page_dom(daemon, budget_ms=5000)
    live = dom.by_id("live")
    assert live.attrs["data-source"] == "script", f"the script did not render the page: {live.text()}"
    assert int(live.attrs["data-polls"]) >= 2, "the page polls /status again and again"
    assert dom.by_id("current-job").text() == RUNNING
    assert dom.by_id("current-pipeline").text() == "slow" and dom.by_id("current-attempt").text() == "1"
    bar = dom.by_id("current-progress")
    assert int(bar.attrs["max"]) == before["current"]["total"] == after["current"]["total"] == SLOW_IMAGES
    assert before["current"]["done"] <= int(bar.attrs["value"]) <= after["current"]["done"]
    figures = dom.by_id("current").text()
    assert f"{bar.attrs['value']} / {SLOW_IMAGES} images" in figures and "images/s" in figures and "ETA" in figures
    assert items(dom, "queue-ready") == [QUEUED, XSS_QUEUED]
    assert items(dom, "queue-settling") == [SETTLING]
    assert dom.by_id("device").text() == before["device"] == "CPU" and before["warm_up"] is None  # auto: GPUs only
    assert dom.by_id("version").text() == before["version"] and dom.by_id("state").text() == "running"
    assert re.match(r"^\d+(\.\d)? (s|min|h|d)\b", dom.by_id("uptime").text())
    rows = result_rows(dom)
    assert rows[BROKEN]["outcome"] == "failed" and rows[BROKEN]["reason"] == "bad_pipeline"
    assert "no-such-pipeline" in rows[BROKEN]["message"]
    assert ISO.match(next(t for t in dom.by_id("results-rows").tags("time")).attrs["datetime"])
    hrefs = {a.attrs["href"] for a in dom.tags("a")}
    assert hrefs == {"/metrics", "/healthz", "/readyz", "/status"}


def test_page_without_javascript_shows_the_same_view_rendered_by_the_server(daemon):
    dom, before, after = page_dom(daemon, js=False)
    assert dom.by_id("live").attrs["data-source"] == "server"
    assert dom.by_id("current-job").text() == RUNNING
    bar = dom.by_id("current-progress")
    assert int(bar.attrs["max"]) == SLOW_IMAGES
    assert before["current"]["done"] <= int(bar.attrs["value"]) <= after["current"]["done"]
    assert items(dom, "queue-ready") == [QUEUED, XSS_QUEUED] and items(dom, "queue-settling") == [SETTLING]
    assert dom.by_id("device").text() == "CPU"
    assert result_rows(dom)[BROKEN]["reason"] == "bad_pipeline"
    refresh = [m for m in dom.tags("meta") if m.attrs.get("http-equiv") == "refresh"]
    assert refresh and refresh[0].attrs["content"] == "5", "without JavaScript the page reloads itself"


def _names_are_text(dom: Node, where: str) -> None:
    view = dom.by_id("view")
    assert not [n for n in view.iter() if n.tag in ("img", "svg", "script")], f"markup from a name ({where})"
    assert not [n for n in view.iter() if any(k.startswith("on") for k in n.attrs)], where
    assert items(dom, "queue-ready") == [QUEUED, XSS_QUEUED]
    row = result_rows(dom)[XSS_FAILED]
    assert row["reason"] == "bad_pipeline" and XSS_PIPELINE in row["message"]
    assert not [b for b in view.tags("b") if b.text() == "no-such"], f"the pipeline name's <b> was parsed ({where})"


def test_job_names_and_messages_are_escaped_in_the_served_page(daemon):
    code, raw, headers = daemon.get("/")
    assert code == 200
    for bad in ("<img", "<svg", "<b>no-such"):
        assert bad not in raw
    assert "&lt;img src=x onerror=alert(1)&gt;" in raw and "&lt;svg onload=alert(2)&gt;" in raw
    _names_are_text(parse(raw), "served")


def test_job_names_and_messages_stay_text_when_the_script_renders_them(daemon, chromium):
    dom = page_dom(daemon)[0]
    assert dom.by_id("live").attrs["data-source"] == "script"
    _names_are_text(dom, "rendered by the script")


def test_page_loads_nothing_from_elsewhere_and_allows_only_its_own_script_and_style(daemon):
    code, raw, headers = daemon.get("/")
    assert code == 200 and headers["Content-Type"] == "text/html; charset=utf-8"
    assert headers["X-Content-Type-Options"] == "nosniff" and headers["Cache-Control"] == "no-store"
    csp = dict(part.strip().split(" ", 1) for part in headers["Content-Security-Policy"].split(";"))
    assert csp["default-src"] == "'none'" and csp["connect-src"] == "'self'"
    for directive, tag in (("script-src", "script"), ("style-src", "style")):
        bodies = re.findall(rf"<{tag}>(.*?)</{tag}>", raw, re.S)
        assert len(bodies) == 1
        digest = base64.b64encode(hashlib.sha256(bodies[0].encode()).digest()).decode()
        assert csp[directive] == f"'sha256-{digest}'", f"{directive} does not match the inline {tag}"
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", raw) and "@import" not in raw
    assert "fetch(\"/status\"" in raw
    assert daemon.get("/")[0] == 200 and daemon.get("/?x=<script>")[0] == 200
    assert daemon.get("/index.html")[0] == 404 and daemon.get("/static/status.js")[0] == 404


def test_renderer_escapes_every_field_and_copes_with_a_partial_status():
    from augd.daemon import statuspage
    evil = '<img src=x onerror=alert(1)>"\'&'
    st = {"state": evil, "device": evil, "version": evil, "started_iso": evil, "settling": [evil],
          "current": {"job": evil, "pipeline": evil, "pipeline_chosen_by": evil, "attempt": evil, "total": 4,
                      "done": 1, "images_per_second": 0.5, "started_iso": evil, "running_seconds": 3},
          "queue": {"jobs": [evil]},
          "last_jobs": [{"job": evil, "result": "failed", "reason": evil, "message": evil, "finished_iso": evil},
                        {"job": evil, "result": evil, "note": evil}]}
    page = statuspage.render(st, evil).decode()
    view = page.split('<main id="view">', 1)[1].split("</main>", 1)[0]
    assert "<img" not in view and "onerror=alert(1)&gt;" in view
    dom = parse(page)
    assert dom.by_id("state").attrs["class"] == "state state-" + evil, "a quote from the data closed an attribute"
    assert dom.by_id("current-job").text() == evil and items(dom, "queue-ready") == [evil]
    assert int(dom.by_id("current-progress").attrs["value"]) == 1
    for partial in ({}, {"ok": 1}, {"current": {"job": "j"}}, {"queue": {"waiting": 2}}, {"last_jobs": [None, {}]}):
        dom = parse(statuspage.render(partial, "1.2.3").decode())
        assert dom.by_id("view").tags("section")
    assert items(parse(statuspage.render({"queue": {"waiting": 2}}).decode()), "queue-settling") == ["2 job(s)"]


def test_page_says_so_when_status_cannot_be_fetched_and_keeps_the_last_view(chromium):
    """The daemon's /status failing (or the daemon gone) shows a notice; the view stays and polling goes on."""
    from prometheus_client import CollectorRegistry

    from augd.daemon.http import StatusServer
    calls = []

    def flaky_status():  # the page's own first view renders; every /status the script asks for fails
        calls.append(1)
        if len(calls) > 1:
            raise RuntimeError("state unavailable")
        return {"state": "idle", "device": "CPU", "version": "9.9", "queue": {"jobs": ["first-view-job"]}}

    server = StatusServer(CollectorRegistry(), "127.0.0.1", 0, health=lambda: (True, {}), ready=lambda: (True, {}),
                          status=flaky_status, version="9.9").start()
    try:
        dom = parse(run_chromium(f"http://127.0.0.1:{server.port}/", "--dump-dom", budget_ms=5000))
    finally:
        server.stop()
    live = dom.by_id("live")
    assert live.attrs["data-source"] == "error" and "HTTP 500" in dom.by_id("error").text()
    assert items(dom, "queue-ready") == ["first-view-job"]
    assert len(calls) >= 3, "the script keeps polling after a failure"


def test_a_client_that_resets_its_connection_is_a_debug_line_not_a_traceback(caplog, capfd):
    """A browser tab closed while the page polls resets its keep-alive connection: no traceback on stderr."""
    import logging
    import socket
    import struct

    from prometheus_client import CollectorRegistry

    from augd.daemon.http import StatusServer
    caplog.set_level(logging.DEBUG, logger="augd.http")
    server = StatusServer(CollectorRegistry(), "127.0.0.1", 0, health=lambda: (True, {}), ready=lambda: (True, {}),
                          status=dict, version="t").start()
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as c:
            c.sendall(b"GET /status HTTP/1.1\r\nHost: x\r\n\r\n")
            assert c.recv(100).startswith(b"HTTP/1.1 200")
            c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close with a RST
        wait_for(lambda: "went away" in caplog.text, 10, "the server to see the reset")
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as c:  # and it serves on
            c.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            assert c.recv(100).startswith(b"HTTP/1.1 200")
    finally:
        server.stop()
    assert "Traceback" not in capfd.readouterr().err


def test_the_last_jobs_variants_are_on_the_page_drawn_from_its_own_records(tmp_path):
    """After a job, /preview.png is a contact sheet of its first images (at most 3) as written, with the plan's
    draws; /status names the job; the page shows the picture. Before any job: 404 and no picture."""
    import cv2
    import numpy as np
    (tmp_path / "pipelines").mkdir()
    (tmp_path / "pipelines" / "rot.yaml").write_text("name: rot\nvariants: 3\nkeep_original: true\n"
                                                     "output: {shards: 1}\nops:\n  - random_rotation: {degrees: 20}\n")
    d = Daemon(write_config(tmp_path, settle_seconds=0.5)).start()
    try:
        d.wait_ready()
        assert d.get("/preview.png")[0] == 404 and status(d)["last_preview"] is None
        assert 'id="preview-img"' not in d.get("/")[1]
        drop_ready(d.inbox, "rot/shown", n=5, seed=4)
        d.wait_done("shown")
        last = status(d)["last_preview"]
        assert last["job"] == "shown" and last["url"] == f"/preview.png?t={last['finished']:.3f}"
        req = urllib.request.Request(d.url(last["url"]))
        with urllib.request.urlopen(req, timeout=10) as r:
            assert r.headers["Content-Type"] == "image/png"
            sheet = cv2.imdecode(np.frombuffer(r.read(), np.uint8), cv2.IMREAD_COLOR)
        assert sheet is not None and sheet.shape[1] > 4 * 160 > sheet.shape[1] - 6 * 10  # input + 3 variants
        page = d.get("/")[1]
        assert 'id="preview-img"' in page and f'src="{last["url"]}"' in page
        assert "img-src 'self'" in d.get("/")[2]["Content-Security-Policy"]
    finally:
        assert d.stop() == 0, d.log_tail()


@pytest.mark.parametrize("bind, setting, shown", [("127.0.0.1", None, True), ("0.0.0.0", None, False),
                                                  ("0.0.0.0", True, True), ("127.0.0.1", False, False)])
def test_pictures_of_the_data_are_shown_only_on_loopback_unless_asked(tmp_path, bind, setting, shown):
    from augd.daemon.config import load_settings
    cfg = tmp_path / "augd.yaml"
    cfg.write_text(f"metrics_bind: {bind}\n" + (f"status_preview: {json.dumps(setting)}\n" if setting is not None
                                                 else ""))
    assert load_settings(str(cfg)).status_preview_on is shown
