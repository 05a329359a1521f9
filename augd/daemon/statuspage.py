"""The status page at `/`: a first view rendered here from /status, kept fresh by a small script that polls /status.

The shell, its CSS and its script are files in augd/daemon/static/, read once when this module loads, and inlined, so
the page fetches nothing but /status from the daemon itself. Everything that comes from the daemon's state (job
names, pipelines, messages: job folder names are user-controlled) goes through `_h`, which escapes all text and
attribute values; the script builds the same view from text nodes only. The page's Content-Security-Policy
allows only that one inline script and style (by hash) and fetches to its own origin, so even an escaping slip
could not run anything. `static/status.js` mirrors `_view` below: change both together.
"""
from __future__ import annotations

import base64
import hashlib
import html
import importlib.resources
import time

__all__ = ["CSP", "render"]

_STATIC = importlib.resources.files("augd.daemon") / "static"
_SHELL = (_STATIC / "status.html").read_text(encoding="utf-8")
_CSS = (_STATIC / "status.css").read_text(encoding="utf-8")
_JS = (_STATIC / "status.js").read_text(encoding="utf-8")


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode() + "'"


CSP = (f"default-src 'none'; script-src {_sha256(_JS)}; style-src {_sha256(_CSS)}; connect-src 'self'; img-src 'self'; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")


class _Html(str):
    """Markup already escaped: `_h` inserts it as is."""


def _h(tag: str, attrs: dict | None = None, *kids) -> _Html:
    """<tag attrs>kids</tag>; attribute values and kids that are not _Html are escaped; None/False kids dropped."""
    a = "".join(f' {k}="{html.escape(str(v), quote=True)}"' for k, v in (attrs or {}).items() if v is not None)
    inner = "".join(k if isinstance(k, _Html) else html.escape(str(k), quote=False)
                    for k in _flat(kids) if k is not None and k is not False)
    return _Html(f"<{tag}{a}>{inner}</{tag}>")


def _flat(kids):
    for k in kids:
        if isinstance(k, (list, tuple)):
            yield from _flat(k)
        else:
            yield k


def _dur(s) -> str:
    """Seconds for people: 4.2 s, 42 s, 3 min 12 s, 2 h 5 min, 3 d 4 h."""
    if not isinstance(s, (int, float)):
        return "-"
    s = max(0.0, float(s))
    if s < 10:
        return f"{s:.1f} s"
    if s < 60:
        return f"{int(s + 0.5)} s"
    m, sec = divmod(int(s), 60)
    if m < 60:
        return f"{m} min {sec} s"
    hours, m = divmod(m, 60)
    if hours < 24:
        return f"{hours} h {m} min"
    d, hours = divmod(hours, 24)
    return f"{d} d {hours} h"


def _when(iso) -> _Html | str:
    """An ISO-8601 UTC time as <time>, shown as 2025-01-31 12:00:01."""
    if not isinstance(iso, str) or len(iso) < 19:
        return "-"
    return _h("time", {"datetime": iso}, iso[:10] + " " + iso[11:19])


def _num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _current(cur) -> _Html:
    if not cur:
        return _h("section", {"id": "current"}, _h("h2", None, "Current job"),
                  _h("p", {"class": "empty"}, "No job running."))
    total, done, ips = cur.get("total"), cur.get("done"), cur.get("images_per_second")
    head = _h("p", None, _h("span", {"class": "job", "id": "current-job"}, cur.get("job", "?")),
              " \u00b7 pipeline ", _h("b", {"id": "current-pipeline"}, cur.get("pipeline", "?")),
              f" (by {cur.get('pipeline_chosen_by') or '?'})",
              " \u00b7 attempt ", _h("b", {"id": "current-attempt"}, cur.get("attempt", "?")))
    if _num(total) and _num(done) and total > 0:
        bar = _h("progress", {"id": "current-progress", "max": total, "value": done}, f"{done}/{total}")
        pct = 100 * done // total
        eta = ("-" if not _num(ips) or ips <= 0 else
               "finishing" if done >= total else _dur((total - done) / ips))
        figures = [_h("b", None, f"{done} / {total}"), f" images ({pct} %) \u00b7 ",
                   _h("b", None, f"{ips:.1f}" if _num(ips) else "-"), " images/s \u00b7 ETA ", _h("b", None, eta)]
    else:
        bar = _h("progress", {"id": "current-progress"}, "starting")
        figures = ["reading the job"]
    figures += [" \u00b7 running for ", _dur(cur.get("running_seconds")), " since ", _when(cur.get("started_iso"))]
    return _h("section", {"id": "current"}, _h("h2", None, "Current job"), head, bar,
              _h("p", {"class": "figures"}, figures))


def _names(tag: str, ident: str, names) -> _Html:
    if not names:
        return _h("p", {"class": "empty", "id": ident}, "none")
    return _h(tag, {"id": ident}, [_h("li", None, n) for n in names])


def _queue(st: dict) -> _Html:
    q = st.get("queue") or {}
    ready = q.get("jobs") or []
    settling = st.get("settling")
    if settling is None:  # an older daemon: only the count
        settling = [f"{q.get('waiting', 0)} job(s)"] if q.get("waiting") else []
    return _h("section", {"id": "queue"}, _h("h2", None, "Queue"), _h("div", {"class": "cols"},
              _h("div", None, _h("h3", None, f"Ready to run ({len(ready)})"), _names("ol", "queue-ready", ready)),
              _h("div", None, _h("h3", None, f"Still settling ({len(settling)})"),
                 _names("ul", "queue-settling", settling))))


def _result_row(r: dict) -> _Html:
    failed = r.get("result") == "failed"
    if failed:
        message = r.get("message") or ""
    elif r.get("images") is not None:
        message = f"{r['images']} images \u2192 {r.get('records', '?')} records"
    else:
        message = r.get("note") or ""
    outcome = r.get("result", "?")
    if failed and _num(r.get("attempts")) and r["attempts"] > 1:
        outcome += f" (attempt {r['attempts']})"
    return _h("tr", {"class": r.get("result", "")},
              _h("td", {"class": "when"}, _when(r.get("finished_iso"))), _h("td", {"class": "job"}, r.get("job", "?")),
              _h("td", {"class": "outcome"}, outcome), _h("td", {"class": "reason"}, r.get("reason") or ""),
              _h("td", {"class": "message"}, message), _h("td", {"class": "num"}, _dur(r.get("seconds"))))


def _results(last) -> _Html:
    if not last:
        body = _h("p", {"class": "empty", "id": "results-rows"}, "No job has finished yet.")
    else:
        body = _h("table", None, _h("thead", None, _h("tr", None, _h("th", None, "finished (UTC)"),
                  _h("th", None, "job"), _h("th", None, "outcome"), _h("th", None, "reason"),
                  _h("th", None, "message"), _h("th", {"class": "num"}, "took"))),
                  _h("tbody", {"id": "results-rows"}, [_result_row(r) for r in last if isinstance(r, dict)]))
    return _h("section", {"id": "results"}, _h("h2", None, "Last results"), body)


def _view(st: dict, version: str) -> _Html:
    state = str(st.get("state", "unknown"))
    summary = _h("div", {"class": "summary", "id": "summary"},
                 _h("span", None, "state ", _h("b", {"class": f"state state-{state}", "id": "state"}, state)),
                 _h("span", None, "device ", _h("b", {"id": "device"}, st.get("device") or "not loaded yet")),
                 _h("span", None, "version ", _h("b", {"id": "version"}, st.get("version") or version)),
                 _h("span", None, "up ", _h("b", {"id": "uptime"}, _dur(st.get("uptime_seconds"))),
                    " since ", _when(st.get("started_iso"))))
    return _Html(summary + _current(st.get("current")) + _queue(st) + _results(st.get("last_jobs"))
                 + _preview(st.get("last_preview")))


def _preview(last) -> _Html:
    """The last finished job's contact sheet (augd.preview), fetched from /preview.png."""
    if not isinstance(last, dict) or not last.get("url"):
        return _Html("")
    job = str(last.get("job", ""))
    return _h("section", {"id": "preview"}, _h("h2", None, "Last job's variants"),
              _h("p", {"class": "empty"}, "job ", _h("b", None, job), ": its first images as written, and what the "
                 "plan drew for each"),
              _h("img", {"id": "preview-img", "src": str(last["url"]), "alt": f"variants of {job}"}))


def render(status: dict, version: str = "") -> bytes:
    """The whole page, its first view rendered from a /status dict (missing keys are shown as unknown)."""
    now = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    page = (_SHELL.replace("<!--CSS-->", _CSS).replace("<!--JS-->", _JS).replace("<!--TIME-->", now)
            .replace("<!--VIEW-->", _view(status if isinstance(status, dict) else {}, version)))
    return page.encode("utf-8")
