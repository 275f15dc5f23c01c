// Keyboard-first review (views/review.templ) and editing (the script table):
// waveforms drawn by wavesurfer.js with the slot, speech and borrowed time as regions
// (the library is loaded only on the review page), A/B between takes at the same
// position, and the shortcuts of the help overlay (press ?). No framework: htmx does
// the requests, this file only clicks the buttons the views already have.
(function () {
  "use strict";

  var colors = {
    wave: "#b8c2dc", progress: "#4f6bed", cursor: "#1d2433",
    slot: "rgba(79, 107, 237, 0.12)", speech: "rgba(46, 158, 107, 0.22)", borrowed: "rgba(199, 124, 2, 0.28)",
  };

  function attrNum(el, name) {
    var v = parseFloat(el.getAttribute(name));
    return isNaN(v) ? -1 : v;
  }

  // regionLabel names a region. Regions live in wavesurfer's shadow DOM, out of
  // reach of the page's style sheet, hence the inline style.
  function regionLabel(text, bottom) {
    var s = document.createElement("span");
    s.textContent = text;
    s.style.cssText = "position:absolute;left:0;padding:0 4px;font-size:10px;line-height:14px;color:#3a4152;" +
      "background:rgba(255,255,255,.7);border-radius:3px;" + (bottom ? "bottom:0;" : "top:0;");
    return s;
  }

  // ---- Waveforms and A/B (review page) ----

  function cards() {
    return Array.prototype.slice.call(document.querySelectorAll("#review-panel article.take"));
  }
  function cardA() { return document.querySelector("#review-panel article.take.ab-a"); }
  function cardB() { return document.querySelector("#review-panel article.take.ab-b"); }

  function isPlaying(card) { return !!(card && card.__ws && card.__ws.isPlaying()); }

  function initWave(card) {
    var el = card.querySelector("[data-wave]");
    if (!el || el.__ws || typeof WaveSurfer === "undefined") return;
    var regions = WaveSurfer.Regions ? WaveSurfer.Regions.create() : null;
    var ws = WaveSurfer.create({
      container: el, url: el.getAttribute("data-src"), height: 72, normalize: false,
      waveColor: colors.wave, progressColor: colors.progress, cursorColor: colors.cursor, cursorWidth: 2,
      plugins: regions ? [regions] : [],
    });
    el.__ws = ws;
    card.__ws = ws;
    ws.on("decode", function () {
      if (regions) {
        var slot = attrNum(el, "data-slot-ms") / 1000;
        var borrowed = attrNum(el, "data-borrowed-ms") / 1000;
        var s0 = attrNum(el, "data-speech-start-ms"), s1 = attrNum(el, "data-speech-end-ms");
        var fixed = { drag: false, resize: false };
        if (slot > 0) {
          var r = regions.addRegion(Object.assign({ start: 0, end: slot, color: colors.slot, content: regionLabel(el.getAttribute("data-label-slot")) }, fixed));
          // The slot's end is what the take must meet: mark it.
          if (r && r.element) r.element.style.borderRight = "2px solid " + colors.progress;
        }
        if (borrowed > 0) regions.addRegion(Object.assign({ start: slot, end: slot + borrowed, color: colors.borrowed, content: regionLabel(el.getAttribute("data-label-borrowed"), true) }, fixed));
        if (s0 >= 0 && s1 > s0) regions.addRegion(Object.assign({ start: s0 / 1000, end: s1 / 1000, color: colors.speech, content: regionLabel(el.getAttribute("data-label-speech"), true) }, fixed));
      }
      card.setAttribute("data-ready", "true");
    });
    ws.on("play", function () { card.classList.add("playing"); card.setAttribute("data-playing", "true"); });
    var stopped = function () { card.classList.remove("playing"); card.removeAttribute("data-playing"); };
    ws.on("pause", stopped);
    ws.on("finish", stopped);
    ws.on("interaction", function () { makeA(card); });
  }

  function destroyWaves(root) {
    if (!root || !root.querySelectorAll) return;
    root.querySelectorAll("[data-wave]").forEach(function (el) {
      if (el.__ws) { try { el.__ws.destroy(); } catch (e) { /* already gone */ } el.__ws = null; }
    });
  }

  // makeA makes card the one that plays (A); the previous A becomes B.
  function makeA(card) {
    var a = cardA();
    if (a === card) return;
    var b = cardB();
    if (b) b.classList.remove("ab-b");
    if (a) { a.classList.remove("ab-a"); a.classList.add("ab-b"); }
    card.classList.remove("ab-b");
    card.classList.add("ab-a");
  }

  // setupAB picks A (the current take) and B (the approved one, another take, or
  // the original) when a panel arrives.
  function setupAB() {
    var all = cards();
    if (!all.length || cardA()) return;
    var takes = all.filter(function (c) { return c.hasAttribute("data-take-id"); });
    var a = all.filter(function (c) { return c.classList.contains("current"); })[0] || takes[0] || all[0];
    var b = takes.filter(function (c) { return c !== a && c.classList.contains("take-approved"); })[0] ||
      takes.filter(function (c) { return c !== a; })[0] ||
      all.filter(function (c) { return c !== a; })[0];
    a.classList.add("ab-a");
    if (b) b.classList.add("ab-b");
  }

  function stopAll(except) {
    cards().forEach(function (c) { if (c !== except && isPlaying(c)) c.__ws.pause(); });
    stopRow();
  }

  function togglePlay(card) {
    if (!card || !card.__ws) return;
    if (isPlaying(card)) { card.__ws.pause(); return; }
    stopAll(card);
    var p = card.__ws.play();
    if (p && p.catch) p.catch(function () { /* autoplay refused: nothing to do */ });
  }

  // abSwitch hands playback from A to B at the same position.
  function abSwitch() {
    var a = cardA(), b = cardB();
    if (!a || !b || !a.__ws || !b.__ws) return;
    var playing = isPlaying(a);
    var t = a.__ws.getCurrentTime();
    a.__ws.pause();
    var d = b.__ws.getDuration();
    b.__ws.setTime(d > 0 ? Math.min(t, d) : t);
    a.classList.remove("ab-a"); a.classList.add("ab-b");
    b.classList.remove("ab-b"); b.classList.add("ab-a");
    if (playing) togglePlay(b);
  }

  document.addEventListener("click", function (ev) {
    var btn = ev.target.closest && ev.target.closest("#review-panel [data-action=play]");
    if (!btn) return;
    var card = btn.closest("article.take");
    makeA(card);
    togglePlay(card);
  });

  htmx.onLoad(function (root) {
    var panel = document.getElementById("review-panel");
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
  document.addEventListener("htmx:beforeSwap", function (ev) {
    var t = ev.detail.target;
    if (t && t.id === "review-panel") destroyWaves(t);
  });
  document.addEventListener("htmx:beforeCleanupElement", function (ev) {
    var el = ev.target;
    if (el && el.__ws) { try { el.__ws.destroy(); } catch (e) { /* already gone */ } el.__ws = null; }
  });

  function rowState(row) {
    var m = /(?:^| )st-row-(\S+)/.exec(row.className);
    return m ? m[1] : "";
  }

  // ---- The script table ----

  var focusedId = null;
  var player = new Audio();
  var playingRow = null, playingOriginal = false;

  function rows() {
    return Array.prototype.slice.call(document.querySelectorAll("#lines tr.line[data-line-id]"));
  }
  function focused() {
    return focusedId ? document.getElementById(focusedId) : null;
  }
  function focusRow(row) {
    var old = focused();
    if (old) old.classList.remove("kb-focus");
    if (!row) { focusedId = null; return; }
    focusedId = row.id;
    row.classList.add("kb-focus");
    row.scrollIntoView({ block: "nearest" });
  }
  function moveFocus(step) {
    var all = rows();
    if (!all.length) return;
    var i = all.indexOf(focused());
    if (i < 0) i = step > 0 ? -1 : all.length;
    focusRow(all[Math.max(0, Math.min(all.length - 1, i + step))]);
  }
  // A row swapped in (live status, a save, an approval) keeps the keyboard focus.
  htmx.onLoad(function () {
    var row = focused();
    if (row) row.classList.add("kb-focus");
  });
  // Clicking a row moves the focus there.
  document.addEventListener("click", function (ev) {
    var row = ev.target.closest && ev.target.closest("#lines tr.line[data-line-id]");
    if (row) focusRow(row);
    // The row play buttons have their own player (app.js): only one plays at a time.
    if (ev.target.closest && ev.target.closest("button[data-play]")) stopRow();
  }, true);

  function projectID() {
    var m = /^\/projects\/(\d+)/.exec(location.pathname);
    return m ? m[1] : null;
  }
  function takeURL(row) {
    var b = row.querySelector("button[data-play]");
    return b ? b.getAttribute("data-play") : null;
  }
  function originalURL(row) {
    return "/projects/" + projectID() + "/lines/" + row.getAttribute("data-line-id") + "/source.wav";
  }
  function stopRow() {
    player.pause();
    if (playingRow) {
      var b = playingRow.querySelector("button[data-play]");
      if (b) b.classList.remove("playing");
      playingRow.removeAttribute("data-kb-playing");
    }
    playingRow = null;
  }
  player.addEventListener("ended", stopRow);
  player.addEventListener("error", function () {
    // No original for this line (no source audio): back to the take.
    if (playingRow && playingOriginal) { var r = playingRow; stopRow(); playRow(r, false, 0); }
  });

  function playRow(row, original, at) {
    var url = original ? originalURL(row) : takeURL(row);
    if (!url) return;
    // Stop a row the mouse started (app.js marks its button .playing).
    document.querySelectorAll("button[data-play].playing").forEach(function (b) {
      if (!playingRow || !playingRow.contains(b)) b.click();
    });
    playingRow = row;
    playingOriginal = original;
    var b = row.querySelector("button[data-play]");
    if (b) b.classList.add("playing");
    row.setAttribute("data-kb-playing", original ? "original" : "take");
    player.src = url;
    var start = function () {
      player.removeEventListener("loadedmetadata", start);
      if (at > 0) player.currentTime = Math.min(at, player.duration || at);
      var p = player.play();
      if (p && p.catch) p.catch(stopRow);
    };
    player.addEventListener("loadedmetadata", start);
    player.load();
  }
  function toggleRow(row) {
    if (playingRow === row && !player.paused) { stopRow(); return; }
    var mouse = row.querySelector("button[data-play].playing");
    if (mouse && playingRow !== row) { mouse.click(); return; } // stop what the mouse started
    stopRow();
    playRow(row, false, 0);
  }
  function abRow(row) {
    var at = playingRow === row ? player.currentTime : 0;
    var original = playingRow === row ? !playingOriginal : true;
    stopRow();
    playRow(row, original, at);
  }
  function approveRow(row) {
    var pid = projectID();
    if (!pid) return;
    htmx.ajax("POST", "/projects/" + pid + "/lines/" + row.getAttribute("data-line-id") + "/approve",
      { source: row, target: row, swap: "outerHTML" });
  }

  // ---- Keys ----

  function help() { return document.getElementById("kb-help"); }
  function toggleHelp(show) {
    var h = help();
    if (!h) return;
    h.hidden = show === undefined ? !h.hidden : !show;
  }
  document.addEventListener("click", function (ev) {
    if (ev.target.closest && (ev.target.closest("[data-kb-close]") || ev.target.id === "kb-help")) toggleHelp(false);
  });

  function typing(el) {
    if (!el || !el.closest) return false;
    return !!el.closest("input, textarea, select, [contenteditable=''], [contenteditable=true]");
  }
  function click(el) { if (el) { el.click(); return true; } return false; }

  function reviewKey(key, panel) {
    var a = cardA();
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
  }

  function tableKey(key) {
    var row = focused();
    if (key === "j" || key === "ArrowDown") { moveFocus(1); return true; }
    if (key === "k" || key === "ArrowUp") { moveFocus(-1); return true; }
    if (!row) return false;
    switch (key) {
      case " ": toggleRow(row); return true;
      case "b": abRow(row); return true;
      case "r": return click(row.querySelector("[data-testid=render-line]"));
      case "a": approveRow(row); return true;
      case "e": case "Enter": return click(row.querySelector("[data-testid=line-text]"));
    }
    return false;
  }

  // Capture phase: a shortcut is handled before a focused button sees the key.
  window.addEventListener("keydown", function (ev) {
    if (ev.ctrlKey || ev.metaKey || ev.altKey || ev.isComposing || typing(ev.target)) return;
    var panel = document.getElementById("review-panel");
    var table = document.getElementById("lines");
    if (!panel && !table) return;
    var h = help();
    if (ev.key === "?") { toggleHelp(); ev.preventDefault(); return; }
    if (ev.key === "Escape") {
      if (h && !h.hidden) toggleHelp(false);
      else { stopAll(null); }
      return;
    }
    if (h && !h.hidden) return;
    // Enter on a focused button or link is theirs.
    if (ev.key === "Enter" && ev.target.closest && ev.target.closest("button, a, summary")) return;
    var handled = panel ? reviewKey(ev.key, panel) : tableKey(ev.key);
    if (handled) { ev.preventDefault(); ev.stopPropagation(); }
  }, true);
})();
