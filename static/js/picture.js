// The picture (views/picture.templ): the source video's proxy with the dub in sync.
//
// The video is the clock. With "Original" it plays its own sound; with "Dub" (or "Dub
// over the bed", the same mix with the project's M&E bed ducked under it) it is
// muted and an <audio> element plays the server's preview mix of the whole programme
// (media.PreviewMix: one WAV from 0, every take at its timecode), slaved to it:
//   - a play or a seek starts the two with a lead-in (start()): the picture holds,
//     paused, at its frame; the dub is sought LEAD_S before it and played; the
//     picture starts when the dub's clock reaches the picture's position. An audio
//     element's clock stands still for its output latency after it starts (60-70 ms
//     in Chromium; its currentTime is what is heard), a muted video's does not, so
//     two elements started in one task begin 20-75 ms apart; the lead-in lets the
//     dub's output start before the picture needs it (docs/picture.md);
//   - under the dub the video plays the proxy's picture without its sound track
//     (picture.mp4): a video with a sound track, even muted, keeps time by its
//     audio output and stands still after a start as the dub does; without one it
//     keeps the wall clock and starts at once;
//   - while playing, every SYNC_MS the drift (dub minus picture) is measured; past
//     DEAD_BAND_S the dub's playbackRate is nudged against it (pitch kept) until it
//     is under SETTLED_S, past HARD_S the two start again with a lead-in.
// URLs come from the page's data attributes, never from its address.

const SYNC_MS = 50;
const HARD_S = 0.25; // a drift past this starts the two again instead of catching up
const SYNCED_S = 0.02; // the status says "in sync" below this
const GAIN = 3; // rate change per second of drift
const DEAD_BAND_S = 0.015; // a drift below this is left alone (the dub at the picture's rate)
const SETTLED_S = 0.004; // a nudge goes on until the drift is below this
const MAX_NUDGE = 0.25; // at most 25% faster or slower (pitch kept), for a few tenths of a second
const READY_TIMEOUT_MS = 60000; // a long programme's first mix is made on request
// The dub plays this much of the programme before the picture starts: its clock runs
// ahead by up to a render period (about 20 ms in Chromium) and then stands still for
// the output's latency, and reaching this far past its start means it runs true.
const LEAD_S = 0.08;
const LEAD_TIMEOUT_MS = 3000; // a dub that does not reach the picture in this time: the picture starts anyway

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
  let gating = false; // start() runs: the picture is paused by us, waiting for the dub
  let again = false; // the user sought while start() ran: start over
  let ownSeek = -1; // where start() last sought the picture (its own seeking event)
  let stale = false; // the lines changed since the mix was loaded
  let syncedRuns = 0;
  let nudging = false; // the dub's rate is being nudged against a drift

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

  // ready reports whether a media element can play from target.
  const ready = (el, target) => !el.seeking && el.readyState >= 3 && Math.abs(el.currentTime - target) < 0.005;
  const gone = () => !root.isConnected;

  // seekTo puts el at target and waits until it can play from there (a long
  // programme's first mix is assembled on this request).
  async function seekTo(el, target) {
    const deadline = Date.now() + READY_TIMEOUT_MS;
    if (el === video) ownSeek = target;
    if (Math.abs(el.currentTime - target) >= 0.005) el.currentTime = target;
    while (!ready(el, target) && !el.error && !again && !gone() && Date.now() < deadline) {
      if (el === dub && el.readyState < 3) say("mixing");
      await once(el, ["seeked", "canplay", "canplaythrough", "loadeddata", "error"], 500);
      if (!el.seeking && Math.abs(el.currentTime - target) >= 0.005) el.currentTime = target;
    }
    return ready(el, target);
  }

  // reach waits until the dub's clock is at target (or it stops, or time runs out),
  // sleeping until near it and then every few milliseconds.
  async function reach(target) {
    const deadline = Date.now() + LEAD_TIMEOUT_MS;
    for (;;) {
      const left = (target - dub.currentTime) / (dub.playbackRate || 1);
      if (left <= 0 || dub.paused || dub.ended || dub.error || again || gone() || Date.now() > deadline) return;
      await new Promise((r) => setTimeout(r, left > 0.03 ? (left - 0.02) * 1000 : 0));
    }
  }

  // start puts the dub where the picture is and starts the two with a lead-in: the
  // picture holds its frame while the dub plays from LEAD_S before it, and starts
  // when the dub's clock reaches it. A picture within LEAD_S of the start (a play
  // from 0) is moved to LEAD_S first: the dub cannot start before 0.
  // While it runs (gating), the events of its own pauses, seeks and plays are not
  // the user's; a seek by the user meanwhile (again) starts it over.
  async function start() {
    if (gating || !dubOn()) return;
    gating = true;
    again = false;
    try {
      if (stale || !dub.getAttribute("src")) loadMix(true);
      video.pause();
      dub.pause();
      root.setAttribute("data-synced", "false");
      syncedRuns = 0;
      if (video.seeking) await once(video, ["seeked", "error"], READY_TIMEOUT_MS);
      const at = Math.max(video.currentTime, LEAD_S);
      const from = Math.max(0, at - LEAD_S);
      const [videoOK, dubOK] = await Promise.all([seekTo(video, at), seekTo(dub, from)]);
      if (again || gone()) return;
      if (!dubOK) { say("mix-error"); return; }
      if (!videoOK) return;
      say("syncing");
      dub.playbackRate = video.playbackRate;
      nudging = false;
      try { await dub.play(); } catch { say("mix-error"); return; }
      await reach(at);
      if (again || gone()) { dub.pause(); return; }
      await video.play().catch(() => dub.pause());
    } finally {
      gating = false;
      if (again) { again = false; start(); }
    }
  }

  function tick() {
    if (!dubOn() || gating || video.paused || dub.paused || video.seeking || dub.seeking) return;
    const drift = dub.currentTime - video.currentTime;
    if (Math.abs(drift) > HARD_S) {
      start();
      return;
    }
    // Within the dead band the dub plays at the picture's own rate: a rate other
    // than 1x goes through the browser's time stretching, whose window (about 20 ms
    // in Chromium) stalls the dub's clock each time it is entered, so a nudge for a
    // few milliseconds of drift would make more than it corrects.
    if (nudging ? Math.abs(drift) < SETTLED_S : Math.abs(drift) < DEAD_BAND_S) {
      nudging = false;
      if (dub.playbackRate !== video.playbackRate) dub.playbackRate = video.playbackRate;
    } else {
      nudging = true;
      const nudge = Math.max(-MAX_NUDGE, Math.min(MAX_NUDGE, -drift * GAIN));
      dub.playbackRate = video.playbackRate * (1 + nudge);
    }
    syncedRuns = Math.abs(drift) < SYNCED_S ? syncedRuns + 1 : 0;
    say(syncedRuns >= 5 ? "synced" : "syncing");
    root.setAttribute("data-synced", syncedRuns >= 5 ? "true" : "false");
    (root.__drifts = root.__drifts || []).push(Math.round(drift * 1000));
    if (root.__drifts.length > 200) root.__drifts.shift();
  }

  // pictureFor switches the video between the proxy's picture alone (under the dub:
  // its clock is the wall clock, which starts at once) and the proxy with its own
  // sound (the original), keeping its position and whether it plays.
  function pictureFor(on) {
    const want = root.getAttribute(on ? "data-picture-url" : "data-original-url");
    if (!want || video.getAttribute("src") === want) return;
    const at = video.currentTime, playing = !video.paused;
    video.src = want;
    video.addEventListener("loadedmetadata", () => {
      video.currentTime = at;
      if (playing) video.play().catch(() => {});
    }, { once: true });
  }

  function applySound() {
    pictureFor(dubOn());
    video.muted = dubOn();
    dub.muted = !dubOn();
    if (!dubOn()) { dub.pause(); say(""); root.removeAttribute("data-synced"); return; }
    if (mixBed !== null && mixBed !== (sound.value === "bed")) stale = true; // bed on or off: another mix
    loadMix(false);
    if (!video.paused) start();
  }

  video.addEventListener("play", () => { if (!gating) start(); });
  video.addEventListener("pause", () => {
    if (gating) return;
    dub.pause();
    say("");
    root.setAttribute("data-synced", "false");
  });
  video.addEventListener("seeking", () => {
    if (gating) { if (Math.abs(video.currentTime - ownSeek) > 0.005) again = true; return; }
    if (!dubOn()) return;
    dub.pause();
    root.setAttribute("data-synced", "false");
    syncedRuns = 0;
    dub.currentTime = video.currentTime;
  });
  video.addEventListener("seeked", () => { if (!gating && !video.paused) start(); });
  video.addEventListener("ratechange", () => { dub.playbackRate = video.playbackRate; });
  video.addEventListener("waiting", () => { if (!gating) dub.pause(); });
  video.addEventListener("playing", () => { if (!gating && dubOn() && dub.paused) start(); });
  sound.addEventListener("change", applySound);
  const reload = () => { stale = true; if (dubOn()) { loadMix(true); if (!video.paused) start(); } };
  takes.addEventListener("change", reload);
  fill.addEventListener("change", reload);
  // A line's new take or timing arrives over the page's event stream: the next play
  // loads the mix again (made once per content on the server).
  document.body.addEventListener("htmx:sseMessage", () => { stale = true; });

  const timer = setInterval(() => {
    if (!root.isConnected) { clearInterval(timer); dub.pause(); return; }
    tick();
  }, SYNC_MS);
  root.__picture = { video, dub, start };
  applySound();
}

function scan(el) {
  (el || document).querySelectorAll("[data-picture]").forEach(init);
}

document.addEventListener("htmx:load", (e) => scan(e.target));
scan(document);
