// The script table (views/project.templ): the keyboard focus on a line and its
// shortcuts (space plays the take, b switches between it and the original
// performance at the same position, a approves, r renders, e edits), and the rows'
// ▶ buttons, here and in the review view's line. Every URL comes from the row:
// its ▶ button's data-play-url, the row's data-original-url and data-approve-url.
import * as player from "./player.js";
import { keymap, click } from "./keys.js";

let focusedID = null;

function rows() {
  return Array.prototype.slice.call(document.querySelectorAll("#lines tr.line[data-line-id]"));
}
function focused() {
  return focusedID ? document.getElementById(focusedID) : null;
}
function focusRow(row, stay) {
  const old = focused();
  if (old) old.classList.remove("kb-focus");
  if (!row) { focusedID = null; return; }
  focusedID = row.id;
  row.classList.add("kb-focus");
  if (!stay) row.scrollIntoView({ block: "nearest" });
}
function moveFocus(step) {
  const all = rows();
  if (!all.length) return;
  let i = all.indexOf(focused());
  if (i < 0) i = step > 0 ? -1 : all.length;
  focusRow(all[Math.max(0, Math.min(all.length - 1, i + step))]);
}

// A row swapped in (live status, a save, an approval) keeps the keyboard focus.
htmx.onLoad(function () {
  const row = focused();
  if (row) row.classList.add("kb-focus");
});

function takeURL(row) {
  const b = row.querySelector("button[data-play-url]");
  return b ? b.getAttribute("data-play-url") : null;
}

// playRow plays row's take, or its original performance, from at seconds. A line
// without an original (no source audio) plays its take instead.
function playRow(row, original, at) {
  const url = original ? row.getAttribute("data-original-url") : takeURL(row);
  if (!url) return;
  player.play(row, url, {
    at: at, kind: original ? "original" : "take",
    onError: original ? function (r) { playRow(r, false, 0); } : null,
  });
}
function toggleRow(row) {
  if (player.isPlaying(row)) { player.stop(); return; }
  playRow(row, false, 0);
}
function abRow(row) {
  const now = player.current();
  if (now && now.owner === row) playRow(row, now.kind !== "original", player.currentTime());
  else playRow(row, true, 0);
}
// approveRow approves row's current take. One that needs review is approved only
// once the question the row carries (data-approve-confirm) is answered yes; the
// answer goes with the request (data-approve-vals), which the server asks for.
function approveRow(row) {
  const url = row.getAttribute("data-approve-url");
  if (!url) return false;
  const ask = row.getAttribute("data-approve-confirm");
  let values = {};
  if (ask) {
    if (!window.confirm(ask)) return true;
    values = JSON.parse(row.getAttribute("data-approve-vals") || "{}");
  }
  htmx.ajax("POST", url, { source: row, target: row, swap: "outerHTML", values: values });
  return true;
}

// Shift-click on a line's box ticks (or clears) every box from the last one clicked
// to it, as a file list does. The last box is kept by its line, which outlives a
// row swapped in.
let lastBoxLine = null;
document.addEventListener("click", function (ev) {
  const box = ev.target.closest && ev.target.closest('#lines input[type=checkbox][name="line_id"]');
  if (!box) return;
  const boxes = Array.prototype.slice.call(document.querySelectorAll('#lines input[type=checkbox][name="line_id"]'));
  const last = lastBoxLine && boxes.filter(function (b) { return b.value === lastBoxLine; })[0];
  if (ev.shiftKey && last && last !== box) {
    const i = boxes.indexOf(last), j = boxes.indexOf(box);
    boxes.slice(Math.min(i, j), Math.max(i, j) + 1).forEach(function (b) { b.checked = box.checked; });
  }
  lastBoxLine = box.value;
});

// Capture phase: the focus moves before htmx acts on the click (an edit, say).
document.addEventListener("click", function (ev) {
  if (!ev.target.closest) return;
  // Clicking a row moves the focus there.
  const row = ev.target.closest("#lines tr.line[data-line-id]");
  if (row) focusRow(row);
  // ▶ plays the row's take, or stops it.
  const btn = ev.target.closest("tr.line button[data-play-url]");
  if (!btn) return;
  ev.preventDefault();
  const r = btn.closest("tr.line"), now = player.current();
  if (now && now.owner === r && now.kind === "take") player.stop();
  else playRow(r, false, 0);
}, true);

keymap("lines", function (key) {
  if (key === "j" || key === "ArrowDown") { moveFocus(1); return true; }
  if (key === "k" || key === "ArrowUp") { moveFocus(-1); return true; }
  const row = focused();
  if (!row) return false;
  switch (key) {
    case " ": toggleRow(row); return true;
    case "b": abRow(row); return true;
    case "r": return click(row.querySelector("[data-testid=render-line]"));
    case "a": return approveRow(row);
    case "e": case "Enter": return click(row.querySelector("[data-testid=line-text]"));
  }
  return false;
});

// A clip selected on the timeline (timeline.js) is the focused line here, without
// scrolling the page away from the timeline; a double click opens its editor.
document.addEventListener("timeline:select", function (ev) {
  const row = document.getElementById("line-" + ev.detail.lineID);
  if (!row) return;
  focusRow(row, !ev.detail.open);
  if (ev.detail.open) click(row.querySelector("[data-testid=line-text]"));
});
