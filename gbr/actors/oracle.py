"""The Oracle actor: answers questions under the same supervisor as the index pipeline.

Questions arrive by `ask`, so an exception while answering one goes back to its caller and
the actor lives on; if the actor itself dies, its supervisor starts a new one from the same
factory and the next question finds it there.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pykka

from gbr.actors.faults import FaultPlan
from gbr.actors.supervisor import ChildRef, SupervisedActor, Supervisor
from gbr.core.answer.oracle import Answer, AskOptions, ContextSink, Oracle, TokenSink
from gbr.core.llm.base import Message


@dataclass(frozen=True, slots=True)
class AskQuestion:
    """Oracle: answer this question; tokens go to `on_token` as they stream in."""

    question: str
    options: AskOptions
    on_token: TokenSink | None = None
    history: Sequence[Message] = ()
    """Earlier turns of a conversation, oldest first (a chat's follow-up questions)."""
    cancel: threading.Event | None = None
    """Set by the caller to stop the stream at its next delta (Ctrl-C in a chat)."""
    on_context: ContextSink | None = None
    """Called once retrieval is done, before the LLM is asked (see `Oracle.answer`)."""


class OracleActor(SupervisedActor):
    def __init__(
        self,
        supervisor: Supervisor,
        name: str,
        *,
        oracle: Oracle,
        faults: FaultPlan | None = None,
    ) -> None:
        super().__init__(supervisor, name, faults)
        self.oracle = oracle

    def handle(self, message: Any) -> Answer | None:
        if isinstance(message, AskQuestion):
            self.check_fault(message)
            return self.oracle.answer(
                message.question,
                message.options,
                message.on_token,
                history=message.history,
                cancel=message.cancel,
                on_context=message.on_context,
            )
        return None


def start_oracle(
    supervisor: Supervisor, oracle: Oracle, faults: FaultPlan | None = None
) -> ChildRef:
    return supervisor.start_child(
        "oracle", lambda: OracleActor.start(supervisor, "oracle", oracle=oracle, faults=faults)
    )


def ask(child: ChildRef, question: AskQuestion, timeout: float | None = None) -> Answer:
    answer: Answer = child.ask(question, timeout=timeout)
    return answer


def ask_once(oracle: Oracle, question: AskQuestion) -> Answer:
    """One question through a short-lived supervised Oracle actor, as a daemon would ask it.

    One-shot front ends (the CLI without a daemon, MCP without a daemon) own no long-lived
    tree, so each question gets its own, stopped before the answer is returned.
    """
    supervisor = Supervisor()
    child = start_oracle(supervisor, oracle)
    try:
        return ask(child, question)
    finally:
        supervisor.stop_all()


def ask_later(child: ChildRef, question: AskQuestion) -> pykka.Future[Answer]:
    """The answer as a future, so the caller can wait, take Ctrl-C, cancel, and wait again.

    `ChildRef.ask` blocks, and an interrupted block would lose the answer in flight.
    """
    future: pykka.Future[Answer] = child.live_ref().ask(question, block=False)
    return future
