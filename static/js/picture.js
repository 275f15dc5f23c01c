// The picture (views/picture.templ): the source video's proxy with the dub in sync.
//
// The video is the clock. With "Original" it plays its own sound; with "Dub" (or "Dub
// over the bed", the same mix with the project's M&E bed ducked under it) it is
// muted and an <audio> element plays the server's preview mix of the whole programme
// (media.PreviewMix: one WAV from 0, every take at its timecode), slaved to it:
//   - a play or a seek starts the two together: the picture waits (paused) until
//     the dub is loaded at the same position, then both play in the same task;
//   - while playing, every SYNC_MS the drift (dub minus picture) is measured and the
//     dub's playbackRate nudged against it (pitch kept), or, past HARD_S, the dub
//     jumps to the picture.
// URLs come from the page's data attributes, never from its address.

const SYNC_MS = 50;
const HARD_S = 0.25; // a drift past this jumps instead of catching up
const SYNCED_S = 0.02; // the status says "in sync" below this
const GAIN = 3; // rate change per second of drift
const MAX_NUDGE = 0.25; // at most 25% faster or slower (pitch kept), for a few tenths of a second
const READY_TIMEOUT_MS = 60000; // a long programme's first mix is made on request

function once(el, names, ms) {
  return new Promise((resolve) => {
    const done = () => { names.forEach((n) => el.removeEventListener(n, done)); clearTimeout(t); resolve(); };
    const t = setTimeout(done, ms);
    names.forEach((n) => el.addEventListener(n, done));
  });
}

function init(root) {
  if (root.__picture) return;
  const video = root.querySelector("video");
  const dub = root.querySelector("audio");
  const sound = root.querySelector("[data-picture-sound]");
  const takes = root.querySelector("[data-picture-takes]");
  const fill = root.querySelector("[data-picture-fill]");
  const status = root.querySelector("[data-picture-status]");
  let gating = false; // the picture is paused by us, waiting for the dub
  let stale = false; // the lines changed since the mix was loaded
  let syncedRuns = 0;

  // "bed" (the dub over the M&E bed) and "dub" (the dub only) both play the mix.
  const dubOn = () => sound.value === "dub" || sound.value === "bed";
  let mixBed = null; // whether the loaded mix has the bed under it
  const say = (key) => { status.textContent = key ? root.getAttribute("data-label-" + key) || "" : ""; };

  function mixURL() {
    const u = new URL(root.getAttribute("data-mix-url"), document.baseURI);
    u.searchParams.set("takes", takes.value);
    u.searchParams.set("fill", fill.value);
    if (sound.value === "bed") u.searchParams.set("bed", "1");
    if (stale) u.searchParams.set("r", String(Date.now()));
    return u.pathname + u.search;
  }

  function loadMix(force) {
    if (!dubOn()) return;
    if (!force && !stale && dub.getAttribute("src")) return;
    dub.src = mixURL();
    mixBed = sound.value === "bed";
    stale = false;
    dub.currentTime = video.currentTime; // kept until the new mix has loaded
  }

  // dubReady reports whether the dub can play from where the picture is.
  function dubReady() {
    return !dub.seeking && dub.readyState >= 3 && Math.abs(dub.currentTime - video.currentTime) < 0.03;
  }

  // together puts the dub where the picture is and starts both at once. While it
  // runs (gating), the events of its own pause and play are not the user's.
  async function together() {
    if (gating || !dubOn()) return;
    gating = true;
    try {
      if (stale || !dub.getAttribute("src")) loadMix(true);
      if (!dubReady()) {
        video.pause();
        dub.pause();
        say("mixing");
        if (Math.abs(dub.currentTime - video.currentTime) >= 0.03) dub.currentTime = video.currentTime;
        const deadline = Date.now() + READY_TIMEOUT_MS;
        while (!dubReady() && !dub.error && Date.now() < deadline) {
          await once(dub, ["seeked", "canplay", "canplaythrough", "loadeddata", "error"], 500);
          if (!dub.seeking && Math.abs(dub.currentTime - video.currentTime) >= 0.03) dub.currentTime = video.currentTime;
        }
        if (!dubReady()) { say("mix-error"); return; }
      }
      say("syncing");
      syncedRuns = 0;
      dub.playbackRate = video.playbackRate;
      await Promise.allSettled([video.play(), dub.play()]);
    } finally {
      gating = false;
    }
  }

  function tick() {
    if (!dubOn() || gating || video.paused || dub.paused || video.seeking || dub.seeking) return;
    const drift = dub.currentTime - video.currentTime;
    if (Math.abs(drift) > HARD_S) {
      dub.currentTime = video.currentTime;
      syncedRuns = 0;
      say("syncing");
      return;
    }
    const nudge = Math.max(-MAX_NUDGE, Math.min(MAX_NUDGE, -drift * GAIN));
    dub.playbackRate = video.playbackRate * (1 + nudge);
    syncedRuns = Math.abs(drift) < SYNCED_S ? syncedRuns + 1 : 0;
    say(syncedRuns >= 5 ? "synced" : "syncing");
    root.setAttribute("data-synced", syncedRuns >= 5 ? "true" : "false");
    (root.__drifts = root.__drifts || []).push(Math.round(drift * 1000));
    if (root.__drifts.length > 200) root.__drifts.shift();
  }

  function applySound() {
    video.muted = dubOn();
    dub.muted = !dubOn();
    if (!dubOn()) { dub.pause(); say(""); root.removeAttribute("data-synced"); return; }
    if (mixBed !== null && mixBed !== (sound.value === "bed")) stale = true; // bed on or off: another mix
    loadMix(false);
    if (!video.paused) together();
  }

  video.addEventListener("play", () => { if (!gating) together(); });
  video.addEventListener("pause", () => {
    if (gating) return;
    dub.pause();
    say("");
    root.setAttribute("data-synced", "false");
  });
  video.addEventListener("seeking", () => {
    if (gating || !dubOn()) return;
    dub.pause();
    root.setAttribute("data-synced", "false");
    syncedRuns = 0;
    dub.currentTime = video.currentTime;
  });
  video.addEventListener("seeked", () => { if (!gating && !video.paused) together(); });
  video.addEventListener("ratechange", () => { dub.playbackRate = video.playbackRate; });
  video.addEventListener("waiting", () => { if (!gating) dub.pause(); });
  video.addEventListener("playing", () => { if (!gating && dubOn() && dub.paused) together(); });
  sound.addEventListener("change", applySound);
  const reload = () => { stale = true; if (dubOn()) { loadMix(true); if (!video.paused) together(); } };
  takes.addEventListener("change", reload);
  fill.addEventListener("change", reload);
  // A line's new take or timing arrives over the page's event stream: the next play
  // loads the mix again (made once per content on the server).
  document.body.addEventListener("htmx:sseMessage", () => { stale = true; });

  const timer = setInterval(() => {
    if (!root.isConnected) { clearInterval(timer); dub.pause(); return; }
    tick();
  }, SYNC_MS);
  root.__picture = { video, dub, together };
  applySound();
}

function scan(el) {
  (el || document).querySelectorAll("[data-picture]").forEach(init);
}

document.addEventListener("htmx:load", (e) => scan(e.target));
scan(document);
