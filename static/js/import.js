// The import panel: the preview's button asks before a replace deletes the project's
// lines, and a finished import clears the form for the next file. htmx does the
// requests (views/import.templ).

document.addEventListener("htmx:confirm", (ev) => {
  const btn = ev.detail.elt;
  if (!btn.hasAttribute || !btn.hasAttribute("data-import-confirm")) return;
  const form = btn.closest("form");
  const mode = form.querySelector("input[name=mode]:checked");
  if (mode && mode.value === "replace") {
    ev.preventDefault();
    if (window.confirm(form.dataset.confirmReplace)) ev.detail.issueRequest(true);
  }
});

document.addEventListener("htmx:afterRequest", (ev) => {
  const btn = ev.detail.elt;
  if (!btn.hasAttribute || !btn.hasAttribute("data-import-confirm") || !ev.detail.successful) return;
  const file = document.querySelector("[data-testid=import-form] input[type=file]");
  if (file && ev.detail.xhr.status === 200) file.value = "";
});
