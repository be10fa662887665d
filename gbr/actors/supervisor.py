"""One-for-one supervision for pykka actors, which have none of their own.

A child that dies while handling a `tell` is started again from the same factory. The
message it was handling is delivered again once; a second crash on the same message sends
it to the dead letters, with an event, so it is never lost silently. Messages still queued
in the dead actor's inbox move to the new one in order. Too many restarts within the window
means something is broken for good: the supervisor gives up and says so.

A child whose start fails (`on_start` raised: its database was locked, say) dies the same
way. pykka does not call `on_failure` for an `on_start` error: it stops the actor and drops
what was queued, and nobody hears of it, so a run would wait for that actor forever.
`SupervisedActor.on_start` is therefore the one place that catches it and hands it to the
supervisor like any crash; subclasses put their set-up in `start_up`.

What this needs and pykka does not offer (moving queued envelopes, ending an actor from its
own `on_start`) is done in gbr/actors/pykka_gaps.py, and only there.
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
from gbr.actors.pykka_gaps import end_failed_start, inbox_empty, requeue, take_queued
from gbr.core.errors import SupervisionError
from gbr.core.telemetry import log

ActorFactory = Callable[[], pykka.ActorRef[Any]]


@dataclass(frozen=True, slots=True)
class RestartPolicy:
    max_restarts: int = 5
    within_seconds: float = 30.0


class RestartWindow:
    """Restarts within the policy's sliding window: the count that decides giving up."""

    def __init__(self, policy: RestartPolicy) -> None:
        self.policy = policy
        self._times: deque[float] = deque()

    def allow(self) -> bool:
        """Count one more restart; False when the policy says to give up instead."""
        now = time.monotonic()
        while self._times and now - self._times[0] > self.policy.within_seconds:
            self._times.popleft()
        if len(self._times) >= self.policy.max_restarts:
            return False
        self._times.append(now)
        return True


class ChildRef:
    """A stable address for a supervised child: it survives the child's restarts."""

    def __init__(self, supervisor: Supervisor, name: str, factory: ActorFactory) -> None:
        self.name = name
        self._supervisor = supervisor
        self._factory = factory
        self._lock = threading.RLock()
        self._ref: pykka.ActorRef[Any] | None = None
        self._restarts = RestartWindow(supervisor.policy)

    @property
    def actor_ref(self) -> pykka.ActorRef[Any] | None:
        return self._ref

    @property
    def lock(self) -> threading.RLock:
        """Held by every sender and by a restart, so a message never reaches an inbox that
        a restart has already moved (see SupervisedActor.on_start)."""
        return self._lock

    def start(self) -> None:
        """Start the first incarnation, under the lock: a start that fails at once reports
        from the actor's thread, which must find this child's `actor_ref` set."""
        with self._lock:
            self._ref = self._factory()

    def renew(self) -> pykka.ActorRef[Any] | None:
        """Start the next incarnation (the caller holds `lock`); None, with this child
        stopped, when its restart window says to give up instead."""
        if not self._restarts.allow():
            self._ref = None
            return None
        self._ref = self._factory()
        return self._ref

    def detach(self) -> pykka.ActorRef[Any] | None:
        """Forget the current incarnation and return it, for the caller to stop."""
        with self._lock:
            ref, self._ref = self._ref, None
        return ref

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
        ref = self.detach()
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
    # What made the last child fail when the supervisor gave up: a caller may show it
    # instead (a StoreError from a failed start already says what to do).
    given_up_cause: BaseException | None = None
    _children: list[ChildRef] = field(default_factory=list)
    _retried: dict[int, Any] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _busy: int = 0  # children handling a message right now
    _last_activity: float = field(default_factory=time.monotonic)

    def working(self, delta: int) -> None:
        """A child took (+1) or finished (-1) a message: the watchdog's sign of life."""
        with self._lock:
            self._busy += delta
            self._last_activity = time.monotonic()

    def idle_for(self) -> float:
        """Seconds since any child last took or finished a message, and no child holds
        one, and no inbox holds one; 0.0 while anything is in hand or queued."""
        with self._lock:
            if self._busy:
                return 0.0
            last = self._last_activity
        for child in self.children():
            ref = child.actor_ref
            if ref is not None and not inbox_empty(ref):
                return 0.0
        return time.monotonic() - last

    def start_child(self, name: str, factory: ActorFactory) -> ChildRef:
        child = ChildRef(self, name, factory)
        # Known before it starts: a start that fails at once reports from the actor's
        # thread, which must find the child (`ChildRef.start` holds its lock meanwhile).
        with self._lock:
            self._children.append(child)
        child.start()
        return child

    def children(self) -> list[ChildRef]:
        """The supervised children, oldest first (a copy)."""
        with self._lock:
            return list(self._children)

    def child_named(self, name: str) -> ChildRef:
        for child in self.children():
            if child.name == name:
                return child
        raise SupervisionError(f"{name} is not supervised")

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
        with child.lock:
            if self.given_up is not None:
                return
            if child.actor_ref is dead:
                if child.renew() is None:
                    self._give_up(child, error)
                    return
                self.restarts += 1
                log().warning(
                    "actor_restarted",
                    actor=child.name,
                    error=describe(error),
                    restarts=self.restarts,
                )
                # Queued messages move in order behind the redelivered ones.
                backlog = take_queued(dead)
            else:
                backlog = []
            new = child.actor_ref
            assert new is not None
            for message in _unique(salvage):
                if self._mark_retry(message):
                    new.tell(message)
                else:
                    self._dead_letter(child, message, error)
            requeue(new, backlog)

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
            error=describe(error),
        )
        if self.on_dead_letter is not None:
            self.on_dead_letter(child.name, message, error)

    def _give_up(self, child: ChildRef, error: BaseException | None) -> None:
        self.given_up = SupervisionError(
            f"the {child.name} crashed {self.policy.max_restarts + 1} times within "
            f"{self.policy.within_seconds:g} s (last error: {describe(error)}); the run was "
            "stopped. Run again with --debug for details; files already written are kept"
        )
        self.given_up_cause = error
        log().error("supervisor_gave_up", actor=child.name, error=describe(error))
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
        for child in reversed(self.children()):
            ref = child.detach()
            if ref is not None:
                with contextlib.suppress(pykka.ActorDeadError, pykka.Timeout):
                    ref.stop(block=True, timeout=timeout)


def _unique(messages: list[Any]) -> list[Any]:
    seen: set[int] = set()
    out = []
    for message in messages:
        if message is not None and id(message) not in seen:
            seen.add(id(message))
            out.append(message)
    return out


def describe(error: BaseException | None) -> str:
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

    def on_start(self) -> None:
        """Start up; a failure is handed to the supervisor like a crash (see the module doc).

        The supervisor starts the next incarnation and moves this one's inbox to it while
        this actor still counts as alive, so a redelivery addressed to it cannot bounce;
        only then does it stop. Senders go through the ChildRef, under the child's lock,
        so nothing reaches this inbox after the move (an `ask` that did would get
        ActorDeadError, and ChildRef.ask asks the next incarnation).
        """
        try:
            if self._faults is not None:
                self._faults.check_start(self._child_name)
            self.start_up()
        except Exception as exc:
            log().error("actor_start_failed", actor=self._child_name, error=describe(exc))
            self.on_start_failed()
            try:
                self._supervisor.child_failed(self.child(), self.actor_ref, exc, [])
            finally:
                end_failed_start(self)

    def start_up(self) -> None:
        """Set-up before the first message (open a store, say); it may raise."""

    def on_start_failed(self) -> None:
        """Release what a failed `start_up` had already taken."""

    def check_fault(self, message: Any) -> None:
        """A crash drill (GBR_FAULTS): raises when the plan crashes this actor on `message`."""
        if self._faults is not None:
            self._faults.check(self._child_name, message)

    def on_receive(self, message: Any) -> Any:
        self._in_hand = message
        self._supervisor.working(+1)
        try:
            result = self.handle(message)
        finally:
            self._supervisor.working(-1)
        self._in_hand = None
        return result

    def handle(self, message: Any) -> Any:
        raise NotImplementedError

    def unfinished(self) -> list[Any]:
        """Messages accepted earlier but not yet passed on; a restart redelivers them."""
        return []

    def child(self) -> ChildRef:
        return self._supervisor.child_named(self._child_name)

    def on_failure(self, exc_type: Any, exc_value: Any, traceback: Any) -> None:
        salvage = [self._in_hand, *self.unfinished()]
        self._supervisor.child_failed(self.child(), self.actor_ref, exc_value, salvage)
