#!/bin/sh
# test_report_cli.sh — `fp16probe report` and `export --chrome-trace` as a user and a CI job meet them
# (the gate's command: tests/test_gate_cli.sh), on sessions written by tests/test_report_fixture: the
# HTML parses (python3 html.parser, with a strict balance check) and holds every chart, CSV files parse
# with the right columns, the trace JSON parses and holds the expected events, bad input gives one
# line, the documented status and no output file; and, where Debian's `chromium` is installed, a
# headless render (a non-blank screenshot, a DOM with the charts) and what a reader sees, measured in
# the page by a script added to a copy (the report itself carries none): no threshold label overlaps
# another or a heatmap's title, every heatmap has a colour scale, a 3000-character configuration JSON
# wraps (no <pre> and not the page scrolls sideways), the page is short with per-layer detail collapsed.
bin="${top_builddir:-.}/fp16probe"
fixture="${top_builddir:-.}/tests/test_report_fixture"
if ! "$bin" report --help >/dev/null 2>&1; then
    echo "1..0 # SKIP fp16probe has no 'report' command"; exit 0
fi
PY=$(command -v python3 || command -v /usr/bin/python3 || true)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/fp16probe-report-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
db="$tmp/runs.db"
"$fixture" "$db" full || { echo "1..0 # SKIP cannot write the fixture"; exit 0; }
n=0; fail=0
ok() { n=$((n + 1)); if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fail=1; fi; }
check() { d=$1; shift; "$@" >/dev/null 2>&1; ok $? "$d"; }
skip() { n=$((n + 1)); echo "ok $n # SKIP $1"; }
# status STATUS WORD COMMAND...: exit status STATUS, exactly one stderr line "fp16probe: ...WORD"
status_line() {
    want=$1; word=$2; shift 2
    "$@" >"$tmp/out" 2>"$tmp/err"; got=$?
    test "$got" -eq "$want" && test "$(wc -l <"$tmp/err")" -eq 1 && grep -q "^fp16probe: .*$word" "$tmp/err"
}
echo "1..24"
check "report --help" sh -c "'$bin' report --help | grep -q 'usage: fp16probe report'"
check "report --html --csv" "$bin" report --db "$db" --html "$tmp/r.html" --csv "$tmp/csv"
check "the HTML and five CSV files exist, nothing else" \
    sh -c "test -s '$tmp/r.html' && test \$(ls '$tmp/csv' | wc -l) -eq 6 && test \$(ls -A '$tmp' | wc -l) -eq 3"

if [ -n "$PY" ]; then
    cat >"$tmp/html_check.py" <<'EOF'
import sys
from html.parser import HTMLParser
VOID = {"meta", "br", "hr", "img", "input", "link", "col", "area", "base", "wbr", "source", "track"}
SVG_SELF = {"rect", "line", "circle", "path", "polyline", "polygon"}
class P(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack, self.errors, self.ids, self.figs, self.svgs, self.scripts = [], [], set(), 0, 0, 0
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a: self.ids.add(a["id"])
        if tag == "script": self.scripts += 1
        if tag == "figure": self.figs += 1
        if tag == "svg": self.svgs += 1
        for k, v in attrs:
            if k in ("src", "href") and v and not v.startswith("#"): self.errors.append("external %s=%s" % (k, v))
        if tag not in VOID: self.stack.append(tag)
    def handle_startendtag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a: self.ids.add(a["id"])
    def handle_endtag(self, tag):
        if tag in VOID: return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append("unbalanced </%s> at %s (open: %s)" % (tag, self.getpos(), self.stack[-3:]))
            if tag in self.stack:
                while self.stack and self.stack.pop() != tag: pass
        else:
            self.stack.pop()
p = P()
p.feed(open(sys.argv[1], encoding="utf-8").read()); p.close()
want = ["chart-loss", "chart-accuracy", "chart-throughput", "chart-speedup", "chart-loss-scale",
        "chart-layer-speedup-1", "chart-precision-error", "summary-table", "layer-table", "kernels-1",
        "env-0", "env-1"] + ["heatmap-%d-%s" % (a, r) for a in (0, 1)
        for r in ("activation", "activation_grad", "weight", "weight_grad", "update")]
missing = [w for w in want if w not in p.ids]
if p.stack: p.errors.append("unclosed: %s" % p.stack)
if missing: p.errors.append("missing ids: %s" % missing)
if p.scripts: p.errors.append("%d script elements" % p.scripts)
if p.figs != p.svgs or p.figs < 17: p.errors.append("figures %d, svgs %d" % (p.figs, p.svgs))
print("\n".join(p.errors)); sys.exit(1 if p.errors else 0)
EOF
    "$PY" "$tmp/html_check.py" "$tmp/r.html" >"$tmp/html.out" 2>&1; r=$?
    [ $r -eq 0 ] || sed 's/^/# /' "$tmp/html.out" | head -5
    ok $r "the HTML parses (html.parser), tags balance, every chart present, no script, no external resource"
    cat >"$tmp/csv_check.py" <<'EOF'
import csv, sys
d = sys.argv[1]
want = {"summary": ["arm", "run", "policy", "reference", "status", "steps", "warmup", "median_step_ns", "speedup"],
        "steps": ["arm", "run", "step", "loss", "loss_scale", "skipped", "lr", "wall_ns", "samples_per_s",
                  "mem_current", "mem_peak", "energy_j", "power_w"],
        "layers": ["arm", "run", "layer", "name", "type", "forward_ns", "backward_data_ns", "backward_weights_ns",
                   "total_ns", "share", "speedup", "format", "overflow", "underflow", "nonfinite"],
        "histograms": ["arm", "run", "step", "layer", "name", "role", "count", "zero", "nan", "inf", "amax"],
        "kernels": ["arm", "run", "time_pct", "total_ns", "instances", "avg_ns", "med_ns", "min_ns", "max_ns",
                    "stddev_ns", "tensor_core", "name"]}
rows_expected = {"summary": 2, "steps": 600, "layers": 252, "histograms": 2 * 126 * 5}
bad = []
for view, cols in want.items():
    raw = open("%s/%s.csv" % (d, view), "rb").read()
    if b"\n" in raw.replace(b"\r\n", b"") and view != "kernels": bad.append("%s: bare LF" % view)
    rows = list(csv.reader(open("%s/%s.csv" % (d, view), newline="", encoding="utf-8"), strict=True))
    if rows[0][:len(cols)] != cols: bad.append("%s header %s" % (view, rows[0]))
    if any(len(r) != len(rows[0]) for r in rows): bad.append("%s: ragged rows" % view)
    if view in rows_expected and len(rows) - 1 != rows_expected[view]:
        bad.append("%s: %d rows" % (view, len(rows) - 1))
    if view == "kernels" and not any("<script>alert(1)</script>" in r[-1] for r in rows): bad.append("hostile name lost")
print("\n".join(bad)); sys.exit(1 if bad else 0)
EOF
    "$PY" "$tmp/csv_check.py" "$tmp/csv" >"$tmp/csv.out" 2>&1; r=$?
    [ $r -eq 0 ] || sed 's/^/# /' "$tmp/csv.out" | head -5
    ok $r "CSV files parse (python csv, strict) with the right columns and row counts"
else
    skip "python3 not found: HTML parse"; skip "python3 not found: CSV parse"
fi

check "export --chrome-trace" "$bin" export --db "$db" --chrome-trace "$tmp/t.json"
if [ -n "$PY" ]; then
    cat >"$tmp/trace_check.py" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1], encoding="utf-8"))
ev = d["traceEvents"]; bad = []
procs = {e["pid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
if len(procs) != 2: bad.append("processes %s" % procs)
for cat in ("step", "layer", "kernel"):
    xs = [e for e in ev if e["ph"] == "X" and e.get("cat") == cat]
    if not xs: bad.append("no %s events" % cat)
    if any(e["dur"] < 0 or e["ts"] < 0 or e["pid"] not in procs for e in xs): bad.append("bad %s event" % cat)
counters = {e["name"] for e in ev if e["ph"] == "C"}
for c in ("loss", "step time (ms)", "loss scale"):
    if c not in counters: bad.append("no counter %s" % c)
if not any("<script>alert(1)</script>" in e.get("name", "") for e in ev): bad.append("hostile kernel name lost")
if not any(e["ph"] == "M" and e["name"] == "thread_name" and e["args"]["name"] == "stream 7" for e in ev):
    bad.append("no stream thread names")
print("\n".join(bad)); sys.exit(1 if bad else 0)
EOF
    "$PY" "$tmp/trace_check.py" "$tmp/t.json" >"$tmp/trace.out" 2>&1; r=$?
    [ $r -eq 0 ] || sed 's/^/# /' "$tmp/trace.out" | head -5
    ok $r "the trace JSON parses: one process per arm, step/layer/kernel X events, loss/step time/loss scale counters"
else
    skip "python3 not found: trace parse"
fi

# ---- host CPU per step (issue 22): a session of known rows (test_report_fixture's hostcpu mode says which)
"$fixture" "$tmp/host.db" hostcpu && "$bin" report --db "$tmp/host.db" --csv "$tmp/hcsv" --html "$tmp/h.html" >/dev/null 2>&1
if [ -n "$PY" ]; then
    "$PY" - "$tmp/hcsv/summary.csv" "$tmp/csv/summary.csv" >"$tmp/host.out" 2>&1 <<'EOF'
import csv, sys
rows = {r["arm"]: r for r in csv.DictReader(open(sys.argv[1], newline="", encoding="utf-8"), strict=True)}
full = list(csv.DictReader(open(sys.argv[2], newline="", encoding="utf-8"), strict=True))
want = {"fp32": ("8", "0.8", "10000000"), "fp16": ("2.6", "0.52", "5000000"), "bf16": ("", "", "6000000")}
bad = []
for arm, (ms, share, step) in want.items():
    r = rows.get(arm, {})
    got = (r.get("host_cpu_ms_per_step"), r.get("host_cpu_share"), r.get("median_step_ns"))
    if got != (ms, share, step): bad.append("%s: %s, want %s" % (arm, got, (ms, share, step)))
# the full fixture records no host CPU (as a file from before schema version 6): the columns are there, empty
if not full or any(r.get("host_cpu_ms_per_step", "x") != "" or r.get("host_cpu_share", "x") != "" for r in full):
    bad.append("full fixture: %s" % [(r.get("host_cpu_ms_per_step"), r.get("host_cpu_share")) for r in full])
print("\n".join(bad)); sys.exit(1 if bad else 0)
EOF
    r=$?; [ $r -eq 0 ] || sed 's/^/# /' "$tmp/host.out" | head -5
    ok $r "summary.csv: host_cpu_ms_per_step and host_cpu_share, medians over the timed steps, empty where not recorded"
else
    skip "python3 not found: host CPU in summary.csv"
fi
check "report --summary and the HTML: host CPU per step per arm, said what it holds" sh -c "
    '$bin' report --db '$tmp/host.db' --summary >'$tmp/host.txt' &&
    grep -q 'fp32 *8 ms (80.00% of the step); CPU backend: includes the training thread' '$tmp/host.txt' &&
    grep -q 'fp16 *2.6 ms (52.00% of the step); GPU: ' '$tmp/host.txt' && grep -q 'bf16 *n/a (not recorded)' '$tmp/host.txt' &&
    grep -q '<th>host CPU / step (training thread)</th><td class=\"n\">8 ms (80.00% of the step)' '$tmp/h.html' &&
    grep -q 'On the CPU backend it includes the compute the training thread does itself' '$tmp/h.html'"

# ---- bad input: one line, the documented status, no output left behind
"$fixture" "$tmp/empty.db" empty
check "report: a missing session: status 1, one line" status_line 1 "no session 9" "$bin" report --db "$db" --session 9 --html "$tmp/x.html"
check "report: an empty session: status 1, one line" status_line 1 "empty" "$bin" report --db "$tmp/empty.db" --html "$tmp/x.html"
check "report: an unwritable output path: status 1, one line" status_line 1 "cannot write" "$bin" report --db "$db" --html "$tmp/no/dir/x.html"
check "report: no output file left behind by the failures" sh -c "test ! -e '$tmp/x.html' && test ! -e '$tmp/no' && test -z \"\$(ls -A '$tmp' | grep '^\\.')\""
check "report: a database that is not there: status 1" status_line 1 "missing.db" "$bin" report --db "$tmp/missing.db" --html "$tmp/x.html"
check "report without --html/--csv: status 2" status_line 2 "nothing to write" "$bin" report --db "$db"
check "report --session abc: status 2" status_line 2 "abc" "$bin" report --db "$db" --session abc --html "$tmp/x.html"
check "export --chrome-trace to an unwritable path: status 1, no file" \
    sh -c "! '$bin' export --db '$db' --chrome-trace '$tmp/no/t.json' 2>/dev/null && test ! -e '$tmp/no'"
check "export --chrome-trace on a missing session: status 1" status_line 1 "no session 5" "$bin" export --db "$db" --session 5 --chrome-trace "$tmp/t2.json"

# ---- headless Chromium (Debian package `chromium`): optional
CHROME=$(command -v chromium || command -v chromium-browser || true)
chrome_started=0
if [ -n "$CHROME" ] && [ -n "$PY" ]; then
    # A browser that cannot start at all in this environment (no /dev/shm, missing libraries) is a
    # skip with its reason; once it runs, a blank screenshot or a DOM without the charts is a failure.
    "$CHROME" --headless --no-sandbox --disable-gpu --window-size=1280,4000 --screenshot="$tmp/shot.png" \
        "file://$tmp/r.html" >/dev/null 2>"$tmp/chrome.err" && [ -s "$tmp/shot.png" ] && chrome_started=1
fi
if [ "$chrome_started" -eq 1 ]; then
    "$PY" -c "
import sys, zlib, struct
b = open('$tmp/shot.png', 'rb').read(); assert b[:8] == b'\x89PNG\r\n\x1a\n'
pos, idat = 8, b''
while pos < len(b):
    n, t = struct.unpack('>I4s', b[pos:pos + 8]); idat += b[pos + 8:pos + 8 + n] if t == b'IDAT' else b''; pos += 12 + n
raw = zlib.decompress(idat)
sys.exit(0 if len(set(raw[i:i + 3] for i in range(1, min(len(raw), 4000000), 997))) > 8 else 1)" 2>/dev/null
    ok $? "headless chromium: the screenshot is not blank"
    "$CHROME" --headless --no-sandbox --disable-gpu --dump-dom "file://$tmp/r.html" 2>/dev/null >"$tmp/dom.html"
    check "headless chromium: the DOM holds the charts" sh -c "grep -q 'id=\"chart-loss\"' '$tmp/dom.html' && test \$(grep -o '<svg' '$tmp/dom.html' | wc -l) -ge 17"
    # The session with a 3000-character, space-free configuration (a weights path) in every run and the
    # session, as a user's long --weights path gives.
    "$PY" - "$db" "$tmp/long.db" <<'EOF'
import sqlite3, sys
src = sqlite3.connect(sys.argv[1]); dst = sqlite3.connect(sys.argv[2]); src.backup(dst); src.close()
tok = "/data/" + "w" * 3000 + ".safetensors"
dst.execute("UPDATE runs SET config = ?", ('{"weights":"%s","model":"resnet50"}' % tok,))
dst.execute("UPDATE sessions SET config = ?", ('{"weights":"%s"}' % tok,))
dst.commit(); dst.close()
EOF
    "$bin" report --db "$tmp/long.db" --html "$tmp/long.html" 2>"$tmp/long.err"
    # A copy with the measuring script: the CSP meta (no script allowed) dropped, the script at the end
    # of <body>. It measures the page as it opens (details closed), then opens every <details> and
    # measures label boxes and widths with everything shown.
    cat >"$tmp/measure.js" <<'EOF'
(function () {
  var out = {}, de = document.documentElement;
  out.height = Math.round(de.scrollHeight);
  function top(id) { var e = document.getElementById(id); return e ? Math.round(e.getBoundingClientRect().top + window.scrollY) : -1; }
  out.top_numerics = top('numerics'); out.top_precision = top('precision');
  var ds = document.querySelectorAll('details'); out.details = ds.length;
  for (var i = 0; i < ds.length; i++) ds[i].open = true;
  out.height_open = Math.round(de.scrollHeight);
  out.viewport = window.innerWidth; out.page_width = de.scrollWidth;
  out.wide_pres = [];
  var pres = document.querySelectorAll('pre');
  for (var i = 0; i < pres.length; i++)
    if (pres[i].scrollWidth > pres[i].clientWidth + 1) out.wide_pres.push((pres[i].id || 'pre ' + i) + ' ' + pres[i].scrollWidth + ' > ' + pres[i].clientWidth);
  out.pres = pres.length;
  function meet(a, b) { return a.left < b.right - 0.5 && b.left < a.right - 0.5 && a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5; }
  out.overlaps = []; out.labels = 0; out.unseen = 0; out.heatmaps = 0; out.scales = 0;
  var figs = document.querySelectorAll('figure[id^="heatmap-"]');
  for (var i = 0; i < figs.length; i++) {
    out.heatmaps++;
    var svg = figs[i].querySelector('svg'), title = svg.querySelector('text[font-weight="bold"]');
    var texts = svg.querySelectorAll('text'), labs = [];
    for (var k = 0; k < texts.length; k++) if (/(min subnormal|min normal|max)$/.test(texts[k].textContent)) labs.push(texts[k]);
    out.labels += labs.length;
    var tb = title.getBoundingClientRect();
    for (var k = 0; k < labs.length; k++) {
      var a = labs[k].getBoundingClientRect();
      if (a.width < 1) out.unseen++;
      if (meet(a, tb)) out.overlaps.push(figs[i].id + ': ' + labs[k].textContent + ' / the title');
      for (var j = k + 1; j < labs.length; j++)
        if (meet(a, labs[j].getBoundingClientRect())) out.overlaps.push(figs[i].id + ': ' + labs[k].textContent + ' / ' + labs[j].textContent);
    }
    if (svg.querySelector('.colour-scale rect')) out.scales++;
  }
  var p = document.createElement('pre'); p.id = 'fp-measured';
  p.textContent = 'MEASURED' + JSON.stringify(out) + 'MEASURED'; document.body.appendChild(p);
})();
EOF
    "$PY" - "$tmp/long.html" "$tmp/measure.js" "$tmp/measure.html" <<'EOF'
import re, sys
h = open(sys.argv[1], encoding="utf-8").read()
h = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", h)
h = h.replace("</body>", "<script>" + open(sys.argv[2]).read() + "</script></body>")
open(sys.argv[3], "w", encoding="utf-8").write(h)
EOF
    "$CHROME" --headless --no-sandbox --disable-gpu --window-size=1280,1000 --dump-dom "file://$tmp/measure.html" \
        2>/dev/null >"$tmp/measured.html"
    # measured EXPR: EXPR (python, over the measured dict m) holds; prints the figures as a comment
    measured() {
        "$PY" - "$tmp/measured.html" "$1" <<'EOF'
import json, re, sys
t = open(sys.argv[1], encoding="utf-8").read()
f = re.search(r"MEASURED(\{.*?\})MEASURED", t, re.S)
if not f: print("# no measurement in the page"); sys.exit(1)
m = json.loads(f.group(1))
ok = eval(sys.argv[2], {}, {"m": m})
print("# " + json.dumps({k: (v[:4] if isinstance(v, list) else v) for k, v in m.items()}))
sys.exit(0 if ok else 1)
EOF
    }
    measured 'm["heatmaps"] >= 10 and m["labels"] > 0 and m["unseen"] == 0 and not m["overlaps"]' >"$tmp/m1" 2>&1
    r=$?; [ $r -eq 0 ] || cat "$tmp/m1"
    ok $r "headless chromium: no threshold label overlaps another or its heatmap's title (every label shown)"
    measured 'm["heatmaps"] >= 10 and m["scales"] == m["heatmaps"]' >"$tmp/m2" 2>&1
    r=$?; [ $r -eq 0 ] || cat "$tmp/m2"
    ok $r "headless chromium: every heatmap has a colour scale"
    measured 'm["pres"] >= 3 and not m["wide_pres"] and m["page_width"] <= m["viewport"]' >"$tmp/m3" 2>&1
    r=$?; [ $r -eq 0 ] || cat "$tmp/m3"
    ok $r "headless chromium: a 3000-character configuration JSON wraps: no <pre> nor the page scrolls sideways"
    # The page as it opens: ~20,000 px before with ten heatmaps; the summary, training, layers and numerics
    # overview within the first 4,500 px, the whole page under 7,000 px (at 1280 px wide).
    measured 'm["details"] >= 3 and m["top_precision"] <= 4500 and m["height"] <= 7000 and m["height_open"] > 2 * m["height"]' \
        >"$tmp/m4" 2>&1
    r=$?; cat "$tmp/m4"
    ok $r "headless chromium: the page is short, per-layer detail collapsed in <details>"
else
    if [ -z "$CHROME" ] || [ -z "$PY" ]; then
        why="chromium or python3 not installed (Debian packages 'chromium', 'python3')"
    else
        why="chromium could not start here: $(grep -v '^$' "$tmp/chrome.err" | tail -1 | cut -c1-120)"
    fi
    skip "$why: headless render"
    skip "$why: rendered DOM"
    skip "$why: threshold labels"
    skip "$why: colour scales"
    skip "$why: configuration JSON wraps"
    skip "$why: page height"
fi
exit $fail
