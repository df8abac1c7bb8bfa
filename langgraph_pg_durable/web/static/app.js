// lgpd's replay page: live steps on a thread page, keyboard navigation, state on demand.
// Plain JavaScript; every text from the database goes into the page as text, never as HTML.
(function () {
  "use strict";
  const POLL_MS = 2000;

  function text(tag, value, cls) {
    const el = document.createElement(tag);
    if (cls) el.className = cls;
    el.textContent = value == null ? "" : String(value);
    return el;
  }

  function when(iso) {
    return iso ? iso.replace("T", " ").slice(0, 19) : "";
  }

  // As the server's `took` filter writes a step's duration.
  function took(ms) {
    if (typeof ms !== "number") return "";
    if (ms < 1000) return Math.round(ms) + "ms";
    if (ms < 60000) return (ms / 1000).toFixed(1) + "s";
    return Math.round(ms / 60000) + "m";
  }

  function stepRow(step, pageBase) {
    const tr = document.createElement("tr");
    tr.dataset.checkpoint = step.checkpoint_id;
    const depth = step.checkpoint_ns ? step.checkpoint_ns.split("|").length : 0;
    tr.className = "depth-" + depth + " fresh";
    const num = document.createElement("td");
    num.className = "num";
    if (!step.checkpoint_ns) {
      const a = text("a", step.step);
      a.href = pageBase + encodeURIComponent(step.step);
      num.appendChild(a);
    } else {
      num.textContent = step.step;
    }
    tr.appendChild(num);
    const what = document.createElement("td");
    if (step.checkpoint_ns) what.appendChild(text("span", step.checkpoint_ns.split("|").map(p => p.split(":")[0]).join("/") + " ", "ns"));
    let tokens = null;
    for (const t of step.made_by || []) {
      const span = text("span", t.agent + " ", "task " + t.action_type);
      span.appendChild(text("em", t.action_type));
      if (t.tools && t.tools.length) {
        span.appendChild(document.createTextNode(" "));
        span.appendChild(text("span", t.tools.join(", "), "tools"));
      } else if (t.reply) {
        span.appendChild(document.createTextNode(" "));
        span.appendChild(text("q", t.reply, "reply"));
      }
      if (typeof t.tokens === "number") tokens = (tokens || 0) + t.tokens;
      what.appendChild(span);
      what.appendChild(document.createTextNode(" "));
    }
    tr.appendChild(what);
    tr.appendChild(text("td", step.source || ""));
    tr.appendChild(text("td", took(step.duration_ms), "num"));
    tr.appendChild(text("td", tokens == null ? "" : tokens.toLocaleString("en-US"), "num"));
    const time = document.createElement("td");
    time.appendChild(text("time", when(step.created_at)));
    tr.appendChild(time);
    const badges = document.createElement("td");
    for (const t of step.ran_from || []) {
      if (t.action_type === "error" || t.action_type === "interrupt") badges.appendChild(text("span", t.action_type, "badge " + t.action_type));
    }
    tr.appendChild(badges);
    return tr;
  }

  function live(table) {
    const body = table.tBodies[0];
    const label = document.getElementById("live");
    async function poll() {
      try {
        const response = await fetch(table.dataset.api, { credentials: "same-origin" });
        if (!response.ok) throw new Error(response.status);
        const data = await response.json();
        const known = new Set(Array.from(body.rows).map(r => r.dataset.checkpoint));
        const fresh = data.steps.filter(s => !known.has(s.checkpoint_id));
        for (const step of fresh.reverse()) body.insertBefore(stepRow(step, table.dataset.page), body.firstChild);
        if (label) label.className = "live";
      } catch (e) {
        if (label) label.className = "live off";
      }
      setTimeout(poll, POLL_MS);
    }
    setTimeout(poll, POLL_MS);
  }

  function keys() {
    document.addEventListener("keydown", function (event) {
      if (event.target.closest("input, select, textarea")) return;
      const go = (id) => { const a = document.getElementById(id); if (a) window.location = a.href; };
      if (event.key === "ArrowLeft" || event.key === "k") go("prev");
      if (event.key === "ArrowRight" || event.key === "j") go("next");
      const table = document.querySelector("table.list");
      if (!table || !(event.key === "ArrowDown" || event.key === "ArrowUp" || event.key === "Enter")) return;
      const rows = Array.from(table.tBodies[0].rows);
      let at = rows.findIndex(r => r.classList.contains("selected"));
      if (event.key === "Enter") { const a = at >= 0 && rows[at].querySelector("a"); if (a) window.location = a.href; return; }
      if (at >= 0) rows[at].classList.remove("selected");
      at = Math.max(0, Math.min(rows.length - 1, at + (event.key === "ArrowDown" ? 1 : -1)));
      if (rows[at]) { rows[at].classList.add("selected"); rows[at].scrollIntoView({ block: "nearest" }); event.preventDefault(); }
    });
  }

  function lazy() {
    for (const details of document.querySelectorAll("details[data-src]")) {
      details.addEventListener("toggle", async function () {
        const pre = details.querySelector("pre.lazy");
        if (!details.open || pre.dataset.loaded) return;
        const response = await fetch(details.dataset.src, { credentials: "same-origin" });
        pre.textContent = JSON.stringify(await response.json(), null, 2);
        pre.dataset.loaded = "1";
      });
    }
  }

  document.addEventListener("DOMContentLoaded", function () {
    const steps = document.getElementById("steps");
    if (steps && steps.dataset.api) live(steps);
    keys();
    lazy();
  });
})();
