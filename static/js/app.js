// dubstudio's own browser code: small, no framework. htmx does the requests. The
// sound and the keyboard are ES modules beside this file: player.js (the page's one
// audio player), keys.js, script_table.js and review.js.
(function () {
  "use strict";
  // Swap validation (422), conflict (409), too-large (413) and throttled (429)
  // responses like successes: they carry the form with its inline errors.
  htmx.config.responseHandling = [
    { code: "204", swap: false },
    { code: "[23]..", swap: true },
    { code: "409|413|422|429", swap: true, error: false },
    { code: "[45]..", swap: true, error: true },
  ];
  htmx.config.defaultSettleDelay = 0;
  // The Content-Security-Policy allows no eval (web/errors.go): nor does htmx, so that
  // no hx-on, js: value or trigger filter can sneak one in.
  htmx.config.allowEval = false;

  // What inline handlers used to do, which the CSP no longer runs: a select that
  // submits its form when changed, a checkbox that ticks every box of its name, a
  // button that closes the table row it is in.
  document.addEventListener("change", function (ev) {
    var el = ev.target;
    if (el.matches && el.matches("select[data-autosubmit]") && el.form) el.form.submit();
    if (el.matches && el.matches("input[data-select-all]")) {
      document.querySelectorAll('input[name="' + el.getAttribute("data-select-all") + '"]').forEach(function (c) {
        c.checked = el.checked;
      });
    }
  });
  document.addEventListener("click", function (ev) {
    var btn = ev.target.closest && ev.target.closest("[data-close-row]");
    if (btn) btn.closest("tr").remove();
  });

  // "Split" sends where the cursor is in the text box.
  document.addEventListener("htmx:configRequest", function (ev) {
    var el = ev.detail.elt;
    if (el && el.hasAttribute && el.hasAttribute("data-split")) {
      var ta = el.closest("form").querySelector("textarea[name=text]");
      if (ta) ev.detail.parameters["at"] = String(Array.from(ta.value.slice(0, ta.selectionStart)).length);
    }
  });

  // Escape leaves an inline edit without saving.
  document.addEventListener("keydown", function (ev) {
    if (ev.key === "Escape") {
      var row = document.activeElement && document.activeElement.closest("tr.editing");
      if (row) {
        var cancel = row.querySelector("button[hx-get]");
        if (cancel) cancel.click();
      }
    }
    // Ctrl/Cmd+Enter saves the line being edited.
    if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) {
      var form = document.activeElement && document.activeElement.closest("form.line-form");
      if (form) { ev.preventDefault(); htmx.trigger(form, "submit"); }
    }
  });
})();

// Live status (web/events.go, views/live.templ): rows, progress and reloads arrive over
// Server-Sent Events; these handlers keep them from undoing what the user is doing.
(function () {
  "use strict";
  // .connected drives the live indicator. A stream htmx had to open anew (after the
  // server refused or failed it) may have missed events, so reload the table; the
  // browser's own reconnections send Last-Event-ID and the server answers resync.
  document.addEventListener("htmx:sseOpen", function (ev) {
    var el = ev.target, src = ev.detail.source;
    el.classList.add("connected");
    if (el._liveSource && el._liveSource !== src) {
      var r = el.querySelector("[data-live-resync]");
      if (r) htmx.trigger(r, "sse:resync");
    }
    el._liveSource = src;
  });
  document.addEventListener("htmx:sseError", function (ev) {
    ev.target.classList.remove("connected");
  });

  // A live row keeps its ticked checkbox; a row being edited is never replaced (the
  // edit row has no sse-swap; this guards against any that might).
  document.addEventListener("htmx:sseBeforeMessage", function (ev) {
    var row = ev.target;
    if (!row.matches || !row.matches("tr.line")) return;
    if (row.classList.contains("editing")) { ev.preventDefault(); return; }
    var box = row.querySelector("input[name=line_id]");
    if (box && box.checked) {
      ev.preventDefault();
      htmx.swap(row, ev.detail.data, { swapStyle: "outerHTML" });
      var fresh = document.getElementById(row.id);
      var nb = fresh && fresh.querySelector("input[name=line_id]");
      if (nb) nb.checked = true;
    }
  });

  // A live reload of the table keeps the rows being edited, typing and all: they are
  // marked hx-preserve in the new table, so htmx moves the open editors into it.
  document.addEventListener("htmx:beforeSwap", function (ev) {
    var elt = ev.detail.requestConfig && ev.detail.requestConfig.elt;
    if (!elt || !elt.hasAttribute || !elt.hasAttribute("data-live-resync")) return;
    var editing = document.querySelectorAll("#lines tr.editing[id]");
    if (!editing.length) return;
    var tpl = document.createElement("template");
    tpl.innerHTML = ev.detail.serverResponse;
    editing.forEach(function (tr) {
      var fresh = tpl.content.getElementById(tr.id);
      if (fresh) fresh.setAttribute("hx-preserve", "true");
    });
    ev.detail.serverResponse = tpl.innerHTML;
  });
})();
