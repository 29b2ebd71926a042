"""The benchmark scripts start (``--help``) and their pure helpers are right; no timed asserts."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.unit.bench.loader import BENCH, load_bench

SCRIPTS = [
    "lag", "trigger", "apply_rate", "copy", "catchup", "baseline", "consistency", "scale", "writer",
    "regroup", "profile_table", "watch",
]


common = load_bench("common")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("script", SCRIPTS)
def test_help_runs(script: str) -> None:
    # run as the README says, from the repository root: bench/copy.py must not shadow stdlib copy
    out = subprocess.run([sys.executable, str(BENCH / f"{script}.py"), "--help"], capture_output=True,
                         text=True, cwd=BENCH.parent, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "--json" in out.stdout


def test_percentile_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]  # 1..100
    assert common.percentile(values, 0.5) == 50.0
    assert common.percentile(values, 0.99) == 99.0
    assert common.percentile(values, 0.999) == 100.0
    assert common.percentile(values, 1.0) == 100.0
    assert common.percentile(values, 0.0) == 1.0
    assert common.percentile([3.0, 1.0, 2.0], 0.5) == 2.0  # unsorted input
    assert common.percentile([], 0.5) is None
    with pytest.raises(ValueError):
        common.percentile(values, 1.5)


def test_lag_stats_keys_and_values() -> None:
    stats = common.lag_stats([0.1, 0.2, 0.3, 5.0])
    assert stats == {"p50_s": 0.2, "p99_s": 5.0, "p999_s": 5.0, "max_s": 5.0, "samples": 4}
    assert common.lag_stats([], "x_")["x_p50_s"] is None


def test_ratio_and_median() -> None:
    assert common.ratio(3.0, 2.0) == 1.5
    assert common.ratio(3.0, 0.0) is None
    assert common.ratio(None, 1.0) is None
    assert common.median([5.0, 1.0, 3.0]) == 3.0
    assert common.median([]) == 0.0


def test_machine_parsers() -> None:
    assert common.parse_meminfo_total("MemFree: 10 kB\nMemTotal:       24105000 kB\n") == 24105000 * 1024
    assert common.parse_vmhwm("Name:\tpython\nVmHWM:\t  123456 kB\nVmRSS:\t 1 kB\n") == 123456 * 1024
    assert common.parse_cpu_model("processor\t: 0\nmodel name\t: Intel(R) Xeon(R)\n") == "Intel(R) Xeon(R)"
    assert common.parse_cpu_model("processor\t: 0\n") == "unknown"
    with pytest.raises(ValueError):
        common.parse_vmhwm("VmRSS: 1 kB\n")


def test_machine_info_states_cores_memory_cpu() -> None:
    info = common.machine_info()
    assert info["cores"] >= 1
    assert info["memory_bytes"] > 0
    assert info["cpu_model"]


def test_file_refs_walks_nested_payloads() -> None:
    from streamer.events.model import FileRef

    a, b = FileRef("file:///a", size=1), FileRef("file:///b", size=2)

    class Holder:  # not a dataclass: ignored
        refs = [a]

    found = common.file_refs({"x": [a, (b,)], "y": Holder()})
    assert found == [a, b]


def test_spark_trigger_split_takes_medians_of_batches_with_rows() -> None:
    progress = [
        {"numInputRows": 1, "durationMs": {"addBatch": 200, "walCommit": 30}},
        {"numInputRows": 0, "durationMs": {"addBatch": 5, "walCommit": 1}},  # an empty trigger: left out
        {"numInputRows": 3, "durationMs": {"addBatch": 300, "walCommit": 50}},
        {"numInputRows": 2, "durationMs": {"addBatch": 250, "walCommit": 40}},
    ]
    assert load_bench("lag").spark_trigger_split(progress) == {"addBatch": 250.0, "walCommit": 40.0}


def test_visible_lags_take_the_first_newer_sighting() -> None:
    lag = load_bench("lag")
    # seq 2 was never seen itself; seq 3 (newer) was seen at 13.0
    assert sorted(lag.visible_lags({1: 10.0, 2: 11.0, 3: 12.0}, {1: 10.5, 3: 13.0})) == [0.5, 1.0, 2.0]


def test_lag_load_is_what_the_canary_leaves_of_the_share() -> None:
    lag = load_bench("lag")
    assert lag.load_rate_for(3.0, 100.0, 50.0, 0.1, 0.5) == 3.0  # --rate wins
    # the canary's 10 bumps/s are 0.2 of 50 alter_table/s: the load gets 0.3 of 100 create_table/s
    assert lag.load_rate_for(None, 100.0, 50.0, 0.1, 0.5) == pytest.approx(30.0)
    assert lag.load_rate_for(None, 100.0, 10.0, 0.1, 0.5) == 0.0  # the canary alone is over the share


def test_lag_windows_split_the_canary_lags_by_commit_time() -> None:
    lag = load_bench("lag")
    committed = {1: 100.0, 2: 104.0, 3: 111.0, 4: 125.0}
    seen = {1: 100.5, 2: 106.0, 3: 111.25, 4: 125.5}
    assert lag.lag_windows(committed, seen, 100.0, 10.0) == [
        {"from_s": 0.0, "p50_s": 0.5, "max_s": 2.0, "samples": 2},
        {"from_s": 10.0, "p50_s": 0.25, "max_s": 0.25, "samples": 1},
        {"from_s": 20.0, "p50_s": 0.5, "max_s": 0.5, "samples": 1},
    ]
    assert lag.lag_windows({1: 100.0}, {}, 100.0, 10.0) == [
        {"from_s": 0.0, "p50_s": None, "max_s": None, "samples": 0}  # committed, never seen
    ]


def test_jdbc_url_of_a_libpq_dsn() -> None:
    assert common.jdbc_from_dsn("host=db.example port=6543 dbname=test user=hive", "streamer_bench_x") == (
        "jdbc:postgresql://db.example:6543/streamer_bench_x",
        "hive",
    )
    assert common.jdbc_from_dsn("dbname=test", "b") == ("jdbc:postgresql://127.0.0.1:5432/b", None)


def test_profile_table_puts_batch_samples_in_the_first_matching_category() -> None:
    prof = load_bench("profile_table")
    batch = "thread (1): Thread-5 (run);start_query.<locals>.on_batch (streamer/target/job/streaming.py:341)"
    text = "\n".join([
        f"{batch};BatchApplier.process (streamer/target/job/streaming.py:153);run_plan (x);"
        "HmsCatalog.add_partitions (streamer/metastore/thrift/catalog.py:9);copy (shutil.py:1) 30",
        f"{batch};BatchApplier.process (streamer/target/job/streaming.py:153);copy (shutil.py:1) 10",
        f"{batch};BatchApplier.process (streamer/target/job/streaming.py:153);"
        "EventDeserializer.__call__ (streamer/events/codec.py:140) 5",
        f"{batch};DataFrame.collect (pyspark/sql/dataframe.py:504) 5",
        "process 2;thread (3): MainThread;KafkaDriverReader.read (streamer/kafka/spark_source.py:265) 25",
        "thread (4): other;sleep (time.py:1) 99",
        "not a sample line",
    ])
    per_category, _ = prof.batch_shares(text)
    assert per_category == {
        "metastore calls (Thrift round trips)": 30,
        "file work (copies, listings, removals, checksums)": 10,
        "decoding (Avro, gzip, JSON)": 5,
        "rows from Spark (collect, py4j)": 5,
    }
    assert prof.source_shares(text) == {"Kafka read (data source process: KafkaDriverReader.read)": 25}
    table = prof.table(text, rate=10.0, wall=10.0)
    assert "| metastore calls (Thrift round trips) | 3.0 | 30% |" in table
    assert "Kafka read) | 5.0 | 50% |" in table  # outside micro-batches
