"""Scoring at scale on this machine: one process, 1 and 2 Ray actors, and the rank-sharded helper against rank 0.

    python -m benchmarks.speed.ray_throughput                    # 1,000 ROC test stories, union's roc, in one run
    python -m benchmarks.speed.ray_throughput --stories 200 --rounds 1 --skip-int8 --skip-ranks

Every measurement scores the same ROC test stories with ``union``'s ``roc`` (MiniLM), each process or actor
on one torch thread unless named otherwise, in ``--rounds`` rounds whose order alternates (ABBA, so that a
change in the machine's load falls on every measurement alike); the medians are reported:

* one process (a fresh one, torch at 1 and at 2 threads): stories/s once warm, peak RSS;
* ``storyeval.score_dataset`` on a local Ray cluster of 2 CPUs with 1 and with 2 actors: the job's wall time
  from the call to the last row, the time until the first batch starts (actor start and checkpoint load),
  stories/s from the first batch's start to the last batch's end, each actor's peak RSS, and the largest
  difference from one process's scores;
* int8 on 2 actors, against one process scoring the same batches (int8 scores depend on which stories share
  a call; float32 ones do not, to 1e-6) and the whole list in one call;
* ``storyeval.score_by_rank`` under torchrun with 2 CPU processes against evaluate's own path, where rank 0
  scores every rank's stories (``num_process`` / ``process_id``), timed in the same launch;
* a projection of the time and cost to score 10M ROC-length stories on N 2-core nodes, from the 2-actor rate,
  with its arithmetic, and the rate at which one process writes the rows as Parquet (what caps
  ``storyeval score-shards``, whose rows come back through its process).

The machine's load (``os.getloadavg``) and its busiest other processes are recorded with the figures: on a
2-core machine that something else is using, 2 actors cannot reach twice one actor's rate.
Results go to benchmarks/results/ray_throughput.json.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import CHECKOUT, machine, results_name, write_results
from storyeval.analysis.ray_data import StoryScorer

TEN_MILLION = 10_000_000
# an assumption, not a measurement: an on-demand 2-vCPU cloud node of the c6a.large class; pass your own
NODE_HOUR_USD = 0.0765

# one fresh process; with a batches file (lists of row indices), each list is scored in one call, as an actor scores
# a batch Ray handed it: int8 scores depend on which stories share a call, float32 ones (to 1e-6) do not
ONE_PROCESS = r"""
import json, resource, sys, time
import torch
threads, stories_path, dtype, batch_size = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
torch.set_num_threads(threads)
from storyeval.checkpoints.resolution import resolve_checkpoint
from storyeval.scoring.sequence import load_scorer
dtype = None if dtype == "float32" else dtype
scorer = load_scorer("union", resolve_checkpoint("union", "roc"), device="cpu")
stories = [line.rstrip("\n") for line in open(stories_path, encoding="utf-8")]
batches = json.load(open(sys.argv[5])) if len(sys.argv) > 5 else [list(range(len(stories)))]
scorer.score(stories[:32], batch_size=batch_size, dtype=dtype)  # warm-up (and the int8 copy, made once)
scores = [None] * len(stories)
started = time.perf_counter()
for batch in batches:
    for i, score in zip(batch, scorer.score([stories[i] for i in batch], batch_size=batch_size, dtype=dtype)):
        scores[i] = score
seconds = time.perf_counter() - started
print(json.dumps({"threads": torch.get_num_threads(), "seconds": seconds, "stories_per_second": len(stories) / seconds,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "scores": scores}))
"""

# every rank: evaluate's rank-0 path and score_by_rank on the same stories, each between barriers
RANKS = r"""
import json, sys, time, torch
torch.set_num_threads(1)
import evaluate
from accelerate import Accelerator
from storyeval import download_model, load_from_checkpoint, score_by_rank
stories_path, metric_dir, cache_dir, batch_size = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
accelerator = Accelerator(cpu=True)
rank, world = accelerator.process_index, accelerator.num_processes
stories = [line.rstrip("\n") for line in open(stories_path, encoding="utf-8")]
scorer = load_from_checkpoint(download_model("union/roc"), device="cpu")
scorer.score(stories[:32], batch_size=batch_size)  # warm-up
timings = {}

def rank_zero_path(name, rank_zero_threads):
    union = evaluate.load(metric_dir, "roc", num_process=world, process_id=rank, experiment_id=name, cache_dir=cache_dir)
    accelerator.wait_for_everyone()
    started = time.perf_counter()
    with accelerator.split_between_processes(stories) as mine:
        union.add_batch(predictions=mine)
    if rank == 0:
        torch.set_num_threads(rank_zero_threads)
    result = union.compute(batch_size=batch_size)  # rank 0 scores every rank's stories; None elsewhere
    torch.set_num_threads(1)
    accelerator.wait_for_everyone()
    timings[name] = time.perf_counter() - started
    return result

def by_rank(name):
    accelerator.wait_for_everyone()
    started = time.perf_counter()
    with accelerator.split_between_processes(stories) as mine:
        scores = score_by_rank(scorer, mine, accelerator, batch_size=batch_size)
    accelerator.wait_for_everyone()
    timings[name] = time.perf_counter() - started
    return scores

# in ABBA order, so that a change in the machine's load falls on both
gathered = rank_zero_path("rank_zero_1", 1)
scores = by_rank("by_rank_1")
by_rank("by_rank_2")
rank_zero_path("rank_zero_2", 1)
rank_zero_path("rank_zero_two_threads", 2)
if rank == 0:
    rates = {name: len(stories) / seconds for name, seconds in timings.items()}
    print(json.dumps({"processes": world, "seconds": timings, "stories_per_second": rates,
                      "median_stories_per_second": {"rank_zero": (rates["rank_zero_1"] + rates["rank_zero_2"]) / 2,
                                                    "by_rank": (rates["by_rank_1"] + rates["by_rank_2"]) / 2},
                      "max_abs_difference": max(abs(a - b) for a, b in zip(gathered["scores"], scores)),
                      "same_length": len(gathered["scores"]) == len(scores) == len(stories)}))
"""


class TimedScorer(StoryScorer):
    """StoryScorer with when each actor started, loaded and scored each batch, and its peak RSS, as columns."""

    def __init__(self, *args, **kwargs):
        self.born = time.time()
        super().__init__(*args, **kwargs)
        self.ready = time.time()

    def __call__(self, batch):
        import pyarrow as pa

        started = time.time()
        batch = super().__call__(batch)
        ended = time.time()
        extra = {"bench_pid": os.getpid(), "bench_born": self.born, "bench_ready": self.ready, "bench_start": started,
                 "bench_end": ended, "bench_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
        for name, value in extra.items():
            batch = batch.append_column(name, pa.array([value] * batch.num_rows))
        return batch


def roc_test_stories(n: int) -> list[str]:
    """The first ``n`` ROC test stories as text, as benchmarks' scoring_speed reads them (the builder's parser)."""
    from storyeval_training.data.builders.roc import parse_plot_guided_line
    from storyeval_training.paths import data_dir

    path = data_dir() / "roc" / "rocstories_test.txt"
    lines = path.read_text(encoding="utf-8").splitlines()[:n]
    return [" ".join(parse_plot_guided_line(line, path, i)["sentences"]) for i, line in enumerate(lines, 1)]


def child_env() -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(CHECKOUT), os.environ.get("PYTHONPATH")]))}


def one_process(stories_path: Path, threads: int, dtype: str, batch_size: int, batches: Path | None = None) -> dict:
    load_before = os.getloadavg()
    out = subprocess.run([sys.executable, "-c", ONE_PROCESS, str(threads), str(stories_path), dtype, str(batch_size),
                          *([str(batches)] if batches else [])], check=True, capture_output=True, text=True, env=child_env())
    return {"load_average_before": load_before, **json.loads(out.stdout.strip().splitlines()[-1])}


def ray_job(jsonl: Path, actors: int, dtype: str, batch_size: int, ray_batch_size: int) -> tuple[dict, dict[int, float], list]:
    """One score_dataset job on the running cluster: its timings, the scores by row id, and the batches (row ids
    each actor scored in one call)."""
    import ray.data

    from storyeval.analysis.ray_data import score_dataset

    load_before = os.getloadavg()
    started = time.time()
    dataset = ray.data.read_json(str(jsonl), num_cpus=0)  # the reads take no CPU: the actors hold both
    scored = score_dataset(dataset, "union", "roc", actors=actors, num_cpus=1, batch_size=batch_size,
                           ray_batch_size=ray_batch_size, dtype=None if dtype == "float32" else dtype, scorer_class=TimedScorer)
    call_seconds = time.time() - started  # its checks: the schema makes Ray read the first block
    records = scored.take_all()
    wall = time.time() - started
    first, last = min(r["bench_start"] for r in records), max(r["bench_end"] for r in records)
    pids = sorted({r["bench_pid"] for r in records})
    per_actor = {}
    for pid in pids:
        mine = [r for r in records if r["bench_pid"] == pid]
        batches = {(r["bench_start"], r["bench_end"]) for r in mine}
        per_actor[str(pid)] = {"stories": len(mine), "busy_seconds": sum(end - start for start, end in batches),
                               "load_seconds": mine[0]["bench_ready"] - mine[0]["bench_born"],
                               "peak_rss_mb": max(r["bench_rss_mb"] for r in mine)}
    result = {"actors": actors, "dtype": dtype, "stories": len(records), "load_average_before": load_before,
              "wall_seconds": wall, "score_dataset_call_seconds": call_seconds, "until_first_batch_seconds": first - started,
              "scoring_seconds": last - first,
              # the job's rate once scoring began (first batch's start to last batch's end): what a long job runs at
              "stories_per_second_scoring": len(records) / (last - first),
              # each actor's stories over the time it spent inside its batches, summed: the rate with no idle actor
              "stories_per_second_busy_sum": sum(a["stories"] / a["busy_seconds"] for a in per_actor.values()),
              "stories_per_second_wall": len(records) / wall,
              "actor_processes_seen": len(pids), "per_actor": per_actor,
              "peak_rss_mb_per_actor": max(a["peak_rss_mb"] for a in per_actor.values())}
    batches = {}
    for r in records:  # one call of an actor: its pid and the moment it started
        batches.setdefault((r["bench_pid"], r["bench_start"]), []).append(r["id"])
    return result, {r["id"]: r["score"] for r in records}, list(batches.values())


def parquet_write_rate(stories: list[str], rounds: int = 20) -> float:
    """Rows a second one process writes as Parquet, with the columns score-shards writes."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"id": list(range(len(stories))), "story": stories, "score": [0.5] * len(stories),
                      "score_problem": pa.array([None] * len(stories), pa.string()),
                      "score_settings": ["union-roc_fp32_storyeval-0.1.0.dev0_transformers-5.24_torch-2.13"] * len(stories)})
    with tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        for k in range(rounds):
            pq.write_table(table, Path(folder) / f"part_{k}.parquet")
        return rounds * len(stories) / (time.perf_counter() - started)


def rank_paths(stories_path: Path, batch_size: int) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        script = Path(folder) / "ranks.py"
        script.write_text(RANKS)
        load_before = os.getloadavg()
        out = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", str(script),
                              str(stories_path), str(CHECKOUT / "metrics" / "union"), str(Path(folder) / "evaluate"), str(batch_size)],
                             check=True, capture_output=True, text=True, env=child_env())
    return {"load_average_before": load_before, "torch_threads_per_process": 1,
            **json.loads([line for line in out.stdout.splitlines() if line.startswith("{")][-1])}


def busiest_processes(count: int = 6) -> list[dict]:
    """What else was running: the processes using the most CPU over one second (not this benchmark's own)."""
    try:
        import psutil
    except ImportError:
        return []
    ours = {os.getpid(), *(child.pid for child in psutil.Process().children(recursive=True))}
    processes = [p for p in psutil.process_iter(["pid", "name", "cmdline"]) if p.pid not in ours]
    for process in processes:
        try:
            process.cpu_percent(None)
        except psutil.Error:
            pass
    time.sleep(1.0)
    rows = []
    for process in processes:
        try:
            rows.append({"cpu_percent": process.cpu_percent(None), "command": " ".join(process.info["cmdline"] or [process.info["name"]])[:100]})
        except psutil.Error:
            pass
    return sorted(rows, key=lambda row: -row["cpu_percent"])[:count]


def projection(rate_per_node: float, startup_seconds: float, price: float, nodes=(1, 10, 100)) -> dict:
    """Hours and cost to score 10M stories on N nodes, each at ``rate_per_node`` stories/s, with the arithmetic."""
    rows = {}
    for n in nodes:
        hours = (TEN_MILLION / (n * rate_per_node) + startup_seconds) / 3600
        rows[str(n)] = {"hours": hours, "cost_usd": n * hours * price,
                        "arithmetic": f"(10,000,000 / ({n} x {rate_per_node:.1f}) + {startup_seconds:.0f}) s / 3600 = {hours:.3f} h; "
                                      f"{n} x {hours:.3f} h x ${price}/h = ${n * hours * price:.2f}"}
    return rows


# one process, 2 threads, 1,000 ROC test stories, on this Intel Xeon host kind when it was quieter
RECORDED_RATES = ("union_int8_speed_openvino", {"float32": "float32", "int8": "int8_openvino"})


def recorded_projections(startup_seconds: float, price: float) -> dict:
    """The projection at the rates a results file recorded (None when the file is absent)."""
    from benchmarks.common import RESULTS

    name, keys = RECORDED_RATES
    path = RESULTS / f"{name}.json"
    if not path.is_file():
        return None
    recorded = json.loads(path.read_text())
    return {"source": f"{name}.json ({recorded['machine']['cpu']}, load average {recorded['load_average'][0]:.2f}, "
                      f"one process, {recorded['num_threads']} threads)",
            **{dtype: {"rate_per_node": recorded["speed"][key]["stories_per_second"],
                       "nodes": projection(recorded["speed"][key]["stories_per_second"], startup_seconds, price)}
               for dtype, key in keys.items()}}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stories", type=int, default=1000, help="ROC test stories scored by every measurement")
    parser.add_argument("--batch-size", type=int, default=16, help="windows per forward pass (storyeval's default for union)")
    parser.add_argument("--ray-batch-size", type=int, default=64,
                        help="rows handed to an actor at a time (small enough that 2 actors share the stories evenly)")
    parser.add_argument("--node-hour-usd", type=float, default=NODE_HOUR_USD,
                        help="assumed price of a 2-core node for an hour, for the projection (not measured)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of every float32 measurement, in ABBA order; medians reported")
    parser.add_argument("--skip-int8", action="store_true", help="no int8 measurements (they need the [int8] extra)")
    parser.add_argument("--skip-ranks", action="store_true", help="no torchrun measurements (they need accelerate)")
    parser.add_argument("--output", type=results_name, default="ray_throughput", help="results file name")
    args = parser.parse_args(argv)
    if min(args.stories, args.batch_size, args.ray_batch_size, args.rounds) < 1:
        parser.error("--stories, --batch-size, --ray-batch-size and --rounds must be positive")
    import ray

    stories = roc_test_stories(args.stories)
    payload = {"command": " ".join(["python -m benchmarks.speed.ray_throughput", *(sys.argv[1:] if argv is None else argv)]),
               "metric": "union", "config": "roc", "stories": len(stories), "batch_size": args.batch_size,
               "ray_batch_size": args.ray_batch_size, "other_processes_at_start": busiest_processes()}
    with tempfile.TemporaryDirectory() as folder:
        stories_path, jsonl = Path(folder) / "stories.txt", Path(folder) / "stories.jsonl"
        stories_path.write_text("\n".join(stories) + "\n", encoding="utf-8")
        jsonl.write_text("".join(json.dumps({"id": i, "story": s}) + "\n" for i, s in enumerate(stories)), encoding="utf-8")
        os.environ["PYTHONPATH"] = child_env()["PYTHONPATH"]  # the actors import this checkout
        started = time.time()
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING)
        init_seconds = time.time() - started
        logging.getLogger("ray.data").setLevel(logging.WARNING)
        ray.data.DataContext.get_current().enable_progress_bars = False
        rounds, reference = [], None
        try:
            for number in range(args.rounds):
                # one round: one process at 1 and 2 threads, then 1 and 2 actors; every other round reversed
                steps = ["1_thread", "2_thread", "1_actor", "2_actor"]
                measured = {}
                for step in (steps if number % 2 == 0 else steps[::-1]):
                    if step.endswith("thread"):
                        measured[step] = one_process(stories_path, int(step[0]), "float32", args.batch_size)
                        scores = measured[step].pop("scores")
                        reference = scores if step == "1_thread" else reference
                    else:
                        measured[step], scores, _ = ray_job(jsonl, int(step[0]), "float32", args.batch_size, args.ray_batch_size)
                        measured[step]["scores"] = scores
                    print(f"round {number + 1}, {step}:", {k: round(v, 2) for k, v in measured[step].items() if isinstance(v, float)}, flush=True)
                for step in ("1_actor", "2_actor"):
                    scores = measured[step].pop("scores")
                    measured[step]["max_abs_difference_to_one_process"] = max(abs(scores[i] - reference[i]) for i in range(len(stories)))
                rounds.append(measured)
            int8 = None
            if not args.skip_int8:
                int8, scores, batches = ray_job(jsonl, 2, "int8", args.batch_size, args.ray_batch_size)
                batches_path = Path(folder) / "batches.json"
                batches_path.write_text(json.dumps(batches))
                whole = one_process(stories_path, 1, "int8", args.batch_size)
                same = one_process(stories_path, 1, "int8", args.batch_size, batches_path)
                int8.update({
                    "one_process_1_thread": {k: v for k, v in whole.items() if k != "scores"},
                    "identical_to_one_process_scoring_the_same_batches": all(scores[i] == same["scores"][i] for i in range(len(stories))),
                    "max_abs_difference_to_one_process_scoring_the_whole_list": max(abs(scores[i] - whole["scores"][i]) for i in range(len(stories))),
                    "ray_batches": len(batches)})
                print("int8:", {k: v for k, v in int8.items() if k.startswith(("identical", "max_abs", "stories_per_second_scoring"))}, flush=True)
        finally:
            ray.shutdown()
        median = {step: {key: statistics.median(r[step][key] for r in rounds) for key in ("stories_per_second", "peak_rss_mb")}
                  for step in ("1_thread", "2_thread")}
        median.update({step: {key: statistics.median(r[step][key] for r in rounds)
                              for key in ("stories_per_second_scoring", "stories_per_second_busy_sum", "stories_per_second_wall",
                                          "until_first_batch_seconds", "score_dataset_call_seconds", "peak_rss_mb_per_actor",
                                          "max_abs_difference_to_one_process")}
                       for step in ("1_actor", "2_actor")})
        one_thread, two_threads = median["1_thread"]["stories_per_second"], median["2_thread"]["stories_per_second"]
        one_actor, two_actors = median["1_actor"]["stories_per_second_scoring"], median["2_actor"]["stories_per_second_scoring"]
        payload.update({"ray": {"version": ray.__version__, "init_seconds": init_seconds}, "rounds": rounds, "median": median,
                        "int8": int8, "ratios": {"two_actors_over_one": two_actors / one_actor,
                                                  "one_actor_over_one_process_1_thread": one_actor / one_thread,
                                                  "two_actors_over_one_process_2_threads": two_actors / two_threads,
                                                  "per_round_two_actors_over_one": [r["2_actor"]["stories_per_second_scoring"]
                                                                                    / r["1_actor"]["stories_per_second_scoring"] for r in rounds]}})
        print("medians:", {step: {k: round(v, 2) for k, v in row.items()} for step, row in median.items()}, flush=True)
        print("2 actors / 1 actor:", round(payload["ratios"]["two_actors_over_one"], 3),
              "| 1 actor / one process (1 thread):", round(payload["ratios"]["one_actor_over_one_process_1_thread"], 3), flush=True)
        if not args.skip_ranks:
            payload["ranks"] = rank_paths(stories_path, args.batch_size)
            print("ranks:", payload["ranks"]["median_stories_per_second"], "max diff", payload["ranks"]["max_abs_difference"], flush=True)
    write_rate = parquet_write_rate(stories)
    startup = payload["ray"]["init_seconds"] + median["2_actor"]["until_first_batch_seconds"]
    payload["projection"] = {
        "stories": TEN_MILLION, "rate_per_node": two_actors, "rate_source": "2 actors on this 2-core machine, first batch to last",
        "startup_seconds": startup, "node_hour_usd_assumed": args.node_hour_usd,
        "assumes": "every node scores as this one did, Ray's scheduling and the reads add nothing beyond what the 2-actor "
                   "job here included, and the nodes are billed for the whole run",
        "nodes": projection(two_actors, startup, args.node_hour_usd),
        # the same arithmetic at the rates one process reached on a quieter host of this CPU (its results file)
        "at_recorded_rates": recorded_projections(startup, args.node_hour_usd),
        "parquet_rows_per_second_one_process": write_rate,
        "nodes_before_the_writer_limits_score_shards": write_rate / two_actors,
    }
    for n, row in payload["projection"]["nodes"].items():
        print(f"10M stories on {n} node(s): {row['arithmetic']}")
    for dtype, recorded in (payload["projection"]["at_recorded_rates"] or {}).items():
        if dtype != "source":
            print(f"at {recorded['rate_per_node']:.0f} stories/s ({dtype}, recorded):", recorded["nodes"]["10"]["arithmetic"])
    payload["other_processes_at_end"] = busiest_processes()
    payload["load_average_at_end"] = os.getloadavg()
    payload["machine"] = machine()
    print("wrote", write_results(args.output, payload))


if __name__ == "__main__":
    main()
