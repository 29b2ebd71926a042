"""Where a profiled catch-up's micro-batch time goes: a table from py-spy's raw (collapsed) stacks.

``py-spy record --idle --threads --format raw -o stacks.txt -- .venv/bin/python bench/catchup.py
--metastore derby ...`` samples every thread of the driver's Python process, waiting ones included
(``--idle``), so a sample is wall-clock time. This script keeps the samples of the thread that runs the
target job's ``foreachBatch`` function (``on_batch``), puts each in the first category whose pattern a
frame of its stack matches (the list below, metastore calls first: a file copy waiting for a metastore
answer is metastore time), and prints each category's seconds and share of the micro-batches' time,
with the top functions (the deepest of streamer's in each stack) of the categories outside the
metastore.
``--wall`` (the catch-up's seconds) adds the time the driver spent outside micro-batches: Spark
scheduling, the Kafka read in the Python data source's process, the trigger's waits.

Pure: parsing and classification take text and return figures; only ``main`` reads a file.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import click

CATEGORIES: Sequence[tuple[str, Sequence[str]]] = (
    ("metastore calls (Thrift round trips)", ("streamer/metastore/", "thrift/")),
    ("rows from Spark (collect, py4j)", ("DataFrame.collect", "pyspark/sql/types.py", "pyspark/serializers")),
    ("decoding (Avro, gzip, JSON)", ("streamer/events/",)),
    ("state writes and reads (streamer/target/state)", ("streamer/target/state/",)),
    ("file work (copies, listings, removals, checksums)", ("streamer/target/apply/files.py", "fsspec/",
                                                          "shutil.py", "streamer/target/apply/copier",
                                                          "streamer/warehouse/files.py")),
    ("watermark (outside its metastore calls)", ("streamer/target/job/watermark.py",)),
    ("planning, regrouping, policy", ("streamer/target/plan", "streamer/target/apply/regroup",
                                      "streamer/target/apply/plan")),
    ("applier logic (streamer/target/apply, rest)", ("streamer/target/apply/",)),
    ("waiting for records after the batch's own (--batch-follow)", ("BatchReader.read_on",)),
    ("job logic (streamer/target/job, rest)", ("streamer/target/job/",)),
)
OTHER = "other"
BATCH_FRAME = "on_batch (streamer/target/job/streaming.py"
# Spark calls the Python data source (its own process, sampled with py-spy --subprocesses) between
# micro-batches: latestOffset, where the driver reader reads Kafka, and the commit of the batch before
SOURCE_PARTS: Sequence[tuple[str, str]] = (
    ("Kafka read (data source process: KafkaDriverReader.read)", "KafkaDriverReader.read "),
    ("data source's other calls (commit, offsets, plan)", "_SimpleStreamReaderWrapper."),
)


def parse(text: str) -> Iterable[tuple[list[str], int]]:
    """``(frames, samples)`` per line of py-spy's raw output (``frame;frame;... count``)."""
    for line in text.splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            yield stack.split(";"), int(count)


def category(frames: Sequence[str]) -> str:
    for name, patterns in CATEGORIES:
        if any(p in f for f in frames for p in patterns):
            return name
    return OTHER


def batch_shares(text: str) -> tuple[Counter[str], Counter[str]]:
    """Samples per category, and per (category, deepest function of streamer's in the stack), of the
    stacks inside the job's ``foreachBatch`` function."""
    per_category: Counter[str] = Counter()
    per_function: Counter[str] = Counter()
    for frames, n in parse(text):
        if not any(BATCH_FRAME in f for f in frames):
            continue
        name = category(frames)
        per_category[name] += n
        ours = [f for f in frames if "streamer/" in f and BATCH_FRAME not in f]
        deepest = ours[-1].split(" (")[0] if ours else "(on_batch itself)"
        per_function[f"{name} | {deepest}"] += n
    return per_category, per_function


def source_shares(text: str) -> Counter[str]:
    """Samples of the Python data source's calls (outside the micro-batches), per part."""
    out: Counter[str] = Counter()
    for frames, n in parse(text):
        for name, pattern in SOURCE_PARTS:
            if any(pattern in f for f in frames):
                out[name] += n
                break
    return out


def table(text: str, rate: float, wall: float | None, top: int = 12) -> str:
    per_category, per_function = batch_shares(text)
    in_batches = sum(per_category.values()) / rate
    basis = wall if wall is not None else in_batches
    rows = ["| where | seconds | share |", "|---|---:|---:|"]
    for name, n in per_category.most_common():
        rows.append(f"| {name} | {n / rate:.1f} | {n / rate / basis:.0%} |")
    if wall is not None:
        rows.append(f"| outside micro-batches (restart, Spark planning and scheduling, Kafka read) | "
                    f"{wall - in_batches:.1f} | {(wall - in_batches) / wall:.0%} |")
        for name, n in source_shares(text).most_common():
            rows.append(f"| &nbsp;&nbsp;of which {name} | {n / rate:.1f} | {n / rate / wall:.0%} |")
    rows.append(f"| **total** | **{basis:.1f}** | |")
    rows += ["", "| category \\| deepest streamer function | seconds |", "|---|---:|"]
    for key, n in per_function.most_common():
        if not key.startswith(CATEGORIES[0][0]) and top > 0:
            escaped = key.replace("|", "\\|")
            rows.append(f"| {escaped} | {n / rate:.2f} |")
            top -= 1
    return "\n".join(rows)


def figures(text: str, rate: float, wall: float | None) -> dict[str, Any]:
    """The table's figures: seconds per category inside micro-batches, per data source part, the wall."""
    per_category, _ = batch_shares(text)
    return {
        "micro_batches_s": {name: n / rate for name, n in per_category.most_common()},
        "data_source_s": {name: n / rate for name, n in source_shares(text).most_common()},
        "in_batches_s": sum(per_category.values()) / rate,
        "wall_s": wall,
    }


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
@click.argument("stacks", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--rate", default=50.0, show_default=True, help="py-spy's --rate (samples/s).")
@click.option("--wall", type=float, default=None, help="Seconds of the catch-up (shares are of it).")
def main(as_json: bool, stacks: Path, rate: float, wall: float | None) -> None:
    """Print a markdown table of a py-spy raw profile's micro-batch time."""
    text = stacks.read_text()
    if as_json:
        sys.stdout.write(json.dumps(figures(text, rate, wall)) + "\n")
    else:
        sys.stdout.write(table(text, rate, wall) + "\n")


if __name__ == "__main__":
    main()
