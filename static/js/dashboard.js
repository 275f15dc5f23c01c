// Project dashboard chart (views/dashboard.templ): audio seconds and lines rendered per
// minute over the last hour, drawn with the vendored uPlot from a small JSON endpoint
// and refreshed every 15 seconds.
(function () {
  "use strict";
  if (typeof uPlot === "undefined") return;

  function options(el) {
    return {
      width: Math.max(el.clientWidth, 300),
      height: 220,
      cursor: { drag: { x: false, y: false } },
      scales: { x: { time: true }, lines: { range: function (u, min, max) { return [0, Math.max(1, max)]; } } },
      series: [
        { label: el.dataset.labelTime },
        {
          label: el.dataset.labelAudio,
          stroke: "#4f6bed",
          fill: "rgba(79, 107, 237, 0.25)",
          paths: uPlot.paths.bars({ size: [0.8, 40] }),
          value: function (u, v) { return v == null ? "—" : v.toFixed(1) + " s"; },
        },
        {
          label: el.dataset.labelLines,
          stroke: "#2e9e6b",
          width: 2,
          scale: "lines",
          value: function (u, v) { return v == null ? "—" : String(v); },
        },
      ],
      axes: [
        {},
        { size: 50 },
        { scale: "lines", side: 1, grid: { show: false }, size: 40 },
      ],
    };
  }

  function draw(el) {
    fetch(el.dataset.uplotSrc, { headers: { Accept: "application/json" }, credentials: "same-origin" })
      .then(function (r) { if (!r.ok) throw new Error(r.status); return r.json(); })
      .then(function (d) {
        var data = [d.t, d.audio_s, d.lines];
        if (el._plot) {
          el._plot.setData(data);
        } else {
          el.textContent = "";
          el._plot = new uPlot(options(el), data, el);
        }
        el.dataset.ready = "true";
      })
      .catch(function () { /* the next refresh tries again */ });
  }

  document.querySelectorAll("[data-uplot-src]").forEach(function (el) {
    draw(el);
    var timer = setInterval(function () {
      if (!document.body.contains(el)) { clearInterval(timer); return; }
      draw(el);
    }, 15000);
    window.addEventListener("resize", function () {
      if (el._plot) el._plot.setSize({ width: Math.max(el.clientWidth, 300), height: 220 });
    });
  });
})();
