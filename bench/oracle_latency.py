"""Time to first token and total time of `ask`, with and without HyDE and reranking.

    .venv/bin/python bench/oracle_latency.py [--runs 5] [--json FILE]

The LLM is the fake server from the test suite on 127.0.0.1, with fixed delays standing in
for a remote model, so the figures isolate what gbr adds: retrieval, the HyDE call (and
its time box), the rerank call, and the streaming path. The slow-HyDE row shows that a
HyDE call far slower than its time box costs at most the time box.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import _corpus as bc  # noqa: E402

from gbr.actors.pipeline import IndexOptions, run_index  # noqa: E402
from gbr.core.answer.oracle import AskOptions, Oracle  # noqa: E402
from gbr.core.answer.prompt import HYDE_SYSTEM_PROMPT  # noqa: E402
from gbr.core.llm.base import ProviderSettings  # noqa: E402
from gbr.core.llm.openai_compat import OpenAICompatProvider  # noqa: E402
from gbr.core.rank.rerank import LlmReranker  # noqa: E402
from gbr.core.rank.search import Searcher  # noqa: E402
from tests.fake_llm import FakeLlm  # noqa: E402

QUESTION = "how can a member reserve a book that is already on loan"
ANSWER_DELAY = 0.4  # seconds before the answer's first byte: a remote model thinking
ANSWER_PIECES = 20
TIME_BOX = 2.0


@dataclass(frozen=True)
class Scenario:
    name: str
    hyde: bool
    rerank: bool
    hyde_delay: float = 0.0
    rerank_delay: float = 0.0


SCENARIOS = [
    Scenario("plain", hyde=False, rerank=False),
    Scenario("hyde (0.5 s)", hyde=True, rerank=False, hyde_delay=0.5),
    Scenario("hyde slow (5 s, box 2 s)", hyde=True, rerank=False, hyde_delay=5.0),
    Scenario("rerank llm (0.5 s)", hyde=False, rerank=True, rerank_delay=0.5),
    Scenario("hyde + rerank", hyde=True, rerank=True, hyde_delay=0.5, rerank_delay=0.5),
]


def responder(fake: FakeLlm, scenario: Scenario) -> Any:
    def respond(body: dict[str, Any]) -> str:
        system = body["messages"][0]["content"]
        if system == HYDE_SYSTEM_PROMPT:
            fake.stopping.wait(scenario.hyde_delay)
            return "pub fn reserve(book: BookId, member: MemberId) -> Result(Int, LoanError)"
        if "[1]" in body["messages"][-1]["content"] and "rank" in system.lower():
            fake.stopping.wait(scenario.rerank_delay)
            return "[2, 1, 3]"
        fake.stopping.wait(ANSWER_DELAY)
        return " ".join(f"word{i}" for i in range(ANSWER_PIECES))

    return respond


def measure(searcher: Searcher, fake: FakeLlm, scenario: Scenario, runs: int) -> dict[str, float]:
    fake.respond = responder(fake, scenario)
    llm = OpenAICompatProvider(
        ProviderSettings(name="openai", base_url=fake.openai_base_url, model="bench")
    )
    oracle = Oracle(searcher, llm, LlmReranker(llm) if scenario.rerank else None)
    options = AskOptions(hyde=scenario.hyde, rerank=scenario.rerank, hyde_timeout=TIME_BOX)
    first, total, hyde_states = [], [], []
    for _ in range(runs):
        started = time.perf_counter()
        seen: list[float] = []

        def on_token(_delta: str, seen: list[float] = seen, started: float = started) -> None:
            seen.append(time.perf_counter() - started)

        answer = oracle.answer(QUESTION, options, on_token)
        total.append(time.perf_counter() - started)
        first.append(seen[0] if seen else float("nan"))
        hyde_states.append(answer.hyde)
    return {
        "ttft_p50": statistics.median(first),
        "total_p50": statistics.median(total),
        "hyde": max(set(hyde_states), key=hyde_states.count),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)

    model = bc.load_model()
    with tempfile.TemporaryDirectory() as tmp:
        root = bc.copy_example(Path(tmp))
        db = Path(tmp) / "index.duckdb"
        run_index(IndexOptions(root=root, db=db, embed_cache=bc.shared_cache()), model)
        with bc.open_read_only(db) as store, FakeLlm() as fake:
            searcher = Searcher(store, model)
            searcher.search("warm up", k=1)
            rows = {s.name: measure(searcher, fake, s, args.runs) for s in SCENARIOS}
    base = rows["plain"]
    print(f"fake LLM: {ANSWER_DELAY}s to first byte, {ANSWER_PIECES} pieces; HyDE box {TIME_BOX}s")
    print(f"{'scenario':<28}{'TTFT p50':>10}{'total p50':>11}{'+TTFT':>8}  hyde")
    for name, row in rows.items():
        extra = row["ttft_p50"] - base["ttft_p50"]
        print(
            f"{name:<28}{row['ttft_p50']:>9.3f}s{row['total_p50']:>10.3f}s{extra:>+7.2f}s  "
            f"{row['hyde']}"
        )
    slow = rows["hyde slow (5 s, box 2 s)"]["ttft_p50"] - base["ttft_p50"]
    verdict = "PASS" if slow <= TIME_BOX + 0.25 else "FAIL"
    print(f"slow HyDE overhead {slow:.2f}s <= time box {TIME_BOX}s (+0.25s slack): {verdict}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rows, indent=2))
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    raise SystemExit(main())
