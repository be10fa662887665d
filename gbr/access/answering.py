"""What a question is answered with: the provider, the reranker and the Oracle over them.

Written once for every place that answers (a local ask, a chat, the daemon's Oracle
actors), so `--rerank`, a missing key and a dry run mean the same wherever the work runs;
`answering_key` says when two questions can share what `resolve` made.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gbr.access.base import LlmChoice
from gbr.core.answer.oracle import AskOptions, Oracle
from gbr.core.errors import MissingKeyError
from gbr.core.llm import LlmProvider, get_provider
from gbr.core.rank.rerank import Reranker, ask_reranker_spec, load_reranker
from gbr.core.rank.search import Searcher


def open_provider(llm: LlmChoice, env: Mapping[str, str]) -> LlmProvider:
    """The provider `llm` names (or the first configured); MissingKeyError says which key."""
    return get_provider(llm.provider, model=llm.model, env=env, timeout=llm.timeout)


def open_reranker(
    rerank: bool, named: str | None, provider: LlmProvider | None, env: Mapping[str, str]
) -> Reranker | None:
    """The reranker an ask with `rerank` uses (the one named, else the default), or None."""
    return load_reranker(ask_reranker_spec(rerank, named, provider, env), provider, env)


# (who answers, rerank, dry run): all that `resolve` reads.
AnsweringKey = tuple[LlmChoice, bool, bool]


def answering_key(llm: LlmChoice, rerank: bool, dry_run: bool) -> AnsweringKey:
    """What tells apart two questions' providers and rerankers. A dry run opens no provider,
    and an ask whose provider lacks its key is answered as one (retrieval alone), so those
    are told apart by the reranker alone."""
    if dry_run:
        llm = LlmChoice(reranker=llm.reranker)
    return (llm, rerank, dry_run)


@dataclass(frozen=True)
class Answering:
    """The provider and reranker one kind of question is answered with.

    `missing` says why there is no provider when one was wanted: the answer is then made
    from retrieval alone and reports it.
    """

    provider: LlmProvider | None
    reranker: Reranker | None
    missing: MissingKeyError | None = None

    def oracle(self, searcher: Searcher) -> Oracle:
        """A new Oracle for one question: nothing shared with another thread is changed."""
        return Oracle(searcher, self.provider, self.reranker)

    def close(self) -> None:
        if self.provider is not None:
            self.provider.close()


def resolve(llm: LlmChoice, options: AskOptions, env: Mapping[str, str]) -> Answering:
    """The provider (none for a dry run, or when its key is missing) and the reranker."""
    provider: LlmProvider | None = None
    missing: MissingKeyError | None = None
    if not options.dry_run:
        try:
            provider = open_provider(llm, env)
        except MissingKeyError as exc:
            missing = exc
    try:
        reranker = open_reranker(options.rerank, llm.reranker, provider, env)
    except BaseException:
        if provider is not None:
            provider.close()
        raise
    return Answering(provider, reranker, missing)
