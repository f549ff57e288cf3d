"""A user's own workload file, written for a test: one shell script run by dash, a number
printed and read by a regex (the tests of workload runs, on this machine, over ssh and in
every measuring command share it)."""

from pathlib import Path


def workload_file(tmp: Path, name: str, script: str, *, metrics: str = "", timeout_s: float = 30,
                  extra: str = "", command: str = '["sh", "{workdir}/run.sh"]', server: str = "",
                  serve: str = "") -> Path:
    """A user's own workload: a shell script printing numbers, read by a regex per metric;
    with `server`, a [server] table's lines, and `serve`, the script serve.sh it may run."""
    metrics = metrics or '''
[[metric]]
name = "value"
unit = "count"
better = "higher"
regex = '^value: (\\d+)$'
'''
    path = tmp / f"{name}.toml"
    path.write_text(f'''name = "{name}"
description = "a test's script"
packages = ["dash"]
command = {command}
fixed_work = true
why = "prints what it is told"
{extra}
{"[server]" if server else ""}
{server}
[files]
"run.sh" = \'\'\'
{script}
\'\'\'
"serve.sh" = \'\'\'
{serve}
\'\'\'

[run]
iterations = "n"
timeout_s = {timeout_s}

[output]
format = "text"

[params.n]
default = "1"
pattern = '[0-9]+'
help = "a number"
{metrics}''')
    return path
