"""What supervision needs from pykka that pykka does not offer, in this one place.

pykka 4.5 has no supervisors, so it has no way to hand a dead actor's queued messages to
the actor that replaces it, and no way to end an actor whose `on_start` failed without
dropping what was queued for it unheard (see gbr.actors.supervisor). The functions below
reach into pykka for those; nothing else in gbr touches pykka's envelopes, its own
message types, or an actor's stop flag. Upgrading pykka means checking this file.
"""

from __future__ import annotations

from typing import Any

import pykka


def inbox_empty(ref: pykka.ActorRef[Any]) -> bool:
    """Whether nothing waits in the actor's inbox: the watchdog's sign of idleness."""
    return ref.actor_inbox.empty()


def take_queued(dead: pykka.ActorRef[Any]) -> list[Any]:
    """The envelopes still queued at a dead actor, which pykka would drop; pykka's own
    messages (a stop request for the dead actor) are not work and stay behind."""
    out = []
    inbox = dead.actor_inbox
    while not inbox.empty():
        envelope = inbox.get_nowait()
        if type(envelope.message).__module__.startswith("pykka"):
            continue
        out.append(envelope)
    return out


def requeue(ref: pykka.ActorRef[Any], envelopes: list[Any]) -> None:
    """Put envelopes taken by `take_queued` in another actor's inbox, in order; a queued
    `ask` keeps its future, so its caller hears from the new actor."""
    for envelope in envelopes:
        ref.actor_inbox.put(envelope)


def end_failed_start(actor: pykka.Actor) -> None:
    """End an actor from inside its own `on_start`, after its failure has been handed on.

    pykka's answer to an `on_start` error is to stop the actor silently. Unregistered and
    flagged as stopped here, the actor skips its message loop and its thread ends, while
    the supervisor has already moved its inbox to the next incarnation.
    """
    pykka.ActorRegistry.unregister(actor.actor_ref)
    actor.actor_stopped.set()
