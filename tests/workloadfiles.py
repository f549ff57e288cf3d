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


# A server a workload that talks to the host runs where the kernel runs: it listens on the
# port it is given, says so, counts the bytes of one connection, answers their count and
# exits (as iperf3 --one-off does after one test). On 127.0.0.1: the fake QEMU's guest is
# this machine, and its forward ends there (tests/fakes/qemu).
HOST_SERVER = '''import socket, sys
with socket.create_server(("127.0.0.1", int(sys.argv[1]))) as listener:
    print("listening on", sys.argv[1], flush=True)
    for _ in range(int(sys.argv[2]) if len(sys.argv) > 2 else 1):
        conn, _ = listener.accept()
        got = 0
        while data := conn.recv(65536):
            got += len(data)
        conn.sendall(b"%d\\n" % got)
        conn.close()
print("received", got, flush=True)
'''
# The host's side: connects to ADDRESS PORT, sends N bytes, prints what it sent and what the
# server says it received, as JSON; then exits with STATUS (and its last words on stderr).
HOST_CLIENT = '''import json, socket, sys
address, port, n, status = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
with socket.create_connection((address, port), timeout=20) as conn:
    conn.sendall(b"x" * n)
    conn.shutdown(socket.SHUT_WR)
    received = int(conn.makefile().read())
print(json.dumps({"end": {"sent": n, "received": received}}))
if status:
    print(f"refusing to go on (exit {status})", file=sys.stderr)
    sys.exit(status)
'''


def free_port() -> int:
    import socket
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def host_workload_file(tmp: Path, name: str, *, port: int | None = None, status: int = 0,
                       program: str = "python3") -> Path:
    """A workload that talks to the host (needs.network = "host"): HOST_SERVER where the
    kernel runs, on `port` (a free one when not given), and HOST_CLIENT on the host, run by
    `program`, against it, sending {n} bytes and exiting with `status`; its metrics `sent`
    and `received` (bytes)."""
    import json
    port = port or free_port()
    client = tmp / f"{name}-client.py"
    client.write_text(HOST_CLIENT)
    command = json.dumps([program, str(client), "{address}", "{port}", "{n}", str(status)])
    path = tmp / f"{name}.toml"
    path.write_text(f'''name = "{name}"
description = "a test's bytes from the host to a server where the kernel runs"
packages = ["python3"]
command = {command}
fixed_work = true
why = "a fixed number of bytes"

[server]
command = ["python3", "{{workdir}}/serve.py", "{port}"]
ready_line = '^listening on'
ready_timeout_s = 20
port = {port}

[files]
"serve.py" = \'\'\'
{HOST_SERVER}\'\'\'

[run]
iterations = "n"
timeout_s = 30

[output]
format = "json"

[params.n]
default = "100000"
pattern = '[1-9][0-9]*'
help = "bytes to send"

[needs]
network = "host"

[[metric]]
name = "sent"
unit = "B"
better = "higher"
path = "end.sent"

[[metric]]
name = "received"
unit = "B"
better = "higher"
path = "end.received"
''')
    return path


class RecordingSink:
    """A Reader's sink that keeps what it is given: metric -> value, metric -> why not."""

    def __init__(self):
        self.samples, self.na = {}, {}

    def sample(self, s):
        self.samples[s[0]] = s[2]

    def unavailable(self, metric, reason):
        self.na[metric] = reason
