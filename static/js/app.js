// dubstudio's own browser code: small, no framework. htmx does the requests.
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

// Row play buttons: one shared player, so a long table costs nothing until played.
(function () {
  "use strict";
  var player = new Audio();
  var current = null;
  function stop() {
    player.pause();
    if (current) current.classList.remove("playing");
    current = null;
  }
  player.addEventListener("ended", stop);
  document.addEventListener("click", function (ev) {
    var btn = ev.target.closest && ev.target.closest("button[data-play]");
    if (!btn) return;
    ev.preventDefault();
    if (current === btn) { stop(); return; }
    stop();
    current = btn;
    btn.classList.add("playing");
    player.src = btn.getAttribute("data-play");
    player.play().catch(stop);
  });
})();
