"""The lab's record: one SQLite file in WAL mode.

Every sample is committed the moment it arrives, so a run that is interrupted (a guest
that hangs, a Ctrl-C, a host that dies) loses nothing already measured.
"""

from __future__ import annotations

import json
import socket
import sqlite3
import time
from pathlib import Path

from .errors import LabError

SCHEMA = """
CREATE TABLE IF NOT EXISTS sources (
    id TEXT PRIMARY KEY, spec TEXT, kind TEXT, version TEXT, content_hash TEXT, tree TEXT);
CREATE TABLE IF NOT EXISTS variants (
    id INTEGER PRIMARY KEY, name TEXT, source_id TEXT REFERENCES sources(id), arch TEXT,
    base TEXT, spec TEXT, config_hash TEXT, dropped TEXT, created REAL,
    UNIQUE (name, source_id, arch, config_hash));
CREATE TABLE IF NOT EXISTS builds (
    key TEXT PRIMARY KEY, variant_id INTEGER REFERENCES variants(id), record TEXT, created REAL);
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY, variant_id INTEGER REFERENCES variants(id), build_key TEXT,
    target TEXT, mode TEXT, host TEXT, status TEXT, reason TEXT, started REAL, ended REAL,
    command TEXT);
CREATE TABLE IF NOT EXISTS samples (
    id INTEGER PRIMARY KEY, run_id INTEGER REFERENCES runs(id), metric TEXT, unit TEXT,
    rep INTEGER, iters INTEGER, value REAL);
CREATE INDEX IF NOT EXISTS samples_run ON samples(run_id, metric);
CREATE TABLE IF NOT EXISTS logs (
    id INTEGER PRIMARY KEY, run_id INTEGER, build_key TEXT, kind TEXT, text TEXT);
"""


class Store:
    def __init__(self, path: Path):
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.db = sqlite3.connect(self.path, timeout=30)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.executescript(SCHEMA)
            self.db.commit()
        except (sqlite3.Error, OSError) as exc:
            raise LabError(f"cannot write the store at {self.path} ({exc}): "
                           "pass --store PATH in a writable directory") from None
        self.db.row_factory = sqlite3.Row

    def close(self) -> None:
        self.db.close()

    def _commit(self, sql: str, args: tuple) -> int:
        try:
            cur = self.db.execute(sql, args)
            self.db.commit()
        except sqlite3.Error as exc:
            raise LabError(f"cannot write the store at {self.path} ({exc}): "
                           "free some space or pass --store PATH") from None
        return cur.lastrowid

    def add_source(self, source) -> None:
        d = source.to_dict()
        self._commit("INSERT OR REPLACE INTO sources VALUES (?,?,?,?,?,?)",
                     (source.id, d["spec"], d["kind"], d["version"], d["content_hash"], d["tree"]))

    def add_variant(self, name, source, arch, base, spec: dict, config_hash, dropped) -> int:
        self.add_source(source)
        row = self.db.execute("SELECT id FROM variants WHERE name=? AND source_id=? AND arch=? "
                              "AND config_hash=?", (name, source.id, arch, config_hash)).fetchone()
        if row:
            return row["id"]
        return self._commit("INSERT INTO variants (name, source_id, arch, base, spec, config_hash,"
                            " dropped, created) VALUES (?,?,?,?,?,?,?,?)",
                            (name, source.id, arch, base, json.dumps(spec), config_hash,
                             json.dumps(dropped), time.time()))

    def add_build(self, key: str, variant_id: int, record: dict) -> None:
        self._commit("INSERT OR IGNORE INTO builds VALUES (?,?,?,?)",
                     (key, variant_id, json.dumps(record), time.time()))

    def build_record(self, key: str) -> dict | None:
        row = self.db.execute("SELECT record FROM builds WHERE key=?", (key,)).fetchone()
        return json.loads(row["record"]) if row else None

    def start_run(self, variant_id, build_key, target, mode, command) -> int:
        return self._commit("INSERT INTO runs (variant_id, build_key, target, mode, host, status,"
                            " started, command) VALUES (?,?,?,?,?,?,?,?)",
                            (variant_id, build_key, target, mode, socket.gethostname(), "running",
                             time.time(), json.dumps(command)))

    def add_sample(self, run_id, metric, unit, rep, iters, value) -> None:
        self._commit("INSERT INTO samples (run_id, metric, unit, rep, iters, value)"
                     " VALUES (?,?,?,?,?,?)", (run_id, metric, unit, rep, iters, value))

    def add_log(self, kind: str, text: str, run_id=None, build_key=None) -> None:
        self._commit("INSERT INTO logs (run_id, build_key, kind, text) VALUES (?,?,?,?)",
                     (run_id, build_key, kind, text))

    def finish_run(self, run_id, status, reason) -> None:
        self._commit("UPDATE runs SET status=?, reason=?, ended=? WHERE id=?",
                     (status, reason, time.time(), run_id))

    def run_samples(self, run_id) -> list[sqlite3.Row]:
        return self.db.execute("SELECT metric, unit, rep, iters, value FROM samples WHERE run_id=?"
                               " ORDER BY id", (run_id,)).fetchall()

    def run_metrics(self, run_id) -> dict[str, list[float]]:
        """metric -> the run's samples of it, in the order they arrived."""
        out: dict[str, list[float]] = {}
        for row in self.run_samples(run_id):
            out.setdefault(row["metric"], []).append(row["value"])
        return out

    def runs(self, limit: int = 50) -> list[sqlite3.Row]:
        return self.db.execute(
            "SELECT r.id, r.started, r.ended, r.mode, r.status, r.reason, r.target, v.name,"
            " v.arch, s.version, (SELECT count(*) FROM samples WHERE run_id=r.id) AS samples"
            " FROM runs r JOIN variants v ON v.id=r.variant_id JOIN sources s ON s.id=v.source_id"
            " ORDER BY r.id DESC LIMIT ?", (limit,)).fetchall()

    def finished_runs(self, build_key: str, mode: str, options: str) -> list[int]:
        """Earlier successful runs of this very kernel with these run options: what lets an
        interrupted bisect or sweep resume without redoing its probes."""
        return [row["id"] for row in self.db.execute(
            "SELECT r.id FROM runs r JOIN logs l ON l.run_id = r.id AND l.kind = 'options'"
            " WHERE r.build_key=? AND r.mode=? AND r.status='ok' AND l.text=? ORDER BY r.id",
            (build_key, mode, options))]

    def run_logs(self, run_id, kind: str) -> list[str]:
        return [row["text"] for row in self.db.execute(
            "SELECT text FROM logs WHERE run_id=? AND kind=? ORDER BY id", (run_id, kind))]

    def run_log(self, run_id, kind="console") -> str | None:
        row = self.db.execute("SELECT text FROM logs WHERE run_id=? AND kind=?",
                              (run_id, kind)).fetchone()
        return row["text"] if row else None
