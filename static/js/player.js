// The page's one audio player. Every play control (a line row's ▶, the script
// table's and the review view's keys, the review takes and their A/B) drives this
// one element, so starting a sound stops the one before and nothing has to be kept
// in step. The element playing is marked data-playing (its value says what plays:
// "take" or "original"), which is what the style sheet and the tests look at.

const audio = new Audio();
let owner = null; // the element whose sound plays
let kind = "";
let errorFunc = null;
let generation = 0; // which play() a late event belongs to
const tickFuncs = [];

function mark(el) {
  if (el) el.setAttribute("data-playing", kind);
}
function unmark(el) {
  if (el) el.removeAttribute("data-playing");
}

// onTick calls f(owner, seconds) on every frame while a sound plays, for the
// waveforms' cursors.
export function onTick(f) { tickFuncs.push(f); }

// play plays url for el from at seconds (clamped to the sound's length), stopping
// whatever played. opts.kind names what plays; opts.onError(el) is called instead of
// stopping quietly when the url cannot be played.
export function play(el, url, opts) {
  opts = opts || {};
  stop();
  const gen = ++generation;
  owner = el;
  kind = opts.kind || "take";
  errorFunc = opts.onError || null;
  mark(owner);
  const href = new URL(url, document.baseURI).href;
  const start = function () {
    if (gen !== generation) return;
    const at = opts.at || 0;
    const d = audio.duration;
    audio.currentTime = d > 0 && isFinite(d) ? Math.min(at, d) : at;
    const p = audio.play();
    if (p && p.catch) p.catch(function () { if (gen === generation) stop(); }); // autoplay refused
  };
  if (audio.src === href && audio.readyState >= 1) { start(); }
  else {
    audio.addEventListener("loadedmetadata", start, { once: true });
    audio.src = href;
    audio.load();
  }
  // One sound at a time: the page's own <audio controls> (the range player, a
  // line's takes) stop too.
  document.querySelectorAll("audio, video").forEach(function (m) { m.pause(); });
}

// stop stops the sound; the next play starts wherever its caller says.
export function stop() {
  generation++;
  audio.pause();
  if (!owner) return;
  unmark(owner);
  owner = null;
  errorFunc = null;
}

// isPlaying says whether el's sound is the one playing.
export function isPlaying(el) { return !!el && owner === el; }

// current is what plays: the element and its kind, or null.
export function current() { return owner ? { owner: owner, kind: kind } : null; }

// currentTime is where the sound playing is, in seconds.
export function currentTime() { return audio.currentTime; }

// seek moves the sound playing to t seconds.
export function seek(t) { if (owner) audio.currentTime = t; }

let ticking = false;
function tick() {
  if (!owner || audio.paused) { ticking = false; return; }
  const t = audio.currentTime;
  tickFuncs.forEach(function (f) { f(owner, t); });
  requestAnimationFrame(tick);
}
audio.addEventListener("playing", function () {
  if (!ticking) { ticking = true; requestAnimationFrame(tick); }
});

audio.addEventListener("ended", function () {
  if (owner) tickFuncs.forEach(function (f) { f(owner, audio.duration); });
  stop();
});
audio.addEventListener("error", function () {
  const el = owner, f = errorFunc;
  if (!el) return;
  stop();
  if (f) f(el);
});

// And one of those <audio controls> starting stops this player.
document.addEventListener("play", function (ev) {
  if (ev.target !== audio) stop();
}, true);

// An element swapped in for the one playing (a live row update, a save) takes over
// its mark, so the sound goes on and still shows where it plays.
htmx.onLoad(function () {
  if (!owner || owner.isConnected || !owner.id) return;
  const fresh = document.getElementById(owner.id);
  if (!fresh) return;
  owner = fresh;
  mark(owner);
});
