"""A user's own workload file, written for a test: one shell script run by dash, a number
printed and read by a regex (the tests of workload runs, on this machine, over ssh and in
every measuring command share it), and a compare of this machine's running kernel with
workloads (running_kernel_report)."""

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


def running_kernel_report(tmp: Path, instances, shell=None) -> dict:
    """`compare` of this machine's running kernel (--target local) with these workloads, one
    quick boot's worth of the agent; with `shell`, the machine's remote commands answered by
    it (a machine posing as a remote). Every run must succeed: the report."""
    import dataclasses

    from kernellab.experiments import compare
    from kernellab.experiments.placement import Placement
    from kernellab.experiments.spec import Experiment, parse_short
    from kernellab.store import Store
    from kernellab.targets import TargetOptions

    placement = Placement(TargetOptions("local"), log=lambda m: None)
    if shell is not None:
        assert placement.machine is not None
        placement.machine.shell = shell
    exp = Experiment("running", [parse_short("running")])
    how = compare.plan(exp, None, 1, None, 300.0, placement=placement, workloads=instances)
    options = dataclasses.replace(how.options, cmdline_extra="KL_ONLY=syscall.null KL_REPEATS=1")
    how = dataclasses.replace(how, options=options, target=lambda p, b: placement.target(p, b, options))
    report, failures = compare.run_experiment(exp, Store(tmp / "s.sqlite"), how, log=lambda m: None)
    assert failures == []
    return report
