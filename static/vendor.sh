#!/usr/bin/env bash
# Copies the pinned front-end libraries from node_modules into static/vendor, the only
# place the app loads them from (embedded in the binary; no CDN). Run by `make vendor`
# after `npm ci`; the result is committed so builds need no network.
set -euo pipefail
cd "$(dirname "$0")/.."
v=static/vendor
rm -rf "$v" && mkdir -p "$v"
cp node_modules/htmx.org/dist/htmx.min.js "$v/htmx.min.js"
cp node_modules/htmx-ext-sse/dist/sse.min.js "$v/htmx-ext-sse.min.js"
cp node_modules/wavesurfer.js/dist/wavesurfer.min.js "$v/wavesurfer.min.js"
cp node_modules/wavesurfer.js/dist/plugins/regions.min.js "$v/wavesurfer-regions.min.js"
cp node_modules/uplot/dist/uPlot.iife.min.js "$v/uplot.min.js"
cp node_modules/uplot/dist/uPlot.min.css "$v/uplot.min.css"
node -e '
const p = require("./package.json");
const out = Object.keys(p.dependencies).map(n => n + " " + require("./node_modules/" + n + "/package.json").version + " (" + require("./node_modules/" + n + "/package.json").license + ")");
require("fs").writeFileSync("static/vendor/VERSIONS", out.join("\n") + "\n");'
cat "$v/VERSIONS"
