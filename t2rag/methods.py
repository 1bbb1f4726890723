"""The RAG methods (the paper's Table 3 plus bm25 and RRF), each a registered composition of pipeline stages.

A method names the stages that turn a question into a ranking (`stages`, names from `t2rag.stages.STAGES`, in
order) and configures the shared ones: which retriever ranks, which texts are indexed and which texts the generator
reads. Every runner runs `Method.chain(...)` as it is; none of them knows a method by name.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Literal

from t2rag import plugins
from t2rag.errors import PluginError
from t2rag.retrieval.config import RETRIEVERS, RankFusion

IndexTexts = Literal["context", "summary"]
ReaderInput = Literal["none", "gold", "retrieved_context", "retrieved_summary"]

#: Stages of every retrieval whose retriever reads dense query vectors.
DENSE = ("embed_queries", "retrieve")
#: Stages of a lexical retrieval.
LEXICAL = ("retrieve",)
#: HyDE's query: a generated hypothetical excerpt, embedded in place of the question.
HYDE = ("hyde_prompts", "generate", "hyde_query")
#: The generator grades the retrieved contexts (Self-RAG, Corrective RAG).
GRADE = ("grade_prompts", "generate", "grade_contexts")
#: The stages every answered row ends with, whatever chain brought it to its prompts.
ANSWER_TAIL = ("generate", "parse_answers")
#: The stages that make a question's answer prompt from what its method reads.
PROMPTING = ("read_contexts", "answer_prompts")
#: Stages that answer a question from what the method reads (they run for the generation sample only).
ANSWER = (*PROMPTING, *ANSWER_TAIL)
#: Query routing (t2rag.routing), as a suffix to a retrieving method's name (`bm25@semantic`): `pooled` searches
#: every loaded subset's contexts together, unrouted; a router ranks the subsets and the method searches the top
#: one (`routing.top`). The routing stages come before the method's own.
ROUTERS = ("pooled", "oracle", "semantic", "llm")
ROUTE = ("route",)
LLM_ROUTE = ("route_prompts", "generate", "route")


@dataclass(frozen=True)
class Method:
    """One RAG method: the stages that rank contexts for a question, then the answering stages."""

    name: str
    description: str
    retriever: str | None = None  # a name from t2rag.retrieval.RETRIEVERS; None: no retrieval
    stages: tuple[str, ...] = ()  # question -> ranking; empty for methods that do not retrieve
    index_texts: IndexTexts = "context"
    reader: ReaderInput = "retrieved_context"
    #: A lexical method whose retriever ranks a question again when the generator judged none of its contexts
    #: relevant (Corrective RAG's `corrective_retrieve`).
    fallback: str | None = None
    #: How the corpus a question searches is chosen (one of ROUTERS); None: its own subset's.
    router: str | None = None

    @property
    def retrieves(self) -> bool:
        return self.retriever is not None

    @property
    def searches_vectors(self) -> bool:
        """Its retrieval embeds the query and searches a vector index (the methods with a dense index to build)."""
        return "embed_queries" in self.stages

    @property
    def retrieval_needs_generator(self) -> bool:
        """A generating stage before retrieval (HyDE), or an index of generated summaries."""
        return "generate" in self.stages or self.index_texts == "summary"

    def texts_read(self, k: int) -> int:
        """How many texts its generator reads: none, the gold context, or the top k (contexts or summaries)."""
        return {"none": 0, "gold": 1}.get(self.reader, k)

    def chain(self, generate: bool) -> tuple[str, ...]:
        """The stages a question of this method goes through: ranking, then answering when it is generated."""
        return self.stages + (ANSWER if generate else ())


METHODS: dict[str, Method] = {
    m.name: m
    for m in [
        Method("pretrained_only", "the question alone, no context", reader="none"),
        Method("oracle", "the question with its own gold context", reader="gold"),
        Method("base", "dense top-k (Base-RAG)", retriever="base", stages=DENSE),
        Method("bm25", "BM25 top-k", retriever="bm25", stages=LEXICAL),
        Method(
            "hybrid_bm25",
            "dense top-k fused with normalised BM25 (the paper's Hybrid BM25)",
            retriever="hybrid_bm25",
            stages=DENSE,
        ),
        Method("hybrid_rrf", "reciprocal-rank fusion of dense and BM25", retriever="hybrid_rrf", stages=DENSE),
        Method("reranker", "cross-encoder over a 3k dense pool", retriever="base", stages=(*DENSE, "rerank")),
        Method(
            "hyde",
            "dense search with the embedding of a generated hypothetical document",
            retriever="base",
            stages=(*HYDE, *DENSE),
        ),
        Method(
            "summarization",
            "index and read generated summaries of every context",
            retriever="base",
            stages=DENSE,
            index_texts="summary",
            reader="retrieved_summary",
        ),
        Method(
            "sumcontext",
            "retrieve over summaries, read the original contexts",
            retriever="base",
            stages=DENSE,
            index_texts="summary",
            reader="retrieved_context",
        ),
        # Beyond the paper: metadata-aware and long-context retrieval (t2rag.retrieval.fusion.weighted, .chunked_dense).
        Method("bm25_numeric", "BM25 over numeric- and table-aware tokens", retriever="bm25_numeric", stages=LEXICAL),
        Method("chunked", "dense over overlapping chunks, max-pooled per context", retriever="chunked", stages=DENSE),
        Method("bm25_meta", "numeric BM25 fused with the metadata prior", retriever="bm25_meta", stages=LEXICAL),
        Method(
            "bm25_page",
            "bm25_meta fused with page evidence (table row labels, phrases, figures)",
            retriever="bm25_page",
            stages=LEXICAL,
        ),
        Method(
            "bm25_focus",
            "bm25_page reading the question without its company's name, with the report year it names",
            retriever="bm25_focus",
            stages=LEXICAL,
        ),
        Method("hybrid_chunked", "numeric BM25 fused with chunked dense", retriever="hybrid_chunked", stages=DENSE),
        Method(
            "hybrid_meta",
            "numeric BM25, chunked dense and the metadata prior, fused",
            retriever="hybrid_meta",
            stages=DENSE,
        ),
        # The authors' library's remaining methods (t2rag.stages.grade).
        Method(
            "hyde_reranker",
            "HyDE's dense pool of 3k reordered by the cross-encoder",
            retriever="base",
            stages=(*HYDE, *DENSE, "rerank"),
        ),
        Method(
            "self_rag",
            "dense top-k; the generator reads only the contexts it judges relevant",
            retriever="base",
            stages=(*DENSE, *GRADE),
        ),
        Method(
            "crag",
            "dense top-k graded by the generator; none relevant: bm25_focus ranks again (Corrective RAG)",
            retriever="base",
            stages=(*DENSE, *GRADE, "corrective_retrieve"),
            fallback="bm25_focus",
        ),
    ]
}

#: The paper's Table 3 order.
PAPER_METHODS: tuple[str, ...] = (
    "pretrained_only",
    "oracle",
    "base",
    "hybrid_bm25",
    "reranker",
    "hyde",
    "summarization",
    "sumcontext",
)


def register_method(name: str, entry: Method | RankFusion, origin: plugins.Origin) -> None:
    """A plugin's method, or a rank fusion (its retriever is registered under the same name, by the same origin)."""
    if isinstance(entry, RankFusion):
        plugins.register("t2rag.retrievers", name, entry, origin)
        description = entry.description or f"reciprocal-rank fusion of {', '.join(entry.retrievers)}"
        embeds = "dense" in RETRIEVERS[name].ingredients  # a member searches with query vectors
        entry = Method(name, description, retriever=name, stages=DENSE if embeds else LEXICAL)
    if not isinstance(entry, Method):
        raise PluginError(f"plugin {origin.label}: method '{name}' is a {type(entry).__name__}, not a "
                          "t2rag.extend.Method")  # fmt: skip
    if entry.name != name or "@" in name or not name:
        raise PluginError(f"plugin {origin.label}: method '{entry.name}' is registered as '{name}' (a method's name "
                          "is the name it is registered by, without '@')")  # fmt: skip
    if entry.retriever is not None and entry.retriever not in RETRIEVERS:
        raise PluginError(f"plugin {origin.label}: method '{name}' searches with retriever '{entry.retriever}', "
                          f"which nothing registers{close_names(entry.retriever, RETRIEVERS)}")  # fmt: skip
    if (entry.retriever is None) != ("retrieve" not in entry.stages):
        raise PluginError(f"plugin {origin.label}: method '{name}' must name a retriever exactly when its stages "
                          "include retrieve")  # fmt: skip
    if entry.retriever is not None and "dense" in RETRIEVERS[entry.retriever].ingredients \
            and "embed_queries" not in entry.stages:  # fmt: skip
        raise PluginError(f"plugin {origin.label}: method '{name}' searches with retriever '{entry.retriever}', "
                          "which reads query vectors, but its stages do not embed the question (use DENSE: "
                          "embed_queries, retrieve)")  # fmt: skip
    METHODS[name] = entry


plugins.add_registrar("t2rag.methods", plugins.Registrar(register_method, lambda: METHODS))


def close_names(name: str, known: Iterable[str]) -> str:
    """`; did you mean a, b?` for the known names closest to `name` ('' when none is close)."""
    close = difflib.get_close_matches(name, list(known), n=3, cutoff=0.6)
    return f"; did you mean {', '.join(close)}?" if close else ""


def get_method(name: str) -> Method:
    """A registered method, or a retrieving one with a router (`METHOD@ROUTER`, see ROUTERS)."""
    if name in METHODS:
        return METHODS[name]
    base, at, router = name.partition("@")
    if at and base in METHODS:
        if router not in ROUTERS:
            raise ValueError(f"unknown router '{router}' in method '{name}' (routers: {', '.join(ROUTERS)})")
        if not METHODS[base].retrieves:
            raise ValueError(f"method '{base}' does not retrieve, so it cannot be routed")
        return routed(METHODS[base], router)
    close = close_names(name, METHODS)
    if close:
        raise ValueError(f"unknown method '{name}' (no plugin registers it{close})")
    raise ValueError(f"unknown method '{name}' (choose from {', '.join(METHODS)}, each retrieving one optionally "
                     f"@{'/'.join(ROUTERS)}; a plugin's method needs its package installed or its module in "
                     "plugins:)")  # fmt: skip


def routed(method: Method, router: str) -> Method:
    """`method` searching the pooled corpus (router `pooled`) or the subsets a router ranks first."""
    stages = (LLM_ROUTE if router == "llm" else ROUTE) + method.stages
    what = "every subset pooled, unrouted" if router == "pooled" else f"the subset the {router} router ranks first"
    return replace(method, name=f"{method.name}@{router}", description=f"{method.description}, over {what}",
                   stages=stages, router=router)  # fmt: skip


def is_method(name: str) -> bool:
    """Whether `get_method` knows the name."""
    try:
        get_method(name)
    except ValueError:
        return False
    return True


def readers_of(names: Iterable[str], plugin_methods: dict[str, dict] | None = None) -> dict[str, str]:
    """What each named method's generator reads (`Method.reader`), as the outcome attribution needs it; a plugin's
    method as the run's manifest recorded it (`plugin_methods`), where this process has not loaded the plugin."""
    recorded = plugin_methods or {}
    return {name: recorded[name]["reader"] if name in recorded and name not in METHODS else get_method(name).reader
            for name in set(names)}  # fmt: skip
