#!/bin/sh
# test_gate_readme.sh — README's GitHub Actions example (section `## CI gate`) runs what the quick start
# builds: its build step is the quick start's `./tools/setup`, which builds ./build/fp16probe, and every
# later step runs ./build/fp16probe (no second build, no ./fp16probe). Then the job's `run:` commands are
# executed in order, as GitHub would for a push to main and then a pull request (their `if:`
# conditions evaluated, the cache save / restore done by copying), in a scratch checkout whose
# tools/setup links this build's binary to ./build/fp16probe (building again would take minutes) and
# with the recording's `resnet50 --no-tui --steps 600` run as tinynet at 32x32 (seconds): the baseline
# is kept on main, the pull request is gated against it (comparable: exit 0, 1 or 2, never 3 or 4) and
# the gate's JUnit, Markdown and JSON and the report are written. Needs python3 (skips without).
bin="${top_builddir:-.}/fp16probe"
src="${top_srcdir:-$(dirname "$0")/..}"
case $bin in /*) ;; *) bin="$(pwd)/$bin" ;; esac
case $src in /*) ;; *) src="$(pwd)/$src" ;; esac
. "$(dirname "$0")/tap.sh"
unset GITHUB_ACTIONS GITHUB_STEP_SUMMARY   # a CI run of these tests is not the gate's CI job
PY=$(command -v python3 || true)
if [ -z "$PY" ]; then echo "1..0 # SKIP python3 not found"; exit 0; fi
if ! "$bin" gate --help >/dev/null 2>&1; then echo "1..0 # SKIP fp16probe has no 'gate' command"; exit 0; fi
tap_workdir gate-readme
cat >job.py <<'EOF'
import json, os, re, shutil, subprocess, sys
readme, setup, binary = sys.argv[1], sys.argv[2], sys.argv[3]
text = open(readme).read()
sec = text[text.index("\n## CI gate"):]
block = sec[sec.index("```yaml\n") + 8:]
block = block[:block.index("```")]
steps, cur, in_run = [], None, None
for line in block.split("\n"):
    m = re.match(r"^      - (.*)$", line)
    if m:
        cur = {}; steps.append(cur); line = "        " + m.group(1); in_run = None
    if cur is None:
        continue
    if in_run is not None:
        if line.startswith("          "):
            cur["run"] += line[10:] + "\n"; continue
        in_run = None
    m = re.match(r"^        ([a-z-]+): ?(.*)$", line)
    if m:
        k, v = m.group(1), m.group(2)
        if k == "run" and v == "|":
            cur["run"] = ""; in_run = True
        else:
            cur[k] = v
runs = [s for s in steps if "run" in s]
quick = re.search(r"```sh\n(\./tools/setup) && (\./build/fp16probe) resnet50", text)
res = {"steps": len(steps), "runs": [s["run"] for s in runs]}
res["first_is_setup"] = bool(quick) and runs[0]["run"].strip() == quick.group(1)
setup_text = open(setup).read()
res["setup_builds_build"] = "mkdir -p build" in setup_text and "cd build" in setup_text and "built $(pwd)/fp16probe" in setup_text
later = "\n".join(s["run"] for s in runs[1:])
res["later_use_build"] = "fp16probe" in later and all(
    m.group(1) == "./build/" for m in re.finditer(r"(\S*?)fp16probe\b", later))
res["no_second_build"] = not re.search(r"(^|[;&|\s])(\./configure|make)\b", later)

def cond(expr, event):
    if not expr:
        return True
    if expr == "always()":
        return True
    if expr == "github.ref == 'refs/heads/main'":
        return event == "push"
    if expr == "github.event_name == 'pull_request'":
        return event == "pull_request"
    raise SystemExit("unknown condition " + expr)

os.makedirs("checkout/tools"); os.makedirs("cache")
with open("checkout/tools/setup", "w") as f:
    f.write("#!/bin/sh\n# stands in for tools/setup: this test's build is the one it would make\n"
            "mkdir -p build && ln -sf '%s' build/fp16probe\n" % binary)
os.chmod("checkout/tools/setup", 0o755)
log = {}
for event in ("push", "pull_request"):
    for name in ("run.db", "gate.xml", "gate.md", "gate.json", "report.html"):
        if os.path.exists("checkout/" + name): os.remove("checkout/" + name)
    failed = False
    for s in steps:
        if not cond(s.get("if", ""), event) or (failed and s.get("if") != "always()"):
            continue
        uses = s.get("uses", "")
        if uses.startswith("actions/cache/save"):
            shutil.copy("checkout/baseline.db", "cache/baseline.db"); continue
        if uses.startswith("actions/cache/restore"):
            if os.path.exists("cache/baseline.db"): shutil.copy("cache/baseline.db", "checkout/baseline.db")
            continue
        if "run" not in s:
            continue
        cmd = s["run"].replace("resnet50 --no-tui --steps 600",
                               "tinynet --image-size 32 --batch 8 --steps 60 --threads 1 --no-tui")
        r = subprocess.run(["sh", "-e", "-c", cmd], cwd="checkout", capture_output=True, text=True)
        log["%s: %s" % (event, s.get("name", cmd.split()[0]))] = r.returncode
        if r.returncode:
            failed = True
            sys.stderr.write("%s: %s: exit %d\n%s%s" % (event, cmd, r.returncode, r.stdout[-2000:], r.stderr[-2000:]))
    res[event] = {"baseline": os.path.exists("checkout/baseline.db"),
                  "outputs": [n for n in ("gate.xml", "gate.md", "gate.json", "report.html", "report/summary.csv")
                              if os.path.exists("checkout/" + n)]}
res["log"] = log
json.dump(res, open("result.json", "w"), indent=1)
EOF
"$PY" job.py "$src/README.md" "$src/tools/setup" "$bin" 2>job.err
rc=$?
[ $rc -eq 0 ] || sed 's/^/# /' job.err | head -20
q() { "$PY" -c "import json, sys; r = json.load(open('result.json')); sys.exit(0 if ($1) else 1)"; }
echo "1..9"
check "the example's job parses (steps with run: commands)" q "len(r['runs']) >= 5"
check "its build step is the quick start's ./tools/setup" q "r['first_is_setup']"
check "tools/setup builds ./build/fp16probe" q "r['setup_builds_build']"
check "every later step runs ./build/fp16probe" q "r['later_use_build']"
check "no step builds a second time (./configure, make)" q "r['no_second_build']"
check "a push to main records and keeps the baseline" q "r['push']['baseline'] and all(v == 0 for k, v in r['log'].items() if k.startswith('push'))"
check "the pull request records and gates against it: exit 0, 1 or 2 (comparable)" \
    q "r['log'].get('pull_request: gate', 9) in (0, 1, 2)"
check "the gate's JUnit, Markdown and JSON are written" q "set(['gate.xml', 'gate.md', 'gate.json']) <= set(r['pull_request']['outputs'])"
check "the report step writes report.html and report/" q "set(['report.html', 'report/summary.csv']) <= set(r['pull_request']['outputs'])"
exit $fail
