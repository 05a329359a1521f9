"use strict";
// augd status page: polls /status every 2 s and re-renders #view. Mirrors _view in augd/daemon/statuspage.py.
// Every value from the daemon becomes a text node (h() never parses markup), so job names stay text.
(function () {
  const POLL_MS = 2000;
  const view = document.getElementById("view");
  const live = document.getElementById("live");

  function h(tag, attrs, ...kids) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v !== null && v !== undefined) el.setAttribute(k, String(v));
    }
    for (const kid of kids.flat(Infinity)) {
      if (kid !== null && kid !== undefined && kid !== false) el.append(kid instanceof Node ? kid : String(kid));
    }
    return el;
  }
  const num = (v) => typeof v === "number" && isFinite(v);

  function dur(s) {
    if (!num(s)) return "-";
    s = Math.max(0, s);
    if (s < 10) return s.toFixed(1) + " s";
    if (s < 60) return Math.floor(s + 0.5) + " s";
    let m = Math.floor(s / 60); const sec = Math.floor(s) % 60;
    if (m < 60) return m + " min " + sec + " s";
    let hours = Math.floor(m / 60); m %= 60;
    if (hours < 24) return hours + " h " + m + " min";
    return Math.floor(hours / 24) + " d " + (hours % 24) + " h";
  }
  function when(iso) {
    if (typeof iso !== "string" || iso.length < 19) return "-";
    return h("time", {datetime: iso}, iso.slice(0, 10) + " " + iso.slice(11, 19));
  }

  function current(cur) {
    if (!cur) {
      return h("section", {id: "current"}, h("h2", null, "Current job"), h("p", {class: "empty"}, "No job running."));
    }
    const total = cur.total, done = cur.done, ips = cur.images_per_second;
    const head = h("p", null, h("span", {class: "job", id: "current-job"}, cur.job ?? "?"),
      " \u00b7 pipeline ", h("b", {id: "current-pipeline"}, cur.pipeline ?? "?"),
      " (by " + (cur.pipeline_chosen_by || "?") + ")",
      " \u00b7 attempt ", h("b", {id: "current-attempt"}, cur.attempt ?? "?"));
    let bar, figures;
    if (num(total) && num(done) && total > 0) {
      bar = h("progress", {id: "current-progress", max: total, value: done}, done + "/" + total);
      const pct = Math.floor(100 * done / total);
      const eta = !num(ips) || ips <= 0 ? "-" : done >= total ? "finishing" : dur((total - done) / ips);
      figures = [h("b", null, done + " / " + total), " images (" + pct + " %) \u00b7 ",
                 h("b", null, num(ips) ? ips.toFixed(1) : "-"), " images/s \u00b7 ETA ", h("b", null, eta)];
    } else {
      bar = h("progress", {id: "current-progress"}, "starting");
      figures = ["reading the job"];
    }
    figures.push(" \u00b7 running for ", dur(cur.running_seconds), " since ", when(cur.started_iso));
    return h("section", {id: "current"}, h("h2", null, "Current job"), head, bar, h("p", {class: "figures"}, figures));
  }

  function names(tag, id, list) {
    if (!list.length) return h("p", {class: "empty", id: id}, "none");
    return h(tag, {id: id}, list.map((n) => h("li", null, n)));
  }
  function queue(st) {
    const q = st.queue || {};
    const ready = q.jobs || [];
    let settling = st.settling;
    if (!Array.isArray(settling)) settling = q.waiting ? [q.waiting + " job(s)"] : [];
    return h("section", {id: "queue"}, h("h2", null, "Queue"), h("div", {class: "cols"},
      h("div", null, h("h3", null, "Ready to run (" + ready.length + ")"), names("ol", "queue-ready", ready)),
      h("div", null, h("h3", null, "Still settling (" + settling.length + ")"),
        names("ul", "queue-settling", settling))));
  }

  function resultRow(r) {
    const failed = r.result === "failed";
    let message = r.note || "";
    if (failed) {
      message = r.message || "";
    } else if (r.images !== undefined && r.images !== null) {
      message = r.images + " images \u2192 " + (r.records ?? "?") + " records";
    }
    let outcome = r.result ?? "?";
    if (failed && num(r.attempts) && r.attempts > 1) outcome += " (attempt " + r.attempts + ")";
    return h("tr", {class: r.result ?? ""},
      h("td", {class: "when"}, when(r.finished_iso)), h("td", {class: "job"}, r.job ?? "?"),
      h("td", {class: "outcome"}, outcome), h("td", {class: "reason"}, r.reason || ""),
      h("td", {class: "message"}, message), h("td", {class: "num"}, dur(r.seconds)));
  }
  function results(last) {
    let body;
    if (!last || !last.length) body = h("p", {class: "empty", id: "results-rows"}, "No job has finished yet.");
    else body = h("table", null, h("thead", null, h("tr", null, h("th", null, "finished (UTC)"), h("th", null, "job"),
        h("th", null, "outcome"), h("th", null, "reason"), h("th", null, "message"), h("th", {class: "num"}, "took"))),
      h("tbody", {id: "results-rows"}, last.filter((r) => r && typeof r === "object").map(resultRow)));
    return h("section", {id: "results"}, h("h2", null, "Last results"), body);
  }

  let sheet = null, sheetUrl = null;  // kept between polls: the picture is fetched once per finished job
  function preview(last) {
    if (!last || typeof last !== "object" || !last.url) return null;
    const job = String(last.job ?? "");
    if (last.url !== sheetUrl) {
      sheetUrl = String(last.url);
      sheet = h("img", {id: "preview-img", src: sheetUrl, alt: "variants of " + job});
    }
    return h("section", {id: "preview"}, h("h2", null, "Last job's variants"),
      h("p", {class: "empty"}, "job ", h("b", null, job), ": its first images as written, and what the plan drew for each"),
      sheet);
  }

  function render(st) {
    const state = String(st.state ?? "unknown");
    const summary = h("div", {class: "summary", id: "summary"},
      h("span", null, "state ", h("b", {class: "state state-" + state, id: "state"}, state)),
      h("span", null, "device ", h("b", {id: "device"}, st.device || "not loaded yet")),
      h("span", null, "version ", h("b", {id: "version"}, st.version || "?")),
      h("span", null, "up ", h("b", {id: "uptime"}, dur(st.uptime_seconds)), " since ", when(st.started_iso)));
    view.replaceChildren(...[summary, current(st.current), queue(st), results(st.last_jobs), preview(st.last_preview)]
      .filter((el) => el));
  }

  let polls = 0;
  async function poll() {
    try {
      const r = await fetch("/status", {cache: "no-store", signal: AbortSignal.timeout(10000)});
      if (!r.ok) throw new Error("HTTP " + r.status);
      const st = await r.json();
      render(st);
      polls += 1;
      live.dataset.source = "script";
      live.dataset.polls = String(polls);
      live.replaceChildren("Live: updated ", when(st.time_iso), " UTC, every " + POLL_MS / 1000 + " s.");
    } catch (e) {
      live.dataset.source = "error";
      live.replaceChildren(h("span", {id: "error"}, "Cannot reach augd (" + e.message + "); retrying every "
        + POLL_MS / 1000 + " s. What is shown may be out of date."));
    }
    setTimeout(poll, POLL_MS);
  }
  poll();
})();
