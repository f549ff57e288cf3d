"""Capture the shipped workloads' declared samples: run each sample's variant for real on this
machine (one core, in a scratch directory under /var/tmp), its server first, and write what
the program printed (its `output.stream`) over the sample file.

    sudo apt-get install -y fio stress-ng rt-tests sysbench iperf3 redis-server redis-tools \\
        nginx apache2-utils linux-perf
    .venv/bin/python tests/data/workloads/capture_samples.py [WORKLOAD ...]

Not a test and not the run side: a stand-in for it, kept so that the samples can be made
again the same way (each runs for a second or two).
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kernellab import workloads

SHIPPED = Path(workloads.__file__).parent


def wait_ready(server: subprocess.Popen[str], spec: workloads.Server) -> None:
    deadline = time.monotonic() + spec.ready_timeout_s
    while time.monotonic() < deadline:
        if spec.ready_port:
            try:
                socket.create_connection(("127.0.0.1", spec.ready_port), 0.2).close()
                return
            except OSError:
                time.sleep(0.1)
        else:
            assert server.stdout is not None
            line = server.stdout.readline()
            if re.search(spec.ready_line, line):
                return
    raise SystemExit("the server did not become ready")


def capture(inst: workloads.Instance, workdir: str) -> str:
    w = inst.workload
    for name, text in inst.files(workdir).items():
        Path(workdir, name).write_text(text)
    Path(workdir, "tmp").mkdir(exist_ok=True)
    server = None
    server_argv = inst.server_argv(workdir)
    if server_argv is not None and w.server is not None:
        server = subprocess.Popen(["taskset", "-c", "0", *server_argv], cwd=workdir, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, start_new_session=True)
        wait_ready(server, w.server)
    try:
        done = subprocess.run(["taskset", "-c", "0", *inst.argv(workdir)], cwd=workdir, capture_output=True,
                              text=True, timeout=120, check=True)
    finally:
        if server is not None:
            os.killpg(server.pid, getattr(signal, f"SIG{w.server.stop_signal}" if w.server else "SIGTERM"))
            server.wait(10)
    return {"stdout": done.stdout, "stderr": done.stderr, "both": done.stdout + done.stderr}[w.output.stream]


def main(names: list[str]) -> None:
    for name in names or workloads.packaged():
        loaded = workloads.load(name)
        for sample in loaded.workload.sample:
            inst = workloads.instance(loaded, sample.params)
            with tempfile.TemporaryDirectory(dir="/var/tmp") as workdir:
                text = capture(inst, workdir)
            print(f"{inst.label}: {inst.read(text).strict(sample.file)}")
            (SHIPPED / sample.file).write_text(text)


if __name__ == "__main__":
    main(sys.argv[1:])
