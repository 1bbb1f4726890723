"""An OpenAI-compatible chat server that answers T2-RAGBench questions by script, for tests that need real run
records with every kind of answer in seconds (no model).

Given each question's reference and the start of its gold context, it finds the question in the prompt
(`Question: ...`) and answers by a hash of the whole prompt, so the same prompt always gets the same answer: the
reference as a formula (right), the reference plus one (a wrong number), `"None"` (the excerpts lack it), or a
formula that does not evaluate. A prompt that holds the gold context is answered right three times in four, one
without it once in four, so reading the gold matters as it does for a real model. A grading prompt (Corrective RAG's:
it asks for `{"relevant": [...]}`) is answered by a hash of the prompt too: every excerpt, the first one, or none (so
some rows are ranked again by the method's fallback). A judging prompt (t2rag judge's) prefers the answer whose
value is the reference's (a tie when both or neither are), except that one reply in eight always names answer 1 (a
judge's position bias) and one in eight names neither (an unparsed verdict). A routing prompt (the LLM router's) is
answered, by its hash, with the listed collections in their order, in reverse, one named in prose, or nothing of use.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

QUESTION = re.compile(r"Question: (.*?)\n\nAnswer with the JSON object only\.", re.S)
WITH_GOLD = ("right", "right", "right", "wrong", "none", "broken", "right", "right")
WITHOUT_GOLD = ("right", "wrong", "none", "broken")
GRADE_ASKED = '{"relevant": [...]}'
ROUTE_ASKED = "You route a question"
COLLECTION = re.compile(r"^- ([\w-]+): ", re.M)
JUDGE_QUESTION = re.compile(r"^Question: (.*?)\n\nReference answer:", re.M | re.S)
JUDGE_ASKED = "Which answer is more accurate with respect to the reference answer?"
JUDGED = re.compile(r"Reference answer: (.*?)\n\nAnswer 1:\nValue: (\S+).*?\n\nAnswer 2:\nValue: (\S+)", re.S)
EXCERPT = re.compile(r"^### Excerpt (\d+)$", re.M)


def _digest(prompt: str) -> int:
    return int(hashlib.sha256(prompt.encode()).hexdigest(), 16)


def scripted_grade(prompt: str) -> str:
    """The grade of a grading prompt's numbered excerpts: all of them, the first, or none (by the prompt's hash)."""
    numbers = [int(n) for n in EXCERPT.findall(prompt)] or [1]
    chosen = (numbers, numbers[:1], [])[_digest(prompt) % 3]
    return json.dumps({"relevant": chosen})


def _right(value: str, reference: float | None) -> bool:
    try:
        number = float(value)
    except ValueError:
        return False
    return reference is not None and abs(number - reference) <= 1e-6 * max(1.0, abs(reference))


def scripted_verdict(prompt: str, reference: float | None) -> str:
    """A judge's reply to a judging prompt (see the module's docstring)."""
    found = JUDGED.search(prompt)
    kind = _digest(prompt) % 8
    if found is None or kind == 0:
        return "I cannot tell these apart."
    if kind == 1:
        return json.dumps({"reasoning": "scripted: the first is better", "better": "1"})
    first, second = _right(found.group(2), reference), _right(found.group(3), reference)
    better = "tie" if first == second else "1" if first else "2"
    return json.dumps({"reasoning": f"scripted: answer 1 right {first}, answer 2 right {second}", "better": better})


def scripted_route(prompt: str) -> str:
    """An LLM router's reply to a routing prompt (see the module's docstring)."""
    names = COLLECTION.findall(prompt)
    kind = _digest(prompt) % 4
    if kind == 0:
        return json.dumps({"ranking": names})
    if kind == 1:
        return json.dumps({"ranking": names[::-1]})
    if kind == 2:
        return f"The question is most likely about {names[-1]}."
    return "I do not know."


def scripted_answer(prompt: str, reference: float | None, gold_start: str) -> str:
    """The JSON answer to one prompt (see the module's docstring)."""
    if ROUTE_ASKED in prompt:
        return scripted_route(prompt)
    if GRADE_ASKED in prompt:
        return scripted_grade(prompt)
    if JUDGE_ASKED in prompt:
        return scripted_verdict(prompt, reference)
    kinds = WITH_GOLD if gold_start and gold_start in prompt else WITHOUT_GOLD
    kind = kinds[_digest(prompt) % len(kinds)]
    if reference is None or kind == "none":
        formula, computed = "None", "N/A"
    elif kind == "right":
        formula, computed = f"add({reference!r}, 0)", repr(reference)
    elif kind == "wrong":
        formula, computed = f"add({reference!r}, 1)", repr(reference + 1)
    else:
        formula, computed = "divide(revenue, 2)", "N/A"
    return json.dumps(
        {"reasoning_steps": [f"scripted: {kind}"], "final_formula": formula, "computed_formula": computed}
    )


class LoopbackServer(ThreadingHTTPServer):
    """A threaded HTTP server for the tests' stand-in servers, with room for a client's concurrent connections:
    http.server's backlog of 5 dropped some of a batch's 8 at once, and each dropped one waited 1 s for its
    connection to be retried (a tenth of a scripted run's batches: 6 of its 10 s of generation)."""

    request_queue_size = 64

    def handle_error(self, request, client_address) -> None:
        """A client that went away mid-request (a replica lost with its node) is no error of the server's."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def send_json(handler: BaseHTTPRequestHandler, payload: dict) -> None:
    """Answer a request with `payload` as JSON (HTTP 200)."""
    data = json.dumps(payload).encode()
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


@contextmanager
def scripted_server(questions: dict[str, tuple[float | None, str]], delay_s: float = 0.0) -> Iterator[str]:
    """Serve on a free loopback port; yields the base URL (`.../v1`). `questions`: question text -> (reference,
    the first characters of the gold context); `delay_s`: how long each answer takes (a generator that is still
    generating when a test takes its node away)."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            prompt = "\n".join(m["content"] for m in body["messages"])
            last = body["messages"][-1]["content"]
            found = QUESTION.search(last) or JUDGE_QUESTION.search(last)  # the system prompt's examples have some
            reference, gold_start = questions.get(found.group(1).strip(), (None, "")) if found else (None, "")
            text = scripted_answer(prompt, reference, gold_start)
            time.sleep(delay_s)
            reply = {
                "id": "scripted",
                "object": "chat.completion",
                "model": body.get("model", "scripted"),
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": len(prompt) // 4, "completion_tokens": len(text) // 4},
            }
            send_json(self, reply)

    server = LoopbackServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def scripted_generator(base_url: str) -> dict[str, object]:
    """The run config's `generator` section for the scripted server."""
    return {"name": "scripted", "engine": "openai", "model": "scripted", "base_url": base_url, "json_mode": "none"}


@contextmanager
def scripted_for(data: str, delay_s: float = 0.0) -> Iterator[dict[str, object]]:
    """The scripted server for the questions of a data layout (`data.source`), as a run config's `generator`
    section; `delay_s` as in `scripted_server`."""
    from t2rag.data import load_questions

    with scripted_server(questions_of(load_questions(data).table), delay_s=delay_s) as url:
        yield scripted_generator(url)


def questions_of(table) -> dict[str, tuple[float | None, str]]:
    """The server's `questions` from a question table (`t2rag.data` columns): the first 40 characters of each gold
    context, which every prompt that holds the context holds too (contexts are clipped at their end)."""
    rows = zip(table.column("question").to_pylist(), table.column("answer_value").to_pylist(),
               table.column("context").to_pylist(), strict=True)  # fmt: skip
    return {q: (ref, (ctx or "")[:40]) for q, ref, ctx in rows}
