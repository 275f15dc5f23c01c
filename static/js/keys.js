// The shortcuts' common ground: the help overlay (? shows it, Esc hides it), Esc
// stopping the sound, and keys typed into a field staying text. Each view registers
// its own keys with keymap (review.js, script_table.js).
import * as player from "./player.js";

const maps = [];

// keymap gives the keys to handle(key, root) on pages where the element rootID is;
// handle says whether it used the key.
export function keymap(rootID, handle) {
  maps.push({ rootID: rootID, handle: handle });
}

// click clicks el, a button or link the view already has, if there is one.
export function click(el) {
  if (!el) return false;
  el.click();
  return true;
}

function help() { return document.getElementById("kb-help"); }
function toggleHelp(show) {
  const h = help();
  if (!h) return;
  h.hidden = show === undefined ? !h.hidden : !show;
}
document.addEventListener("click", function (ev) {
  if (ev.target.closest && (ev.target.closest("[data-kb-close]") || ev.target.id === "kb-help")) toggleHelp(false);
});

// typing says whether key belongs to the focused field: every key of a text field,
// a select, a radio button (its arrows pick) or an editable element; of a checkbox
// (a line's box, which a click on it focuses) only the space bar that ticks it, so
// that the shortcuts go on working after ticking lines.
function typing(el, key) {
  if (!el || !el.closest) return false;
  const field = el.closest("input, textarea, select, [contenteditable=''], [contenteditable=true]");
  if (!field) return false;
  if (field.matches("input[type=checkbox]")) return key === " ";
  return true;
}

// Capture phase: a shortcut is handled before a focused button sees the key.
window.addEventListener("keydown", function (ev) {
  if (ev.ctrlKey || ev.metaKey || ev.altKey || ev.isComposing || typing(ev.target, ev.key)) return;
  let map = null, root = null;
  for (const m of maps) {
    root = document.getElementById(m.rootID);
    if (root) { map = m; break; }
  }
  if (!map) return;
  const h = help();
  if (ev.key === "?") { toggleHelp(); ev.preventDefault(); return; }
  if (ev.key === "Escape") {
    if (h && !h.hidden) toggleHelp(false);
    else player.stop();
    return;
  }
  if (h && !h.hidden) return;
  // Enter on a focused button or link is theirs.
  if (ev.key === "Enter" && ev.target.closest && ev.target.closest("button, a, summary")) return;
  if (map.handle(ev.key, root)) { ev.preventDefault(); ev.stopPropagation(); }
}, true);
