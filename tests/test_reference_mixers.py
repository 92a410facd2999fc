"""Reference tests: semzoo's mixers and losses against an independent re-derivation of the authors' code.

Each reference below is written here, in plain torch, from the logic of the authors' PyMARL code (not by calling
semzoo's modules): QMIX and VDN (oxwhirl/pymarl ``modules/mixers/qmix.py``, ``learners/q_learner.py``), QPLEX
general and Qatten (wjh720/QPLEX ``modules/mixers/dmaq_general.py``, ``dmaq_qatten.py``, ``dmaq_qatten_weight.py``,
``dmaq_si_weight.py``, ``learners/dmaq_qatten_learner.py``) and CW-/OW-QMIX (oxwhirl/wqmix
``learners/max_q_learner.py``, ``modules/mixers/qmix_central_no_hyper.py``). The weights are copied from semzoo's
modules (their ``state_dict``), the agents' utilities are given (the same random tensors to both sides), and both
sides run in float64 on one random batch with padding, variable lengths, real ends and time-outs. A difference
above ``TOL`` fails.

The authors' code pads as PyMARL's buffer does (zeros past an episode, unavailable actions at -9999999) and
bootstraps at a time-out (SMAC's ``episode_limit`` info), as semzoo does by default. One semzoo constant is kept
on purpose: QPLEX's lambda gets ``+1e-10`` (its POSITIVE_EPS, so IGM's lambda > 0 holds exactly); the authors'
does not, which moves Q_tot by about 1e-10 * |A_i|, far below ``TOL``.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from semzoo.agents.rnn import RNNAgent
from semzoo.config import LearnerConfig, MemoryConfig
from semzoo.learners.q_learner import QLearner
from semzoo.learners.wqmix import WQMIXLearner
from semzoo.mixers.base import make_mixer
from semzoo.mixers.settings import QMIXSettings, QPLEXSettings, WQMIXSettings
from semzoo.types import EpisodeBatch, StateLayout

TOL = 1e-8
PYMARL_MASKED = -9999999.0
"""What the authors' code writes over unavailable actions' utilities before a max."""
B, T, A, U, O = 5, 6, 3, 5, 4
UNIT, ENEMY_FEATURES = 4, 7
S = A * UNIT + ENEMY_FEATURES
LAYOUT = StateLayout(n_units=A, unit_dim=UNIT)
LENGTHS = (6, 4, 6, 2, 5)
TERMINATED = (False, True, False, True, False)
"""Episodes 1 and 3 end for real (no bootstrap); 0, 2 and 4 are cut by a time-out (bootstrapped)."""
GAMMA = 0.99


@pytest.fixture(autouse=True)
def float64():
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(before)


# ----- the batch and the agents' utilities ----------------------------------------------------------------------

def make_batch(seed: int = 0) -> EpisodeBatch:
    """B episodes of LENGTHS steps, padded with zeros as PyMARL's buffer is; some agents dead (only the no-op)."""
    g = torch.Generator().manual_seed(seed)
    slot_valid = torch.arange(T + 1)[None, :] <= torch.tensor(LENGTHS)[:, None]  # [B,T+1]
    filled = torch.arange(T)[None, :] < torch.tensor(LENGTHS)[:, None]
    avail = torch.rand(B, T + 1, A, U, generator=g) < 0.6
    avail[..., 1] = True  # every live agent can stop
    dead = torch.rand(B, T + 1, A, generator=g) < 0.2
    avail[dead] = torch.tensor([True] + [False] * (U - 1))  # a dead agent: the no-op only
    avail &= slot_valid[..., None, None]
    actions = torch.multinomial(avail[:, :-1].reshape(-1, U).double() + (~avail[:, :-1].reshape(-1, U).any(-1,
                                keepdim=True)).double(), 1, generator=g).view(B, T, A)
    actions = torch.where(filled[..., None], actions, 0)
    terminated = torch.zeros(B, T, dtype=torch.bool)
    for b, (length, ends) in enumerate(zip(LENGTHS, TERMINATED)):
        terminated[b, length - 1] = ends
    state = torch.randn(B, T + 1, S, generator=g) * slot_valid[..., None]
    return EpisodeBatch(obs=torch.zeros(B, T + 1, A, O), state=state.float(), avail=avail, actions=actions,
                        reward=(torch.randn(B, T, generator=g) * filled).float(), terminated=terminated,
                        filled=filled, length=torch.tensor(LENGTHS))


def utilities(seed: int) -> torch.Tensor:
    """Given per-agent utilities Q_a(tau_t, u) of every slot: [B,T+1,A,U]."""
    return torch.randn(B, T + 1, A, U, generator=torch.Generator().manual_seed(seed)) * 2.0


def given_utilities(learner: QLearner, by_network: dict[str, torch.Tensor]) -> None:
    """Make ``learner`` read the given utilities instead of running its agent networks (one tensor per network)."""
    nets = {id(net): name for name, net in learner.networks().items()}
    learner.agent_q = lambda agent, clean: by_network[nets[id(agent)]]  # type: ignore[method-assign]


def perturb(module: torch.nn.Module, seed: int) -> None:
    """Make a target network differ from its online copy."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.add_(torch.randn(p.shape, generator=g) * 0.3)


# ----- plain-torch references of the authors' mixers ----------------------------------------------------------

def lin(x: torch.Tensor, w: dict[str, torch.Tensor], name: str) -> torch.Tensor:
    out = x @ w[f"{name}.weight"].T
    return out + w[f"{name}.bias"] if f"{name}.bias" in w else out


def ref_qmix(qs: torch.Tensor, states: torch.Tensor, w: dict[str, torch.Tensor], embed: int) -> torch.Tensor:
    """oxwhirl/pymarl QMixer: elu(Q W1 + b1) w2 + V(s), W1 = |hyper_w_1(s)|, w2 = |hyper_w_final(s)|. -> [B,T]"""
    bs = qs.shape[0]
    s = states.reshape(-1, S)
    q = qs.reshape(-1, 1, A)
    w1 = lin(F.relu(lin(s, w, "hyper_w1.0")), w, "hyper_w1.2").abs().view(-1, A, embed)
    b1 = lin(s, w, "hyper_b1").view(-1, 1, embed)
    hidden = F.elu(torch.bmm(q, w1) + b1)
    w_final = lin(F.relu(lin(s, w, "hyper_w2.0")), w, "hyper_w2.2").abs().view(-1, embed, 1)
    v = lin(F.relu(lin(s, w, "hyper_v.0")), w, "hyper_v.2").view(-1, 1, 1)
    return (torch.bmm(hidden, w_final) + v).view(bs, -1)


def ref_si_weight(s: torch.Tensor, actions_onehot: torch.Tensor, w: dict[str, torch.Tensor], heads: int) -> torch.Tensor:
    """wjh720/QPLEX DMAQ_SI_Weight, adv_hypernet_layers 1: sum_k (|key_k(s)| + 1e-10) sig(agents_k(s)) sig(action_k(s, u))."""
    data = torch.cat([s, actions_onehot.reshape(-1, A * U)], dim=1)
    key, agents, action = lin(s, w, "attention.key"), lin(s, w, "attention.agent"), lin(data, w, "attention.action")
    total = torch.zeros(s.shape[0], A)
    for k in range(heads):  # the authors' per-head networks are the rows of semzoo's stacked layer
        x_key = key[:, k:k + 1].abs().repeat(1, A) + 1e-10
        total = total + x_key * torch.sigmoid(agents[:, k * A:(k + 1) * A]) * torch.sigmoid(action[:, k * A:(k + 1) * A])
    return total


def ref_qatten_weight(s: torch.Tensor, w: dict[str, torch.Tensor], heads: int, embed: int):
    """wjh720/QPLEX Qatten_Weight (nonlinear, weighted_head, mask_dead False; state_bias True): (w [N,A], v [N], reg)."""
    units = s[:, :A * UNIT].reshape(-1, A, UNIT).permute(1, 0, 2)  # [A,N,unit]
    head_logits, head_weights = [], []
    for h in range(heads):
        selector = lin(F.relu(lin(s, w, f"qatten.query.{h}.0")), w, f"qatten.query.{h}.2")  # [N,E]
        key_w = w["qatten.key.weight"][h * embed:(h + 1) * embed]
        keys = torch.stack([enc @ key_w.T for enc in units])  # [A,N,E]
        logits = torch.matmul(selector.view(-1, 1, embed), keys.permute(1, 2, 0))  # [N,1,A]
        head_logits.append(logits)
        head_weights.append(F.softmax(logits / math.sqrt(embed), dim=2))
    attend = torch.stack(head_weights, dim=1).view(-1, heads, A).sum(dim=1)
    v = lin(F.relu(lin(s, w, "qatten.value.0")), w, "qatten.value.2").view(-1)
    return attend, v, head_logits


def ref_qplex(qs, states, actions_onehot, max_q, w, *, heads, transformation, qatten_heads=4, embed=32,
              is_v_only=False):
    """QPLEX's two mixer calls summed (dmaq_qatten_learner): V part (is_v) + advantage part. -> ([B,T], reg)"""
    bs = qs.shape[0]
    s = states.reshape(-1, S)
    q = qs.reshape(-1, A)
    reg = None
    if transformation == "qatten":
        w_final, v, logits = ref_qatten_weight(s, w, qatten_heads, embed)
        w_final = w_final + 1e-10
        v = v.view(-1, 1).repeat(1, A) / A
        reg = 0.001 * sum((logit ** 2).mean() for logit in logits)
    else:
        w_final = lin(F.relu(lin(s, w, "hyper_w.0")), w, "hyper_w.2").abs() + 1e-10
        v = lin(F.relu(lin(s, w, "hyper_v.0")), w, "hyper_v.2")
    q_t = w_final * q + v
    v_tot = q_t.sum(dim=-1)
    max_t = w_final * max_q.reshape(-1, A) + v
    adv_q = (q_t - max_t).detach()
    lam = ref_si_weight(s, actions_onehot, w, heads)
    adv_tot = (adv_q * (lam - 1.0)).sum(dim=1)
    return (v_tot + adv_tot).view(bs, -1), reg


def ref_central(qs: torch.Tensor, states: torch.Tensor, w: dict[str, torch.Tensor]) -> torch.Tensor:
    """oxwhirl/wqmix QMixerCentralFF: net([s, Q]) (3 hidden ReLU layers) + V(s), central_action_embed 1. -> [B,T]"""
    bs = qs.shape[0]
    x = torch.cat([states.reshape(-1, S), qs.reshape(-1, A)], dim=1)
    for i in (0, 2, 4):
        x = F.relu(lin(x, w, f"net.{i}"))
    adv = lin(x, w, "net.6")
    v = lin(F.relu(lin(states.reshape(-1, S), w, "value.0")), w, "value.2")
    return (adv + v).view(bs, -1)


# ----- pieces of the authors' learners -------------------------------------------------------------------------

def pymarl_parts(batch: EpisodeBatch):
    """(rewards, terminated, mask, avail, actions, actions_onehot, states) as the authors' learners slice them."""
    rewards = batch.reward.double()
    terminated = batch.terminated.double()
    mask = batch.filled.double()
    return rewards, terminated, mask, batch.avail, batch.actions, F.one_hot(batch.actions, U).double(), batch.state.double()


def masked(q: torch.Tensor, avail: torch.Tensor) -> torch.Tensor:
    q = q.clone()
    q[~avail] = PYMARL_MASKED
    return q


def ref_q_loss(batch, q, tq, mixer_w, target_w, mix):
    """oxwhirl/pymarl QLearner (double Q): masked mean of (mix(Q_a(u_t)) - r - gamma (1 - term) mix^-(Q^-_a(u'*)))^2."""
    rewards, terminated, mask, avail, actions, _, states = pymarl_parts(batch)
    chosen = q[:, :-1].gather(3, actions.unsqueeze(3)).squeeze(3)
    cur_max = masked(q, avail)[:, 1:].max(dim=3, keepdim=True)[1]
    target_max = masked(tq, avail)[:, 1:].gather(3, cur_max).squeeze(3)
    targets = rewards + GAMMA * (1 - terminated) * mix(target_max, states[:, 1:], target_w)
    td = (mix(chosen, states[:, :-1], mixer_w) - targets) * mask
    return (td ** 2).sum() / mask.sum()


def ref_qplex_loss(batch, q, tq, mixer_w, target_w, **mixer_kw):
    """wjh720/QPLEX DMAQ_qattenLearner.sub_train's loss (double Q, is_minus_one, stopped advantage), + Qatten's reg."""
    rewards, terminated, mask, avail, actions, onehot, states = pymarl_parts(batch)
    chosen = q[:, :-1].gather(3, actions.unsqueeze(3)).squeeze(3)
    x_mac_out = masked(q.detach(), avail)
    max_action_qvals = x_mac_out[:, :-1].max(dim=3)[0]
    target_mac_out = masked(tq, avail)[:, 1:]
    cur_max_actions = x_mac_out[:, 1:].max(dim=3, keepdim=True)[1]
    target_chosen = target_mac_out.gather(3, cur_max_actions).squeeze(3)
    target_max_qvals = target_mac_out.max(dim=3)[0]
    cur_max_onehot = F.one_hot(cur_max_actions.squeeze(3), U).double()
    q_tot, reg = ref_qplex(chosen, states[:, :-1], onehot, max_action_qvals, mixer_w, **mixer_kw)
    target, _ = ref_qplex(target_chosen, states[:, 1:], cur_max_onehot, target_max_qvals, target_w, **mixer_kw)
    targets = rewards + GAMMA * (1 - terminated) * target
    td = (q_tot - targets.detach()) * mask
    loss = (td ** 2).sum() / mask.sum()
    return loss + reg if reg is not None else loss


def ref_wqmix_loss(batch, q, central_q, target_central_q, mixer_w, central_w, target_central_w, *, alpha, cw,
                   embed):
    """oxwhirl/wqmix MAXQLearner.train's loss: weighted QMIX loss + the central loss, targets from Q*^-."""
    rewards, terminated, mask, avail, actions, _, states = pymarl_parts(batch)
    chosen = q[:, :-1].gather(3, actions.unsqueeze(3)).squeeze(3)
    cur_max_actions = masked(q.detach(), avail).max(dim=3, keepdim=True)[1]  # every slot
    central_chosen = central_q[:, :-1].gather(3, actions.unsqueeze(3)).squeeze(3)
    central_target_max = masked(target_central_q, avail).gather(3, cur_max_actions).squeeze(3)
    q_tot = ref_qmix(chosen, states[:, :-1], mixer_w, embed)
    targets = rewards + GAMMA * (1 - terminated) * ref_central(central_target_max[:, 1:], states[:, 1:],
                                                               target_central_w)
    td = q_tot - targets.detach()
    masked_td = td * mask
    central_td = (ref_central(central_chosen, states[:, :-1], central_w) - targets.detach()) * mask
    central_loss = (central_td ** 2).sum() / mask.sum()
    ws = torch.ones_like(td) * alpha
    if cw:
        is_max_action = (actions == cur_max_actions[:, :-1].squeeze(3)).all(dim=2)
        max_action_qtot = ref_central(central_target_max[:, :-1], states[:, :-1], target_central_w)
        ws = torch.where(is_max_action | (targets > max_action_qtot), torch.ones_like(td), ws)
    else:
        ws = torch.where(td < 0, torch.ones_like(td), ws)
    qmix_loss = (ws.detach() * masked_td ** 2).sum() / mask.sum()
    return qmix_loss + central_loss, ws, mask


# ----- the tests ----------------------------------------------------------------------------------------------

def weights(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def build(mixer_name: str, settings: QMIXSettings | QPLEXSettings | None, seed: int = 0):
    torch.manual_seed(seed)
    agent = RNNAgent(obs_dim=O, n_agents=A, n_actions=U, hidden_dim=8)
    mixer = make_mixer(mixer_name, n_agents=A, state_dim=S, n_actions=U, settings=settings, state_layout=LAYOUT)
    return agent, mixer


QMIX_CONFIG = QMIXSettings(embed_dim=8, hypernet_dim=16)


def test_qmix_forward_matches_the_authors():
    _, mixer = build("qmix", QMIX_CONFIG)
    qs, states = torch.randn(B, T, A), torch.randn(B, T, S)
    ours = mixer(qs, states).squeeze(-1)
    assert (ours - ref_qmix(qs, states, weights(mixer), QMIX_CONFIG.embed_dim)).abs().max() < TOL


def test_vdn_forward_is_the_sum():
    _, mixer = build("vdn", None)
    qs = torch.randn(B, T, A)
    assert (mixer(qs, torch.randn(B, T, S)).squeeze(-1) - qs.sum(-1)).abs().max() < TOL


QPLEX_CONFIGS = {
    "general": QPLEXSettings(qplex_lambda_layers=1, qplex_heads=3),
    "qatten": QPLEXSettings(qplex_transformation="qatten", qplex_lambda_layers=1, qplex_heads=4, qatten_heads=4,
                            qplex_embed_dim=8, qplex_hypernet_dim=16),
}


def qplex_kw(transformation: str) -> dict:
    config = QPLEX_CONFIGS[transformation]
    return {"heads": config.qplex_heads, "transformation": transformation, "qatten_heads": config.qatten_heads,
            "embed": config.qplex_embed_dim}


@pytest.mark.parametrize("transformation", list(QPLEX_CONFIGS))
def test_qplex_forward_and_regulariser_match_the_authors(transformation):
    _, mixer = build("qplex", QPLEX_CONFIGS[transformation])
    g = torch.Generator().manual_seed(3)
    all_q = torch.randn(B, T, A, U, generator=g)
    actions = torch.randint(0, U, (B, T, A), generator=g)
    chosen = all_q.gather(-1, actions.unsqueeze(-1)).squeeze(-1)
    onehot, states = F.one_hot(actions, U).double(), torch.randn(B, T, S, generator=g)
    ours = mixer(chosen, states, actions_onehot=onehot, max_qs=all_q.max(-1).values).squeeze(-1)
    ref, reg = ref_qplex(chosen, states, onehot, all_q.max(-1).values, weights(mixer), **qplex_kw(transformation))
    assert (ours - ref).abs().max() < TOL
    ours_reg = mixer.regularizer(states, torch.ones(T))
    ours_reg = None if ours_reg is None else ours_reg.detach()
    if transformation == "qatten":
        assert abs(float(ours_reg) - float(reg)) < TOL and float(reg) > 0
    else:
        assert ours_reg is None and reg is None


def test_qatten_weights_sum_to_the_number_of_heads():
    _, mixer = build("qplex", QPLEX_CONFIGS["qatten"])
    w, v = mixer.transform_weights(torch.randn(B, T, S))
    assert torch.allclose(w.sum(-1), torch.full((B, T), 4.0)) and torch.allclose(v, v[..., :1].expand_as(v))


@pytest.mark.parametrize("mixer_name", ["qmix", "vdn"])
def test_qmix_and_vdn_losses_match_the_authors(mixer_name):
    agent, mixer = build(mixer_name, QMIX_CONFIG)
    learner = QLearner(agent=agent, mixer=mixer, config=LearnerConfig(gamma=GAMMA), memory_config=MemoryConfig())
    perturb(learner.target_mixer, 1)
    q, tq = utilities(1), utilities(2)
    given_utilities(learner, {"agent": q, "target_agent": tq})
    ours, _ = learner.compute_loss(make_batch())

    def mix(qs, states, w):
        return ref_qmix(qs, states, w, QMIX_CONFIG.embed_dim) if mixer_name == "qmix" else qs.sum(-1)

    ref = ref_q_loss(make_batch(), q, tq, weights(learner.mixer), weights(learner.target_mixer), mix)
    assert abs(float(ours.detach()) - float(ref.detach())) < TOL


@pytest.mark.parametrize("transformation", list(QPLEX_CONFIGS))
def test_qplex_loss_matches_the_authors(transformation):
    agent, mixer = build("qplex", QPLEX_CONFIGS[transformation])
    learner = QLearner(agent=agent, mixer=mixer, config=LearnerConfig(gamma=GAMMA), memory_config=MemoryConfig())
    perturb(learner.target_mixer, 1)
    q, tq = utilities(3), utilities(4)
    given_utilities(learner, {"agent": q, "target_agent": tq})
    ours, stats = learner.compute_loss(make_batch())
    ref = ref_qplex_loss(make_batch(), q, tq, weights(learner.mixer), weights(learner.target_mixer),
                         **qplex_kw(transformation))
    assert abs(float(ours.detach()) - float(ref.detach())) < TOL
    assert ("loss_mixer_reg" in stats) == (transformation == "qatten")


@pytest.mark.parametrize("weighting", ["cw", "ow"])
def test_weighted_qmix_loss_and_weights_match_the_authors(weighting):
    torch.manual_seed(0)
    agent = RNNAgent(obs_dim=O, n_agents=A, n_actions=U, hidden_dim=8)
    config = WQMIXSettings(central_embed_dim=12, wqmix_alpha=0.3)
    mixer = make_mixer("qmix", n_agents=A, state_dim=S, n_actions=U, settings=QMIX_CONFIG)
    learner = WQMIXLearner(agent=agent, mixer=mixer, config=LearnerConfig(gamma=GAMMA), memory_config=MemoryConfig(),
                           weighting=weighting, settings=config)
    perturb(learner.target_central_mixer, 5)  # target != online: the threshold must read the target
    nets = {"agent": utilities(5), "target_agent": utilities(6), "central_agent": utilities(7),
            "target_central_agent": utilities(8)}
    given_utilities(learner, nets)
    ours, _ = learner.compute_loss(make_batch())
    ref, ref_ws, mask = ref_wqmix_loss(make_batch(), nets["agent"], nets["central_agent"], nets["target_central_agent"],
                                       weights(learner.mixer), weights(learner.central_mixer),
                                       weights(learner.target_central_mixer), alpha=0.3, cw=weighting == "cw",
                                       embed=QMIX_CONFIG.embed_dim)
    assert abs(float(ours.detach()) - float(ref.detach())) < TOL
    from semzoo.types import CleanBatch

    clean = CleanBatch.from_batch(make_batch())
    with torch.no_grad():
        values = learner.online_values(clean)
        ours_ws = learner.step_weights(values, learner.td_target(clean, learner.next_value(clean, values.q_BTAU)))
    real = mask.bool()
    assert torch.equal(ours_ws[real], ref_ws[real])
    assert 0 < int((ref_ws[real] == 1.0).sum()) < int(real.sum())  # both weights occur: the check can fail
