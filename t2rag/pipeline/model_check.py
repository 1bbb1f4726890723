"""The models a run will load and whether each can be had on this machine: what `t2rag plan` lists, and what both
runners check before any work, so that a model that cannot be had ends the run in seconds with one line instead
of after hours of the work before its first load.

A built-in stage's pool says which model it loads (`embed` and `tokenize`: the embedder, `rerank`: the
cross-encoder, `generate`: the generator; a plugin's stage loads what it loads itself); a method whose index is
generated summaries needs the generator too. The generator's
engine says how its weights are found (`Engine.weights`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from t2rag import plugins
from t2rag.config import RunConfig
from t2rag.errors import ModelUnavailable
from t2rag.generation.registry import engine_of
from t2rag.methods import get_method
from t2rag.model_access import Availability, hub_availability
from t2rag.retrieval.dense.embedder import resolve_model_path
from t2rag.retrieval.dense.hashing_embedder import HASHING_MODEL
from t2rag.stages import STAGES
from t2rag.stages.work import WorkGroup

#: The model a stage's pool loads.
ROLE_OF_POOL = {"embed": "embedder", "tokenize": "embedder", "rerank": "reranker", "generate": "generator"}
ROLES = ("embedder", "reranker", "generator")


@dataclass(frozen=True)
class ModelNeed:
    """One model the run loads: its role, its name, the methods that need it and whether it can be had here."""

    role: str
    model: str
    methods: tuple[str, ...]
    available: bool
    where: str

    def to_dict(self) -> dict:
        return asdict(self)


def needed_models(config: RunConfig, work: list[WorkGroup]) -> list[ModelNeed]:
    """Every model the planned rows `work` load, in role order, each checked on this machine."""
    users: dict[str, set[str]] = {}
    for group in work:
        roles = {ROLE_OF_POOL[STAGES[s].pool] for s in group.stages
                 if STAGES[s].pool in ROLE_OF_POOL and plugins.origin_of("t2rag.stages", s).built_in}  # fmt: skip
        for method in dict.fromkeys(group.rows.column("method").to_pylist()):
            needs = roles | ({"generator"} if get_method(method).retrieval_needs_generator else set())
            for role in needs:
                users.setdefault(role, set()).add(method)
    if config.generator is None:  # a run that needs one is refused by its stages' own check, naming the setting
        users.pop("generator", None)
    out = []
    for role in ROLES:
        if role in users:
            model, found = _model_of(config, role)
            methods = tuple(sorted(users[role], key=config.methods.index))
            out.append(ModelNeed(role, model, methods, found.available, found.where))
    return out


def _model_of(config: RunConfig, role: str) -> tuple[str, Availability]:
    if role == "generator":
        return config.generator.model, engine_of(config.generator).weights(config.generator)
    model = config.retrieval.embedder.model if role == "embedder" else config.retrieval.reranker.model
    if model == HASHING_MODEL:
        return model, Availability(True, "no weights (the deterministic hashing embedder)")
    return model, hub_availability(resolve_model_path(model))


def require_models(config: RunConfig, work: list[WorkGroup]) -> None:
    """Refuse, with one line naming every model that cannot be had and how to provide it, a run whose rows left
    to compute (`work`) would load one (unless `check_models` is off)."""
    if not config.check_models:
        return
    missing = [n for n in needed_models(config, work) if not n.available]
    if missing:
        what = "; ".join(f"the {n.role} '{n.model}' (for {', '.join(n.methods)}): {n.where}" for n in missing)
        downloads = ", ".join(f"`hf download {n.model}`" for n in missing)
        raise ModelUnavailable(
            f"this run needs models it cannot have here, so nothing was run: {what}. Download them where the Hub "
            f"is reachable ({downloads}, same HF_HOME), point the config at a local directory, drop the methods, "
            "or set check_models: false if the nodes that load them have them"
        )
