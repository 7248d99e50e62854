"""A function's dead letters: list them, invoke them again (redrive), delete them."""

from __future__ import annotations

from faasrl.gateway.async_events import DeadLetter
from faasrl.gateway.schemas import Redriven
from faasrl.gateway.services import Services, invocations
from faasrl.namespaces import local_name


async def listed(svc: Services, function: str) -> list[DeadLetter]:
    """``function``'s (qualified) dead letters, newest first, as its namespace names it."""
    svc.invoker.spec(function)  # FunctionNotFound (404) before Redis is touched
    return [_shown(d) for d in await svc.dead_letters.list(function)]


async def redrive(svc: Services, function: str, letter_id: str | None) -> list[Redriven]:
    """Accept ``letter_id`` (None: every one) again as a new asynchronous invocation, with its
    full retry budget, and drop it from the list; what was redriven (none: no such letter).
    A letter leaves the list before it is accepted, so concurrent redrives run it once."""
    spec = svc.invoker.spec(function)
    if letter_id is None:
        letters = await svc.dead_letters.list(function)
    else:
        letter = await svc.dead_letters.get(function, letter_id)
        letters = [letter] if letter is not None else []
    out = []
    for letter in reversed(letters):  # the oldest first, as they came
        if not await svc.dead_letters.remove(function, letter.id):
            continue  # a concurrent redrive (or delete) took it: it runs once
        try:
            invocation = await invocations.accept(svc, spec, letter.args)
        except Exception:
            await svc.dead_letters.add(letter)  # refused (memory short): the letter stays
            raise
        out.append(Redriven(dead_letter=letter.id, invocation=invocation))
    return out


async def delete(svc: Services, function: str, letter_id: str) -> bool:
    svc.invoker.spec(function)
    return await svc.dead_letters.remove(function, letter_id)


def _shown(letter: DeadLetter) -> DeadLetter:
    return letter.model_copy(update={"function": local_name(letter.function)})
