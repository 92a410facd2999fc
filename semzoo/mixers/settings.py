"""The built-in mixers' own settings: QMIX's, QPLEX's and WQMIX's central mixer and weighting.

Each is a frozen dataclass whose fields are CLI flags and ``<section>.<field>`` keys, as a plugin mixer's settings
are (``semzoo.register_mixer(name, settings=...)``); ``MIXER_SETTINGS`` names the section of each and the mixers
(the bases of the algorithm ids) that train with it. VDN has none. They live apart from the mixers' modules so that
the config, `train --help` and `semzoo algos` know them without loading torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from semzoo.settings import AT_LEAST_ONE, NON_NEGATIVE, Range, check_fields, ranged


@dataclass(frozen=True, kw_only=True)
class QMIXSettings:
    """QMIX's mixing network (Rashid et al. 2018; PyMARL's qmix.yaml). WQMIX's Q_tot is this mixer too."""

    embed_dim: int = ranged(32, AT_LEAST_ONE)
    """QMIX mixing embedding size."""
    hypernet_dim: int = ranged(64, AT_LEAST_ONE)
    """Hidden size of QMIX's 2-layer hypernetworks."""

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass(frozen=True, kw_only=True)
class QPLEXSettings:
    """QPLEX's duplex dueling mixer (Wang et al. 2021; wjh720/QPLEX's config/algs/qplex*.yaml)."""

    qplex_embed_dim: int = ranged(32, AT_LEAST_ONE)
    """Hidden size of QPLEX's transformation networks w_i(s), v_i(s), and the key/query size and V(s) hidden layer of
    its Qatten transformation (the authors' mixing_embed_dim)."""
    qplex_hypernet_dim: int = ranged(64, AT_LEAST_ONE)
    """Hidden size of the Qatten transformation's query networks (the authors' hypernet_embed; qatten only)."""
    qplex_heads: int = ranged(4, AT_LEAST_ONE)
    """Attention heads of QPLEX's advantage weights (4 for SMAC, 10 for matrix games in the original settings)."""
    qplex_attend_dim: int = ranged(32, AT_LEAST_ONE)
    """Per-head key/query size of QPLEX's attention."""
    qplex_transformation: Literal["general", "qatten"] = "general"
    """QPLEX's transformation weights w_i(s), v_i(s): 'general' (|hypernet(s)|, per-agent biases; the "dmaq" mixer) or
    'qatten' (Qatten's multi-head softmax attention over the env's per-unit state features plus V(s)/n: the
    authors' SMAC setup, "dmaq_qatten"; needs an env that declares its state layout, such as smax: and smac:)."""
    qplex_lambda_layers: int = ranged(2, Range(low=1, high=2), "1 is the authors' SMAC setup")
    """Layers of each of QPLEX's lambda networks (key, agent and action): 2 (a hidden layer of qplex_attend_dim shared
    by the heads) or 1 (one linear layer per head, the authors' adv_hypernet_layers: 1 on SMAC)."""
    qatten_heads: int = ranged(4, AT_LEAST_ONE, "the authors use 4")
    """Attention heads of the Qatten transformation (its weights sum to 1 per head, so to qatten_heads per state)."""
    qatten_reg: float = ranged(0.001, NON_NEGATIVE, "the authors use 0.001")
    """Weight of the Qatten attention regulariser, reg * sum_heads mean(logit^2), added to the loss (qatten only)."""

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass(frozen=True, kw_only=True)
class WQMIXSettings:
    """Weighted QMIX's unrestricted central mixer Q* and its weighting (Rashid et al. 2020; oxwhirl/wqmix)."""

    central_embed_dim: int = ranged(256, AT_LEAST_ONE)
    """Hidden size of WQMIX's unrestricted central mixer Q* (3 hidden layers and a V(s) head, as the authors')."""
    wqmix_alpha: float = ranged(0.75, Range(low=0, high=1, low_open=True), "a weight; the SEM paper uses 0.75")
    """Weight given by WQMIX to joint actions that are not (believed) optimal; the SEM paper's WQMIX (CW) on SMAC: 0.75."""

    def __post_init__(self) -> None:
        check_fields(self)


MIXER_SETTINGS: dict[str, tuple[type, tuple[str, ...]]] = {
    "qmix": (QMIXSettings, ("qmix",)),
    "qplex": (QPLEXSettings, ("qplex",)),
    "wqmix": (WQMIXSettings, ("cw-qmix", "ow-qmix")),
}
"""Section name -> (its settings, the bases that train with it): every config of an id on one of those bases holds
the section, filled with its defaults (``qmix`` also for ``cw-qmix`` and ``ow-qmix``, whose Q_tot is QMIX's mixer);
the config registers them when it is imported."""
