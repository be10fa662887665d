"""One-for-one supervision for pykka actors, which have none of their own.

A child that dies while handling a `tell` is started again from the same factory. The
message it was handling is delivered again once; a second crash on the same message sends
it to the dead letters, with an event, so it is never lost silently. Messages still queued
in the dead actor's inbox move to the new one in order. Too many restarts within the window
means something is broken for good: the supervisor gives up and says so.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pykka

from gbr.actors.faults import FaultPlan
from gbr.core.errors import SupervisionError
from gbr.core.telemetry import log

ActorFactory = Callable[[], pykka.ActorRef[Any]]


@dataclass(frozen=True, slots=True)
class RestartPolicy:
    max_restarts: int = 5
    within_seconds: float = 30.0


class ChildRef:
    """A stable address for a supervised child: it survives the child's restarts."""

    def __init__(self, supervisor: Supervisor, name: str, factory: ActorFactory) -> None:
        self.name = name
        self._supervisor = supervisor
        self._factory = factory
        self._lock = threading.RLock()
        self._ref: pykka.ActorRef[Any] | None = None
        self._restarts: deque[float] = deque()

    @property
    def actor_ref(self) -> pykka.ActorRef[Any] | None:
        return self._ref

    def tell(self, message: Any) -> None:
        for _ in range(1000):
            with self._lock:
                ref = self._ref
                if ref is None:
                    raise SupervisionError(f"{self.name} is stopped; the run was aborted")
                try:
                    ref.tell(message)
                    return
                except pykka.ActorDeadError:
                    pass
            self._supervisor.restart(self, ref, None, [])
        raise SupervisionError(f"{self.name} could not be restarted to receive a message")

    def live_ref(self) -> pykka.ActorRef[Any]:
        """The current incarnation, restarted first if it died; SupervisionError once stopped."""
        for _ in range(3):
            with self._lock:
                ref = self._ref
            if ref is None:
                raise SupervisionError(f"{self.name} is stopped; the run was aborted")
            if ref.is_alive():
                return ref
            self._supervisor.restart(self, ref, None, [])
        raise SupervisionError(f"{self.name} could not be restarted")

    def ask(self, message: Any, timeout: float | None = None) -> Any:
        """Ask the current incarnation; a dead one is restarted first, never asked in vain."""
        for _ in range(3):
            ref = self.live_ref()
            try:
                return ref.ask(message, timeout=timeout)
            except pykka.ActorDeadError:
                # It died with our question still queued; the next incarnation answers it.
                self._supervisor.restart(self, ref, None, [])
        raise SupervisionError(f"{self.name} could not be restarted to answer")

    def stop(self) -> None:
        with self._lock:
            ref, self._ref = self._ref, None
        if ref is not None:
            ref.stop(block=False)


@dataclass
class Supervisor:
    """Owns the children; restarts them, counts restarts, and gives up when it must."""

    policy: RestartPolicy = field(default_factory=RestartPolicy)
    on_dead_letter: Callable[[str, Any, BaseException | None], None] | None = None
    on_give_up: Callable[[str, BaseException | None], None] | None = None
    restarts: int = 0
    dead_letters: int = 0
    given_up: SupervisionError | None = None
    _children: list[ChildRef] = field(default_factory=list)
    _retried: dict[int, Any] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start_child(self, name: str, factory: ActorFactory) -> ChildRef:
        child = ChildRef(self, name, factory)
        child._ref = factory()
        self._children.append(child)
        return child

    def child_failed(
        self,
        child: ChildRef,
        dead: pykka.ActorRef[Any],
        error: BaseException | None,
        salvage: list[Any],
    ) -> None:
        """Called from the dying actor's own thread, from `on_failure`."""
        self.restart(child, dead, error, salvage)

    def restart(
        self,
        child: ChildRef,
        dead: pykka.ActorRef[Any],
        error: BaseException | None,
        salvage: list[Any],
    ) -> None:
        """Replace `dead` with a fresh actor (once, however many threads notice) and redeliver.

        `salvage` lists what the dead actor held: the message in flight first, then work it
        had accepted but not passed on. Each is delivered again once at most.
        """
        with child._lock:
            if self.given_up is not None:
                return
            if child._ref is dead:
                if not self._allow_restart(child):
                    self._give_up(child, error)
                    return
                child._ref = child._factory()
                self.restarts += 1
                log().warning(
                    "actor_restarted",
                    actor=child.name,
                    error=_describe(error),
                    restarts=self.restarts,
                )
                # Queued messages move in order behind the redelivered ones.
                backlog = _drain(dead)
            else:
                backlog = []
            new = child._ref
            assert new is not None
            for message in _unique(salvage):
                if self._mark_retry(message):
                    new.tell(message)
                else:
                    self._dead_letter(child, message, error)
            for envelope in backlog:
                new.actor_inbox.put(envelope)

    def _allow_restart(self, child: ChildRef) -> bool:
        now = time.monotonic()
        window = child._restarts
        while window and now - window[0] > self.policy.within_seconds:
            window.popleft()
        if len(window) >= self.policy.max_restarts:
            return False
        window.append(now)
        return True

    def _mark_retry(self, message: Any) -> bool:
        with self._lock:
            if id(message) in self._retried:
                return False
            # Holding the message keeps its id from being reused by another object.
            self._retried[id(message)] = message
            return True

    def _dead_letter(self, child: ChildRef, message: Any, error: BaseException | None) -> None:
        with self._lock:
            self.dead_letters += 1
        log().error(
            "dead_letter",
            actor=child.name,
            message=type(message).__name__,
            path=getattr(message, "path", None),
            error=_describe(error),
        )
        if self.on_dead_letter is not None:
            self.on_dead_letter(child.name, message, error)

    def _give_up(self, child: ChildRef, error: BaseException | None) -> None:
        self.given_up = SupervisionError(
            f"the {child.name} crashed {self.policy.max_restarts + 1} times within "
            f"{self.policy.within_seconds:g} s (last error: {_describe(error)}); the run was "
            "stopped. Run again with --debug for details; files already written are kept"
        )
        log().error("supervisor_gave_up", actor=child.name, error=_describe(error))
        child._ref = None
        if self.on_give_up is not None:
            self.on_give_up(child.name, error)

    def stop_child(self, child: ChildRef) -> None:
        """Stop one child for good (after the message in hand) and forget it."""
        with self._lock:
            if child in self._children:
                self._children.remove(child)
        child.stop()

    def stop_all(self, timeout: float = 30.0) -> None:
        """Stop children last-started first, waiting for each `on_stop` (it closes the DB)."""
        for child in reversed(self._children):
            ref = child.actor_ref
            child._ref = None
            if ref is not None:
                with contextlib.suppress(pykka.ActorDeadError, pykka.Timeout):
                    ref.stop(block=True, timeout=timeout)


def _drain(dead: pykka.ActorRef[Any]) -> list[Any]:
    """Envelopes still queued at a dead actor; pykka would drop the `tell` ones."""
    out = []
    inbox = dead.actor_inbox
    while not inbox.empty():
        envelope = inbox.get_nowait()
        if type(envelope.message).__module__.startswith("pykka"):
            continue  # a stop request for the dead actor, not work
        out.append(envelope)
    return out


def _unique(messages: list[Any]) -> list[Any]:
    seen: set[int] = set()
    out = []
    for message in messages:
        if message is not None and id(message) not in seen:
            seen.add(id(message))
            out.append(message)
    return out


def _describe(error: BaseException | None) -> str:
    if error is None:
        return "actor died"
    return f"{type(error).__name__}: {error}"


class SupervisedActor(pykka.ThreadingActor):
    """Base of every pipeline actor: remembers the message in hand for its supervisor."""

    def __init__(
        self, supervisor: Supervisor, child_name: str, faults: FaultPlan | None = None
    ) -> None:
        super().__init__()
        self._supervisor = supervisor
        self._child_name = child_name
        self._in_hand: Any = None
        self._faults = faults

    def check_fault(self, message: Any) -> None:
        """A crash drill (GBR_FAULTS): raises when the plan crashes this actor on `message`."""
        if self._faults is not None:
            self._faults.check(self._child_name, message)

    def on_receive(self, message: Any) -> Any:
        self._in_hand = message
        result = self.handle(message)
        self._in_hand = None
        return result

    def handle(self, message: Any) -> Any:
        raise NotImplementedError

    def unfinished(self) -> list[Any]:
        """Messages accepted earlier but not yet passed on; a restart redelivers them."""
        return []

    def child(self) -> ChildRef:
        for child in self._supervisor._children:
            if child.name == self._child_name:
                return child
        raise SupervisionError(f"{self._child_name} is not supervised")

    def on_failure(self, exc_type: Any, exc_value: Any, traceback: Any) -> None:
        salvage = [self._in_hand, *self.unfinished()]
        self._supervisor.child_failed(self.child(), self.actor_ref, exc_value, salvage)
