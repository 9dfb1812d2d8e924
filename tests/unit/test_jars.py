"""The jar stamp check and tool discovery in infra.jars, without running Maven."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from infra import jars
from infra.broker import new_cluster_id, render_properties
from schemas.errors import HindsightError


def _filled(lib_dir: Path, digest: str) -> Path:
    lib_dir.mkdir(parents=True)
    (lib_dir / "kafka_2.13-4.4.0.jar").write_bytes(b"")
    (lib_dir / jars.STAMP_NAME).write_text(digest + "\n")
    return lib_dir


def test_stamp_matching_the_pom_means_current(tmp_path: Path) -> None:
    lib = _filled(tmp_path / "lib", jars.pom_digest())
    assert jars.jars_current(lib, jars.pom_digest())


def test_changed_pom_missing_stamp_or_missing_broker_jar_mean_stale(tmp_path: Path) -> None:
    lib = _filled(tmp_path / "lib", "0" * 64)
    assert not jars.jars_current(lib, jars.pom_digest())  # pom changed since the last resolve
    assert not jars.jars_current(tmp_path / "absent", jars.pom_digest())
    (lib / jars.STAMP_NAME).write_text(jars.pom_digest())
    (lib / "kafka_2.13-4.4.0.jar").unlink()
    assert not jars.jars_current(lib, jars.pom_digest())  # someone emptied the folder


def test_current_jars_do_not_run_maven(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lib = _filled(tmp_path / "lib", jars.pom_digest())

    def no_subprocess(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("maven must not run when the stamp is current")

    monkeypatch.setattr(subprocess, "run", no_subprocess)
    assert jars.ensure_jars(lib) == lib.resolve()


def test_missing_maven_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jars.shutil, "which", lambda name: None)
    with pytest.raises(HindsightError, match="mvn: not found"):
        jars.ensure_jars(tmp_path / "lib")


def test_missing_java_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setattr(jars.shutil, "which", lambda name: None)
    with pytest.raises(HindsightError, match="java: not found"):
        jars.find_java()


@pytest.mark.parametrize(
    ("output", "major"),
    [
        ('openjdk version "17.0.15" 2025-04-15', 17),
        ('openjdk version "21" 2023-09-19', 21),
        ('java version "1.8.0_392"', 8),
        ("no version here", None),
    ],
)
def test_parse_java_major(output: str, major: int | None) -> None:
    assert jars.parse_java_major(output) == major


def test_default_lib_dir_sits_next_to_the_pom() -> None:
    assert jars.POM.parent / "target" / "lib" == jars.DEFAULT_LIB_DIR
    assert jars.POM.is_file()


def test_cluster_id_has_kafka_uuid_form() -> None:
    cluster_id = new_cluster_id()
    assert len(cluster_id) == 22 and "=" not in cluster_id
    assert cluster_id != new_cluster_id()


def test_properties_are_sorted_key_value_lines() -> None:
    text = render_properties({"node.id": "1", "log.dirs": "/x"})
    assert text.splitlines()[1:] == ["log.dirs=/x", "node.id=1"]
