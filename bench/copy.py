"""Copy efficiency: FileCopier (verified, fsynced, staged) vs ``cp -r`` of the same files, same disk.

Part 1 makes ``--small`` files of 1 MB and ``--large`` files of ``--large-mb`` MB, then, per repeat,
copies them with ``FileCopier.copy_all`` (sha256 verified while streaming, fsync, rename into
place) and with ``cp -r`` (and ``cp -r`` + fsync of every file, the like-for-like durability).
Amplification = bytes this process wrote to storage during the copier's run (``write_bytes`` of
/proc/self/io: temporary files included, as they are the files renamed) / bytes of the source files.
A second ``copy_all`` of the same references must write nothing (already-verified files are skipped).

Part 2 runs an ACID workload with aborted transactions on the bundled warehouse, applies its
events with ``BatchApplier`` (in-memory catalog, real files) and reports the bytes of aborted
transactions' delta files that reached the target (target: 0) and the workload's amplification.
"""

from __future__ import annotations

import os
import sys

if sys.path and os.path.abspath(sys.path[0] or ".") == os.path.dirname(os.path.abspath(__file__)):
    sys.path.append(sys.path.pop(0))  # so that bench/copy.py cannot shadow the standard library's copy

import hashlib
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import click
from common import (
    emit,
    encode_events,
    exit_on_sigterm,
    file_refs,
    io_write_bytes,
    median,
    metric_sum,
    prepared_events,
    quiet_logs,
    ratio,
    ref_size,
    say,
)

MB = 1 << 20


def make_files(src: Path, small: int, large: int, large_mb: int) -> list[Any]:
    """Random files and their references (sha256, size), as an event would carry them."""
    from streamer.events.model import FileRef

    src.mkdir(parents=True)
    refs = []
    specs = [(f"small_{i:05d}", MB) for i in range(small)] + [
        (f"large_{i}", large_mb * MB) for i in range(large)
    ]
    for name, size in specs:
        digest = hashlib.sha256()
        with (src / name).open("wb") as out:
            left = size
            while left:
                chunk = os.urandom(min(left, 4 * MB))
                digest.update(chunk)
                out.write(chunk)
                left -= len(chunk)
        refs.append(FileRef((src / name).as_uri(), digest.hexdigest(), "sha256", size=size))
    return refs


def _fsync_tree(root: Path) -> None:
    for path in root.rglob("*"):
        if path.is_file():
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


def copy_once(refs: list[Any], src: Path, dst: Path, workers: int) -> dict[str, float]:
    from streamer.target.apply.files import FileCopier

    total = sum(r.size for r in refs)
    copier = FileCopier(max_workers=workers)
    w0, t0 = io_write_bytes(), time.perf_counter()
    report = copier.copy_all(refs, lambda ref: (dst / "copier").as_uri())
    copier_s = time.perf_counter() - t0
    written = io_write_bytes() - w0
    w1 = io_write_bytes()
    again = copier.copy_all(refs, lambda ref: (dst / "copier").as_uri())
    rewritten = io_write_bytes() - w1
    t1 = time.perf_counter()
    subprocess.run(["cp", "-r", str(src), str(dst / "cp")], check=True)
    cp_s = time.perf_counter() - t1
    t2 = time.perf_counter()
    subprocess.run(["cp", "-r", str(src), str(dst / "cp_sync")], check=True)
    _fsync_tree(dst / "cp_sync")
    cp_sync_s = time.perf_counter() - t2
    leftovers = [p.name for p in (dst / "copier").iterdir() if p.name.startswith(".")]
    assert report.bytes_copied == total and again.skipped == len(refs), (report, again)
    return {
        "verified_bps": total / copier_s,
        "cp_bps": total / cp_s,
        "cp_fsync_bps": total / cp_sync_s,
        "amplification": written / total,
        "recopy_bytes_written": rewritten,
        "temp_leftovers": len(leftovers),
    }


def aborted_workload(work: Path, events: int, seed: int) -> dict[str, Any]:
    """ACID workload with aborts -> BatchApplier; aborted delta bytes on the target."""
    from streamer.metastore.memory import MemoryCatalog
    from streamer.target.job.settings import (
        KafkaSettings,
        LayoutSettings,
        MetastoreSettings,
        TargetSettings,
    )
    from streamer.target.job.streaming import BatchApplier
    from streamer.warehouse.warehouse import Warehouse
    from streamer.warehouse.workload import Workload

    source = work / "source"
    source.mkdir(parents=True)
    url = str(source / "m.db")
    with Warehouse.open(
        url, root=source / "wh", cmroot=source / "cm", message_format="gzip(json-2.0)", source_id="bench"
    ) as wh:
        workload = Workload(wh, seed=seed, txn_share=0.5, abort_ratio=0.5)
        prepared: list[Any] = []
        first = wh.current_event_id() + 1
        while wh.current_event_id() - first + 1 < events:  # enrich as the agent does: right after commit
            workload.run(1)
            prepared += prepared_events(url, str(source / "cm"), after=first - 1 + len(prepared))
        n_events = wh.current_event_id() - first + 1
        txns_committed, txns_aborted = len(wh.txns("committed")), len(wh.txns("aborted"))
        aborted = set()
        for txn in wh.txns("aborted"):
            for row in wh.txn_write_rows(txn):
                for uri in row.files.split("]"):
                    if uri:
                        parts = uri.split("#")[0].rstrip("/").split("/")
                        aborted.add((row.db, row.table, parts[-2], parts[-1]))
    changed = {(r.uri, r.checksum): ref_size(r) for e in prepared for r in file_refs(e.payload)}
    root = work / "target" / "warehouse"
    settings = TargetSettings(
        source_id="bench",
        kafka=KafkaSettings(bootstrap_servers="-", topic="-"),
        metastore=MetastoreSettings(uri="-"),
        layout=LayoutSettings(
            warehouse_root=root.as_uri(), state_dir=str(work / "state"), checkpoint_dir=str(work / "ckpt"),
            external_base_dir=(work / "target" / "external").as_uri(),
        ),
    )
    applier = BatchApplier(settings, MemoryCatalog())
    records = encode_events(prepared)
    skipped0 = metric_sum("streamer_target_aborted_bytes_skipped_total")
    copied0 = metric_sum("streamer_target_bytes_copied_total")
    w0 = io_write_bytes()
    for i in range(0, len(records), 500):
        applier.process(records[i : i + 500])
    written = io_write_bytes() - w0
    copied = metric_sum("streamer_target_bytes_copied_total") - copied0
    copied = metric_sum("streamer_target_bytes_copied_total") - copied0
    aborted_copied = 0
    target_bytes = 0
    for path in root.rglob("*"):
        if path.is_file() and not path.name.startswith((".", "_")):
            target_bytes += path.stat().st_size
            rel = path.relative_to(root).as_posix()
            if any(
                rel.endswith(f"{sub}/{name}") and f"{db}.db/{tbl}/" in rel for db, tbl, sub, name in aborted
            ):
                aborted_copied += path.stat().st_size
    return {
        "aborted_bytes_copied": aborted_copied,
        "aborted_files_on_source": len(aborted),
        "aborted_bytes_skipped_metric": metric_sum("streamer_target_aborted_bytes_skipped_total") - skipped0,
        "workload_events": n_events,
        "txns_committed": txns_committed,
        "txns_aborted": txns_aborted,
        "workload_changed_bytes": sum(changed.values()),
        "workload_bytes_written": written,
        "workload_amplification": ratio(written, sum(changed.values())),
        "workload_bytes_copied": copied,
        "workload_copied_over_changed": ratio(copied, sum(changed.values())),
        "halted": {d: h.cause for d, h in applier.state.halts().items()},
    }


def run_copy(
    work: Path, *, small: int, large: int, large_mb: int, repeats: int, workers: int, acid_events: int
) -> dict[str, Any]:
    say(f"making {small} x 1 MB + {large} x {large_mb} MB source files")
    refs = make_files(work / "src", small, large, large_mb)
    runs = []
    for r in range(repeats):
        say(f"copy repeat {r + 1}/{repeats}")
        dst = work / f"dst{r}"
        dst.mkdir()
        runs.append(copy_once(refs, work / "src", dst, workers))
        shutil.rmtree(dst)
    verified, cp = median(x["verified_bps"] for x in runs), median(x["cp_bps"] for x in runs)
    say(f"ACID workload with aborts ({acid_events} events)")
    acid = aborted_workload(work / "acid", acid_events, seed=7)
    return {
        "verified_bps": verified,
        "cp_bps": cp,
        "ratio_vs_cp": ratio(verified, cp),
        "cp_fsync_bps": median(x["cp_fsync_bps"] for x in runs),
        "ratio_vs_cp_fsync": ratio(verified, median(x["cp_fsync_bps"] for x in runs)),
        "amplification": median(x["amplification"] for x in runs),
        "aborted_bytes_copied": acid["aborted_bytes_copied"],
        "recopy_bytes_written": max(x["recopy_bytes_written"] for x in runs),
        "files": len(refs),
        "bytes": sum(r.size for r in refs),
        "repeats": repeats,
        "copy_workers": workers,
        "acid": acid,
    }


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
@click.option("--small", default=100, show_default=True, help="Number of 1 MB files.")
@click.option("--large", default=2, show_default=True, help="Number of large files.")
@click.option(
    "--large-mb", default=256, show_default=True, help="Size of each large file (MB)."
)
@click.option("--repeats", default=3, show_default=True, help="Repeats; medians are reported.")
@click.option(
    "--workers", default=8, show_default=True, help="FileCopier threads (the target job's default)."
)
@click.option(
    "--acid-events", default=300, show_default=True, help="Events of the ACID workload with aborts."
)
@click.option(
    "--work-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where to make the files (the disk under test) [default: the temp dir].",
)
def main(
    as_json: bool,
    small: int,
    large: int,
    large_mb: int,
    repeats: int,
    workers: int,
    acid_events: int,
    work_dir: Path | None,
) -> None:
    """FileCopier vs cp -r on the same files; copy amplification; aborted ACID bytes copied."""
    quiet_logs()
    exit_on_sigterm()
    with tempfile.TemporaryDirectory(prefix="bench-copy-", dir=work_dir) as tmp:
        result = run_copy(
            Path(tmp),
            small=small,
            large=large,
            large_mb=large_mb,
            repeats=repeats,
            workers=workers,
            acid_events=acid_events,
        )
    emit("copy: FileCopier vs cp -r", result, as_json)


if __name__ == "__main__":
    main()
