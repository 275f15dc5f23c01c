// Admin GPU page (views/gpus.templ): live charts of VRAM, utilisation, temperature and
// power per GPU, and of a batching host's batch (sequences by stage, decode tokens/s,
// KV cache in use; views/usage.templ), drawn with the vendored uPlot from the charts' data-samples-url
// (/admin/gpus/samples.json), polled every two seconds (the workers publish their samples every two seconds); and the
// load-test chart of a calibration page. The numbers, budget and seats next to the
// charts are refreshed by htmx (hx-get="/admin/gpus/live").
(function () {
  "use strict";
  if (typeof uPlot === "undefined") return;

  var WINDOW_MS = 15 * 60 * 1000; // what a chart keeps
  var POLL_MS = 2000;

  // One chart per metric; the points' columns are [t, used, total, util, temp, power].
  var METRICS = [
    { label: "labelVram", color: "#4f6bed", value: function (p) { return p[1] == null ? null : p[1] / 1e9; },
      range: function (u, min, max, pts) { return [0, Math.max(max, 1)]; } },
    { label: "labelUtil", color: "#2e9e6b", value: function (p) { return p[3]; },
      range: function () { return [0, 100]; } },
    { label: "labelTemp", color: "#d4812f", value: function (p) { return p[4]; },
      range: function (u, min, max) { return [Math.min(min == null ? 30 : min, 30), Math.max(max == null ? 90 : max, 90)]; } },
    { label: "labelPower", color: "#b83b5e", value: function (p) { return p[5]; },
      range: function (u, min, max) { return [0, Math.max(max == null ? 100 : max, 100)]; } },
  ];

  var series = {}; // key -> array of points, oldest first
  var charts = {}; // key -> [uPlot per metric]

  // A batching host's batch; its points' columns are [t, decoding, in s2mel, waiting,
  // tokens/s, KV in use bytes]. The first chart draws three series.
  var BATCH = [
    { series: [{ label: "labelDecoding", color: "#4f6bed", col: 1 }, { label: "labelS2mel", color: "#2e9e6b", col: 2 },
      { label: "labelWaiting", color: "#d4812f", col: 3 }], title: "labelSequences",
      range: function (u, min, max) { return [0, Math.max(max == null ? 1 : max, 1)]; } },
    { series: [{ label: "labelTokens", color: "#b83b5e", col: 4 }],
      range: function (u, min, max) { return [0, Math.max(max == null ? 1 : max, 1)]; } },
    { series: [{ label: "labelKv", color: "#7b61c9", col: 5, scale: 1e9 }],
      range: function (u, min, max) { return [0, Math.max(max == null ? 0.1 : max, 0.1)]; } },
  ];
  var batchSeries = {}; // key -> array of batch points, oldest first
  var batchCharts = {}; // key -> [uPlot per BATCH entry]

  // The poll asks for what is newer than the oldest of the GPUs' newest points (each
  // chart keeps only what is newer than its own). A sample's time is its worker's
  // clock, and workers publish at moments of their own: the newest point of all would
  // hide every later sample of a worker whose clock is behind, or that published
  // before the others (its charts stopped, or lost points).
  var newest = {}; // key -> time of the newest sample of the GPU's charts
  var batchNewest = {}; // key -> the same for its batch charts
  function oldestNewest(m) {
    var keys = Object.keys(m);
    if (!keys.length) return 0;
    return Math.min.apply(null, keys.map(function (k) { return m[k]; }));
  }

  function makeBatchCharts(box) {
    var key = box.dataset.batchCharts;
    batchCharts[key] = BATCH.map(function (m) {
      var el = document.createElement("div");
      el.className = "chart";
      box.appendChild(el);
      var ser = [{ label: box.dataset.labelTime }].concat(m.series.map(function (s) {
        return { label: box.dataset[s.label], stroke: s.color, width: 2,
          value: function (u, v) { return v == null ? "—" : (Math.round(v * 100) / 100).toString(); } };
      }));
      return new uPlot({
        title: m.title ? box.dataset[m.title] : undefined,
        width: width(el), height: 150, cursor: { drag: { x: false, y: false } }, legend: { live: true },
        scales: { x: { time: true }, y: { range: m.range } }, series: ser, axes: [timeAxis(), { size: 44 }],
      }, [[]].concat(m.series.map(function () { return []; })), el);
    });
    box.dataset.ready = "true";
  }

  function redrawBatch(key) {
    var pts = batchSeries[key] || [];
    var t = pts.map(function (p) { return p[0] / 1000; });
    (batchCharts[key] || []).forEach(function (chart, i) {
      chart.setData([t].concat(BATCH[i].series.map(function (s) {
        return pts.map(function (p) { return p[s.col] == null ? null : p[s.col] / (s.scale || 1); });
      })));
    });
  }

  function width(el) { return Math.max(el.clientWidth - 4, 200); }

  // The x axis of the live charts: one line per tick, the time to the second in the
  // browser's locale. uPlot's default writes the date under the first tick and the
  // minute under each minute's, which on a chart a quarter of the page wide ran into
  // each other ("12/7/26 3:03am3:04am").
  function timeAxis() {
    return {
      space: 70,
      values: function (u, splits) {
        return splits.map(function (v) {
          return new Date(v * 1000).toLocaleTimeString([], { hour: "numeric", minute: "2-digit", second: "2-digit" });
        });
      },
    };
  }

  function makeCharts(box) {
    var key = box.dataset.gpuCharts;
    charts[key] = METRICS.map(function (m) {
      var el = document.createElement("div");
      el.className = "chart";
      box.appendChild(el);
      var opts = {
        width: width(el),
        height: 150,
        cursor: { drag: { x: false, y: false } },
        legend: { live: true },
        scales: { x: { time: true }, y: { range: m.range } },
        series: [{ label: box.dataset.labelTime }, { label: box.dataset[m.label], stroke: m.color, width: 2, fill: m.color + "22",
          value: function (u, v) { return v == null ? "—" : (Math.round(v * 10) / 10).toString(); } }],
        axes: [timeAxis(), { size: 44 }],
      };
      return new uPlot(opts, [[], []], el);
    });
    box.dataset.ready = "true";
  }

  function redraw(key) {
    var pts = series[key] || [];
    var t = pts.map(function (p) { return p[0] / 1000; });
    (charts[key] || []).forEach(function (chart, i) {
      chart.setData([t, pts.map(METRICS[i].value)]);
    });
  }

  function poll(url) {
    fetch(url + "?since=" + oldestNewest(newest) + "&batch_since=" + oldestNewest(batchNewest),
      { headers: { Accept: "application/json" }, credentials: "same-origin" })
      .then(function (r) { if (!r.ok) throw new Error(r.status); return r.json(); })
      .then(function (d) {
        var now = Date.now();
        // GPUs no longer in the answer (their worker stopped) hold the cursor back no more.
        var seen = {}, seenBatch = {};
        (d.gpus || []).forEach(function (g) {
          var pts = series[g.key] || [];
          var last = pts.length ? pts[pts.length - 1][0] : (newest[g.key] || 0);
          g.points.forEach(function (p) {
            if (p[0] > last) { pts.push(p); last = p[0]; }
          });
          while (pts.length && pts[0][0] < now - WINDOW_MS) pts.shift();
          series[g.key] = pts;
          seen[g.key] = last;
          if (charts[g.key]) redraw(g.key);
          var bpts = batchSeries[g.key] || [];
          var blast = bpts.length ? bpts[bpts.length - 1][0] : (batchNewest[g.key] || 0);
          (g.batch || []).forEach(function (p) {
            if (p[0] > blast) { bpts.push(p); blast = p[0]; }
          });
          while (bpts.length && bpts[0][0] < now - WINDOW_MS) bpts.shift();
          batchSeries[g.key] = bpts;
          if (g.batch || batchNewest[g.key] !== undefined) seenBatch[g.key] = blast;
          if (batchCharts[g.key]) redrawBatch(g.key);
        });
        newest = seen;
        batchNewest = seenBatch;
      })
      .catch(function () { /* the next poll tries again */ });
  }

  var boxes = document.querySelectorAll("[data-gpu-charts]");
  document.querySelectorAll("[data-batch-charts]").forEach(makeBatchCharts);
  if (boxes.length) {
    boxes.forEach(makeCharts);
    var samplesURL = boxes[0].dataset.samplesUrl;
    poll(samplesURL);
    var timer = setInterval(function () {
      if (!document.querySelector("[data-gpu-charts]")) { clearInterval(timer); return; }
      poll(samplesURL);
    }, POLL_MS);
    window.addEventListener("resize", function () {
      boxes.forEach(function (box) {
        (charts[box.dataset.gpuCharts] || []).forEach(function (c) {
          c.setSize({ width: width(c.root.parentNode), height: 150 });
        });
      });
      Object.keys(batchCharts).forEach(function (key) {
        batchCharts[key].forEach(function (c) { c.setSize({ width: width(c.root.parentNode), height: 150 }); });
      });
    });
  }

  // A calibration's load test: throughput and average latency by concurrency.
  document.querySelectorAll("[data-calibration-chart]").forEach(function (el) {
    var steps = JSON.parse(el.dataset.calibrationChart || "[]");
    if (!steps.length) return;
    var data = [
      steps.map(function (s) { return s.concurrency; }),
      steps.map(function (s) { return s.throughput; }),
      steps.map(function (s) { return s.avg; }),
    ];
    el.textContent = "";
    new uPlot({
      width: Math.max(el.clientWidth, 300),
      height: 240,
      scales: {
        x: { time: false },
        y: { range: function (u, min, max) { return [0, (max || 1) * 1.15]; } },
        lat: { range: function (u, min, max) { return [0, (max || 1) * 1.15]; } },
      },
      series: [
        { label: el.dataset.labelConcurrency },
        { label: el.dataset.labelThroughput, stroke: "#4f6bed", width: 2, points: { size: 7 } },
        { label: el.dataset.labelLatency, stroke: "#d4812f", width: 2, scale: "lat", points: { size: 7 } },
      ],
      axes: [{ label: el.dataset.labelConcurrency }, { size: 50 }, { scale: "lat", side: 1, grid: { show: false }, size: 50 }],
    }, data, el);
    el.dataset.ready = "true";
  });
})();
