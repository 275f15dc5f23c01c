// The timeline under the picture (views/timeline.templ, docs/picture.md): a track per
// character, each line a clip at its slot with its take's waveform, drawn on one
// canvas per clip from the peaks the server sends (media.TakePeaks); the playhead
// follows the picture's <video>; zoom (the buttons, Ctrl+wheel) and scroll.
//   - a click on a clip selects its line (the script's keyboard focus moves to it);
//     a double click opens the line's editor in the script;
//   - dragging a clip's body moves its slot, dragging an edge moves that edge; an
//     edge comes to a neighbour's edge or the playhead when within SNAP px;
//   - Alt+Left/Right moves the selected clip by a frame, Alt+Shift+Left/Right its end;
//   - a click on the ruler or an empty part of a track seeks the picture there.
// A change is POSTed as the line's new start and end with the revision the clip
// showed (web.saveSlot: the edit's revision check, history and re-render rules); the
// answer is the clip re-read from the database and the notice, swapped by htmx.
// URLs come from the page's data attributes, never from its address.

const MIN_PPS = 2; // pixels per second at the farthest zoom
const MAX_PPS = 800;
const ZOOM_STEP = 1.6;
const NUDGE_SEND_MS = 400; // nudges in a row are sent once, this long after the last
const DRAG_PX = 3; // a pointer that moves less is a click
const EDGE_PX = 6; // the grab zone of a clip's edges
const REFRESH_MS = 1200; // live line changes reload the timeline at most this often

const views = new Map(); // project id -> {pps, scroll, selected}: kept across reloads

function view(root) {
  const id = root.getAttribute("data-project-id");
  if (!views.has(id)) views.set(id, { pps: 0, scroll: 0, selected: null });
  return views.get(id);
}

function csrf() {
  try {
    return JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRF-Token"] || "";
  } catch (e) {
    return "";
  }
}

function decodePeaks(b64) {
  if (!b64) return null;
  const s = atob(b64);
  const out = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
  return out;
}

function tickStep(pps) {
  const steps = [0.04, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 1800, 3600];
  for (const s of steps) if (s * pps >= 70) return s;
  return 3600;
}

function label(sec, step) {
  const m = Math.floor(sec / 60), s = sec - m * 60;
  const ss = step < 1 ? s.toFixed(step < 0.1 ? 2 : 1) : String(Math.round(s));
  return m + ":" + (s < 10 ? "0" : "") + ss;
}

function init(root) {
  if (root.__timeline) return;
  const scroll = root.querySelector("[data-tl-scroll]");
  if (!scroll) return;
  const canvas = root.querySelector("[data-tl-canvas]");
  const ruler = root.querySelector("[data-tl-ruler]");
  const playhead = root.querySelector("[data-tl-playhead]");
  const durationMs = Number(root.getAttribute("data-duration-ms")) || 1000;
  const frameMs = Number(root.getAttribute("data-frame-ms")) || 40;
  const snapPx = Number(root.getAttribute("data-snap-px")) || 8;
  const peaksRate = Number(root.getAttribute("data-peaks-rate")) || 50;
  const st = view(root);
  const want = new Map(); // line id -> {start, end}: a change not answered yet
  const pending = new Map(); // line id -> timer of a nudge to send
  const inflight = new Set();
  let drag = null;

  const clips = () => Array.prototype.slice.call(root.querySelectorAll("[data-clip]"));
  const clipOf = (id) => root.querySelector('[data-clip][data-line-id="' + id + '"]');
  const slotOf = (el) => want.get(el.getAttribute("data-line-id")) ||
    { start: Number(el.getAttribute("data-start")), end: Number(el.getAttribute("data-end")) };
  const fitPPS = () => Math.max(MIN_PPS, Math.min(MAX_PPS, (scroll.clientWidth - 20) / (durationMs / 1000 + 1)));

  function video() { return document.querySelector("[data-picture] video"); }

  function drawWave(el) {
    const cv = el.querySelector("canvas");
    if (!cv) return;
    const w = Math.max(1, Math.min(8192, Math.round(el.clientWidth)));
    const h = Math.max(1, el.clientHeight);
    const key = w + "x" + h + ":" + st.pps + ":" + el.getAttribute("data-peaks").length;
    if (cv.__key === key) return;
    cv.__key = key;
    const dpr = window.devicePixelRatio || 1;
    cv.width = Math.round(w * dpr);
    cv.height = Math.round(h * dpr);
    cv.style.width = w + "px";
    cv.style.height = h + "px";
    const g = cv.getContext("2d");
    g.clearRect(0, 0, cv.width, cv.height);
    const peaks = el.__peaks || (el.__peaks = decodePeaks(el.getAttribute("data-peaks")));
    if (!peaks || !peaks.length) return;
    g.fillStyle = getComputedStyle(el).getPropertyValue("--wave").trim() || "rgba(0,0,0,.45)";
    const pxPerPeak = st.pps / peaksRate * dpr;
    const mid = cv.height / 2;
    const bar = Math.max(1, Math.floor(pxPerPeak) - (pxPerPeak > 3 ? 1 : 0));
    // At a far zoom several peaks share a pixel: the loudest of them is drawn.
    const per = Math.max(1, Math.floor(1 / pxPerPeak));
    for (let i = 0; i < peaks.length; i += per) {
      let v = 0;
      for (let j = i; j < Math.min(peaks.length, i + per); j++) v = Math.max(v, peaks[j]);
      const x = i * pxPerPeak;
      if (x > cv.width) break;
      const a = Math.max(dpr, (v / 255) * (cv.height - 2 * dpr) / 2);
      g.fillRect(x, mid - a, bar, 2 * a);
    }
  }

  function place(el) {
    const s = slotOf(el);
    el.style.left = (s.start / 1000) * st.pps + "px";
    el.style.width = Math.max(2, ((s.end - s.start) / 1000) * st.pps) + "px";
    el.classList.toggle("selected", st.selected === el.getAttribute("data-line-id"));
    el.classList.toggle("saving", want.has(el.getAttribute("data-line-id")));
  }

  function drawVisible() {
    const from = scroll.scrollLeft - 200, to = scroll.scrollLeft + scroll.clientWidth + 200;
    for (const el of clips()) {
      const l = el.offsetLeft, r = l + el.offsetWidth;
      if (r >= from && l <= to) drawWave(el);
    }
  }

  function drawRuler() {
    const step = tickStep(st.pps);
    const frag = document.createDocumentFragment();
    const end = Math.max(durationMs / 1000 + 1, scroll.clientWidth / st.pps);
    for (let t = 0; t <= end; t += step) {
      const tick = document.createElement("span");
      tick.className = "tl-tick";
      tick.style.left = t * st.pps + "px";
      tick.textContent = label(t, step);
      frag.appendChild(tick);
    }
    ruler.replaceChildren(frag);
  }

  function layout() {
    const width = Math.max(scroll.clientWidth, (durationMs / 1000 + 1) * st.pps);
    canvas.style.width = width + "px";
    clips().forEach(place);
    drawRuler();
    drawVisible();
    movePlayhead();
  }

  function zoom(factor, atClientX) {
    const rect = scroll.getBoundingClientRect();
    const x = atClientX === undefined ? scroll.clientWidth / 2 : atClientX - rect.left;
    const at = (scroll.scrollLeft + x) / st.pps;
    st.pps = factor === 0 ? fitPPS() : Math.max(MIN_PPS, Math.min(MAX_PPS, st.pps * factor));
    layout();
    scroll.scrollLeft = factor === 0 ? 0 : at * st.pps - x;
    root.setAttribute("data-pps", String(st.pps));
  }

  function movePlayhead() {
    const v = video();
    const t = v ? v.currentTime : 0;
    playhead.style.left = t * st.pps + "px";
    // While the picture plays, the view turns the page to keep the playhead in it.
    if (v && !v.paused && !drag) {
      const x = t * st.pps;
      if (x < scroll.scrollLeft || x > scroll.scrollLeft + scroll.clientWidth - 20) scroll.scrollLeft = x - 40;
    }
  }

  function select(id, open) {
    st.selected = id;
    clips().forEach(place);
    if (!id) return;
    document.dispatchEvent(new CustomEvent("timeline:select", { detail: { lineID: id, open: !!open } }));
  }

  // edges are the times a moved edge snaps to: the other clips' edges, the playhead.
  function edges(except) {
    const out = [];
    for (const el of clips()) {
      if (el === except) continue;
      const s = slotOf(el);
      out.push(s.start, s.end);
    }
    const v = video();
    if (v) out.push(Math.round(v.currentTime * 1000));
    return out;
  }

  function snap(ms, targets) {
    const reach = (snapPx / st.pps) * 1000;
    let best = null, dist = reach;
    for (const t of targets) {
      const d = Math.abs(t - ms);
      if (d <= dist) { best = t; dist = d; }
    }
    return best;
  }

  // send posts a clip's wanted slot; the answer (the clip, the notice) is swapped in.
  async function send(id) {
    const el = clipOf(id);
    const w = want.get(id);
    if (!el || !w) return;
    if (inflight.has(id)) return; // sent again when the answer comes
    inflight.add(id);
    const body = new URLSearchParams({ base_revision: el.getAttribute("data-revision"), start_ms: String(w.start), end_ms: String(w.end) });
    let html = "", status = 0, retarget = null;
    try {
      const r = await fetch(el.getAttribute("data-slot-url"), {
        method: "POST", body: body, credentials: "same-origin",
        headers: { "X-CSRF-Token": csrf(), "HX-Request": "true", "Content-Type": "application/x-www-form-urlencoded" },
      });
      status = r.status;
      retarget = r.headers.get("HX-Retarget");
      html = await r.text();
    } catch (e) {
      status = 0;
    }
    inflight.delete(id);
    const again = want.get(id);
    const changedSince = again && (again.start !== w.start || again.end !== w.end);
    if (!changedSince || status !== 200) want.delete(id);
    if (retarget) {
      const t = document.querySelector(retarget);
      if (t) htmx.swap(t, html, { swapStyle: "innerHTML" });
    } else if (html && clipOf(id)) {
      htmx.swap(clipOf(id), html, { swapStyle: "outerHTML" });
    }
    root.setAttribute("data-last-status", String(status));
    const fresh = clipOf(id);
    if (fresh) place(fresh), drawWave(fresh);
    if (status === 200 || status === 409) refreshRow(fresh || el);
    if (changedSince && status === 200) send(id);
  }

  // refreshRow reloads the line's row in the script (its times, its state), unless
  // it is being edited there.
  function refreshRow(el) {
    const row = document.getElementById("line-" + el.getAttribute("data-line-id"));
    if (!row || row.classList.contains("editing")) return;
    root.__ownSwap = true;
    htmx.ajax("GET", el.getAttribute("data-row-url"), { target: row, swap: "outerHTML" }).finally(() => { root.__ownSwap = false; });
  }

  function setWant(el, start, end) {
    start = Math.max(0, Math.round(start));
    end = Math.max(start, Math.round(end));
    want.set(el.getAttribute("data-line-id"), { start: start, end: end });
    place(el);
    drawWave(el);
  }

  function nudge(el, dStart, dEnd) {
    const s = slotOf(el);
    if (s.start + dStart < 0) { dEnd -= s.start + dStart; dStart = -s.start; }
    setWant(el, s.start + dStart, Math.max(s.start + dStart, s.end + dEnd));
    const id = el.getAttribute("data-line-id");
    clearTimeout(pending.get(id));
    pending.set(id, setTimeout(() => { pending.delete(id); send(id); }, NUDGE_SEND_MS));
  }

  // Pointer: a drag of a clip's body or edge, or a click (select / seek).
  scroll.addEventListener("pointerdown", (ev) => {
    if (ev.button !== 0) return;
    const el = ev.target.closest("[data-clip]");
    const x0 = ev.clientX;
    if (!el) {
      const rect = canvas.getBoundingClientRect();
      const v = video();
      if (v && v.readyState >= 1) v.currentTime = Math.max(0, (ev.clientX - rect.left) / st.pps);
      movePlayhead();
      return;
    }
    const r = el.getBoundingClientRect();
    let mode = "move";
    if (ev.target.closest("[data-edge]")) mode = ev.target.closest("[data-edge]").getAttribute("data-edge");
    else if (x0 - r.left <= EDGE_PX && r.width > 3 * EDGE_PX) mode = "start";
    else if (r.right - x0 <= EDGE_PX && r.width > 3 * EDGE_PX) mode = "end";
    const s = slotOf(el);
    drag = { el: el, mode: mode, x0: x0, start: s.start, end: s.end, moved: false, targets: edges(el) };
    el.setPointerCapture(ev.pointerId);
    select(el.getAttribute("data-line-id"));
    ev.preventDefault();
  });
  scroll.addEventListener("pointermove", (ev) => {
    if (!drag) return;
    const dx = ev.clientX - drag.x0;
    if (!drag.moved && Math.abs(dx) < DRAG_PX) return;
    drag.moved = true;
    const d = (dx / st.pps) * 1000;
    let start = drag.start, end = drag.end;
    if (drag.mode === "move") {
      start = drag.start + d;
      const len = drag.end - drag.start;
      const a = snap(start, drag.targets), b = snap(start + len, drag.targets);
      if (a !== null && (b === null || Math.abs(a - start) <= Math.abs(b - start - len))) start = a;
      else if (b !== null) start = b - len;
      start = Math.max(0, start);
      end = start + len;
    } else if (drag.mode === "start") {
      start = Math.min(drag.end, drag.start + d);
      const a = snap(start, drag.targets);
      if (a !== null && a <= drag.end) start = a;
    } else {
      end = Math.max(drag.start, drag.end + d);
      const b = snap(end, drag.targets);
      if (b !== null && b >= drag.start) end = b;
    }
    setWant(drag.el, start, end);
  });
  const endDrag = () => {
    if (!drag) return;
    const d = drag;
    drag = null;
    if (d.moved) send(d.el.getAttribute("data-line-id"));
  };
  scroll.addEventListener("pointerup", endDrag);
  scroll.addEventListener("pointercancel", endDrag);
  scroll.addEventListener("dblclick", (ev) => {
    const el = ev.target.closest("[data-clip]");
    if (el) select(el.getAttribute("data-line-id"), true);
  });
  scroll.addEventListener("scroll", () => { st.scroll = scroll.scrollLeft; drawVisible(); });
  scroll.addEventListener("wheel", (ev) => {
    if (!ev.ctrlKey) return;
    ev.preventDefault();
    zoom(ev.deltaY < 0 ? ZOOM_STEP : 1 / ZOOM_STEP, ev.clientX);
  }, { passive: false });
  root.querySelectorAll("[data-tl-zoom]").forEach((b) => b.addEventListener("click", () => {
    const z = b.getAttribute("data-tl-zoom");
    zoom(z === "in" ? ZOOM_STEP : z === "out" ? 1 / ZOOM_STEP : 0);
  }));

  root.__timeline = {
    nudge: nudge, layout: layout, select: select, clipOf: clipOf,
    busy: () => !!drag || want.size > 0 || inflight.size > 0 || pending.size > 0,
    selected: () => st.selected,
    frameMs: frameMs,
  };
  if (!st.pps) st.pps = fitPPS();
  root.setAttribute("data-pps", String(st.pps));
  layout();
  scroll.scrollLeft = st.scroll;
  const tick = () => {
    if (!root.isConnected) return;
    movePlayhead();
    requestAnimationFrame(tick);
  };
  requestAnimationFrame(tick);
  root.setAttribute("data-ready", "true");
}

function current() {
  const root = document.querySelector("[data-timeline]");
  return root && root.__timeline ? root : null;
}

function typing(el) {
  return !!(el && el.closest && el.closest("input, textarea, select, [contenteditable=''], [contenteditable=true]"));
}

// Alt+Left/Right (and with Shift) move the selected clip: keys.js leaves Alt keys alone.
window.addEventListener("keydown", (ev) => {
  if (!ev.altKey || ev.ctrlKey || ev.metaKey || (ev.key !== "ArrowLeft" && ev.key !== "ArrowRight") || typing(ev.target)) return;
  const root = current();
  if (!root) return;
  const tl = root.__timeline;
  const el = tl.selected() && tl.clipOf(tl.selected());
  if (!el) return;
  ev.preventDefault(); // Alt+Left is also the browser's Back
  ev.stopPropagation();
  const d = (ev.key === "ArrowLeft" ? -1 : 1) * tl.frameMs;
  if (ev.shiftKey) tl.nudge(el, 0, d);
  else tl.nudge(el, d, d);
}, true);
window.addEventListener("keydown", (ev) => {
  if (ev.key !== "Escape" || typing(ev.target)) return;
  const root = current();
  if (root && root.__timeline.selected()) root.__timeline.select(null);
});

// Lines changed elsewhere (a render finished, an edit or import in the script, another
// editor): the timeline reloads, at most every REFRESH_MS and never mid-drag.
let refreshTimer = null;
function refreshSoon() {
  clearTimeout(refreshTimer);
  refreshTimer = setTimeout(() => {
    const root = current();
    if (!root) return;
    if (root.__timeline.busy()) { refreshSoon(); return; }
    htmx.trigger(document.body, "timeline-refresh");
  }, REFRESH_MS);
}
document.body.addEventListener("htmx:sseMessage", refreshSoon);
document.body.addEventListener("htmx:afterSwap", (ev) => {
  const root = current();
  if (root && root.__ownSwap) return;
  const t = ev.detail && ev.detail.target;
  if (t && t.closest && t.closest("#lines")) refreshSoon();
});
window.addEventListener("resize", () => { const r = current(); if (r) r.__timeline.layout(); });

function scan(el) {
  (el || document).querySelectorAll("[data-timeline]").forEach(init);
}
document.addEventListener("htmx:load", (e) => {
  const t = e.target;
  if (t.matches && t.matches("[data-timeline]")) init(t);
  else scan(t);
});
scan(document);
