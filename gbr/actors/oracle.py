"""The Oracle actor: answers questions under the same supervisor as the index pipeline.

Questions arrive by `ask`, so an exception while answering one goes back to its caller and
the actor lives on; if the actor itself dies, its supervisor starts a new one from the same
factory and the next question finds it there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gbr.actors.faults import FaultPlan
from gbr.actors.supervisor import ChildRef, SupervisedActor, Supervisor
from gbr.core.oracle import Answer, AskOptions, Oracle, TokenSink


@dataclass(frozen=True, slots=True)
class AskQuestion:
    """Oracle: answer this question; tokens go to `on_token` as they stream in."""

    question: str
    options: AskOptions
    on_token: TokenSink | None = None


class OracleActor(SupervisedActor):
    def __init__(
        self,
        supervisor: Supervisor,
        name: str,
        *,
        oracle: Oracle,
        faults: FaultPlan | None = None,
    ) -> None:
        super().__init__(supervisor, name)
        self.oracle = oracle
        self._faults = faults

    def handle(self, message: Any) -> Answer | None:
        if isinstance(message, AskQuestion):
            if self._faults is not None:
                self._faults.check(self._child_name, message)
            return self.oracle.answer(message.question, message.options, message.on_token)
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
