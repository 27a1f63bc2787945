"""The reproduction table: every claim of the five papers against the experiments' results.

:func:`verdicts` reads each paper experiment's ``results.json`` (one directory per
experiment, as ``mlsched reproduce`` writes them) and decides each claim of
:data:`mlsched.experiments.claims.CLAIMS`:

* **reproduced**: the check passed for the paper's algorithm as the paper defines it;
* **reproduced only with** an addition of ours (named): the paper's row failed, the
  addition's row (:func:`mlsched.experiments.base.addition_check`) passed;
* **not reproduced**: neither, with the measured figures and the documented cause;
* **not tested** (no experiment tests it: why) or **not run** (no results for it).

:func:`render` writes them as Markdown (docs/reproduction.md); checks that test no claim
(our own correctness checks) are listed after the claims, so that nothing is dropped.
:func:`readme_figure` is the sentence the README gives of the totals, written between its
markers by :func:`with_readme_figure` (``mlsched reproduce --readme``); :func:`table_counts`
reads the totals back from a written table, so that a test holds the two equal.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlsched.core.errors import SpecError
from mlsched.experiments.claims import CLAIMS, PAPERS, Claim
from mlsched.experiments.costs import cluster_check

__all__ = [
    "README_BEGIN",
    "README_END",
    "Verdict",
    "count_verdicts",
    "load_results",
    "readme_figure",
    "render",
    "table_counts",
    "verdicts",
    "with_readme_figure",
]

REPRODUCED = "reproduced"
WITH_ADDITION = "reproduced only with"
NOT_REPRODUCED = "not reproduced"
NOT_TESTED = "not tested"
NOT_RUN = "not run"


@dataclass(frozen=True)
class Verdict:
    claim: Claim
    verdict: str
    detail: str = ""
    additions: tuple[tuple[str, bool], ...] = ()  # (label, passed) of our additions' rows
    #: The same check on runs charging a cluster's restart cost: passed, or None (no row).
    cluster: bool | None = None
    cluster_detail: str = ""

    @property
    def text(self) -> str:
        if self.verdict == WITH_ADDITION:
            held = [label for label, ok in self.additions if ok]
            return f"{WITH_ADDITION} {', '.join(held)}"
        return self.verdict


def load_results(root: Path, experiments: Sequence[str] | None = None) -> dict[str, Any]:
    """Experiment -> its ``root/<experiment>/results.json`` (those present)."""
    names = experiments or [exp for _, exp in PAPERS.values()]
    out: dict[str, Any] = {}
    for name in names:
        path = root / name / "results.json"
        if path.is_file():
            out[name] = json.loads(path.read_text(encoding="utf-8"))
    return out


def _additions(name: str, checks: Mapping[str, Any]) -> tuple[tuple[str, bool], ...]:
    prefix = f"{name} ["
    return tuple(
        (n[len(prefix) : -1], bool(c["passed"]))
        for n, c in checks.items()
        if n.startswith(prefix) and n.endswith("]")
    )


def verdicts(results: Mapping[str, Any]) -> list[Verdict]:
    out: list[Verdict] = []
    for claim in CLAIMS:
        if claim.untested:
            out.append(Verdict(claim, NOT_TESTED, claim.untested))
            continue
        res = results.get(claim.experiment)
        checks = {c["name"]: c for c in (res or {}).get("checks", [])}
        if claim.check not in checks:
            why = "no results" if res is None else f"no check named {claim.check!r}"
            out.append(Verdict(claim, NOT_RUN, why))
            continue
        check = checks[claim.check]
        additions = _additions(claim.check, checks)
        charged = checks.get(cluster_check(claim.check))
        if check["passed"]:
            verdict = REPRODUCED
        elif any(ok for _, ok in additions):
            verdict = WITH_ADDITION
        else:
            verdict = NOT_REPRODUCED
        out.append(
            Verdict(
                claim,
                verdict,
                str(check.get("detail", "")),
                additions,
                None if charged is None else bool(charged["passed"]),
                "" if charged is None else str(charged.get("detail", "")),
            )
        )
    return out


def count_verdicts(rows: Sequence[Verdict]) -> dict[str, int]:
    """Verdict -> how many claims have it (every "reproduced only with ..." as one), in the
    order they first occur."""
    counts: dict[str, int] = {}
    for v in rows:
        key = WITH_ADDITION if v.verdict == WITH_ADDITION else v.verdict
        counts[key] = counts.get(key, 0) + 1
    return counts


#: The README's figure stands between these two lines.
README_BEGIN = "<!-- reproduction figure: written by mlsched reproduce --readme -->"
README_END = "<!-- end of the reproduction figure -->"
_PHRASES = {
    REPRODUCED: "{n} {be} reproduced by the paper's algorithm as the paper defines it",
    WITH_ADDITION: "{n} only with an addition of ours",
    NOT_REPRODUCED: "{n} {be} not reproduced",
    NOT_TESTED: "{n} {be} not tested",
    NOT_RUN: "{n} {be} not run",
}


def readme_figure(counts: Mapping[str, int]) -> str:
    """The README's sentence of the totals of docs/reproduction.md."""
    parts = [
        _PHRASES[k].format(n=counts[k], be="is" if counts[k] == 1 else "are")
        for k in _PHRASES
        if counts.get(k)
    ]
    listed = ", ".join(parts[:-1]) + (" and " if len(parts) > 1 else "") + parts[-1]
    return (
        f"Of the five papers' {sum(counts.values())} claims, {listed} "
        "([docs/reproduction.md](docs/reproduction.md): each claim's figures, and the cause "
        "where it is not reproduced)."
    )


def with_readme_figure(readme: str, figure: str, source: str = "README") -> str:
    """``readme`` with the text between :data:`README_BEGIN` and :data:`README_END`
    replaced by ``figure``; both markers must be there, once each and in order."""
    begin, end = readme.count(README_BEGIN), readme.count(README_END)
    at, until = readme.find(README_BEGIN), readme.find(README_END)
    if begin != 1 or end != 1 or until < at:
        raise SpecError(
            "--readme", source, f"a file with the lines {README_BEGIN!r} and {README_END!r} "
            "once each, in that order",
        )  # fmt: skip
    return f"{readme[: at + len(README_BEGIN)]}\n{figure}\n{readme[until:]}"


_VERDICT_CELL = re.compile(r"\| \*\*(?P<verdict>[^*]+)\*\* \|$")


def table_counts(table: str) -> dict[str, int]:
    """The totals of a table :func:`render` wrote, read back from its rows' verdicts."""
    counts: dict[str, int] = {}
    for line in table.splitlines():
        match = _VERDICT_CELL.search(line)
        if match and line.startswith("| "):
            verdict = match["verdict"]
            key = WITH_ADDITION if verdict.startswith(WITH_ADDITION + " ") else verdict
            counts[key] = counts.get(key, 0) + 1
    return counts


#: A check's detail beyond this many characters is cut (results.json keeps it whole).
DETAIL_CHARS = 1500


def _shorten(text: str) -> str:
    if len(text) <= DETAIL_CHARS:
        return text
    return text[:DETAIL_CHARS].rsplit(" ", 1)[0] + " ... (the rest in results.json)"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _command(res: Mapping[str, Any]) -> str:
    return f"`mlsched experiment {res['experiment']} --scale {res['scale']} --seeds {res['seeds']}`"


def _cost(cost: Mapping[str, Any] | None) -> str:
    """A restart cost as results.json states it: seconds, share of the slot, why."""
    if not cost:
        return "not recorded"
    seconds, share = float(cost.get("restart_s", 0.0)), cost.get("slot_share")
    if seconds == 0:
        return f"none ({cost.get('why', '')})"
    of_slot = f", {float(share):.3g} of the {float(cost['slot_seconds']):g}-s slot" if share else ""
    return f"{seconds:g} s per restart{of_slot} ({cost.get('why', '')})"


def render(results: Mapping[str, Any], command: str) -> str:
    """docs/reproduction.md: the summary table, then each paper's claims with the figures."""
    rows = verdicts(results)
    lines = [
        "# Reproduction: every claim of the five papers",
        "",
        f"Generated by `{command}`; do not edit by hand. A claim is *reproduced* only",
        "by the paper's algorithm as the paper defines it; where only an addition of ours",
        "(named) meets it, the verdict says so; where neither does, the measured figures and",
        "the documented cause follow in the paper's section, with the experiment's command,",
        "seeds and restart cost. The figures give the spread between seeds.",
        "",
        "Each verdict charges restarts as the paper assumes (free for PD-ORS, OASiS and",
        "GADGET; 0.1 slot for A_online; DPS never restarts a job). The column before it says",
        "whether the claim holds for the paper's algorithm with a cluster's restart cost",
        "instead (checkpoint save + relaunch; its share of the slot in each section): `-`",
        "where the claim's runs restart nothing or are not run again.",
        "",
        "| paper | claim | where | the paper says | ours | with a cluster's restart cost | verdict |",
        "|---|---|---|---|---|---|---|",
    ]
    for v in rows:
        paper = PAPERS[v.claim.spec][0].split(",")[0]
        res = results.get(v.claim.experiment)
        ours = (
            "-"
            if v.verdict in (NOT_TESTED, NOT_RUN) or res is None
            else f"`{res['experiment']}` {res['scale']}, {res['seeds']} seeds"
            + (f"; stand-in: {_cell(v.claim.stand_in)}" if v.claim.stand_in else "")
        )
        charged = {None: "-", True: "holds", False: "does not hold"}[v.cluster]
        lines.append(
            f"| {_cell(paper)} | {_cell(v.claim.id)} | {_cell(v.claim.figure)} | "
            f"{_cell(v.claim.says)} | {ours} | {charged} | **{_cell(v.text)}** |"
        )
    counts = count_verdicts(rows)
    lines += ["", "Totals: " + ", ".join(f"{k} {n}" for k, n in counts.items()) + "."]
    for spec, (paper, experiment) in PAPERS.items():
        res = results.get(experiment)
        lines += ["", f"## {paper}", ""]
        if res is None:
            lines.append(f"Not run: no results of `mlsched experiment {experiment}`.")
        else:
            lines.append(
                f"{_command(res)}: {res['seeds']} seeds, {res['scale']} scale, "
                f"{float(res.get('wall_seconds', 0.0)):.0f} s. Restart cost of the verdicts: "
                f"{_cost(res.get('restart_cost'))}. "
                + (
                    f"Beside them, a cluster's: {_cost(res['cluster_restart_cost'])}."
                    if res.get("cluster_restart_cost")
                    else "No second cost: no run restarts a job."
                )
            )
        for v in (v for v in rows if v.claim.spec == spec):
            lines += ["", f"- **{v.claim.id}** ({v.claim.figure}): {v.claim.says}.", ""]
            lines.append(f"  - Verdict: **{v.text}**.")
            if v.claim.stand_in:
                lines.append(f"  - Stand-in: {v.claim.stand_in}.")
            if v.claim.check:
                lines.append(f"  - Check: \u201c{v.claim.check}\u201d.")
            for label, ok in v.additions:
                lines.append(f"  - {label}: {'holds' if ok else 'does not hold'}.")
            if v.cluster is not None:
                held = "holds" if v.cluster else "does not hold"
                lines.append(f"  - With a cluster's restart cost: {held}.")
            if v.detail:
                what = "Why" if v.verdict in (NOT_TESTED, NOT_RUN) else "Measured"
                lines.append(f"  - {what}: {_shorten(v.detail)}")
            if v.verdict == NOT_REPRODUCED and v.claim.cause:
                lines.append(f"  - Cause: {v.claim.cause}.")
            if v.cluster is not None and v.cluster_detail != v.detail:
                lines.append(
                    f"  - Measured with a cluster's restart cost: {_shorten(v.cluster_detail)}"
                )
            if v.cluster is False and v.claim.cluster_cause:
                lines.append(f"  - Cause with a cluster's restart cost: {v.claim.cluster_cause}.")
        if res is not None:
            claimed = {c.check for c in CLAIMS if c.check}
            own = [
                c
                for c in res.get("checks", [])
                if c["name"] not in claimed
                and not any(c["name"].startswith((f"{n} [", f"{n} {{")) for n in claimed)
            ]
            if own:
                lines += ["", "Checks of our own (no paper claim):", ""]
                lines += [
                    f"- {'passed' if c['passed'] else '**failed**'}: {c['name']}" for c in own
                ]
    return "\n".join(lines) + "\n"
