"""Which runs a report compares: a memory variant against its base and SEM, a setting's variant against the runs it
departs from, and the pairs asked for with ``--compare``. Runs are known by their labels (``runfiles.run_labels``)."""

from __future__ import annotations

from collections.abc import Sequence

from semzoo.analysis.report import RunSeries, _grouped, _labels
from semzoo.config import config_fields
from semzoo.episodic.memory import NO_MEMORY, memory_of
from semzoo.runfiles import setting_name

SEM = "sem"
"""The memory every other memory is also compared with (``memory_pairs``): the paper's."""


def memory_pairs(algos: Sequence[str], *, over_sem: bool = True) -> list[tuple[str, str]]:
    """(<memory>-X, X) for each memory variant (a registered memory's prefix) whose base X is among ``algos``;
    then, unless ``over_sem`` is False, (<memory>-X, sem-X) for each other memory whose SEM variant is among them.

    ``algos`` are run labels (``runfiles.run_labels``): ``sem-qmix lam=0.3`` pairs with ``qmix``, its memory
    settings dropped, and ``sem-qmix lr=0.001`` with ``qmix lr=0.001``; ``emc-qmix`` pairs with ``qmix``, then
    with ``sem-qmix``.
    """
    memory_settings = {setting_name(f.key) for f in config_fields() if f.section == "memory"}
    over_base, over_sem_pairs = [], []
    for label in sorted(algos):
        algo, *settings = label.split(" ")
        kind, _, base = algo.partition("-")
        base = " ".join([base, *(s for s in settings if s.partition("=")[0] not in memory_settings)])
        if memory_of(algo) == NO_MEMORY:
            continue
        if base in algos:
            over_base.append((label, base))
        if over_sem and kind != SEM and f"{SEM}-{base}" in algos:
            over_sem_pairs.append((label, f"{SEM}-{base}"))
    return over_base + over_sem_pairs


def setting_pairs(algos: Sequence[str]) -> list[tuple[str, str]]:
    """(X, Y) for labels of one algorithm where Y's settings are a proper subset of X's: each variant against the
    runs it departs from. ``qmix runtime=semzoo-0.2`` pairs with ``qmix``; a factor run ``qmix runtime=semzoo-0.2
    timeout_as_terminal=true`` with both; ``sem-qmix lam=0.3`` with ``sem-qmix`` (and, through ``memory_pairs``,
    with ``qmix``).
    """
    parsed = [(label, *_label_parts(label)) for label in sorted(algos)]
    return [(x, y) for x, x_algo, x_settings in parsed for y, y_algo, y_settings in parsed
            if x_algo == y_algo and y_settings < x_settings]


def _label_parts(label: str) -> tuple[str, frozenset[str]]:
    algo, *settings = label.split(" ")
    return algo, frozenset(settings)


def compared_pairs(algos: Sequence[str]) -> list[tuple[str, str]]:
    """The pairs a report compares: ``memory_pairs`` then ``setting_pairs``, each pair once."""
    return list(dict.fromkeys(memory_pairs(algos) + setting_pairs(algos)))


COMPARE_SEPARATOR = " vs "
"""Between the two labels of a ``--compare`` pair: ``'qmix td_lambda=0.6 vs sem-qmix'`` asks for P(X > Y)."""


def parse_compare(text: str) -> tuple[str, str]:
    """``'X vs Y'`` -> (X, Y), two run labels (``runfiles.run_labels``) around one `` vs ``; ValueError otherwise."""
    parts = [part.strip() for part in text.split(COMPARE_SEPARATOR)]
    if len(parts) != 2 or not all(parts) or parts[0] == parts[1]:
        raise ValueError(f"--compare {text!r}: expected two different run labels around ' vs ', e.g. "
                         "'qmix td_lambda=0.6 vs sem-qmix' (the labels of a report's tables)")
    return parts[0], parts[1]


def check_compare(runs: Sequence[RunSeries], pairs: Sequence[tuple[str, str]]) -> None:
    """ValueError naming a label of ``pairs`` that no run carries, and the labels the runs do carry."""
    labels = _labels(_grouped(runs))
    for pair in pairs:
        for label in pair:
            if label not in labels:
                raise ValueError(f"--compare {COMPARE_SEPARATOR.join(pair)!r}: no run is labelled {label!r}; "
                                 f"the labels of these runs: {', '.join(labels)}")
