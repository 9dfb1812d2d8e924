"""Resolve the Kafka broker jars with Maven, once, and find the Java runtime that runs them.

The jars land in ``infra/target/lib`` next to this file (gitignored). ``Path(__file__)`` points at
the source tree under an editable install, so the default works from a checkout and from
``pip install -e``. A stamp file holding the hash of ``pom.xml`` tells whether the folder is
current, so Maven only runs on the first use and after the pom changes.

Usage: ``python -m infra.jars [--lib-dir DIR]`` prints the jar folder.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from schemas.errors import HindsightError

INFRA_DIR = Path(__file__).resolve().parent
POM = INFRA_DIR / "pom.xml"
DEFAULT_LIB_DIR = INFRA_DIR / "target" / "lib"
STAMP_NAME = ".pom.sha256"
# The one jar without which there is no broker; its absence means the folder is unusable.
BROKER_JAR_GLOB = "kafka_2.13-*.jar"
MIN_JAVA = 17  # Kafka 4.x brokers need Java 17 or newer
MVN_TIMEOUT_S = 900.0


class JavaToolMissing(HindsightError):
    """``java`` or ``mvn`` is not installed or too old to run the local broker."""


def pom_digest(pom: Path = POM) -> str:
    return hashlib.sha256(pom.read_bytes()).hexdigest()


def jars_current(lib_dir: Path, digest: str) -> bool:
    """True when ``lib_dir`` was filled from a pom with this digest and still holds the broker."""
    stamp = lib_dir / STAMP_NAME
    try:
        recorded = stamp.read_text(encoding="utf-8").strip()
    except OSError:
        return False
    return recorded == digest and any(lib_dir.glob(BROKER_JAR_GLOB))


def find_java() -> str:
    """The ``java`` to run the broker with: ``$JAVA_HOME/bin/java`` first, then ``PATH``."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        candidate = Path(java_home) / "bin" / "java"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which("java")
    if found is None:
        raise JavaToolMissing(
            f"java: not found on PATH (and no usable JAVA_HOME); the local Kafka broker needs "
            f"Java {MIN_JAVA}+ (Debian/Ubuntu: apt-get install openjdk-17-jre-headless)"
        )
    return found


def parse_java_major(version_output: str) -> int | None:
    """Major version from ``java -version`` output: '17.0.15' -> 17, legacy '1.8.0_392' -> 8."""
    match = re.search(r'version "(\d+)(?:\.(\d+))?', version_output)
    if match is None:
        return None
    major = int(match.group(1))
    if major == 1 and match.group(2) is not None:
        return int(match.group(2))
    return major


def check_java(java: str) -> None:
    """Fail early with a clear message instead of a broker that dies on an old class version."""
    proc = subprocess.run(
        [java, "-version"], capture_output=True, text=True, timeout=60, check=False
    )
    major = parse_java_major(proc.stderr + proc.stdout)
    if major is not None and major < MIN_JAVA:
        raise JavaToolMissing(
            f"java: {java} is Java {major}; the local Kafka broker needs Java {MIN_JAVA}+"
        )


def _find_mvn() -> str:
    found = shutil.which("mvn")
    if found is None:
        raise JavaToolMissing(
            "mvn: not found on PATH; Maven 3.8+ resolves the Kafka broker jars once "
            "(Debian/Ubuntu: apt-get install maven), or point KAFKA_BOOTSTRAP at a running broker"
        )
    return found


def _tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def ensure_jars(lib_dir: Path | None = None) -> Path:
    """Return a folder holding every runtime jar of the broker, running Maven only if needed."""
    target = (lib_dir or DEFAULT_LIB_DIR).resolve()
    if not POM.is_file():
        raise HindsightError(f"pom.xml: not found at {POM}; the infra package is incomplete")
    digest = pom_digest()
    if jars_current(target, digest):
        return target

    mvn = _find_mvn()
    check_java(find_java())
    # Build into a private sibling folder and swap it in, so a half-finished or concurrent run
    # never leaves a mix of two Kafka versions on the classpath.
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.parent / f".{target.name}.tmp-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    cmd = [mvn, "-B", "-q", "-f", str(POM), "package", f"-Dhindsight.lib.dir={staging}"]
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=MVN_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise HindsightError(f"mvn: resolving Kafka jars took over {MVN_TIMEOUT_S:.0f}s") from exc
    if proc.returncode != 0 or not any(staging.glob(BROKER_JAR_GLOB)):
        shutil.rmtree(staging, ignore_errors=True)
        raise HindsightError(
            f"mvn: resolving Kafka jars from {POM} failed (exit {proc.returncode}):\n"
            f"{_tail(proc.stdout + proc.stderr)}"
        )
    (staging / STAMP_NAME).write_text(digest + "\n", encoding="utf-8")

    if jars_current(target, digest):  # another process finished first; keep its folder
        shutil.rmtree(staging, ignore_errors=True)
        return target
    stale = target.parent / f".{target.name}.old-{os.getpid()}"
    if target.exists():
        target.rename(stale)
    staging.rename(target)
    shutil.rmtree(stale, ignore_errors=True)
    return target


def classpath(lib_dir: Path) -> str:
    """Every jar in ``lib_dir`` joined for ``java -cp`` (sorted, so runs are reproducible)."""
    jars = sorted(str(p) for p in lib_dir.glob("*.jar"))
    if not jars:
        raise HindsightError(f"classpath: no jars in {lib_dir}; call ensure_jars() first")
    return os.pathsep.join(jars)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Resolve the local Kafka broker jars.")
    parser.add_argument("--lib-dir", type=Path, default=None, help="jar folder to fill")
    args = parser.parse_args(argv)
    try:
        print(ensure_jars(args.lib_dir))
    except HindsightError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
