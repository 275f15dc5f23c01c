// The review view (views/review.templ): a waveform per take and for the original
// performance, drawn by wavesurfer.js with the slot, the speech and the borrowed
// time as regions; A/B between two of them at the same position; and the view's
// shortcuts. The waveforms only draw: the sound is the page's one player
// (player.js), whose position each waveform's cursor follows.
import * as player from "./player.js";
import { keymap, click } from "./keys.js";

const colors = {
  wave: "#b8c2dc", progress: "#4f6bed", cursor: "#1d2433",
  slot: "rgba(79, 107, 237, 0.12)", speech: "rgba(46, 158, 107, 0.22)", borrowed: "rgba(199, 124, 2, 0.28)",
};

function attrNum(el, name) {
  const v = parseFloat(el.getAttribute(name));
  return isNaN(v) ? -1 : v;
}

// regionLabel names a region. Regions live in wavesurfer's shadow DOM, out of
// reach of the page's style sheet, hence the inline style.
function regionLabel(text, bottom) {
  const s = document.createElement("span");
  s.textContent = text;
  s.style.cssText = "position:absolute;left:0;padding:0 4px;font-size:10px;line-height:14px;color:#3a4152;" +
    "background:rgba(255,255,255,.7);border-radius:3px;" + (bottom ? "bottom:0;" : "top:0;");
  return s;
}

function cards() {
  return Array.prototype.slice.call(document.querySelectorAll("#review-panel article.take"));
}
function cardA() { return document.querySelector("#review-panel article.take.ab-a"); }
function cardB() { return document.querySelector("#review-panel article.take.ab-b"); }

function initWave(card) {
  const el = card.querySelector("[data-wave]");
  if (!el || el.__ws || typeof WaveSurfer === "undefined") return;
  const regions = WaveSurfer.Regions ? WaveSurfer.Regions.create() : null;
  const ws = WaveSurfer.create({
    container: el, url: el.getAttribute("data-src"), height: 72, normalize: false,
    waveColor: colors.wave, progressColor: colors.progress, cursorColor: colors.cursor, cursorWidth: 2,
    plugins: regions ? [regions] : [],
  });
  el.__ws = ws;
  card.__ws = ws;
  ws.on("decode", function () {
    if (regions) {
      const slot = attrNum(el, "data-slot-ms") / 1000;
      const borrowed = attrNum(el, "data-borrowed-ms") / 1000;
      const s0 = attrNum(el, "data-speech-start-ms"), s1 = attrNum(el, "data-speech-end-ms");
      const fixed = { drag: false, resize: false };
      if (slot > 0) {
        const r = regions.addRegion(Object.assign({ start: 0, end: slot, color: colors.slot, content: regionLabel(el.getAttribute("data-label-slot")) }, fixed));
        // The slot's end is what the take must meet: mark it.
        if (r && r.element) r.element.style.borderRight = "2px solid " + colors.progress;
      }
      if (borrowed > 0) regions.addRegion(Object.assign({ start: slot, end: slot + borrowed, color: colors.borrowed, content: regionLabel(el.getAttribute("data-label-borrowed"), true) }, fixed));
      if (s0 >= 0 && s1 > s0) regions.addRegion(Object.assign({ start: s0 / 1000, end: s1 / 1000, color: colors.speech, content: regionLabel(el.getAttribute("data-label-speech"), true) }, fixed));
    }
    card.setAttribute("data-ready", "true");
  });
  // A click on the waveform moves its cursor (wavesurfer does that) and, if the
  // card is the one playing, the sound with it.
  ws.on("interaction", function (t) {
    makeA(card);
    if (player.isPlaying(card)) player.seek(t);
  });
}

function destroyWave(el) {
  if (el.__ws) { try { el.__ws.destroy(); } catch (e) { /* already gone */ } el.__ws = null; }
}

// The cursor of the card playing follows the sound.
player.onTick(function (owner, t) {
  if (owner.__ws && owner.isConnected) owner.__ws.setTime(t);
});

// makeA makes card the one that plays (A); the previous A becomes B.
function makeA(card) {
  const a = cardA();
  if (a === card) return;
  const b = cardB();
  if (b) b.classList.remove("ab-b");
  if (a) { a.classList.remove("ab-a"); a.classList.add("ab-b"); }
  card.classList.remove("ab-b");
  card.classList.add("ab-a");
}

// setupAB picks A (the current take) and B (the approved one, another take, or
// the original) when a panel arrives.
function setupAB() {
  const all = cards();
  if (!all.length || cardA()) return;
  const takes = all.filter(function (c) { return c.hasAttribute("data-take-id"); });
  const a = all.filter(function (c) { return c.classList.contains("current"); })[0] || takes[0] || all[0];
  const b = takes.filter(function (c) { return c !== a && c.classList.contains("take-approved"); })[0] ||
    takes.filter(function (c) { return c !== a; })[0] ||
    all.filter(function (c) { return c !== a; })[0];
  a.classList.add("ab-a");
  if (b) b.classList.add("ab-b");
}

// playCard plays card's sound from at seconds: the waveform's own data-src.
function playCard(card, at) {
  const d = card.__ws.getDuration();
  // Played to its end, it starts again, as a media element does.
  if (d > 0 && at >= d) at = 0;
  player.play(card, card.querySelector("[data-wave]").getAttribute("data-src"), {
    at: at, kind: card.hasAttribute("data-take-id") ? "take" : "original",
  });
}

// togglePlay plays card from its cursor, or stops it there.
function togglePlay(card) {
  if (!card || !card.__ws) return;
  if (player.isPlaying(card)) { player.stop(); return; }
  playCard(card, card.__ws.getCurrentTime());
}

// abSwitch hands playback from A to B at the same position.
function abSwitch() {
  const a = cardA(), b = cardB();
  if (!a || !b || !a.__ws || !b.__ws) return;
  const playing = player.isPlaying(a);
  const t = playing ? player.currentTime() : a.__ws.getCurrentTime();
  const d = b.__ws.getDuration();
  const at = d > 0 ? Math.min(t, d) : t;
  b.__ws.setTime(at);
  a.classList.remove("ab-a"); a.classList.add("ab-b");
  b.classList.remove("ab-b"); b.classList.add("ab-a");
  if (playing) playCard(b, at);
  else if (player.isPlaying(b)) player.seek(at);
}

document.addEventListener("click", function (ev) {
  const btn = ev.target.closest && ev.target.closest("#review-panel [data-action=play]");
  if (!btn) return;
  const card = btn.closest("article.take");
  makeA(card);
  togglePlay(card);
});

function rowState(row) {
  const m = /(?:^| )st-row-(\S+)/.exec(row.className);
  return m ? m[1] : "";
}

htmx.onLoad(function (root) {
  const panel = document.getElementById("review-panel");
  if (!panel) return;
  cards().forEach(initWave);
  setupAB();
  // A row swapped in the panel (edited, or regenerated with its own button) may have
  // started a render: reload the panel, which then follows the render.
  if (root.matches && root.matches("#review-panel tr.line[data-line-id]") && rowState(root) &&
    panel.getAttribute("data-state") !== rowState(root)) {
    htmx.trigger(document.body, "review-refresh");
  }
});
// A new panel (another line, or after an action) stops the take it replaces.
document.addEventListener("htmx:beforeSwap", function (ev) {
  const t = ev.detail.target;
  if (!t || t.id !== "review-panel") return;
  const now = player.current();
  if (now && now.owner.matches("article.take") && t.contains(now.owner)) player.stop();
  t.querySelectorAll("[data-wave]").forEach(destroyWave);
});
document.addEventListener("htmx:beforeCleanupElement", function (ev) {
  if (ev.target) destroyWave(ev.target);
});

keymap("review-panel", function (key, panel) {
  const a = cardA();
  switch (key) {
    case "j": case "ArrowDown": return click(panel.querySelector("[data-nav=next]"));
    case "k": case "ArrowUp": return click(panel.querySelector("[data-nav=prev]"));
    case " ": togglePlay(a); return true;
    case "b": abSwitch(); return true;
    case "r": return click(panel.querySelector("[data-action=regenerate]"));
    case "a":
      return click((a && a.querySelector("[data-action=approve]")) ||
        panel.querySelector("article.take.current [data-action=approve]"));
    case "e": case "Enter": return click(panel.querySelector("tr.line [data-testid=line-text]"));
  }
  return false;
});
