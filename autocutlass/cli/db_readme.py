"""The README of the shipped tuning databases (``tuning_dbs/README.md``), generated from them by
``autocutlass db readme``, so that it always says what the files hold.

Per ``*.sqlite`` file: the problems with a best record per op, the best records and trials; per
hard key in it: GPU, compute capability, SMs, nvidia-cutlass-dsl version, kernel-source hash,
timing protocol, trial states and dates, and a table of the problems with their best config,
median time, TFLOP/s and trial count; torch's recorded times (vendor verdicts,
``autocutlass.vendor``) in a table of their own beside ours, marking the problems torch serves.
Read through the store API only (read-only, immutable);
the text depends on nothing but the records (no paths, no clock), so generating it twice gives
the same bytes and a test can compare it with the committed file.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from autocutlass.cli.db import config_summary
from autocutlass.db import BestRecord, TrialRecord, TuningStore, release
from autocutlass.device import HardKey
from autocutlass.vendor import VENDOR_FAMILY, VENDOR_MARGIN, host_times, variant_of, vendor_faster

INTRO = """\
# Shipped tuning databases

<!-- Generated from the *.sqlite files beside it by `autocutlass db readme`; do not edit by hand.
tests/test_cli_db_readme.py fails when this file and the databases disagree. -->

One SQLite file per GPU model (`<gpu-model>.sqlite`), opened read-only below the user's own
database. A record is used only when its hard key (GPU name, compute capability, SM count,
nvidia-cutlass-dsl version, kernel-source hash, timing-protocol version) matches the running
machine, so a file tuned for another GPU or another kernel revision is silently skipped.
`autocutlass db show` lists these records beside the user's (marked shipped); `autocutlass info`
counts them. A config shows the fields that decide most first (tile MxNxK, cluster MxN, schedule,
split-K); flags that are off are left out.
"""


def render_readme(paths: Sequence[Path]) -> str:
    """The README text for the shipped database files ``paths`` (in the order given)."""
    sections = [INTRO]
    if not paths:
        sections.append("No database is shipped yet.\n")
    for path in paths:
        store = TuningStore(path, read_only=True, immutable=True)
        try:
            every = store.bests(vendor=True)
            ours = [r for r in every if r.family != VENDOR_FAMILY]
            torch_times = [r for r in every if r.family == VENDOR_FAMILY]
            sections.append(_file_section(path.name, store.hard_keys(), ours, store.trials(), torch_times))
        finally:
            release(path)
    return "\n".join(sections)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _per_op(bests: Sequence[BestRecord]) -> str:
    ops = Counter(op for op, _ in {(r.problem.op, r.problem.key()) for r in bests})
    return ", ".join(f"{op} {n}" for op, n in sorted(ops.items()))


def _file_section(name: str, hard_keys: Sequence[HardKey], bests: Sequence[BestRecord],
                  trials: Sequence[TrialRecord], torch_times: Sequence[BestRecord] = ()) -> str:  # fmt: skip
    problems = len({r.problem.key() for r in bests})
    lines = [f"## {name}", ""]
    summary = f"{_plural(problems, 'problem')} with a best record"
    if bests:
        summary += f" ({_per_op(bests)})"
    lines += [f"{summary}, {_plural(len(bests), 'best record')}, {_plural(len(trials), 'trial')}.", ""]
    keys = {hk.key(): hk for hk in hard_keys}
    keys.update({r.hard_key.key(): r.hard_key for r in bests})
    keys.update({t.hard_key.key(): t.hard_key for t in trials})
    vendor_keys = {r.hard_key.key() for r in torch_times}
    for key in sorted(keys):
        if key in vendor_keys:
            continue
        hk = keys[key]
        lines += _hard_key_section(
            hk, [r for r in bests if r.hard_key.key() == key], [t for t in trials if t.hard_key.key() == key]
        )
    if torch_times:
        lines += _vendor_section(bests, torch_times)
    return "\n".join(lines)


def _vendor_section(bests: Sequence[BestRecord], torch_times: Sequence[BestRecord]) -> list[str]:
    """torch's recorded time per problem beside our best's; where torch is faster by more than
    the margin, dispatch serves the problem with torch."""
    ours = {(r.problem.key(), r.hard_key.gpu_name): r for r in bests}
    rows = []
    for t in torch_times:
        mine = ours.get((t.problem.key(), t.hard_key.gpu_name))
        if mine is not None:
            rows.append((t, mine, vendor_faster(mine.median_ms, t.median_ms, host_times(t.config))))
    served = sum(1 for *_, v in rows if v)
    lines = [
        f"### {torch_times[0].hard_key.gpu_name}: torch's times (vendor verdicts)", "",
        f"- torch's time was recorded beside {_plural(len(rows), 'best record')}; torch serves the "
        f"{served} where it was faster by more than {VENDOR_MARGIN:.0%} (`autocutlass/vendor.py`; GPU plus host time"
        f" of a call where the tuning measured both: the host columns); a row of a variant of torch's path (its "
        f"name after the problem; conv2d's `heuristic`: cuDNN outside benchmark mode, PyTorch's default) judges "
        f"only the calls torch would run that way",
        "", "| problem | ours ms | torch ms | torch / ours | ours host ms | torch host ms | served by |",
        "| --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]  # fmt: skip
    for t, mine, by_torch in rows:
        host = host_times(t.config)
        hosts = (f"{host[0]:.4f}", f"{host[1]:.4f}") if host is not None else ("-", "-")
        variant = variant_of(t.hard_key)
        cells = (t.problem.describe() + (f" ({variant})" if variant else ""), f"{mine.median_ms:.4f}", f"{t.median_ms:.4f}",
                 f"{t.median_ms / mine.median_ms:.3f}", *hosts, "torch" if by_torch else mine.family)  # fmt: skip
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    lines.append("")
    return lines


def _hard_key_section(hk: HardKey, bests: Sequence[BestRecord], trials: Sequence[TrialRecord]) -> list[str]:
    lines = [
        f"### {hk.gpu_name}, kernel sources `{hk.kernel_hash}`",
        "",
        f"- GPU: {hk.gpu_name}, compute capability {hk.cc}, {hk.sm_count} SMs",
        (f"- toolchain: nvidia-cutlass-dsl {hk.dsl_version}, kernel sources `{hk.kernel_hash}`, "
         f"timing protocol {hk.protocol_version}"),
    ]
    line = f"- {_plural(len(bests), 'best record')}" + (f" ({_per_op(bests)})" if bests else "")
    lines.append(line)
    states = Counter(t.state.value for t in trials)
    ok = states.pop("ok", 0)
    line = f"- {_plural(len(trials), 'trial')}"
    if trials:
        failed = ", ".join(f"{s} {n}" for s, n in sorted(states.items()))
        first, last = min(t.created_at for t in trials).date(), max(t.created_at for t in trials).date()
        dates = first.isoformat() if first == last else f"{first.isoformat()} to {last.isoformat()}"
        line += f" ({ok} ok" + (f"; {failed}" if failed else "") + f"), recorded {dates} (UTC)"
    lines += [line, ""]
    if not bests:
        return lines
    per_problem = Counter(t.problem.key() for t in trials)
    lines += [
        "| problem | family | best config | median ms | TFLOP/s | trials |",
        "| --- | --- | --- | ---: | ---: | ---: |",
    ]
    for r in bests:
        cells = (r.problem.describe(), r.family, config_summary(r.config), f"{r.median_ms:.4f}", f"{r.tflops:.1f}",
                 str(per_problem.get(r.problem.key(), 0)))  # fmt: skip
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    lines.append("")
    return lines
