"""Generated .config files, fragments, variant strings, experiment and study files, through
kernellab's parsers in process: each is read or refused with a LabError (one line for the
user), never a traceback."""

import random
import time
from pathlib import Path

import pytest

from faults.lanes import counts
from kernellab import datafile
from kernellab.config.dotconfig import parse_config, parse_settings
from kernellab.errors import LabError
from kernellab.experiments import study
from kernellab.experiments.spec import experiment_from_data, parse_short

ROOT = Path(__file__).resolve().parents[2]
INPUTS = 100_000   # the full command's; the fast lane tries the first FAST_LANE of them
FAST_LANE = 2_000
# Pieces a hand-edited or damaged file is made of.
VOCABULARY = ["=", "\"", "'", "[", "]", "[[", "]]", "{", "}", "#", "\n", " ", "\t", "\\", "CONFIG_", "=y", "=m",
              "=n", " is not set", "0x", "-1", "1e999", "nan", "\x00", "\x7f", "é", "\u202e", "\ufeff", "true",
              "variant", "name", "base", "options", "boot_args", "vcpus", "[[experiment.variant]]", "[[sweep]]",
              ",", "9" * 30, "\r\n"]


def seeds() -> dict[str, list[str]]:
    fragments = sorted((ROOT / "src/kernellab/config/fragments").glob("*.config"))
    return {
        "config": [p.read_text() for p in fragments] + [
            "CONFIG_A=y\n# CONFIG_B is not set\nCONFIG_C=\"text\"\nCONFIG_D=0x10\nCONFIG_E=-3\n"],
        "experiment": [p.read_text() for p in sorted((ROOT / "examples").glob("*.toml"))]
                      + [(ROOT / "src/kernellab/experiments/default.toml").read_text()],
        "study": [p.read_text() for p in sorted((ROOT / "src/kernellab/studies").glob("*.toml"))],
        "variant": ["lab-minimal", "debug=lab-minimal+debug-kernel+CONFIG_HZ_1000=y+boot:quiet",
                    "x=tinyconfig+sysctl:vm.swappiness=10+vcpus:2+devices:3+fs:ext4-4k+cc:clang"],
    }


def mutate(rng: random.Random, text: str) -> str:
    for _ in range(rng.randint(1, 6)):
        pos = rng.randrange(len(text) + 1)
        kind = rng.randrange(5)
        if kind == 0:
            text = text[:pos] + rng.choice(VOCABULARY) + text[pos:]
        elif kind == 1:
            text = text[:pos] + text[pos + rng.randint(1, 40):]
        elif kind == 2:
            lines = text.splitlines(keepends=True)
            if lines:
                i = rng.randrange(len(lines))
                lines.insert(rng.randrange(len(lines) + 1), lines[i])
                text = "".join(lines)
        elif kind == 3:
            text = text[:pos] + chr(rng.randrange(1, 0x3000)) + text[pos:]
        else:
            text = text[:pos]
    return text


def parse(kind: str, text: str) -> None:
    if kind == "config":
        parse_config(text, "generated.config")
        parse_settings(text, "generated fragment")
    elif kind == "variant":
        parse_short(text)
    elif kind == "experiment":
        experiment_from_data(datafile.parse_toml(text, "generated.toml"), "generated.toml")
    else:
        study.parse(datafile.parse_toml(text, "generated study"), "generated study")


@pytest.mark.parametrize("count", counts(FAST_LANE, INPUTS))
def test_no_generated_input_makes_a_parser_raise_anything_but_a_one_line_error(count):
    rng = random.Random(20261125)
    inputs = seeds()
    kinds = sorted(inputs)
    start = time.monotonic()
    refused: dict[str, int] = dict.fromkeys(kinds, 0)
    for i in range(count):
        kind = kinds[i % len(kinds)]
        text = mutate(rng, rng.choice(inputs[kind]))
        try:
            parse(kind, text)
        except LabError as exc:
            assert len(str(exc).splitlines()) == 1, (kind, text, exc)
            refused[kind] += 1
        except Exception as exc:   # noqa: BLE001  (the point: anything else is a bug)
            pytest.fail(f"{kind} input raised {type(exc).__name__}: {exc}\n--- input ---\n{text!r}")
    print(f"{count} inputs, refused with a one-line error: {refused}, {time.monotonic() - start:.0f} s")
    assert all(refused.values())    # the mutations did reach every parser's errors
