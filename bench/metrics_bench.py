"""The cost of Prometheus metrics: NEXMark Q1 and Q5 throughput with a scrape of every member each second.

The members always collect (the engine's counters are plain increments per batch, per packet or per
watermark, never per item); what a scrape adds is its collection: reading every processor's counters
and writing the text format, on the member's own threads. So the same 2-member local cluster runs each
query unpaced (``jetlet.nexmark.bench.throughput``: the source's emittedCount over a measured interval
after a warm-up) once *with* a thread scraping every member's ``/metrics`` every second and once
*without*, in interleaved rounds (the order alternates), and reports the medians and the cost
(1 - with / without). The scrapes' own duration and size are reported too.

On a shared machine those throughput ratios swing with the load; a figure that does not is the CPU
time a scrape takes: the bench also runs each query embedded in its own process and times the
collection and the text format on the scraping thread (``time.thread_time``) while the job runs.
At one scrape a second, that time over a second is the share of a core the scrapes take.

Run: ``python bench/metrics_bench.py [--repeats N]`` (N rounds, default 3); ``bench/run_all.py`` puts
the section into RESULTS.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
import urllib.request
from collections.abc import Sequence
from typing import Any

from prometheus_client import exposition

import _common
import jetlet
from jetlet._metrics import collector, samples, server
from jetlet.nexmark import fast_generator
from jetlet.nexmark.bench import jobs, throughput

QUERIES = ("q1", "q5")
MEMBERS = 2
WARMUP_S = 3.0
SECONDS = 6.0
SCRAPE_PERIOD_S = 1.0


class Scraper:
    """Scrapes every address's ``/metrics`` each period on a thread of its own, timing each scrape."""

    def __init__(self, addresses: Sequence[str]) -> None:
        self.addresses = list(addresses)
        self.durations: list[float] = []
        self.sizes: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="scraper", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for address in self.addresses:
                started = time.perf_counter()
                with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as response:
                    size = len(response.read())
                self.durations.append(time.perf_counter() - started)
                self.sizes.append(size)
            self._stop.wait(SCRAPE_PERIOD_S)

    def __enter__(self) -> Scraper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _round(client: Any, addresses: list[str], query: str, scraped: bool, scrapes: Scraper) -> float:
    if not scraped:
        return throughput.measure(client, query, MEMBERS, SECONDS, WARMUP_S).events_per_s
    with Scraper(addresses) as scraper:
        rate = throughput.measure(client, query, MEMBERS, SECONDS, WARMUP_S).events_per_s
    scrapes.durations += scraper.durations
    scrapes.sizes += scraper.sizes
    return rate


def collection_cpu(query: str, scrapes: int = 30) -> tuple[float, int]:
    """(median CPU seconds of one scrape on the scraping thread, series per scrape) while ``query`` runs
    unpaced in an embedded instance."""
    with jetlet.embedded() as jet:
        config = fast_generator.FastConfig(base_time=int(time.time() * 1000))
        name = f"metrics-bench-{query}"
        pipeline = jobs.build_pipeline(
            query, config, paced=False, slide_ms=jobs.THROUGHPUT_SLIDE_MS, list_name=name
        )
        job = jet.new_job(pipeline, jobs.job_config(False, name))
        labels = {"job_id": job.id_string, "job_name": name, "execution": job.id_string, "member": "m"}
        member = collector.MemberCollector(
            lambda: "m", lambda: [samples.ExecutionView(labels, job.plan)], jet.service.worker_stats, dict
        )
        registry = server.registry(member)
        jobs.sleep_until(time.time() + WARMUP_S)
        times = []
        for _ in range(scrapes):
            started = time.thread_time()
            exposition.generate_latest(registry)
            times.append(time.thread_time() - started)
            time.sleep(0.05)
        series = len(member.measurements())
        jobs.stop(job)
    return statistics.median(times), series


def main(argv: Sequence[str] = ()) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="interleaved rounds (default 3)")
    rounds = parser.parse_args(list(argv)).repeats
    rates: dict[tuple[str, bool], list[float]] = {(q, s): [] for q in QUERIES for s in (False, True)}
    scrapes = Scraper([])
    load_before = os.getloadavg()[0]
    with jobs.open_cluster(MEMBERS) as client:
        addresses = [m["metrics_address"] for m in client.request("GET", "/cluster")["members"]]
        for index in range(rounds):
            for query in QUERIES:
                for scraped in (False, True) if index % 2 == 0 else (True, False):
                    rates[(query, scraped)].append(_round(client, addresses, query, scraped, scrapes))
    rows = []
    for query in QUERIES:
        without, with_ = statistics.median(rates[(query, False)]), statistics.median(rates[(query, True)])
        pairs = ", ".join(
            f"{(1 - w / o) * 100:+.1f}"
            for o, w in zip(rates[(query, False)], rates[(query, True)], strict=True)
        )
        rows.append(
            [
                query.upper(),
                f"{without:,.0f}",
                f"{with_:,.0f}",
                f"{(1 - with_ / without) * 100:+.1f} %",
                pairs,
            ]
        )
    table = _common.markdown_table(
        ["query", "events/s, no scrape (median)", "events/s, scraped every 1 s", "cost", "cost per round, %"],
        rows,
    )
    durations = sorted(scrapes.durations)
    cpu_rows = []
    for query in QUERIES:
        cpu, series = collection_cpu(query)
        cpu_rows.append([query.upper(), str(series), f"{cpu * 1000:.2f}", f"{cpu * 100:.2f} %"])
    cpu_table = _common.markdown_table(
        [
            "query (embedded)",
            "job series",
            "CPU per scrape, ms (median of 30)",
            "share of a core at 1 scrape/s",
        ],
        cpu_rows,
    )
    load_after = os.getloadavg()[0]
    load = f"load average (1 min) {load_before:.1f} before, {load_after:.1f} after, {os.cpu_count()} CPUs"
    return (
        "## Prometheus metrics: the cost of scraping (metrics_bench)\n\n"
        f"NEXMark unpaced on {MEMBERS} member processes (local cluster), {rounds} interleaved rounds of "
        f"{WARMUP_S:g} s warm-up + {SECONDS:g} s measured per query and mode; *scraped*: a thread fetches "
        f"every member's `/metrics` each {SCRAPE_PERIOD_S:g} s during the run. "
        "Cost = 1 - scraped / not scraped (negative: the scraped run was faster, i.e. noise).\n\n"
        + table
        + f"\nScrapes: {len(durations)}, median {statistics.median(durations) * 1000:.1f} ms, "
        f"max {durations[-1] * 1000:.1f} ms, median {statistics.median(scrapes.sizes) / 1024:.0f} KiB "
        f"of text per member. The machine: {load}.\n\n"
        "The collection's own CPU time on the scraping thread (load-independent; the job series are "
        "Jet's metrics, the process and garbage-collector ones come on top):\n\n" + cpu_table
    )


if __name__ == "__main__":
    print(main(sys.argv[1:]))
