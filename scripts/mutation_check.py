"""Targeted mutation check: each listed bug, planted in a copy of the tree, must make the
fast tests named beside it fail.

A mutant is one exact text replacement in one file (the text must occur exactly once, so the
list cannot silently drift from the code) and the tests expected to catch it. The check
first runs those tests on the unmutated copy (they must pass, or a "kill" would mean
nothing), then each mutant, restoring the file after each. A mutant that makes the tests
fail or time out is killed; one they pass with survives, and the check fails. Runs go on
side by side (``--jobs``, default one per core), each in a copy of the tree of its own;
selections that start training processes run one at a time.

    python scripts/mutation_check.py            # every mutant
    python scripts/mutation_check.py --list     # the list, no runs
    python scripts/mutation_check.py --only engine-moved-servers-not-rechecked

The list, its rationale and the last score are in docs/testing.md.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT_S = 600


@dataclass(frozen=True)
class Mutant:
    name: str
    path: str  # relative to the repository root
    find: str
    replace: str
    tests: tuple[str, ...]  # pytest arguments: files, node ids, -k expressions
    why: str


CONTINUITY = "tests/test_trainers_continuity.py"

MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        "quota-counts-only-the-new-jobs",
        "mlsched/controller/tenancy.py",
        "if waiting + len(jobs) > quota.queued:",
        "if len(jobs) > quota.queued:",
        ("tests/test_users.py",),
        "a user's queued quota ignores the jobs already waiting",
    ),
    Mutant(
        "anyone-may-act-on-any-job",
        "mlsched/net/users.py",
        "return self.admin or (owner is not None and owner == self.name)",
        "return True",
        ("tests/test_users.py",),
        "a user may cancel or read the logs of another user's job",
    ),
    Mutant(
        "tasks-see-gpus-by-position",
        "mlsched/agent/task.py",
        '",".join(devices[p] for p in positions)',
        '",".join(str(p) for p in positions)',
        ("tests/test_agent_gpus.py",),
        "a task's CUDA_VISIBLE_DEVICES names the controller's positions, not the devices",
    ),
    Mutant(
        "wire-added-to-a-cell-that-measured-its-links",
        "mlsched/engine/simulator.py",
        "wire = comm if spread and not match.links_measured else 0.0",
        "wire = comm if spread else 0.0",
        ("tests/test_profile_shapes.py",),
        "the simulator adds modelled wire time to a cell measured across a cluster's links",
    ),
    Mutant(
        "probe-spread-within-one-rack",
        "mlsched/controller/probes.py",
        "chosen = [a for row in turns for a in row if a is not None][:hosts]",
        "chosen = agents[:hosts]",
        ("tests/test_profile_shapes.py",),
        "a 'racks' probe takes agents in registration order, all in one rack",
    ),
    Mutant(
        "fidelity-error-over-simulated",
        "mlsched/testbed/fidelity/report.py",
        "return abs(simulated - measured) / measured",
        "return abs(simulated - measured) / simulated",
        ("tests/test_fidelity_report.py",),
        "a job's error is taken relative to the simulated JCT, not the measured one",
    ),
    Mutant(
        "fidelity-plant-never-applied",
        "mlsched/testbed/fidelity/noise.py",
        'p = PLANTS[plant] if plant is not None else Plant("none")',
        'p = Plant("none")',
        ("tests/test_fidelity_noise.py", "-k", "planted"),
        "the replay hands the simulator the recorded costs whatever regression is planted",
    ),
    Mutant(
        "fidelity-restarted-over-every-job",
        "mlsched/testbed/fidelity/noise.py",
        '"restarted": [r for r in rows if (r.get("restarts_measured") or 0) > 0],',
        '"restarted": [r for r in rows if (r.get("restarts_measured") or 0) >= 0],',
        ("tests/test_fidelity_noise.py", "-k", "statistic"),
        "the restart-cost statistic averages every job, where a restart's error dilutes",
    ),
    Mutant(
        "fidelity-own-costs-are-the-profile",
        "mlsched/testbed/fidelity/noise.py",
        "    return dataclasses.replace(profile, cells=tuple(cells))",
        "    return profile",
        ("tests/test_fidelity_noise.py", "-k", "own_costs"),
        "the run simulated with its own costs is simulated with the profile again",
    ),
    Mutant(
        "restart-counts-a-paused-jobs-wait",
        "mlsched/controller/generation_measure.py",
        "    if gen.stopped_s is None:",
        "    if True:",
        ("tests/test_cluster_executor.py", "-k", "paused"),
        "a resumed job's restart runs from its stop, the slots it waited paused included",
    ),
    Mutant(
        "start-up-never-reported",
        "mlsched/controller/generation_measure.py",
        "    if gen.trigger_at is not None or gen.number != 1:",
        "    if True:",
        ("tests/test_cluster_executor.py", "-k", "start_up"),
        "the cluster executor never reports a first launch's start-up",
    ),
    Mutant(
        "fidelity-fresh-ignores-the-start-slot",
        "mlsched/testbed/fidelity/noise.py",
        'and row.get("started_slot_measured") == row.get("started_slot_simulated")',
        'and row.get("started_slot_measured") is not None',
        ("tests/test_fidelity_noise.py", "-k", "statistic"),
        "the start-up statistic takes in jobs a policy queued differently on the two sides",
    ),
    Mutant(
        "device-slice-per-task-not-per-rank",
        "mlsched/trainers/cpu_share.py",
        "return self.ps_cores if ps else self.device_cores * max(1, ranks)",
        "return self.ps_cores if ps else self.device_cores",
        ("tests/test_device_slices.py",),
        "a launcher with several ranks gets one device's cores for all of them",
    ),
    # Engine accounting ------------------------------------------------------------------
    Mutant(
        "engine-moved-servers-not-rechecked",
        "mlsched/engine/charges.py",
        "if prev == p:",
        "if prev == p or (prev is not None and prev.n_workers == p.n_workers"
        " and prev.n_ps == p.n_ps):",
        ("tests/test_engine.py",),
        "a job whose counts stay but whose servers move skips the capacity re-check",
    ),
    Mutant(
        "engine-departed-usage-kept",
        "mlsched/engine/charges.py",
        "self._rows(job, prev):\n                self.used[s] -= u\n                shrank",
        "self._rows(job, prev):\n                self.used[s] -= 0 * u\n                shrank",
        ("tests/test_engine.py",),
        "a job that leaves the allocation keeps its resources booked",
    ),
    Mutant(
        "link-reservation-never-released",
        "mlsched/engine/link_ledger.py",
        "used[link] -= gbps",
        "used[link] -= 0 * gbps",
        ("tests/test_links.py",),
        "a ring that moves or leaves keeps its hop bandwidth booked on its old links",
    ),
    Mutant(
        "link-finished-job-kept",
        "mlsched/engine/charges.py",
        "self.links.change(job, prev, None)  # its ring hops are free again",
        "pass",
        ("tests/test_links.py",),
        "a finished job's ring holds its links for the rest of the run",
    ),
    Mutant(
        "ring-order-only-counted",
        "mlsched/engine/link_ledger.py",
        "if sorted(p.ring) != servers:",
        "if len(p.ring) != len(servers):",
        ("tests/test_links.py",),
        "a ring order naming a server without workers (or leaving one out) passes",
    ),
    Mutant(
        "engine-worker-cap-off-by-one",
        "mlsched/engine/charges.py",
        "if n_w > job.worker_cap or n_w < job.min_workers:",
        "if n_w > job.worker_cap + 1 or n_w < job.min_workers:",
        ("tests/test_engine.py",),
        "one worker more than the job allows passes",
    ),
    Mutant(
        "engine-capacity-checked-only-beside-a-release",
        "mlsched/engine/charges.py",
        "        if grew:\n            self._check_capacity(policy, t)",
        "        if grew and shrank:\n            self._check_capacity(policy, t)",
        ("tests/test_engine.py",),
        "an allocation that only adds use, releasing none, is never checked against capacity",
    ),
    Mutant(
        "engine-capacity-slack",
        "mlsched/engine/charges.py",
        "over = self.used - self.cluster.capacity > 1e-6",
        "over = self.used - self.cluster.capacity > 1.0",
        ("tests/test_engine.py",),
        "a server over-allocated by up to one unit passes",
    ),
    # Runtime model ----------------------------------------------------------------------
    Mutant(
        "estimator-loose-refit-shortcut",
        "mlsched/perfmodel/estimator.py",
        "> 1e-12 * max(1.0, abs(measured))",
        "> 1e-1 * max(1.0, abs(measured))",
        ("tests/test_estimator.py", "tests/test_estimator_versions.py"),
        "new samples within 10 % of the fit are taken as explained: the model stops following",
    ),
    Mutant(
        "estimator-loose-observe-shortcut",
        "mlsched/perfmodel/estimator.py",
        "return abs(pc - compute) <= 1e-12 * max(1.0, compute)",
        "return abs(pc - compute) <= 1e-1 * max(1.0, compute)",
        ("tests/test_estimator.py", "tests/test_estimator_versions.py"),
        "a measurement within 10 % of an exact fit marks nothing for refit: drift is missed",
    ),
    # Checkpoint and resume --------------------------------------------------------------
    Mutant(
        "resume-momentum-not-restored",
        "mlsched/trainers/common.py",
        "if opt is not None and state.momentum:",
        "if False:",
        (CONTINUITY, "-k", "2to1-ddp"),
        "an all-reduce replica resumes with zero SGD momentum",
    ),
    Mutant(
        "resume-ps-momentum-not-restored",
        "mlsched/trainers/ps/server.py",
        "if state is not None and state.momentum:",
        "if False:",
        (CONTINUITY, "-k", "2to1-ps-sync"),
        "a PS shard resumes with zero SGD momentum",
    ),
    Mutant(
        "resume-cursor-ignores-ranks",
        "mlsched/trainers/allreduce/replica.py",
        "return self.cursor + (step - self.start) * self.world\n",
        "return self.cursor + (step - self.start)\n",
        (CONTINUITY, "-k", "2to1-ddp"),
        "the checkpoint's cursor counts steps, not the batches W ranks consumed",
    ),
    Mutant(
        "resume-draws-not-keyed",
        "mlsched/trainers/common.py",
        "torch.manual_seed(mix_seed(self.seed, index, _DRAWS))",
        "pass",
        (CONTINUITY, "-k", "2to1-ddp"),
        "dropout masks come from the process's stream: replicas agree, resumes replay",
    ),
    Mutant(
        "checkpoint-copied-not-renamed",
        "mlsched/trainers/checkpoint.py",
        "        os.rename(tmp, final)\n",
        "        shutil.copytree(tmp, final)\n",
        ("tests/test_trainers_checkpoint.py",),
        "the checkpoint is copied, not renamed into place: its temporary directory stays",
    ),
    # Intake validation ------------------------------------------------------------------
    Mutant(
        "id-allows-slash",
        "mlsched/core/ids.py",
        '_ID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*")',
        '_ID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._/-]*")',
        ("tests/test_hostile_inputs.py",),
        "a job id may name a path below another directory",
    ),
    Mutant(
        "id-allows-leading-dot",
        "mlsched/core/ids.py",
        '_ID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*")',
        '_ID = re.compile(r"[A-Za-z0-9._-][A-Za-z0-9._-]*")',
        ("tests/test_hostile_inputs.py",),
        'a job id may be ".." (a parent directory) or a hidden file',
    ),
    Mutant(
        "path-escape-allowed",
        "mlsched/core/ids.py",
        "    if target != base and base not in target.parents:\n"
        '        raise SpecError(field, os.path.join(*parts) if parts else "", ',
        '    if False:\n        raise SpecError(field, os.path.join(*parts) if parts else "", ',
        ("tests/test_hostile_inputs.py", "tests/test_core.py"),
        "a path built from a job's input may leave the directory it belongs to",
    ),
    Mutant(
        "batch-size-unbounded",
        "mlsched/core/limits.py",
        '"batch_size": _count(1, 65_536),',
        '"batch_size": _count(1, 10**15),',
        ("tests/test_hostile_inputs.py",),
        "a job may ask for an absurd batch size",
    ),
    # Placement and pricing --------------------------------------------------------------
    Mutant(
        "placement-fits-slack",
        "mlsched/scheduler/view.py",
        "if not n <= f + 1e-9:",
        "if not n <= f + 1.0:",
        ("tests/test_core.py",),
        "a task counts as fitting a server one unit short",
    ),
    Mutant(
        "placement-max-count-rounds-up",
        "mlsched/scheduler/view.py",
        "return math.floor(least + 1e-9)",
        "return math.ceil(least - 1e-9)",
        ("tests/test_core.py",),
        "a server takes one task more than its free capacity holds",
    ),
    Mutant(
        "ledger-max-counts-first-resource",
        "mlsched/scheduler/view.py",
        "yield math.floor(min(row[j] / d for j, d in need) + 1e-9)",
        "yield math.floor(row[need[0][0]] / need[0][1] + 1e-9)",
        ("tests/test_ledger.py",),
        "a server's room for a task of several resources is read from its first one only",
    ),
    Mutant(
        "committed-release-ignored",
        "mlsched/scheduler/committed.py",
        "            self._committed.drop(job_id, after=self._next_slot - 1, release=True)\n",
        "            pass\n",
        ("tests/test_policy_properties.py", "-k", "frees"),
        "a cancelled job's committed plan (OASiS, PD-ORS) keeps its capacity reserved",
    ),
    Mutant(
        "committed-plans-not-steady",
        "mlsched/scheduler/committed.py",
        "        slots = self.steady(job, slots)\n",
        "        slots = dict(slots)\n",
        ("tests/test_committed.py",),
        "a committed plan moves a job to other servers at unchanged counts (a restart)",
    ),
    Mutant(
        "level-plan-ignores-slack",
        "mlsched/scheduler/committed.py",
        "    return level_cost - best_cost <= slack * best_payoff\n",
        "    return True\n",
        ("tests/test_committed.py",),
        "a level plan is taken whatever it costs (capacity a contended cluster needs)",
    ),
    Mutant(
        "oasis-price-curve-bent",
        "mlsched/scheduler/oasis/prices.py",
        "return ln_low + load * (ln_high - ln_low)",
        "return ln_low + load * load * (ln_high - ln_low)",
        ("tests/test_oasis.py",),
        "the exponential price grows too slowly at low load",
    ),
    # DPS (spec 004) ---------------------------------------------------------------------
    Mutant(
        "dps-index-takes-max",
        "mlsched/scheduler/dps/bandit.py",
        "return np.minimum(demand, capacity)",
        "return np.maximum(demand, capacity)",
        ("tests/test_dps.py",),
        "an arm's index is the larger of the demand and capacity bounds, not the smaller",
    ),
    Mutant(
        "dps-counts-only-sales",
        "mlsched/scheduler/dps/policy.py",
        "                self.arms(state).offered(choice.arm, sold)",
        "                if accepted:\n                    self.arms(state).offered(choice.arm, sold)",
        ("tests/test_dps.py",),
        "N(p) counts sales only (Alg. 1 as printed, A7): Q-hat is units per sale, biased up",
    ),
    Mutant(
        "dps-pa-order-by-ps",
        "mlsched/scheduler/dps/placement.py",
        "order = np.lexsort((np.arange(len(x)), -z, -x))",
        "order = np.lexsort((np.arange(len(x)), -x, -z))",
        ("tests/test_dps.py",),
        "PA orders servers by idle PS slots first, so workers spread over more servers",
    ),
    # Tests that once passed whatever the code did (docs/testing.md) ----------------------
    Mutant(
        "node-limit-incumbent-dropped",
        "mlsched/scheduler/solvers/highs.py",
        "        code = 1  # a limit, like the clock's: the incumbent (if any) is a feasible point",
        "        code = 4",
        ("tests/test_solvers.py", "tests/test_offline_optimum.py", "-k", "limit"),
        "a MILP stopped by its node limit drops its incumbent (Dorm falls back to DRF)",
    ),
    Mutant(
        "offline-bound-not-above-schedule",
        "mlsched/scheduler/offline/optimum.py",
        "        bound = max(bound, total)",
        "        bound = total",
        ("tests/test_offline_optimum.py", "-k", "limited"),
        "a limited solve reports its schedule's utility as the bound on the optimum",
    ),
    Mutant(
        "fifo-rejects-every-job",
        "mlsched/scheduler/baselines/fifo.py",
        "        seed = self.context.seed if self.context else 0\n        w, p = fixed_counts(",
        "        return Admission.reject(RejectKind.CAPACITY, 'planted')\n"
        "        seed = self.context.seed if self.context else 0\n        w, p = fixed_counts(",
        ("tests/test_policy_properties.py", "-k", "lone_job_that_fits and fifo"),
        "a policy that rejects every job passes the liveness property (nothing to finish)",
    ),
    Mutant(
        "pd-ors-admits-nothing",
        "mlsched/scheduler/pdors/policy.py",
        "        return Admission.admit(plan=plan, reason=reason), (",
        "        return Admission.reject(RejectKind.CAPACITY, reason), (",
        ("tests/test_pdors_policy.py", "-k", "finish_what_they_admit"),
        "PD-ORS admits nothing: 'every admitted job finishes' holds of no job",
    ),
    Mutant(
        "fidelity-rows-read-one-run",
        "mlsched/testbed/experiment.py",
        "js = jct_s(sim, simulated.slot_seconds) if sim is not None else None",
        "js = jct_s(rec, measured.slot_seconds) if sim is not None else None",
        ("tests/test_emulation.py", "-k", "fidelity"),
        "the fidelity table compares the measured run with itself",
    ),
    Mutant(
        "pdors-utility-figure-missing",
        "mlsched/experiments/pdors/plots.py",
        'if sweep["values"]:',
        "if False:",
        ("tests/test_experiment_pdors.py", "-k", "smoke_run"),
        "the pdors experiment draws no utility figure and its smoke test loops over the rest",
    ),
    Mutant(
        "claim-passed-by-our-addition",
        "mlsched/experiments/base.py",
        "checks = [Check(name, paper in held, detail)]",
        "checks = [Check(name, bool(held), detail)]",
        ("tests/test_experiment_oasis_checks.py",),
        "a paper's claim passes when only our addition (the utility floor) meets it",
    ),
    Mutant(
        "oasis-h2-decided-over-every-job",
        "mlsched/experiments/oasis/targets.py",
        '_closest(names, stats, "mean_abs", "std")',
        '_closest(names, stats, "all_mean_abs", "all_std")',
        ("tests/test_experiment_oasis_checks.py",),
        "H2's claim is decided over every job (our check beside), not on the completed jobs "
        "the paper's Fig. 4 plots",
    ),
    Mutant(
        "gadget-gap-deficit-as-lead",
        "mlsched/experiments/gadget/checks.py",
        "for a, b in pairwise(values)) and values[-1] > 0",
        "for a, b in pairwise(values))",
        ("tests/test_experiment_gadget.py", "-k", "gap_must_be_a_lead"),
        "Q1's widening gap passes a deficit that shrinks",
    ),
    Mutant(
        "hetero-unfinished-runs-pass",
        "mlsched/experiments/hetero/checks.py",
        'return Check("every job completed within the run\'s bound", not open_runs, detail)',
        'return Check("every job completed within the run\'s bound", True, detail)',
        ("tests/test_experiment_hetero.py", "-k", "unfinished"),
        "a hetero run that leaves jobs unfinished passes the completion check",
    ),
    Mutant(
        "ideal-worker-count-drawn",
        "mlsched/scheduler/baselines/common.py",
        'w = job.requested_workers or (cap if worker_rule == "ideal" else draw(cap))',
        "w = job.requested_workers or draw(cap)",
        ("tests/test_experiment_hetero.py", "-k", "ideal_counts"),
        "the baselines' ideal worker count (AMB-13) is drawn instead",
    ),
    Mutant(
        "dps-renewal-radius-on-free-time",
        "mlsched/scheduler/dps/bandit.py",
        "capacity = p * self.capacity * self.horizon / self.runtime_lcb()",
        "capacity = p * self.capacity * self.horizon / max(1.0, self.horizon - mu)",
        ("tests/test_dps.py", "-k", "renewal or capacity_bound"),
        "the renewal bound's runtime from the free time's UCB: 1 slot, a bound that never binds",
    ),
    Mutant(
        "reproduction-verdict-from-an-addition",
        "mlsched/experiments/reproduction.py",
        'if check["passed"]:',
        'if check["passed"] or any(ok for _, ok in additions):',
        ("tests/test_reproduction_table.py",),
        "the table calls a claim reproduced when only our addition meets it",
    ),
    Mutant(
        "oasis-h4-tie-counts",
        "mlsched/experiments/oasis/utility.py",
        "float(np.mean(under)) > float(np.mean(over))",
        "float(np.mean(under)) >= float(np.mean(over))",
        ("tests/test_experiment_oasis_checks.py",),
        "H4 passes when under- and over-estimates earn the same",
    ),
    Mutant(
        "oasis-h5-simulation-lead-ignored",
        "mlsched/experiments/oasis/testbed.py",
        "if testbed_gap >= 0 and sim_gap is not None and 0 <= testbed_gap < sim_gap:",
        "if testbed_gap >= 0:",
        ("tests/test_experiment_oasis_checks.py",),
        "H5 passes without OASiS leading in the simulation",
    ),
    Mutant(
        "oasis-h5-margin-not-compared",
        "mlsched/experiments/oasis/testbed.py",
        "if testbed_gap >= 0 and sim_gap is not None and 0 <= testbed_gap < sim_gap:",
        "if testbed_gap >= 0 and sim_gap is not None and sim_gap >= 0:",
        ("tests/test_experiment_oasis_checks.py",),
        "H5 passes when the testbed's lead is larger than the simulated one",
    ),
    Mutant(
        "pdors-rounding-u-without-right-arm",
        "mlsched/experiments/pdors/checks.py",
        "ok = near_one and left and right",
        "ok = near_one and left",
        ("tests/test_experiment_pdors.py",),
        "check 5 passes a rounding ratio falling to the largest gain (no U)",
    ),
    Mutant(
        "gadget-q2-flat-line-passes",
        "mlsched/experiments/gadget/checks.py",
        "ok = ok and not flat",
        "ok = ok",
        ("tests/test_experiment_gadget.py",),
        "Q2 passes a flat embedded-ratio sweep",
    ),
    Mutant(
        "coast-after-a-pause",
        "mlsched/engine/coast.py",
        " and c.last_slot == last:",
        ":",
        ("tests/test_coast.py",),
        "a job that paused coasts on when it resumes, its restart never charged",
    ),
    Mutant(
        "coast-skips-the-window",
        "mlsched/perfmodel/estimator.py",
        "        samples.append(last)\n        if not (entry.quiet is last",
        "        if not (entry.quiet is last",
        ("tests/test_coast.py",),
        "a repeated measurement (a steady job's, coasted or not) never reaches the window",
    ),
    Mutant(
        "coast-quiet-skips-the-window",
        "mlsched/engine/coast.py",
        "                    c.append(c.sample)  # type: ignore[misc]\n",
        "",
        ("tests/test_coast.py",),
        "a quiet repeat's sample never reaches its key's window",
    ),
    Mutant(
        "round-robin-looks-at-the-first-server",
        "mlsched/scheduler/placement.py",
        "                    fits = ledger.fits(s, demand)\n",
        "                    fits = ledger.fits(servers[0], demand)\n",
        ("tests/test_round_robin.py",),
        "a fill's first pass judges each server by the room of the first in its order",
    ),
    Mutant(
        "round-robin-one-task-pointer-stays",
        "mlsched/scheduler/placement.py",
        "self._next_worker = s + 1",
        "self._next_worker = s",
        ("tests/test_round_robin.py",),
        "a one-task job leaves the cyclic pointer on its server, so the next job starts there",
    ),
    Mutant(
        "coast-ends-at-the-slot-end",
        "mlsched/engine/engine.py",
        "                self._finish(c.record, t, offset)\n",
        "                self._finish(c.record, t, self.slot_seconds)\n",
        ("tests/test_coast.py",),
        "a coasting job its slot finishes completes at the slot's end, not when its work ends",
    ),
    Mutant(
        "coast-quiet-outlives-a-refit",
        "mlsched/perfmodel/estimator.py",
        "                self._model_version += 1\n                self._repeat_epoch += 1\n",
        "                self._model_version += 1\n",
        ("tests/test_coast.py",),
        "a coasting job keeps its quiet repeat's prediction after its key's parameters changed",
    ),
    Mutant(
        "bfp-replay-release-late",
        "mlsched/scheduler/offline/fixed_price.py",
        "end = t + int(model.together[i] if together else model.apart[i])",
        "end = t + 1 + int(model.together[i] if together else model.apart[i])",
        ("tests/test_fixed_price.py",),
        "the best-fixed-price replay frees a job's slots a slot after the engine does",
    ),
    Mutant(
        "readme-figure-splits-the-additions",
        "mlsched/experiments/reproduction.py",
        '            key = WITH_ADDITION if verdict.startswith(WITH_ADDITION + " ") else verdict\n',
        "            key = verdict\n",
        ("tests/test_reproduction_table.py",),
        "the totals read back from the table count each addition's verdict apart, so the "
        "README's figure leaves out the claims reproduced only with an addition of ours",
    ),
    Mutant(
        "gadget-drops-small-gains",
        "mlsched/scheduler/gadget/problem.py",
        "return k >= self.min_ring and self.log_gain(k) > -math.inf",
        "return k >= self.min_ring and self.gain(k) > 1e-7",
        (
            "tests/test_gadget.py",
            "tests/test_experiment_gadget.py::test_at_the_smoke_point_no_gpu_a_job_could_use_is_left_idle",
        ),
        "GADGET's LP passes over gains below a floor (the 1e-7 it once had), so the jobs far "
        "below their sigmoid's rise never start though objective (10) counts their gains",
    ),
    Mutant(
        "gadget-one-lp-over-every-gain",
        "mlsched/scheduler/gadget/tiers.py",
        "            and waiting[at].best_log_gain >= top - _LOG_SPAN\n",
        "",
        ("tests/test_gadget.py",),
        "the tiers put every job in one LP: gains hundreds of orders of magnitude below the "
        "largest look like zero to the solver and the far jobs are left out",
    ),
    Mutant(
        "pdors-accept-redraws-the-cover",
        "mlsched/scheduler/pdors/slot.py",
        'check = _Feasibility(self, servers, d, need_s, cover=rounding.cover == "redraw")',
        "check = _Feasibility(self, servers, d, need_s)",
        ("tests/test_pdors.py",),
        "Fig. 11's accepted cover violations are redrawn anyway, so every G_delta < 1 "
        "refuses the job alike",
    ),
    Mutant(
        "cluster-row-decides-the-verdict",
        "mlsched/experiments/reproduction.py",
        "        check = checks[claim.check]\n",
        "        check = checks.get(cluster_check(claim.check), checks[claim.check])\n",
        ("tests/test_reproduction_table.py",),
        "the verdict is taken from the runs charging a cluster's restart cost, not the "
        "paper's own assumption",
    ),
    Mutant(
        "hetero-copies-runs-that-restarted",
        "mlsched/experiments/hetero/__init__.py",
        'if paper is not None and paper["restarts"] == 0:',
        "if paper is not None:",
        ("tests/test_experiment_hetero.py::test_smoke_scale_writes_results_checks_and_plots",),
        "the cluster-cost rows copy the paper-cost runs even where jobs restarted, so the "
        "second cost is never charged",
    ),
    Mutant(
        "drf-grows-pss-off-their-host",
        "mlsched/scheduler/baselines/taskgrow.py",
        "if not is_worker and dem.one_ps_host and counts:",
        "if False:",
        ("tests/test_one_ps_host.py",),
        "DRF's later PSs go wherever the fallback puts them, so a job's PSs split over "
        "hosts and break (2i) in the hetero experiment",
    ),
    Mutant(
        "one-ps-host-ignored-by-packing",
        "mlsched/scheduler/placement.py",
        "        if one_ps_host:\n            ok = _fill_one(ps_order, pd, n_ps, ledger, p_taken)",
        "        if False:\n            ok = _fill_one(ps_order, pd, n_ps, ledger, p_taken)",
        ("tests/test_one_ps_host.py",),
        "packing and round-robin spread a job's PSs over servers whatever one_ps_host says",
    ),
    Mutant(
        "fig9-free-run-not-required-best",
        "mlsched/experiments/hetero/held.py",
        '    return Check(\n        "forced onto one worker type',
        '    best = True\n    return Check(\n        "forced onto one worker type',
        (
            "tests/test_experiment_hetero.py::test_fig9_wants_a_strong_spread_and_the_free_choice_best",
        ),
        "Fig. 9 passes on the spread alone, whether or not A_online free to choose is best",
    ),
    Mutant(
        "trace-arrivals-dropped",
        "mlsched/workloads/pdors.py",
        "        arrivals = _scaled(arrival_times, jobs, horizon)",
        "        pass",
        (
            "tests/test_experiment_pdors.py::test_trace_arrivals_keep_the_seed_s_jobs_and_the_trace_s_shape",
        ),
        "the trace part runs the synthetic arrivals again under the trace's name",
    ),
    Mutant(
        "quota-counts-finished-jobs",
        "mlsched/controller/server.py",
        "if s.spec is not None and s.status.state not in FINAL_STATES",
        "if s.spec is not None",
        ("tests/test_users_ended.py",),
        "a user's finished jobs hold their GPUs and queue places forever",
    ),
    Mutant(
        "queued-quota-counts-only-pending",
        "mlsched/controller/tenancy.py",
        "_WAITING = frozenset({JobState.PENDING.value, JobState.ADMITTED.value, JobState.PAUSED.value})",
        "_WAITING = frozenset({JobState.PENDING.value})",
        ("tests/test_users.py",),
        "admitted and paused jobs escape the queued quota",
    ),
    Mutant(
        "queued-quota-counts-running-jobs",
        "mlsched/controller/tenancy.py",
        "waiting = sum(1 for _, state in own if state in _WAITING)",
        "waiting = len(own)",
        ("tests/test_users.py",),
        "a user's running jobs count as waiting for a place",
    ),
    Mutant(
        "oasis-prices-ignore-committed-load",
        "mlsched/scheduler/oasis/policy.py",
        "prices = constants.prices(used[block], capacity)",
        "prices = constants.prices(0 * used[block], capacity)",
        ("tests/test_oasis.py::test_a_job_arriving_beside_committed_load_pays_the_higher_prices",),
        "OASiS prices every slot as if nothing were committed there",
    ),
    Mutant(
        "pdors-prices-ignore-committed-load",
        "mlsched/scheduler/pdors/policy.py",
        "constants.log_prices(used[i], capacity),",
        "constants.log_prices(0 * used[i], capacity),",
        (
            "tests/test_pdors_policy.py::test_a_job_arriving_beside_committed_load_pays_the_higher_prices",
        ),
        "PD-ORS prices every slot as if nothing were committed there",
    ),
    Mutant(
        "profile-drops-communication",
        "mlsched/profiling/measure.py",
        'comm = statistics.fmean(float(r["comm_time"]) for r in steady)',
        'comm = 0.0 * statistics.fmean(float(r["comm_time"]) for r in steady)',
        ("tests/test_profile.py::test_a_cell_s_iteration_time_is_the_wall_time_its_steps_took",),
        "a profile's cells leave their communication out (iteration = compute)",
    ),
    Mutant(
        "drf-grows-the-largest-share-first",
        "mlsched/scheduler/baselines/drf.py",
        "heapq.heappush(heap, (self._share(t.dem, t.y, t.z), seq, i))",
        "heapq.heappush(heap, (-self._share(t.dem, t.y, t.z), seq, i))",
        ("tests/test_baselines_drf.py",),
        "DRF gives the next worker to the job with the largest dominant share",
    ),
    Mutant(
        "tiresias-serves-the-most-attained-first",
        "mlsched/scheduler/baselines/tiresias.py",
        "return (view[job_id].worker_slots * self._gpus[job_id],)",
        "return (-view[job_id].worker_slots * self._gpus[job_id],)",
        ("tests/test_baselines_tiresias.py",),
        "Tiresias serves the job with the most attained service first",
    ),
    Mutant(
        "las2d-rank-reversed",
        "mlsched/scheduler/baselines/las2d.py",
        "return (view[job_id].remaining * self._size[job_id],)",
        "return (-view[job_id].remaining * self._size[job_id],)",
        ("tests/test_baselines_las2d.py",),
        "2D-LAS serves the most remaining work x resources first",
    ),
    Mutant(
        "executor-forgets-the-checkpoint-step",
        "mlsched/controller/decisions.py",
        "            step, cursor = m.checkpoint_step, m.checkpoint_cursor",
        "            cursor = m.checkpoint_cursor",
        ("tests/test_decisions.py",),
        "a generation's end keeps the step it started from, not its newest checkpoint's",
    ),
    Mutant(
        "solve-memo-answers-unchecked",
        "mlsched/scheduler/solvers/memo.py",
        "        if not program.feasible(x):\n            return False",
        "        pass",
        ("tests/test_solve_memo.py",),
        "a memo's point is used without checking that it is a point of the program",
    ),
    Mutant(
        "solve-memo-never-solves-again",
        "mlsched/scheduler/solvers/memo.py",
        "if int(key[:8], 16) % VERIFY_EVERY == 0:",
        "if False:",
        ("tests/test_solve_memo.py",),
        "the memo's sampled keys are not solved again, so a stale memo goes unseen",
    ),
)


def copy_tree(dest: Path) -> None:
    """The working tree (with generated stubs), without the venv, git and caches."""
    skip = shutil.ignore_patterns(
        ".venv", ".git", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", "runs"
    )
    shutil.copytree(ROOT, dest, ignore=skip, dirs_exist_ok=True)


def run_tests(tree: Path, args: tuple[str, ...]) -> tuple[str, float]:
    """'pass', 'fail' or 'timeout', and the seconds it took."""
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider"]
    cmd += ["-m", "not slow", *args]
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return "timeout", time.perf_counter() - start
    took = time.perf_counter() - start
    if proc.returncode == 0:
        return "pass", took
    if proc.returncode != 1:  # 2-4: usage or collection errors, not a test failing
        tail = proc.stdout.decode(errors="replace")[-2000:] + proc.stderr.decode(errors="replace")
        raise SystemExit(f"pytest could not run {' '.join(args)} (rc {proc.returncode}):\n{tail}")
    return "fail", took


def find_problem(m: Mutant, text: str) -> str | None:
    """Why ``m`` cannot be planted in ``text`` (its file's): its text must occur once."""
    count = text.count(m.find)
    if count == 1:
        return None
    return f"mutant {m.name}: {m.find!r} occurs {count} times in {m.path}, not once"


def apply(tree: Path, m: Mutant) -> str:
    """Plant ``m`` in ``tree``; returns the original text to restore."""
    file = tree / m.path
    text = file.read_text()
    problem = find_problem(m, text)
    if problem is not None:
        raise SystemExit(problem)
    file.write_text(text.replace(m.find, m.replace))
    return text


def heavy(args: tuple[str, ...]) -> bool:
    """Whether a test selection starts training processes (its file is marked
    ``processes``): such selections run one at a time, as in make test."""
    files = [a.split("::")[0] for a in args if a.endswith(".py") or ".py::" in a]
    return any("pytest.mark.processes" in (ROOT / f).read_text() for f in files)


class Trees:
    """One copy of the tree per concurrent run (a mutant is planted in its run's copy
    only), handed out and returned; a lock lets one heavy selection run at a time."""

    def __init__(self, root: Path, n: int) -> None:
        self.free: queue.SimpleQueue[Path] = queue.SimpleQueue()
        for i in range(n):
            tree = root / f"tree{i}"
            copy_tree(tree)
            self.free.put(tree)
        self.heavy = threading.Lock()

    def run(self, args: tuple[str, ...], m: Mutant | None = None) -> tuple[str, float]:
        tree = self.free.get()
        try:
            with self.heavy if heavy(args) else contextlib.nullcontext():
                original = apply(tree, m) if m is not None else None
                try:
                    return run_tests(tree, args)
                finally:
                    if m is not None and original is not None:
                        (tree / m.path).write_text(original)
        finally:
            self.free.put(tree)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--list", action="store_true", help="print the mutants and exit")
    ap.add_argument("--only", action="append", default=[], help="run this mutant (repeatable)")
    ap.add_argument(
        "--jobs",
        type=int,
        default=len(os.sched_getaffinity(0)),
        help="test runs at once (default: the cores this process may use)",
    )
    args = ap.parse_args(argv)
    names = {m.name for m in MUTANTS}
    unknown = sorted(set(args.only) - names)
    if unknown:
        ap.error(f"unknown mutant(s) {', '.join(unknown)}; --list shows them")
    if args.jobs < 1:
        ap.error("--jobs must be >= 1")
    chosen = [m for m in MUTANTS if not args.only or m.name in args.only]
    if args.list:
        for m in chosen:
            print(f"{m.name:40s} {m.path}: {m.why}")
        return 0

    with tempfile.TemporaryDirectory(prefix="mlsched-mutants-") as tmp:
        trees = Trees(Path(tmp), args.jobs)
        check = Path(tmp) / "check"
        copy_tree(check)
        for m in chosen:  # every mutant applies, before anything runs
            (check / m.path).write_text(apply(check, m))
        suites = list(dict.fromkeys(m.tests for m in chosen))
        print(f"baseline: {len(suites)} test selections on the unmutated tree", flush=True)
        with ThreadPoolExecutor(args.jobs) as pool:
            for sel, (verdict, took) in zip(suites, pool.map(trees.run, suites), strict=True):
                if verdict != "pass":
                    print(f"  {' '.join(sel)}: {verdict} without any mutant ({took:.0f} s)")
                    return 2
            # Heavy (real-process) mutants first: they run one at a time, the rest fill in.
            order = sorted(chosen, key=lambda m: not heavy(m.tests))
            futures = {pool.submit(trees.run, m.tests, m): m for m in order}
            killed = 0
            for i, future in enumerate(as_completed(futures), 1):
                m = futures[future]
                verdict, took = future.result()
                ok = verdict in ("fail", "timeout")
                killed += ok
                state = "killed" if ok else "SURVIVED"
                print(
                    f"[{i}/{len(chosen)}] {state:8s} {m.name} ({verdict}, {took:.0f} s)", flush=True
                )
        print(f"score: {killed}/{len(chosen)} mutants killed")
        return 0 if killed == len(chosen) else 1


if __name__ == "__main__":
    raise SystemExit(main())
