#!/usr/bin/env python3
# gpu_check_figures.py ON.db OFF.db WARMUP — the GPU check's figures read from its databases: per arm the CUPTI
# kernel rows and the share of kernel time attributed to a layer and phase (library kernels apart), NVML energy
# per step, the top kernels, how much of a traced step the GPU was busy; and the fp16 probe overhead as a user
# pays it at the default sampling interval (traced steps left out of it: tracing is a choice of its own; the
# parameter pass on the GPU, outside the step's time, added from its events); per
# policy the host CPU time per step (steps.host_cpu_ns, schema version 6: the training thread's CPU time; nan
# from a database without it); per arm the fused batchnorm chains (its fusion event, where fusion was on).
import os, re, sqlite3, statistics as st, sys
on = sqlite3.connect(sys.argv[1]); warm = int(sys.argv[3])
q = lambda db, s, *a: db.execute(s, a).fetchall()
has_host_cpu = any(c[1] == "host_cpu_ns" for c in q(on, "PRAGMA table_info(steps)"))
for run, pol in q(on, "SELECT id, policy FROM runs ORDER BY id"):
    k = q(on, "SELECT COUNT(*), SUM(end - start), SUM(CASE WHEN layer IS NOT NULL AND phase IS NOT NULL THEN end - start END), "
              "COUNT(DISTINCT step) FROM kernels WHERE run = ?", run)[0]
    lib = q(on, "SELECT COUNT(*), COUNT(CASE WHEN layer IS NOT NULL AND phase IS NOT NULL THEN 1 END) FROM kernels k "
                "JOIN StringIds s ON s.id = k.shortName WHERE run = ? AND (s.value LIKE '%cudnn%' OR s.value LIKE '%xmma%' "
                "OR s.value LIKE '%sm90%' OR s.value LIKE '%nhwc%' OR s.value LIKE '%gemm%' OR s.value LIKE '%nvjet%' "
                "OR s.value LIKE '%cutlass%')", run)[0]
    e = q(on, "SELECT COUNT(energy_j), AVG(energy_j) FROM steps WHERE run = ? AND step > ?", run, warm)[0]
    share = 100.0 * (k[2] or 0) / k[1] if k[1] else float("nan")
    print(f"cupti[{pol}]: {k[0]} kernel rows on {k[3]} traced step(s), {share:.1f}% of kernel time with layer and phase; "
          f"library kernels (cuDNN / cuBLAS names) attributed {lib[1]} of {lib[0]}; "
          f"nvml: energy on {e[0]} steps after warm-up, mean {e[1] if e[1] is None else round(e[1], 2)} J/step")
    top = q(on, "SELECT s.value, COUNT(*), SUM(k.end - k.start) FROM kernels k JOIN StringIds s ON s.id = k.shortName "
                "WHERE run = ? GROUP BY s.value ORDER BY 3 DESC LIMIT 3", run)
    busy = q(on, "SELECT k.step, SUM(k.end - k.start), MAX(k.end) - MIN(k.start), s.wall_ns FROM kernels k JOIN steps s "
                 "ON s.run = k.run AND s.step = k.step WHERE k.run = ? GROUP BY k.step ORDER BY k.step DESC LIMIT 1", run)
    for step, ksum, span, wall in busy:
        print(f"   gpu busy[{pol}] step {step}: kernels {ksum / 1e6:.1f} ms (first to last {span / 1e6:.1f} ms) of a "
              f"{wall / 1e6:.1f} ms step: {100.0 * ksum / wall:.0f}% of the step on the GPU")
    for name, n, ns in top:
        print(f"   top kernel[{pol}]: {ns / 1e6:.1f} ms in {n} launches: {name[:100]}")
# Fusion (trainer/model_fuse.c): each arm's event saying how many batchnorm -> (add ->) relu chains ran fused.
for run, pol in q(on, "SELECT id, policy FROM runs ORDER BY id"):
    for (text,) in q(on, "SELECT text FROM events WHERE run = ? AND kind = 'info' AND text LIKE 'fusion:%'", run):
        print(f"fusion[{pol}]: {text[len('fusion: '):]}")
# Host CPU per step (issue 22): the training thread's CPU time, median over the unskipped steps after warm-up that
# recorded it, and its median share of the step's wall time; on a GPU arm the host's own work per step (the wait
# for the device sleeps on a blocking-sync event: docs/schema.md). The goal: the GPU, not the host, sets the pace.
for run, pol in q(on, "SELECT id, policy FROM runs ORDER BY id"):
    rows = q(on, "SELECT host_cpu_ns, wall_ns FROM steps WHERE run = ? AND step > ? AND skipped = 0 AND "
                 "host_cpu_ns > 0 AND wall_ns > 0", run, warm) if has_host_cpu else []
    if rows:
        ms = st.median(h for h, _ in rows) / 1e6
        share = st.median(h / w for h, w in rows)
        print(f"bench: name=resnet50_{pol}_host_cpu_ms_per_step value={ms:.3f} unit=ms (the training thread's CPU time, "
              f"median of {len(rows)} steps after warm-up; {100.0 * share:.1f}% of the step's wall time)")
    else:
        why = "no steps after warm-up recorded it" if has_host_cpu else "a database from before schema version 6"
        print(f"bench: name=resnet50_{pol}_host_cpu_ms_per_step value=nan unit=ms (not recorded: {why})")
# How each GPU arm's batches reached the device (trainer/cuda/upload.c's paths: prefetched during the step before,
# direct DMA from the page-locked ring, staged, plain, the CUDA graph's slots), the run's closing info event.
for run, pol in q(on, "SELECT id, policy FROM runs ORDER BY id"):
    for (text,) in q(on, "SELECT text FROM events WHERE run = ? AND kind = 'info' AND text LIKE 'GPU uploads%' "
                         "ORDER BY id DESC LIMIT 1", run):
        print(f"uploads[{pol}]: {text}")
def fp16_walls(db):
    r = q(db, "SELECT id FROM runs WHERE policy = 'fp16' ORDER BY id LIMIT 1")
    if not r:
        return set(), {}
    run = r[0][0]
    sampled = {s for (s,) in q(db, "SELECT DISTINCT step FROM histograms WHERE run = ? UNION SELECT DISTINCT step FROM "
                                   "precision_error WHERE run = ?", run, run)}
    traced = {s for (s,) in q(db, "SELECT DISTINCT step FROM kernels WHERE run = ?", run)}
    return sampled, {s: w for s, w in q(db, "SELECT step, wall_ns FROM steps WHERE run = ? AND step > ?", run, warm)
                     if s not in traced or s in sampled}
# The parameter pass on the GPU (weights, updates, lost updates at the histogram steps: trainer/analysis/
# param_pass_device.c) runs after the step, outside steps.wall_ns: its time comes from the run's "lost updates at
# step N" events ("the parameter pass on the GPU took X ms outside the step"); none: on the host (the run's info
# event says why) or no sampled step.
pass_re = re.compile(r"the parameter pass on the GPU took ([0-9.]+) ms")
def pass_ms(db, pol):
    return [float(m.group(1)) for (t,) in q(db, "SELECT e.text FROM events e JOIN runs r ON r.id = e.run WHERE "
                                              "r.policy = ? AND e.text LIKE 'lost updates at step%'", pol)
            for m in [pass_re.search(t or "")] if m]
for (pol,) in q(on, "SELECT DISTINCT policy FROM runs ORDER BY id"):
    ms = pass_ms(on, pol)
    if ms:
        print(f"bench: name=resnet50_{pol}_param_pass_ms value={st.mean(ms):.2f} unit=ms (the parameter pass on the GPU "
              f"after a sampled step, outside the step's time; mean of {len(ms)})")
    else:
        print(f"bench: name=resnet50_{pol}_param_pass_ms value=nan unit=ms (no timed pass on the GPU: on the host, see "
              f"the run's info event, or no sampled step)")
s_on, w_on = fp16_walls(on)
s_off, w_off = fp16_walls(sqlite3.connect(sys.argv[2])) if os.path.exists(sys.argv[2]) else (set(), {})
plain_on = [w for s, w in w_on.items() if s not in s_on]
samp_on = [w for s, w in w_on.items() if s in s_on]
if plain_on and w_off:
    m_on, m_off = st.median(plain_on), st.median(w_off.values())
    extra = (st.mean(samp_on) - m_on) if samp_on else 0.0
    p16 = pass_ms(on, "fp16")
    pass_ns = st.mean(p16) * 1e6 if p16 else 0.0   # outside the step's wall time: added here
    every = 50   # the --hist-every / --error-every default
    ovh = 100.0 * (m_on + (extra + pass_ns) / every - m_off) / m_off
    print(f"bench: name=resnet50_fp16_probe_overhead value={ovh:.2f} unit=percent (at the default every {every} steps: "
          f"a sampled step +{extra / 1e6:.0f} ms in the step, mean of {len(samp_on)}, "
          f"+{pass_ns / 1e6:.1f} ms parameter pass on the GPU after it{'' if p16 else ' (none timed)'}; the steps between "
          f"{100.0 * (m_on - m_off) / m_off:+.2f}%: median {m_on / 1e6:.1f} ms of {len(plain_on)} vs {m_off / 1e6:.1f} ms "
          f"of {len(w_off)} with the probes off)")
else:
    print("bench: name=resnet50_fp16_probe_overhead value=nan (a run did not finish)")
