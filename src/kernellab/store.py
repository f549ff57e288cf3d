"""The lab's record: one SQLite file in WAL mode, with a versioned schema.

Every sample is committed the moment it arrives, so a run that is interrupted (a guest
that hangs, a Ctrl-C, a host that dies) loses nothing already measured.

The schema's version is SQLite's `user_version`. Opening a store written by an older
kernellab migrates it forward in one transaction (all of it or none of it); a store
written by a newer kernellab is refused, never half-read.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import sqlite3
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import reaper
from .errors import LabError
from .guest import vulnerabilities

SCHEMA_VERSION = 5
# SQLite's integers: an id or a limit beyond them names no row (and would overflow).
_MAX_SQL_INT = 2**63 - 1
# What a store must have to be kernellab's (any version): anything else is someone else's file.
CORE_TABLES = {"variants", "runs", "samples"}

SCHEMA = """
CREATE TABLE sources (
    id TEXT PRIMARY KEY, spec TEXT, kind TEXT, version TEXT, content_hash TEXT, tree TEXT);
CREATE TABLE variants (
    id INTEGER PRIMARY KEY, name TEXT, source_id TEXT REFERENCES sources(id), arch TEXT,
    base TEXT, spec TEXT, config_hash TEXT, dropped TEXT, created REAL,
    boot_args TEXT NOT NULL DEFAULT '', sysctls TEXT NOT NULL DEFAULT '',
    UNIQUE (name, source_id, arch, config_hash, boot_args, sysctls));
CREATE TABLE builds (
    key TEXT PRIMARY KEY, variant_id INTEGER REFERENCES variants(id), record TEXT, created REAL);
CREATE TABLE runs (
    id INTEGER PRIMARY KEY, variant_id INTEGER REFERENCES variants(id), build_key TEXT,
    target TEXT, mode TEXT, host TEXT, status TEXT, reason TEXT, started REAL, ended REAL,
    command TEXT,
    options_key TEXT,        -- what besides the kernel decides the numbers (RunOptions.key)
    agent_version INTEGER,   -- the agent's record version (its hello record)
    initramfs TEXT,          -- the initramfs file, named by the agent binary's hash
    clocksource TEXT,        -- the guest's clocksource when the agent started
    target_info TEXT,        -- JSON: the target's label and details (accelerator, CPU, emulator)
    owner TEXT,              -- 'PID START' of the kernellab measuring it (schema 3)
    invocation TEXT);        -- the kernellab command that measured it (schema 5, NULL before)
CREATE INDEX runs_reuse ON runs(build_key, mode, status, options_key);
CREATE TABLE samples (
    id INTEGER PRIMARY KEY, run_id INTEGER REFERENCES runs(id), metric TEXT, unit TEXT,
    rep INTEGER, iters INTEGER, value REAL, seq INTEGER);
CREATE INDEX samples_run ON samples(run_id, metric);
-- One sample per agent record: a record the console repeats is stored once (schema 3).
CREATE UNIQUE INDEX IF NOT EXISTS samples_seq ON samples(run_id, seq);
CREATE TABLE unavailable (
    id INTEGER PRIMARY KEY, run_id INTEGER REFERENCES runs(id), metric TEXT, reason TEXT);
CREATE TABLE logs (
    id INTEGER PRIMARY KEY, run_id INTEGER, build_key TEXT, kind TEXT, text TEXT);
"""

# What a run's workloads were (schema 4): the program, its version when known and its argv
# (provenance, JSON), how it ended and in how much guest time.
WORKLOADS_TABLE = """
CREATE TABLE IF NOT EXISTS workloads (
    id INTEGER PRIMARY KEY, run_id INTEGER REFERENCES runs(id), label TEXT, provenance TEXT,
    status TEXT, reason TEXT, elapsed_s REAL);
"""
SCHEMA += WORKLOADS_TABLE

# Log kinds that schema 1 used for what now has columns and tables of its own.
_V1_MOVED_KINDS = ("options", "initramfs", "clocksource", "not-available")


def _migrate_1_to_2(db: sqlite3.Connection) -> None:
    """Schema 1 (kernellab before user_version) kept run facts as text in `logs`."""
    db.execute("ALTER TABLE variants RENAME TO variants_v1")
    db.execute("ALTER TABLE runs RENAME TO runs_v1")
    db.execute("ALTER TABLE samples RENAME TO samples_v1")
    db.execute("DROP INDEX IF EXISTS samples_run")
    for statement in SCHEMA.split(";"):
        if statement.strip() and not statement.strip().startswith(("CREATE TABLE sources",
                                                                     "CREATE TABLE builds",
                                                                     "CREATE TABLE logs")):
            db.execute(statement)
    db.execute("INSERT INTO variants (id, name, source_id, arch, base, spec, config_hash, dropped,"
               " created) SELECT id, name, source_id, arch, base, spec, config_hash, dropped, created"
               " FROM variants_v1")
    db.execute("INSERT INTO runs (id, variant_id, build_key, target, mode, host, status, reason,"
               " started, ended, command) SELECT id, variant_id, build_key, target, mode, host, status,"
               " reason, started, ended, command FROM runs_v1")
    db.execute("INSERT INTO samples (id, run_id, metric, unit, rep, iters, value)"
               " SELECT id, run_id, metric, unit, rep, iters, value FROM samples_v1")
    for column, kind in (("options_key", "options"), ("initramfs", "initramfs"),
                         ("clocksource", "clocksource")):
        db.execute(f"UPDATE runs SET {column} = (SELECT text FROM logs WHERE logs.run_id = runs.id"
                   f" AND kind = ? ORDER BY id LIMIT 1)", (kind,))
    for run_id, text in db.execute("SELECT run_id, text FROM logs WHERE kind = 'not-available'").fetchall():
        metric, _, reason = text.partition(": ")
        db.execute("INSERT INTO unavailable (run_id, metric, reason) VALUES (?,?,?)", (run_id, metric, reason))
    # Schema 1 had one agent record version (1), named in each console log's hello record.
    for run_id, text in db.execute("SELECT run_id, text FROM logs WHERE kind = 'console'").fetchall():
        m = re.search(r"@KL seq=\d+ t=hello v=(\d+)", text or "")
        if m:
            db.execute("UPDATE runs SET agent_version = ? WHERE id = ?", (int(m.group(1)), run_id))
    db.execute(f"DELETE FROM logs WHERE kind IN ({','.join('?' * len(_V1_MOVED_KINDS))})", _V1_MOVED_KINDS)
    db.execute("UPDATE runs SET target_info = json_object('label', 'QEMU TCG ' || mode,"
               " 'details', json_object('accelerator', 'tcg', 'note', 'recorded before schema 2'))"
               " WHERE target = 'qemu'")
    for table in ("samples_v1", "runs_v1", "variants_v1"):
        db.execute(f"DROP TABLE {table}")


def _migrate_2_to_3(db: sqlite3.Connection) -> None:
    """Schema 2 stored a record the console repeated once per copy: keep the first; and
    did not say which process measured a run."""
    if "owner" not in {row[1] for row in db.execute("PRAGMA table_info(runs)")}:
        db.execute("ALTER TABLE runs ADD COLUMN owner TEXT")
    db.execute("DELETE FROM samples WHERE seq IS NOT NULL AND id NOT IN"
               " (SELECT min(id) FROM samples WHERE seq IS NOT NULL GROUP BY run_id, seq)")
    db.execute("CREATE UNIQUE INDEX IF NOT EXISTS samples_seq ON samples(run_id, seq)")


def _migrate_3_to_4(db: sqlite3.Connection) -> None:
    """Schema 3 had no workloads: their table, empty."""
    db.execute(WORKLOADS_TABLE)


def _migrate_4_to_5(db: sqlite3.Connection) -> None:
    """Schema 4 knew a run's process (owner), not its command: the runs it has keep NULL,
    and `runs` groups them by process, as it did. (A schema 1 store has it already: its
    runs table was made anew from SCHEMA.)"""
    if "invocation" not in {row[1] for row in db.execute("PRAGMA table_info(runs)")}:
        db.execute("ALTER TABLE runs ADD COLUMN invocation TEXT")


# The fault suite's hook (tests/faults): the Nth sample this process writes dies in the
# middle of its transaction, as a kill -9 timed by luck would.
_KILL_AT_SAMPLE = int(os.environ.get("KERNELLAB_FAULT_KILL_AT_SAMPLE", "0") or 0)


def _die_inside_a_write(db: sqlite3.Connection, run_id: int) -> None:
    db.execute("BEGIN IMMEDIATE")
    db.execute("INSERT INTO samples (run_id, metric, unit, rep, iters, value) VALUES (?, 'fault', 'ns', 0, 1, 0)",
               (run_id,))
    os.kill(os.getpid(), signal.SIGKILL)


def _me() -> str:
    """This process, as a run's owner: its pid and start time (a pid alone gets reused)."""
    return f"{os.getpid()} {reaper.start_time(os.getpid())}"


MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {1: _migrate_1_to_2, 2: _migrate_2_to_3,
                                                              3: _migrate_3_to_4, 4: _migrate_4_to_5}

# The kernellab command whose runs are being measured: what `runs` groups by. cli.main makes
# a new one for each command (begin_command), so that two commands in one process (a test, a
# script calling main) are two groups, where a process (a run's owner) would be one.
_invocation = uuid.uuid4().hex


def begin_command() -> None:
    """The runs measured from now on belong to a new command."""
    global _invocation
    _invocation = uuid.uuid4().hex


class Store:
    def __init__(self, path: Path):
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            self._refuse_foreign()   # before anything below writes to the file
            self.db.execute("PRAGMA journal_mode=WAL")
            # In WAL mode NORMAL still makes each commit survive the death of the process
            # (kill -9, a panic of kernellab); only a power loss may lose the last commits.
            # FULL would fsync every sample.
            self.db.execute("PRAGMA synchronous=NORMAL")
            self._open_schema()
            self.db.row_factory = sqlite3.Row
            self.abandoned = self._mark_abandoned()
        except sqlite3.DatabaseError as exc:
            if "not a database" in str(exc):
                raise LabError(f"{self.path} is not a kernellab store (not an SQLite database, or a damaged "
                               "one): move it away or pass --store PATH; kernellab never overwrites it") from None
            raise LabError(f"cannot open the store at {self.path} ({exc}): "
                           "pass --store PATH in a writable directory") from None
        except OSError as exc:
            raise LabError(f"cannot open the store at {self.path} ({exc}): "
                           "pass --store PATH in a writable directory") from None
        self._samples_written = 0

    def _open_schema(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")  # one writer decides and migrates
        try:
            version = self.db.execute("PRAGMA user_version").fetchone()[0]
            tables = self._tables()
            if version == 0 and tables:
                version = 1  # written before the schema had a version
            if version > SCHEMA_VERSION:
                raise LabError(f"the store at {self.path} has schema version {version}; this kernellab "
                               f"reads up to {SCHEMA_VERSION}: upgrade kernellab or pass --store PATH")
            if version < 0 or (0 < version < SCHEMA_VERSION and version not in MIGRATIONS):
                raise LabError(f"the store at {self.path} has schema version {version}, which no kernellab "
                               "wrote (changed by something else): move it away or pass --store PATH; "
                               "kernellab never overwrites it")
            if version == 0:
                for statement in SCHEMA.split(";"):
                    if statement.strip():
                        self.db.execute(statement)
            else:
                while version < SCHEMA_VERSION:
                    MIGRATIONS[version](self.db)
                    version += 1
            self.db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise

    def _mark_abandoned(self) -> list[int]:
        """Runs this host's kernellab was measuring when it died (kill -9, OOM): marked
        interrupted, their samples kept. A run whose kernellab still runs is left alone."""
        marked = []
        rows = self.db.execute("SELECT id, owner FROM runs WHERE status = 'running' AND owner IS NOT NULL"
                               " AND host = ?", (socket.gethostname(),)).fetchall()
        for run_id, owner in rows:
            pid, started = self._owner(run_id, owner)
            if reaper.alive(pid, started):
                continue
            kept = self.db.execute("SELECT count(*) FROM samples WHERE run_id = ?", (run_id,)).fetchone()[0]
            self._commit("UPDATE runs SET status = 'interrupted', reason = ?, ended = ? WHERE id = ?"
                         " AND status = 'running'",
                         (f"kernellab (pid {pid}) died while it measured this run (killed?); "
                          f"the {kept} sample(s) it stored are kept", time.time(), run_id))
            marked.append(run_id)
        return marked

    def _owner(self, run_id: int, owner: Any) -> tuple[int, int]:
        """A run's owner as kernellab writes it ('PID START'), or a LabError naming the row."""
        try:
            pid, started = (int(x) for x in str(owner).split())
            return pid, started
        except ValueError:
            raise self._damaged(run_id, "owner", owner) from None

    def _damaged(self, run_id: int, column: str, value: Any) -> LabError:
        return LabError(f"the store at {self.path}: run {run_id} has {column} = {str(value)[:40]!r}, which "
                        "kernellab never writes (the file was changed by something else): correct or delete "
                        f"that row (sqlite3 {self.path}), or pass --store PATH")

    def _query(self, sql: str, args: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        """Every read goes through here: a store damaged under a running kernellab (a page
        gone bad, a table altered) is one line naming the file, never a traceback."""
        try:
            return self.db.execute(sql, args).fetchall()
        except sqlite3.DatabaseError as exc:
            raise LabError(f"cannot read the store at {self.path} ({exc}): move it away or pass "
                           "--store PATH") from None

    def _tables(self) -> set[str]:
        return {row[0] for row in self.db.execute("SELECT name FROM sqlite_master WHERE type='table'")}

    def _refuse_foreign(self) -> None:
        tables = self._tables()
        if tables and not CORE_TABLES <= tables:
            raise LabError(f"{self.path} is an SQLite database but not a kernellab store (its tables: "
                           f"{', '.join(sorted(tables)[:6])}): pass --store PATH; kernellab never overwrites it")

    def close(self) -> None:
        self.db.close()

    def _commit(self, sql: str, args: tuple[Any, ...]) -> int:
        # Autocommit mode: each statement is its own transaction, committed on return.
        try:
            cur = self.db.execute(sql, args)
        except sqlite3.Error as exc:
            raise LabError(f"cannot write the store at {self.path} ({exc}): "
                           "free some space or pass --store PATH") from None
        return cur.lastrowid or 0

    def schema_version(self) -> int:
        return int(self.db.execute("PRAGMA user_version").fetchone()[0])

    # -- variants and builds ---------------------------------------------------------

    def add_source(self, source: Any) -> None:
        d = source.to_dict()
        self._commit("INSERT OR REPLACE INTO sources VALUES (?,?,?,?,?,?)",
                     (source.id, d["spec"], d["kind"], d["version"], d["content_hash"], d["tree"]))

    def add_variant(self, name: str, source: Any, arch: str, base: str, spec: dict[str, Any],
                    config_hash: str, dropped: list[dict[str, str]], boot_args: str = "",
                    sysctls: str = "") -> int:
        self.add_source(source)
        row = self.db.execute("SELECT id FROM variants WHERE name=? AND source_id=? AND arch=? AND"
                              " config_hash=? AND boot_args=? AND sysctls=?",
                              (name, source.id, arch, config_hash, boot_args, sysctls)).fetchone()
        if row:
            return int(row["id"])
        return self._commit("INSERT INTO variants (name, source_id, arch, base, spec, config_hash,"
                            " dropped, created, boot_args, sysctls) VALUES (?,?,?,?,?,?,?,?,?,?)",
                            (name, source.id, arch, base, json.dumps(spec), config_hash,
                             json.dumps(dropped), time.time(), boot_args, sysctls))

    def add_build(self, key: str, variant_id: int, record: dict[str, Any]) -> None:
        """The record of the build the cache holds under `key`: a kernel built again (from
        scratch, to time it) replaces the record of the earlier build, as it did its files."""
        if record.get("cached"):   # a cache hit: the record of the build that made it stands
            sql = "INSERT OR IGNORE INTO builds VALUES (?,?,?,?)"
        else:
            sql = ("INSERT INTO builds VALUES (?,?,?,?) ON CONFLICT (key) DO UPDATE SET "
                   "record = excluded.record, created = excluded.created")
        self._commit(sql, (key, variant_id, json.dumps(record), time.time()))

    # -- runs ------------------------------------------------------------------------

    def start_run(self, variant_id: int, build_key: str, target: str, target_info: dict[str, Any],
                  mode: str, command: list[str], options_key: str, initramfs: str | None) -> int:
        return self._commit(
            "INSERT INTO runs (variant_id, build_key, target, mode, host, status, started, command,"
            " options_key, initramfs, target_info, owner, invocation) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (variant_id, build_key, target, mode, socket.gethostname(), "running", time.time(),
             json.dumps(command), options_key, initramfs, json.dumps(target_info), _me(), _invocation))

    def add_sample(self, run_id: int, metric: str, unit: str, rep: int, iters: int, value: float,
                   seq: int | None = None) -> None:
        self._samples_written += 1
        if self._samples_written == _KILL_AT_SAMPLE:
            _die_inside_a_write(self.db, run_id)
        # A record stored already (the same run and record number) is not stored again.
        self._commit("INSERT OR IGNORE INTO samples (run_id, metric, unit, rep, iters, value, seq)"
                     " VALUES (?,?,?,?,?,?,?)", (run_id, metric, unit, rep, iters, value, seq))

    def add_unavailable(self, run_id: int, metric: str, reason: str) -> None:
        self._commit("INSERT INTO unavailable (run_id, metric, reason) VALUES (?,?,?)",
                     (run_id, metric, reason))

    def append_log(self, log_id: int, text: str) -> None:
        """More of a log that grows as it is read (a console)."""
        self._commit("UPDATE logs SET text = text || ? WHERE id = ?", (text, log_id))

    def add_log(self, kind: str, text: str, run_id: int | None = None, build_key: str | None = None) -> int:
        return self._commit("INSERT INTO logs (run_id, build_key, kind, text) VALUES (?,?,?,?)",
                            (run_id, build_key, kind, text))

    def finish_run(self, run_id: int, status: str, reason: str, agent_version: int | None = None,
                   clocksource: str | None = None) -> None:
        self._commit("UPDATE runs SET status=?, reason=?, ended=?, agent_version=coalesce(?, agent_version),"
                     " clocksource=coalesce(?, clocksource) WHERE id=?",
                     (status, reason, time.time(), agent_version, clocksource, run_id))

    def add_workload(self, run_id: int, label: str, provenance: dict[str, Any], status: str, reason: str,
                     elapsed_s: float | None) -> None:
        """How one workload of the run ended, with what it ran (program, version, argv)."""
        self._commit("INSERT INTO workloads (run_id, label, provenance, status, reason, elapsed_s)"
                     " VALUES (?,?,?,?,?,?)", (run_id, label, json.dumps(provenance), status, reason, elapsed_s))

    def set_target_info(self, run_id: int, target_info: dict[str, Any]) -> None:
        """What the target learned by the end of a run (a machine's load average after)."""
        self._commit("UPDATE runs SET target_info=? WHERE id=?", (json.dumps(target_info), run_id))

    # -- reading ---------------------------------------------------------------------

    def run(self, run_id: int) -> sqlite3.Row | None:
        if not -_MAX_SQL_INT <= run_id <= _MAX_SQL_INT:
            return None
        rows = self._query("SELECT * FROM runs WHERE id=?", (run_id,))
        return rows[0] if rows else None

    def run_samples(self, run_id: int) -> list[sqlite3.Row]:
        return self._query("SELECT metric, unit, rep, iters, value, seq FROM samples WHERE run_id=?"
                           " ORDER BY id", (run_id,))

    def run_metrics(self, run_id: int) -> dict[str, list[float]]:
        """metric -> the run's samples of it, in the order they arrived."""
        out: dict[str, list[float]] = {}
        for row in self.run_samples(run_id):
            out.setdefault(row["metric"], []).append(row["value"])
        return out

    def run_unavailable(self, run_id: int) -> dict[str, str]:
        """metric -> why the run could not measure it."""
        return {row["metric"]: row["reason"] for row in self._query(
            "SELECT metric, reason FROM unavailable WHERE run_id=? ORDER BY id", (run_id,))}

    def runs(self, limit: int = 50) -> list[sqlite3.Row]:
        """The latest runs, newest first; a row whose start is not a time is refused, named."""
        rows = self._query(
            "SELECT r.id, r.started, r.ended, r.mode, r.status, r.reason, r.target,"
            # target_info that is not JSON (edited) is no label, rather than an SQL error
            " coalesce(CASE WHEN json_valid(r.target_info) THEN json_extract(r.target_info, '$.label') END,"
            " r.target) AS label, v.name,"
            " v.arch, s.version, (SELECT count(*) FROM samples WHERE run_id=r.id) AS samples,"
            # The first run of the kernellab command that measured it (its invocation; before
            # schema 5, its process: the owner): NULL for a run of a store older than owners.
            " (SELECT min(o.id) FROM runs o WHERE coalesce(o.invocation, o.owner) = coalesce(r.invocation, r.owner))"
            " AS command_run"
            " FROM runs r JOIN variants v ON v.id=r.variant_id JOIN sources s ON s.id=v.source_id"
            " ORDER BY r.id DESC LIMIT ?", (min(limit, _MAX_SQL_INT),))
        for row in rows:
            started = row["started"]
            # What time.time() wrote: a number of seconds a date can be made of (0 to year 9999).
            if isinstance(started, bool) or not isinstance(started, (int, float)) or not 0 <= started < 2.5e11:
                raise self._damaged(row["id"], "started", started)
        return rows

    def finished_runs(self, build_key: str, mode: str, options_key: str) -> list[int]:
        """Earlier successful runs of this very kernel with these run options: what lets an
        interrupted bisect or sweep resume without redoing its probes."""
        return [row["id"] for row in self._query(
            "SELECT id FROM runs WHERE build_key=? AND mode=? AND status='ok' AND options_key=?"
            " ORDER BY id", (build_key, mode, options_key))]

    def run_for_target(self, target: str, key: str, value: str, unless: tuple[str, ...] = ()) -> int | None:
        """The first run on `target` whose target details say key=value (a LAVA job id),
        its status not one of `unless`: what keeps a job imported twice from counting
        twice, while a failed import can be tried again."""
        rows = self._query("SELECT id FROM runs WHERE target=? AND"
                           " json_extract(target_info, '$.details.' || ?) = ?"
                           f" AND status NOT IN ({','.join('?' * len(unless))}) ORDER BY id LIMIT 1",
                           (target, key, value, *unless))
        return int(rows[0]["id"]) if rows else None

    def run_workloads(self, run_id: int) -> list[dict[str, Any]]:
        """The run's workloads, in the order they ran: label, provenance, status, reason, elapsed_s."""
        out = []
        for row in self._query("SELECT label, provenance, status, reason, elapsed_s FROM workloads"
                               " WHERE run_id=? ORDER BY id", (run_id,)):
            try:
                provenance = json.loads(row["provenance"])
            except (TypeError, ValueError):
                raise self._damaged(run_id, "workloads.provenance", row["provenance"]) from None
            out.append({"label": row["label"], "provenance": provenance, "status": row["status"],
                        "reason": row["reason"], "elapsed_s": row["elapsed_s"]})
        return out

    def run_logs(self, run_id: int, kind: str) -> list[str]:
        if not -_MAX_SQL_INT <= run_id <= _MAX_SQL_INT:
            return []
        return [_text(row["text"]) for row in self._query(
            "SELECT text FROM logs WHERE run_id=? AND kind=? ORDER BY id", (run_id, kind))]

    def run_vulnerabilities(self, run_id: int) -> dict[str, str]:
        """The CPU flaws the run's kernel reported, NAME -> state as the agent sent it."""
        return vulnerabilities.from_log(self.run_log(run_id, vulnerabilities.LOG_KIND))

    def run_log(self, run_id: int, kind: str = "console") -> str | None:
        logs = self.run_logs(run_id, kind)
        return logs[0] if logs else None


def _text(value: Any) -> str:
    """A log as text, whatever the column holds: a console's bytes that are not UTF-8
    (stored as a BLOB by something else) decoded with replacement, NULL as nothing."""
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return "" if value is None else str(value)
