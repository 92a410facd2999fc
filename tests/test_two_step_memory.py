"""Does episodic memory help? SEM-VDN reaches the two-step game's optimum 8 where VDN settles on 7.

Settings are those of scripts/two_step_lambda.py and docs/studies/two-step.md ("Does memory help?"):
uniform exploration (epsilon = 1, the QMIX paper's setting for this game), 4000 env steps, lr 1e-3,
|M| = 100 env steps. Under uniform data VDN's best value in state 2B is 6.5 < 7 (closed form below),
so VDN's agent 0 picks 2A; SEM's target for 2B is (1 - lambda) 6.5 + lambda 8, above 7 once
lambda > 1/3.

The positive control: the episode's own return from the first step towards 2B averages gamma 2.5 (the mean
2B payoff), so mc-VDN's blended target (1 - lambda) 6.5 + lambda 2.5 = 4.5 at lambda = 0.5, and TD(lambda)'s
y_1 = (1 - lambda) V(2B) + lambda r_2 the same, stay below 7: what reaches 8 is the table's max over episodes.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import NO_ACTOR
from script_modules import load_script

from semzoo import make_env
from semzoo.config import ExplorationConfig, LearnerConfig, MemoryConfig, TrainConfig
from semzoo.run.trainer import Trainer

STEPS = 4000
PENDING_SIZE = 100  # 50 two-step episodes between table updates; 5000 would update it once, at the end
SEM_LAMBDA = 0.5
SEEDS = range(10)


def two_step_config(lam: float, seed: int, algo: str = "sem-vdn", td_lambda: float = 0.0) -> TrainConfig:
    return TrainConfig(**NO_ACTOR, env="matrix:two_step", algo=algo, steps=STEPS, seed=seed, n_envs=8, test_episodes=8,
                       test_interval=10**9, log_interval=10**9, device="cpu",
                       exploration=ExplorationConfig(epsilon_start=1.0, epsilon_finish=1.0),
                       learner=LearnerConfig(lr=1e-3, batch_size=32, buffer_size=500, target_update_episodes=50,
                                             td_lambda=td_lambda),
                       memory=MemoryConfig(lam=lam, pending_size=PENDING_SIZE, capacity=1000))


def greedy_return(lam: float, seed: int, algo: str = "sem-vdn", td_lambda: float = 0.0) -> float:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny networks: extra threads only contend
    trainer = Trainer(two_step_config(lam, seed, algo, td_lambda))
    try:
        return trainer.run()["test_return_mean"]
    finally:
        trainer.close()
        torch.set_num_threads(threads)


def test_closed_form_threshold_is_one_third():
    payoff = np.asarray(make_env("matrix:two_step").payoff, float)
    table_2b = payoff[1]
    fit = table_2b.mean(axis=1)[:, None] + table_2b.mean(axis=0)[None, :] - table_2b.mean()
    assert fit.max() == 6.5 and np.argmax(fit) == np.argmax(table_2b)  # greedy in 2B is right, its value is low
    lam_star = (payoff[0].max() - fit.max()) / (table_2b.max() - fit.max())
    assert lam_star == pytest.approx(1 / 3)
    assert lam_star < SEM_LAMBDA


def test_own_return_and_td_lambda_targets_stay_below_7_at_lambda_one_half():
    """The control's closed form: only the table's max over episodes lifts 2B above 2A's 7."""
    payoff = np.asarray(make_env("matrix:two_step").payoff, float)
    table_2b = payoff[1]
    fit_max = 6.5  # VDN's best 2B value under uniform data (above)
    own_return = table_2b.mean()  # E[r_2] in 2B: the own return of mc-, and TD(lambda)'s y_2
    assert own_return == 2.5
    blended = {"sem": (1 - SEM_LAMBDA) * fit_max + SEM_LAMBDA * table_2b.max(),
               "mc": (1 - SEM_LAMBDA) * fit_max + SEM_LAMBDA * own_return,
               "td_lambda": (1 - SEM_LAMBDA) * fit_max + SEM_LAMBDA * own_return}
    assert blended["sem"] > payoff[0].max() > blended["mc"] == blended["td_lambda"] == 4.5


@pytest.mark.slow
def test_sem_vdn_reaches_8_where_vdn_settles_on_7():
    """One seed of the study (lambda = 0 is VDN bit for bit)."""
    assert greedy_return(0.0, seed=0) == 7.0
    assert greedy_return(SEM_LAMBDA, seed=0) == 8.0


@pytest.mark.slow
def test_own_return_and_td_lambda_settle_on_7_where_sem_reaches_8():
    """The positive control on seed 0: mc-VDN and TD(lambda) VDN at lambda = 0.5 stay at VDN's 7."""
    assert greedy_return(SEM_LAMBDA, seed=0, algo="mc-vdn") == 7.0
    assert greedy_return(0.0, seed=0, algo="vdn", td_lambda=SEM_LAMBDA) == 7.0


@pytest.mark.long
def test_the_control_table_only_sem_reaches_8():
    """docs/studies/two-step.md's control table, 10 seeds a row: VDN, mc-VDN and TD(lambda) VDN settle on 7 on every seed; SEM-VDN
    reaches 8 on 9 (seed 4 ends on a tie of agent 0's first-step values, 0.016 apart, where 0.25 gamma is predicted)."""
    vdn = [greedy_return(0.0, seed, algo="vdn") for seed in SEEDS]
    sem = [greedy_return(SEM_LAMBDA, seed) for seed in SEEDS]
    own_return = [greedy_return(SEM_LAMBDA, seed, algo="mc-vdn") for seed in SEEDS]
    td_lambda = [greedy_return(0.0, seed, algo="vdn", td_lambda=SEM_LAMBDA) for seed in SEEDS]
    assert vdn == own_return == td_lambda == [7.0] * len(SEEDS)
    assert set(sem) <= {7.0, 8.0}
    page = {row[0]: row[4].split() for row in control_table()}  # the page's per-seed column, the findings page's source
    assert page["SEM-VDN"] == [f"{r:.0f}" for r in sem]
    assert page["VDN"] == page["mc-VDN"] == page["VDN, TD(lambda)"] == ["7"] * len(SEEDS)


def control_table() -> list[list[str]]:
    """The rows of docs/studies/two-step.md's control table, as cells (as the findings page's figure reads them)."""
    findings = load_script("findings_tables")
    return findings._page_table(*findings.CONTROL_TABLE)


def test_the_control_table_on_the_page_reads_as_its_test_expects():
    page = {row[0]: row for row in control_table()}
    assert set(page) == {"VDN", "SEM-VDN", "mc-VDN", "VDN, TD(lambda)"}
    sem = page["SEM-VDN"][4].split()
    assert len(sem) == len(SEEDS) and page["SEM-VDN"][5] == f"{sem.count('8')}/{len(SEEDS)}"
