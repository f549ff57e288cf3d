"""A git history of the fake kernel tree with planted changes (issue 32), for `why` and
`track` (tests/test_why.py, tests/test_track.py): the fake tree as its first commit, then
12 commits: a comment only, innocuous ones, one that makes the system-call path 10% slower
(a FAKE_COST string the fake QEMU reads from vmlinux), one whose kernel panics, one that
breaks the build and the one that fixes both, and one that turns a Kconfig default on
(FAKE_SLOW: 25% slower, for a configuration that does not already say "is not set")."""

import json
import os
import shutil
import subprocess
from pathlib import Path

from fakes import KERNEL_TREE

GIT_ENV = {"GIT_AUTHOR_NAME": "Ada Lovelace", "GIT_AUTHOR_EMAIL": "ada@example.org",
           "GIT_COMMITTER_NAME": "Ada Lovelace", "GIT_COMMITTER_EMAIL": "ada@example.org",
           "GIT_AUTHOR_DATE": "2024-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2024-01-01T00:00:00Z"}
PLANTED = "sched: getppid walks the task list"
BROKEN = "fork: call the new clone hook"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env={**os.environ, **GIT_ENV}).stdout.strip()


def edit(repo: Path, path: str, old: str | None, new: str) -> None:
    """Replace `old` by `new` in a file (None: append `new`)."""
    f = repo / path
    text = f.read_text()
    if old is None:
        f.write_text(text + new)
    else:
        assert old in text, (path, old)
        f.write_text(text.replace(old, new, 1))


def commit(repo: Path, subject: str) -> str:
    git(repo, "commit", "-qam", subject)
    return git(repo, "rev-parse", "HEAD")


PANICS = "fs: proc entries checked at boot"
# (subject, [(file, old text or None to append, new text)])
HISTORY = [
    ("init: say hello in a comment", [("init/main.c", "/* The ELF entry point", "/* Hello. The ELF entry point")]),
    ("net: count sockets", [("net/socket.c", None, "int socket_count;\n")]),
    (PLANTED, [("kernel/sched.c", None, 'FAKE_COST(getppid_walk, "syscall.null=1.10");\n')]),
    ("mm: count pages", [("mm/memory.c", None, "int page_count;\n")]),
    (PANICS, [("fs/proc.c", None, 'FAKE_COST(proc_check, "panic=1");\n')]),
    (BROKEN, [("kernel/fork.c", "\treturn 1;\n}", "\tclone_hook_that_does_not_exist();\n\treturn 1;\n}")]),
    ("fork: drop the clone hook and the proc check", [
        ("kernel/fork.c", "\tclone_hook_that_does_not_exist();\n", ""),
        ("fs/proc.c", 'FAKE_COST(proc_check, "panic=1");\n', "")]),
    ("Kconfig: FAKE_SLOW is on by default", [
        ("Kconfig", 'bool "Slow guest: system calls and forks take 25% longer, boot 30%"\n',
         'bool "Slow guest: system calls and forks take 25% longer, boot 30%"\n\tdefault y\n')]),
    ("tty: count ports", [("drivers/tty/serial8250.c", None, "int serial_ports;\n")]),
    ("crypto: count keys", [("crypto/aes.c", None, "int aes_keys;\n")]),
    ("lib: count list checks", [("lib/list_debug.c", None, "int list_checks;\n")]),
    ("virtio: count queues", [("drivers/virtio/virtio.c", None, "int virtio_queues;\n")]),
]


def make_history(where: Path) -> tuple[Path, list[str]]:
    """A git repository of the fake kernel tree: (its path, the commits: GOOD then the 12)."""
    repo = where / "linux"
    shutil.copytree(KERNEL_TREE, repo, ignore=shutil.ignore_patterns("__pycache__"))
    git(repo, "init", "-q", "-b", "master")
    git(repo, "add", "-A")
    shas = [commit(repo, "the fake tree as shipped")]
    for subject, edits in HISTORY:
        for path, old, new in edits:
            edit(repo, path, old, new)
        shas.append(commit(repo, subject))
    return repo, shas


def shown_as_format_1(lab, capsys, result: dict, rows: str, name: str) -> tuple[str, dict]:
    """`result` (a why answer or a track series) as format 1 wrote it (no build counts in
    its `rows`), shown: -> (the table, the JSON `show` gives back)."""
    old = json.loads(json.dumps(result))
    old["format_version"] = 1
    for row in old[rows]:
        del row["compiled"], row["checkout_from"]
    path = lab.tmp / name
    path.write_text(json.dumps(old))
    assert lab.main("show", str(path)) == 0
    table = capsys.readouterr().out
    assert lab.main("show", str(path), "--format", "json") == 0
    return table, json.loads(capsys.readouterr().out)
