"""The replay progress file: written atomically and throttled, read back by the dashboard."""

from __future__ import annotations

from pathlib import Path

import orjson

from pipeline.runtime.progress import ProgressWriter, progress_path, read_progress


def test_progress_file_goes_through_phases_to_done(tmp_path: Path) -> None:
    path = progress_path(tmp_path)
    writer = ProgressWriter(path, run_id="replay-1", target_prefix="replay-1.", into=tmp_path)
    started = read_progress(path)
    assert started is not None and started.state == "running" and started.events_total is None
    writer.phase("consolidate", 40)
    assert (progress := read_progress(path)) is not None
    assert progress.phase == "consolidate" and progress.events_total == 40
    writer.advance(10, 40)  # throttled: the file may still say 0, the writer knows 10
    assert writer.progress.events_applied == 10 and writer.progress.fraction == 0.25
    writer.finish(40)
    done = read_progress(path)
    assert done is not None and done.state == "done" and done.phase == "done"
    assert done.events_applied == 40 and done.fraction == 1.0
    assert not path.with_suffix(".tmp").exists()  # written, then renamed


def test_a_failure_is_recorded_with_its_cause(tmp_path: Path) -> None:
    path = progress_path(tmp_path)
    writer = ProgressWriter(path, run_id="r", target_prefix="r.", into=tmp_path, reindex=True)
    writer.fail(RuntimeError("broker went away"))
    failed = read_progress(path)
    assert failed is not None and failed.state == "failed" and failed.reindex
    assert failed.error == "RuntimeError: broker went away"
    assert orjson.loads(path.read_bytes())["schema_version"] == 1


def test_missing_or_unreadable_progress_reads_as_none(tmp_path: Path) -> None:
    assert read_progress(tmp_path / "nothing.json") is None
    broken = tmp_path / "broken.json"
    broken.write_text("{half")
    assert read_progress(broken) is None
