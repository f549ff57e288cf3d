"""Workload files (src/kernellab/workloads/*.toml, a user's own by path): the format, the
parameters, the parsers on the real output of each program, and `kernellab workload`."""

from __future__ import annotations

import fnmatch
import json
import textwrap
import tomllib
from pathlib import Path

import pytest

from kernellab import workloads
from kernellab.errors import LabError
from kernellab.experiments.lab import RunOptions
from kernellab.workloads import parse

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "src" / "kernellab" / "workloads"
USER_FILE = ROOT / "tests" / "data" / "workloads" / "spin.toml"

# A small valid text workload; the tests below break one thing at a time.
MINIMAL = """\
name = "tiny"
description = "prints a number"
packages = []
command = ["tiny", "--n={n}", "--mode={mode}"]
fixed_work = true
why = "a fixed count"

[run]
iterations = "n"
timeout_s = 10

[output]
format = "text"

[params.n]
default = "10"
pattern = '[1-9][0-9]*'
help = "how many"

[params.mode]
default = "a.b"
choices = ["a.b", "c"]
help = "the mode"

[[metric]]
name = "{n}_time"
unit = "s"
better = "lower"
regex = '^{mode} took ([\\d.]+)$'
"""


HOST_NEEDS = '[needs]\nnetwork = "host"\n'
HOST_SERVER = '[server]\ncommand = ["srv"]\nready_port = 9000\nport = 9000\n'


def write(tmp_path: Path, text: str, name: str = "tiny.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.startswith("kernellab: error: "), err
    assert err.count("\n") == 1, err
    return err


# -- the shipped files, on their real samples

@pytest.mark.parametrize("name", workloads.packaged())
def test_a_shipped_workload_yields_every_metric_it_declares_from_its_real_samples(name):
    loaded = workloads.load(name)
    assert loaded.workload.sample, f"{name}: name a sample of the program's real output"
    covered = set()
    for sample, inst, text in workloads.samples(loaded):
        values = inst.read(text).strict(sample.file)
        resolved = inst.metrics()
        assert set(values) == {m.name for m in resolved}, sample.file
        assert all(v == v and v >= 0 for v in values.values()), values
        covered |= {m.template for m in resolved}
    assert covered == {m.name for m in loaded.workload.metric}


def test_the_starter_set_is_shipped():
    assert {"fio", "stress-ng", "hackbench", "cyclictest", "perf-bench", "sysbench", "iperf3", "iperf3-host",
            "redis", "nginx"} <= set(workloads.packaged())


def test_package_data_ships_every_workload_file_and_sample():
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["kernellab"]
    files = [p.relative_to(SHIPPED.parent).as_posix() for p in SHIPPED.rglob("*")
             if p.is_file() and p.suffix != ".py" and "__pycache__" not in p.parts]
    assert any(f.endswith(".toml") for f in files) and any("/samples/" in f for f in files)
    for f in files:
        assert any(fnmatch.fnmatch(f, p) for p in patterns), f


def test_the_metrics_speak_the_catalogs_vocabulary():
    from kernellab import modes
    for name in workloads.packaged():
        for m in workloads.load(name).workload.metric:
            assert m.better in ("lower", "higher") and set(m.modes) <= set(modes.NAMES)


# -- parameters and the command


def test_a_metrics_label_has_its_placeholders_filled_as_its_name_has():
    """fio's p99 says which access it is ("randread completion latency ..."), never "{rw} ..."."""
    [p99] = [m for m in workloads.resolve("fio:rw=randwrite").metrics() if m.name.endswith("_clat_p99")]
    assert (p99.name, p99.label) == ("randwrite_clat_p99", "randwrite completion latency, 99th percentile")
    assert all("{" not in m.label for spec in ("fio", "redis", "stress-ng", "hackbench")
               for m in workloads.resolve(spec).metrics())


def test_a_variant_fills_the_command_with_checked_parameters():
    inst = workloads.resolve("fio:bs=1M,rw=write,io=direct")
    argv = inst.argv("/scratch")
    assert "--bs=1M" in argv and "--rw=write" in argv and "--direct=1" in argv
    assert "--filename=/scratch/fio.dat" in argv
    assert inst.label == "fio:rw=write,bs=1M,io=direct"
    assert [m.name for m in inst.metrics()] == ["write_iops", "write_bw", "write_clat_p99"]
    assert workloads.resolve("fio").label == "fio"


def test_a_choice_may_stand_for_no_word_or_several():
    assert workloads.resolve("hackbench").argv("/w")[-1] == "--process"          # socket: no word
    assert workloads.resolve("hackbench:ipc=pipe").argv("/w")[-1] == "--pipe"
    memcpy = workloads.resolve("perf-bench:bench=mem_memcpy,loops=7").argv("/w")
    assert memcpy[2:] == ["--format=simple", "mem", "memcpy", "--function=default", "--size=4KB", "--nr_loops=7"]


@pytest.mark.parametrize("spec,says", [
    ("fio:bs=4k;rm -rf /", "does not match"),
    ("fio:rw=readwrite", "is not one of read, write, randread, randwrite"),
    ("fio:colour=red", "no parameter 'colour'"),
    ("fio:bs", "is not key=value"),
    ("fio:bs=4k,bs=1M", "given twice"),
    ("fio:bs=4k\n", "control character"),
    ("no-such-workload", "no workload 'no-such-workload'"),
    ("Fio", "write NAME or FILE.toml"),
])
def test_a_bad_variant_is_refused(spec, says):
    with pytest.raises(LabError, match=says.replace("(", r"\(")):
        workloads.resolve(spec).argv("/w")


def test_a_server_and_its_files_get_the_workdir():
    inst = workloads.resolve("nginx")
    assert inst.server_argv("/w") == ["nginx", "-p", "/w/", "-c", "nginx.conf", "-e", "stderr"]
    assert "root /w;" in inst.files("/w")["nginx.conf"]
    assert workloads.resolve("fio").server_argv("/w") is None


def test_a_runs_time_limit_counts_each_servers_grace_to_stop(tmp_path):
    """A server is stopped after its client, with a grace beyond the run's timeout (which
    already bounds its readiness wait): a run must not be killed as hung in that grace."""
    served = MINIMAL.replace('name = "tiny"', 'name = "served"') + (
        '\n[server]\ncommand = ["tinyd"]\nready_port = 9000\nready_timeout_s = 20\n')
    plain = workloads.resolve(str(write(tmp_path, MINIMAL)))
    server = workloads.resolve(str(write(tmp_path, served, "served.toml")))
    grace = workloads.Server.stop_grace_s
    assert grace == 5.0
    assert plain.workload.longest_s() == 10
    assert server.workload.longest_s() == 10 + grace
    assert RunOptions(workloads=(plain, server)).workload_timeout_s() == 10 + 10 + grace


def test_parameter_values_are_literal_in_a_regex(tmp_path):
    inst = workloads.resolve(str(write(tmp_path, MINIMAL)))
    assert inst.read("a.b took 1.5\n").strict("t") == {"10_time": 1.5}
    assert inst.read("axb took 1.5\n").failures     # the "." of mode=a.b is a dot, not any character


def test_a_value_that_makes_a_bad_metric_name_is_one_line(tmp_path):
    path = write(tmp_path, MINIMAL.replace('name = "{n}_time"', 'name = "{mode}_time"'))
    with pytest.raises(LabError, match="metric name 'a.b_time'"):
        workloads.resolve(str(path)).metrics()
    assert [m.name for m in workloads.resolve(f"{path}:mode=c").metrics()] == ["c_time"]


# -- the file format: one-line errors

@pytest.mark.parametrize("change,says", [
    (lambda t: t.replace('fixed_work = true', 'fixed_work = true\nfixed_wrok = true'), "unknown key 'fixed_wrok'"),
    (lambda t: t.replace('why = "a fixed count"\n', ''), "missing key 'why'"),
    (lambda t: t.replace("([\\d.]+)$'", "([\\d.]+) (s)$'"), "exactly one capturing group"),
    (lambda t: t.replace('"--n={n}"', '"--n={count}"'), "{count} is not a parameter"),
    (lambda t: t.replace('iterations = "n"', 'duration = "n"'), "not fixed work"),
    (lambda t: t.replace("pattern = '[1-9][0-9]*'", "pattern = '[1-9][0-9]*'\nchoices = ['1']"),
     "either a pattern or choices"),
    (lambda t: t.replace('default = "10"', 'default = "ten"'), "does not match"),
    (lambda t: t.replace("regex = ", "path = 'a.b'\nregex = "), "either path"),
    (lambda t: t.replace('format = "text"', 'format = "json"'), "json output is read by path"),
    (lambda t: t.replace('better = "lower"', 'better = "lower"\nmodes = ["icount", "fast"]'), "unknown mode 'fast'"),
    (lambda t: t.replace('better = "lower"', 'better = "lower"\nwhen = { mode = ["d"] }'), "is not one of"),
    (lambda t: t.replace('name = "tiny"', 'name = "Tiny Tim"'), "use lower-case letters"),
    (lambda t: t + '[needs]\nkernel = ["EPOLL"]\n', "not a kernel option"),
    (lambda t: t + '[server]\ncommand = ["srv"]\n', "either ready_port or ready_line"),
    (lambda t: t + '[files]\n"../x" = "hi"\n', "not a plain file name"),
    # A workload that talks to the host: its server where the kernel runs, its command on the host.
    (lambda t: t + HOST_NEEDS, 'needs.network = "host" runs the [server] where the kernel runs and the command on '
                               'the host, against it: give the workload a [server]'),
    (lambda t: t + HOST_NEEDS + '[server]\ncommand = ["srv"]\nready_port = 9000\n',
     'needs.network = "host": give the [server] the TCP port it listens on, which the host connects to (port = N)'),
    (lambda t: t + '[server]\ncommand = ["srv"]\nready_port = 9000\nport = 9000\n',
     '[server] port is where the host reaches the server of a workload with needs.network = "host"'),
    (lambda t: t + HOST_NEEDS + '[server]\ncommand = ["srv"]\nready_port = 9000\nport = 70000\n',
     "port 70000 is not a TCP port"),
    (lambda t: t.replace('"--n={n}"', '"--to={address}"'),
     "'--to={address}': {address} is where the host reaches the server: it is for the command of a workload "
     'with needs.network = "host" only'),
    (lambda t: t + HOST_NEEDS + HOST_SERVER.replace('["srv"]', '["srv", "--port={port}"]'),
     "'--port={port}': {port} is where the host reaches the server"),
    (lambda t: t + '[files]\n"x" = "{port}"\n', "files.x: {port} is where the host reaches the server"),
    (lambda t: t.replace('"--n={n}"', '"{workdir}/out"') + HOST_NEEDS + HOST_SERVER,
     "'{workdir}/out': {workdir} is the server's directory, where the kernel runs; the command of a workload with "
     'needs.network = "host" runs on the host, which has none'),
    (lambda t: t.replace("[params.mode]", "[params.port]").replace("{mode}", "{port}"),
     "parameter 'port': use lower-case letters, digits and '_' (not workdir, address, port)"),
])
def test_a_bad_workload_file_is_one_line_and_exit_2(tmp_path, lab, capsys, change, says):
    path = write(tmp_path, change(MINIMAL))
    assert path.read_text() != MINIMAL
    assert lab.main("workload", "check", str(path)) == 2
    assert says in one_line_error(capsys)


def test_two_metrics_of_one_name_for_a_variant_are_refused(tmp_path):
    twice = MINIMAL + MINIMAL[MINIMAL.index("[[metric]]"):]
    with pytest.raises(LabError, match="two metrics are named 7_time for tiny:n=7"):
        workloads.resolve(f"{write(tmp_path, twice)}:n=7").metrics()


# -- the parsers

def test_json_paths():
    data = {"jobs": [{"read": {"iops": 5.5, "clat_ns": {"percentile": {"99.000000": 7}}}}], "ok": True}
    assert parse.follow(data, "jobs[0].read.iops") == 5.5
    assert parse.follow(data, '$.jobs[0].read.clat_ns.percentile["99.000000"]') == 7
    with pytest.raises(LabError, match=r"no key 'write' at jobs\[0\] \(keys: read\)"):
        parse.follow(data, "jobs[0].write.iops")
    with pytest.raises(LabError, match=r"no item \[3\] at jobs \(a list of 1\)"):
        parse.follow(data, "jobs[3].read")
    for bad in ("", "jobs..read", "jobs[x]", ".jobs", "jobs[0]read", "a b"):
        with pytest.raises(ValueError):
            parse.compile_path(bad)


class Rule:
    def __init__(self, name, path="", regex="", scale=1.0):
        self.name, self.path, self.regex, self.scale = name, path, regex, scale


def test_a_parser_that_matches_nothing_or_reads_no_number_fails_its_metric_alone():
    rules = [Rule("rps", regex=r"^rps: (\S+)$"), Rule("p99", regex=r"^p99: (\S+)$"), Rule("n", regex=r"^n: (\d+)$")]
    parsed = parse.parse(rules, "text", "rps: 12.5\np99: fast\n", "redis")
    assert parsed.values == {"rps": 12.5}
    assert "'fast' is not a number" in parsed.failures["p99"]
    assert "matches nothing" in parsed.failures["n"]
    with pytest.raises(LabError, match=r"^redis: metric p99: 'fast' is not a number$"):
        parsed.strict("redis")


def test_json_output_that_is_not_json_or_not_a_number():
    with pytest.raises(LabError, match="the output is not JSON .* it begins 'fio: no such file'"):
        parse.parse([Rule("iops", path="iops")], "json", "fio: no such file\n", "fio")
    parsed = parse.parse([Rule("a", path="a"), Rule("b", path="b"), Rule("c", path="c", scale=2)], "json",
                         json.dumps({"a": "1e3x", "b": True, "c": 4}), "w")
    assert parsed.values == {"c": 8.0}
    assert "not a number" in parsed.failures["a"] and "a boolean" in parsed.failures["b"]
    assert parse.parse([Rule("a", path="a")], "json", '{"a": "nan"}', "w").failures


# -- samples and the command line

def test_a_sample_path_may_not_leave_the_files_directory(tmp_path, lab, capsys):
    (tmp_path / "outside.txt").write_text("c took 1\n")
    inner = tmp_path / "wl"
    inner.mkdir()
    (inner / "link.txt").symlink_to(tmp_path / "outside.txt")
    for sample, says in (("../outside.txt", "leaves the file's directory"),
                         (str(tmp_path / "outside.txt"), "leaves the file's directory"),
                         ("link.txt", "leads out of the file's directory")):
        path = write(inner, MINIMAL + f'[[sample]]\nfile = "{sample}"\nparams = {{ mode = "c" }}\n')
        assert lab.main("workload", "check", str(path)) == 2
        assert says in one_line_error(capsys)


def test_check_reads_the_files_samples_and_says_which_metrics_none_yields(tmp_path, lab, capsys):
    (tmp_path / "c.txt").write_text("c took 2.5\n")
    path = write(tmp_path, MINIMAL + '[[sample]]\nfile = "c.txt"\nparams = { mode = "c" }\n')
    assert lab.main("workload", "check", str(path)) == 0
    out = capsys.readouterr().out
    assert "tiny.10_time = 2.5 s" in out
    (tmp_path / "c.txt").write_text("c took no time\n")
    assert lab.main("workload", "check", str(path)) == 2
    assert "c.txt (tiny:mode=c): metric 10_time: the regular expression" in one_line_error(capsys)


def test_check_a_users_file_and_an_output_given(lab, capsys, tmp_path):
    assert lab.main("workload", "check", str(USER_FILE)) == 0
    assert "spin.loop_time = " in capsys.readouterr().out
    output = tmp_path / "out.txt"
    output.write_text("loops: 5\nns per loop: 42\n")
    assert lab.main("workload", "check", f"{USER_FILE}:loops=5", "--sample", str(output)) == 0
    assert "spin.loop_time = 42 ns" in capsys.readouterr().out
    output.write_text("garbage\n")
    assert lab.main("workload", "check", str(USER_FILE), "--sample", str(output)) == 2
    assert "matches nothing" in one_line_error(capsys)
    assert lab.main("workload", "check", str(tmp_path / "none.toml")) == 2
    assert "no workload file" in one_line_error(capsys)


def test_a_host_workloads_command_gets_the_servers_address_and_port(tmp_path):
    """{address} and {port}: where the host reaches the server, filled on the host; the
    agent's and the reports' argv keep them as they are, as {workdir}."""
    text = MINIMAL.replace('"--n={n}"', '"--to={address}:{port}"') + HOST_NEEDS + HOST_SERVER
    inst = workloads.resolve(f"{write(tmp_path, text)}:n=3")
    assert inst.workload.client_on_host and inst.workload.server.port == 9000
    assert inst.host_argv("127.0.0.1", 40123) == ["tiny", "--to=127.0.0.1:40123", "--mode=a.b"]
    assert inst.argv("/w") == ["tiny", "--to={address}:{port}", "--mode=a.b"]
    assert workloads.describe(inst)["variant"]["argv_runs_on"] == "host"
    assert workloads.describe(workloads.resolve("iperf3"))["variant"]["argv_runs_on"] == "machine"
    # Its run may take the host's wait for its command beyond the server's timeout and grace.
    assert inst.workload.longest_s() == 10 + workloads.Server.stop_grace_s + workloads.HOST_WAIT_S


def test_a_file_without_samples_says_so(tmp_path, lab, capsys):
    assert lab.main("workload", "check", str(write(tmp_path, MINIMAL))) == 0
    assert "no sample to read" in capsys.readouterr().out


def test_workload_list(lab, capsys):
    assert lab.main("workload", "list") == 0
    out = capsys.readouterr().out
    assert "stress-ng-sem     timed" in out and "fio               fixed" in out
    assert lab.main("workload", "list", "--format", "json") == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["name"] for r in rows} == set(workloads.packaged())


def test_workload_show(lab, capsys):
    assert lab.main("workload", "show", "redis:requests=500") == 0
    out = capsys.readouterr().out
    assert "redis-benchmark -h 127.0.0.1 -p 6379 -t get,set -n 500 -c 10 --csv" in out
    assert "server:   redis-server" in out and "redis.get_rps  1/s, higher is better" in out
    assert lab.main("workload", "show", f"{USER_FILE}:loops=7", "--format", "json") == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["name"] == "spin" and shown["variant"]["argv"] == ["sh", "{workdir}/spin.sh", "7"]
    assert shown["variant"]["metrics"] == ["loop_time"] and shown["params"]["loops"]["default"] == "100000"
    assert lab.main("workload", "show", "fio:rw=sideways") == 2
    assert "'sideways' is not one of" in one_line_error(capsys)


def test_the_docs_example_is_a_file_that_loads(tmp_path):
    text = (ROOT / "docs" / "workloads.md").read_text()
    example = text.split("```toml\n", 1)[1].split("```", 1)[0]
    inst = workloads.resolve(str(write(tmp_path, textwrap.dedent(example), "example.toml")))
    assert inst.metrics()


def test_a_metric_label_names_its_program_once():
    """A label that starts with the program's own name ("redis GET: ...") is not prefixed
    again ("redis: redis GET: ..."); one that does not gets the workload's name in front."""
    from kernellab.experiments import compare
    from kernellab.guest.workloads import catalog_metrics
    from kernellab.metrics import catalog

    names = [path.stem for path in (Path(__file__).parent.parent / "src/kernellab/workloads").glob("*.toml")]
    with catalog.command_scope():   # resolving registers their metrics: for this test alone
        labels = {m.name: m.label for m in catalog_metrics(compare.resolve_workloads(sorted(names)))}
    assert labels["redis.get_rps"] == "redis GET: requests per second"
    assert labels["nginx.rps"] == "nginx: requests per second"
    assert labels["stress-ng.switch_ops_per_s"] == "stress-ng: switch: bogo ops per second (real time)"
    for name, label in labels.items():
        program = name.split(".")[0].split("-")[0]
        assert not label.startswith(f"{name.split('.')[0]}: {program}"), (name, label)
        assert label.startswith(program), (name, label)
