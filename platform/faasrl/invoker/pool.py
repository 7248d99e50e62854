"""The node's container pool as a pure state machine.

Every decision of the invoker is made here: which container serves an invocation, when one is
started, queued for, handed over warm, reclaimed after its keep-alive, or evicted to make room for
another function. Events come in with the caller's clock (``now``) and the pool answers with a list
of actions; it does no I/O and never sleeps. The async ``Invoker`` carries the actions out. This
split is what lets unit tests drive keep-alive expiry, queueing and capacity with a fake clock.

Policy in brief:
- An invocation takes the most recently used container of its function with a free slot (so
  surplus containers age out), else joins a container that is still starting, else starts one if
  capacity allows, else evicts idle containers of other functions (least recently used first) when
  that frees enough, else waits in its function's bounded queue.
- Affinity: an invocation may carry a key naming state a container keeps for it (a training
  job's actor slot and its envs). The container that last served a key is the key's home; an
  invocation goes to its key's home when that one can take it. Where it cannot (busy), a
  function whose manifest says ``affinity: wait`` (its handler's per-key state would be lost
  elsewhere: envs mid-episode, a replay memory) waits for the home, however many keys share
  it; ``prefer`` (a cache, such as a learner's weights) takes another container instead. A key
  whose home is gone (died, evicted, reclaimed) goes anywhere; its state starts afresh there.
  A retry (its container died) does not go to the home of another key of its own tenant
  while a starting container or a new one can take it: the two keys would share that home
  and, under ``wait``, run in turn from then on (a job's actors one after the other, every
  round, after one died).
- A released container goes straight to the first in line of the waiters of its function that
  it is the home of, else of those that have no other home to wait for (warm hand-over).
- The line is fair share, not arrival (``fairshare.py``): retries first, then the namespace
  that used the least of the node lately (namespaces share equally), then within it the
  tenant (a job, or a plain invocation's function) with the least recent usage per unit of
  weight (a job's priority), then arrival. Usage is dominant-share-seconds of running
  invocations, decayed with a half-life. A blocked waiter holds back what it needs so those
  behind it cannot starve it.
- Preemption: a waiter whose tenant outweighs the one that pre-warmed containers may stop
  those that serve nobody yet (starting with no claim, or idle and never used) when nothing
  else makes room; a container that runs an invocation is never taken.
- Quotas (``quota.py``): a waiter that would take its namespace beyond its quota, or its
  function beyond its ``reserved_concurrency`` / ``concurrency_limit``, waits without holding
  anything back, and is refused (429) at its queue timeout. A function's reservation sets
  capacity aside: other functions' waiters see the node less what its reserved containers
  would hold beyond what its containers hold now, and do not evict its idle containers.
- A container holds its function's memory and GPUs from start until it has exited, but its cores
  only while it starts or runs an invocation: an idle container uses memory, not CPU. So an idle
  learner does not block a round's actors, and an idle actor needs free cores to run again.
- Lent cores: an invocation may ask for more cores than its function's ``cpu`` (a job's
  learner asks for its actors' cores, as they wait for it), up to its manifest's ``cpu_max``.
  It gets the whole cores that are free when it takes a warm container and nothing else
  waits, as far as its tenant's part of the node among the tenants running now and its
  namespace's quota allow; they are held with its container's own until the run ends, and
  the runtime sizes its thread pools to them.
- GPUs: a function of ``gpu: n`` (whole) takes n devices nothing else holds any of; one of
  ``gpu: f`` (f < 1) takes f of one device that fractional containers share while their
  fractions sum to at most 1 (packed: the fullest device that still fits goes first, so that
  whole devices stay free for whole-GPU functions).

Stem cells (``stem_cells`` per image, on backends that have them: Docker): generic runtime
containers started ahead, before any function asks, for each image a registered CPU function
runs (``spec.image``; "" is the backend's default). A start of such a function takes a ready
one when the function's memory leaves ``STEM_HEADROOM_MB`` beyond what the stem cell already
uses (its preloaded imports); the cell becomes that function's container (under the cell's
id) for good and a new
one is started in its place at the next tick (in the background: no invocation waits for it).
A stem cell holds ``stem_memory_mb`` of memory and no cores (the backend runs it at a low CPU
weight); it is the first thing evicted when an invocation needs the memory, and is not
restarted until the node has memory to spare again.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum

from faasrl.invoker.errors import (
    CapacityError,
    FunctionGone,
    FunctionNotFound,
    InvokerError,
    QueueFull,
    QueueTimeout,
    StartFailed,
)
from faasrl.invoker.fairshare import FairShare, Share
from faasrl.invoker.quota import Quotas, Usage, function_cap, refused, reserved_containers
from faasrl.invoker.tenant import Tenant
from faasrl.manifest import FunctionSpec
from faasrl.namespaces import Quota, local_name, namespace_of
from faasrl.resources import Resources, whole_cores

STEM_HEADROOM_MB = 128  # of its memory, beyond what a stem cell uses, a function must have
NOTHING = Resources()
MICRO = 1_000_000  # the held sums count cores in millionths: integers add up exactly


class State(StrEnum):
    STARTING = "starting"
    IDLE = "idle"
    BUSY = "busy"
    STOPPING = "stopping"


_HOLDS_CORES = frozenset({State.STARTING, State.BUSY})


@dataclass
class Container:
    id: str
    function: str
    generation: int
    need: Resources
    gpus: tuple[int, ...]
    prewarmed: bool
    created_at: float
    state: State = State.STARTING
    inflight: int = 0
    served: int = 0
    claims: list[str] = field(default_factory=list)  # waiters served once it is started
    last_used: float = 0.0
    idle_since: float | None = None
    retire: bool = False  # stop as soon as it is idle
    stop_reason: str | None = None
    keys: set[str] = field(default_factory=set)  # the affinity keys it is the home of
    running: list[Tenant] = field(default_factory=list)  # whom its invocations in flight are for
    share: float = 0.0  # what one invocation on it holds of the node (see FairShare)
    lent: float = 0.0  # cores its run holds beyond ``need`` (lent cores)
    lent_share: float = 0.0  # what they add to ``share``
    prewarmed_for: Tenant | None = None  # who asked for it ahead (None: its function's min_warm)
    # The namespaces of the invocations it took since it was last idle (empty: it counts for
    # its function's namespace; see quota.py)
    charged: set[str] = field(default_factory=set)


@dataclass
class StemCell:
    """A generic container of an image, started before its function is known."""

    id: str
    image: str  # as manifests name it: "" is the backend's default image
    need: Resources
    state: State = State.STARTING  # STARTING, IDLE (ready to be taken) or STOPPING
    memory_mb: float = 0.0  # what it uses once ready (its preloaded imports)


@dataclass(slots=True)
class Waiter:
    id: str
    function: str
    since: float
    who: Tenant  # who it is for: a job's tenant, or its function's own (Tenant.of_function)
    container: str | None = None  # the starting container it will get
    affinity: str | None = None  # the key whose home (the container that last served it) it wants
    retry: bool = False  # a retry of an invocation whose container died: it goes first
    blocked: str | None = None  # the quota it waits for, as the last pass found
    cores: float = 0.0  # the cores it may use in all where they are free (0: its function's cpu)

    @property
    def namespace(self) -> str:
        """Whose quota it counts against."""
        return self.who.namespace


# Actions the invoker carries out.
@dataclass(frozen=True)
class Start:
    container: str
    spec: FunctionSpec
    gpus: tuple[int, ...]
    stem: str | None = None  # the stem cell to specialise into this container


@dataclass(frozen=True)
class StartStem:
    stem: str
    image: str
    memory_mb: int  # its memory limit until it is specialised


@dataclass(frozen=True)
class Assign:
    waiter: str
    container: str
    cold: bool  # the invocation waited for this container to start
    bills_init: bool  # the container was started on demand and this is its first invocation
    cores: float = 0.0  # the cores its run may use (a function with cpu_max); 0: its cpu


@dataclass(frozen=True)
class Stop:
    container: str
    reason: str


@dataclass(frozen=True)
class StopStem:
    stem: str
    reason: str


@dataclass(frozen=True)
class Reject:
    waiter: str
    error: InvokerError


Action = Start | Assign | Stop | Reject | StartStem | StopStem


def need_of(spec: FunctionSpec) -> Resources:
    return Resources(spec.cpu, spec.memory_mb, spec.gpu)


def _holding(c: Container) -> Resources:
    """What ``c`` holds while it runs: its function's need and the cores lent to its run."""
    need = c.need
    return Resources(need.cpu + c.lent, need.memory_mb, need.gpus) if c.lent else need


def gpu_share(need: Resources) -> int:
    """What a container of ``need`` holds of each of its devices, in millionths: all of each
    for whole GPUs, its fraction of its one device otherwise."""
    return MICRO if need.gpus >= 1 else round(need.gpus * MICRO)


def stem_image(spec: FunctionSpec) -> str | None:
    """The image whose stem cells can become this function's container (None: none can; a
    stem cell's devices cannot change, so it has no GPUs)."""
    return None if spec.gpu else spec.image or ""


def _less(budget: Resources, others: Resources) -> Resources:
    """``budget`` less what others' reservations keep (no arithmetic when none do)."""
    return budget if others is NOTHING else budget - others


def _hold(budget: Resources, need: Resources, others: Resources) -> Resources:
    """``budget`` less what a blocked waiter holds back: ``need``, from the part of it that
    others' reservations leave to its function (never from what they set aside)."""
    if others is NOTHING:
        return (budget - need).floor_zero()
    rest = (budget - others - need).floor_zero()
    return Resources(min(budget.cpu, others.cpu + rest.cpu),
                     min(budget.memory_mb, others.memory_mb + rest.memory_mb),
                     min(budget.gpus, others.gpus + rest.gpus))


def _unique_id() -> str:
    return uuid.uuid4().hex[:12]


class Pool:
    def __init__(
        self,
        capacity: Resources,
        gpu_ids: Iterable[int] = (),
        *,
        max_queue: int = 1000,
        queue_timeout_s: float = 300.0,
        new_id: Callable[[], str] | None = None,
        stem_cells: int = 0,
        stem_memory_mb: int = 1024,
    ):
        """``stem_cells``: how many to keep ready per image (0: none; only for backends that
        can specialise one)."""
        self.capacity = capacity
        self.stem_cells = stem_cells
        self.stem_memory_mb = stem_memory_mb
        self.max_queue = max_queue
        self.queue_timeout_s = queue_timeout_s
        self._new_id = new_id or _unique_id
        # per device, what of it is free, in millionths (a fraction's share: ``gpu_share``)
        self._gpu_free = {g: MICRO for g in gpu_ids}
        self._specs: dict[str, FunctionSpec] = {}
        self._generation: dict[str, int] = {}
        self._containers: dict[str, Container] = {}
        # What the containers hold and what the stopping ones hold: [cpu in millionths of a
        # core, memory_mb, millionths of a GPU].
        self._held_sum = [0, 0, 0]
        self._stopping_sum = [0, 0, 0]
        self._queue: dict[str, Waiter] = {}  # insertion order is arrival order (retries first)
        # per function, how many of its queued waiters each tenant has (``_enqueue``)
        self._queued_by: dict[str, dict[str, int]] = {}
        self._backoff_until: dict[str, float] = {}
        self._failures: dict[str, int] = {}
        self._stems: dict[str, StemCell] = {}
        self._stem_failures: dict[str, int] = {}  # per image
        self._stem_backoff_until: dict[str, float] = {}
        self._homes: dict[str, str] = {}  # affinity key -> the container that last served it
        self._key_owners: dict[str, str] = {}  # affinity key -> the key of its tenant
        self._fair = FairShare()  # who got how much recently: the order waiters are served in
        self._quotas = Quotas()
        self._reserving: set[str] = set()  # functions with a reserved_concurrency
        self._capped: set[str] = set()  # functions with a bound on invocations in flight

    # ----------------------------------------------------------------- functions
    def spec(self, name: str) -> FunctionSpec:
        try:
            return self._specs[name]
        except KeyError:
            # its bare name: the same answer whichever namespace asked (no existence leak)
            raise FunctionNotFound(f"no function named {local_name(name)!r}") from None

    def functions(self) -> list[FunctionSpec]:
        return list(self._specs.values())

    def register(self, spec: FunctionSpec, now: float) -> list[Action]:
        """Add or replace a function; containers of an older version retire once idle."""
        short = self.capacity.shortfall(need_of(spec))
        if short:
            detail = "; ".join(f"{k}: {v}" for k, v in short.items())
            raise CapacityError(f"more than this whole node has ({detail})")
        self._specs[spec.name] = spec
        self._generation[spec.name] = self._generation.get(spec.name, 0) + 1
        for names, yes in ((self._reserving, spec.reserved_concurrency is not None),
                           (self._capped, function_cap(spec) is not None)):
            if yes:
                names.add(spec.name)
            else:
                names.discard(spec.name)
        self._failures.pop(spec.name, None)
        self._backoff_until.pop(spec.name, None)
        actions = self._retire_stale(spec.name)
        return actions + self._top_up(now) + self._dispatch(now)

    def unregister(self, name: str, now: float) -> list[Action]:
        self.spec(name)
        del self._specs[name]
        self._reserving.discard(name)
        self._capped.discard(name)
        actions: list[Action] = []
        for w in [w for w in self._queue.values() if w.function == name]:
            self._dequeue(w.id)
            actions.append(Reject(w.id, FunctionGone(f"function {name!r} was deleted")))
        for c in self._containers.values():
            if c.function == name:
                c.claims.clear()
        return actions + self._retire_stale(name) + self._dispatch(now)

    # --------------------------------------------------------------- invocations
    def request(self, function: str, waiter: str, now: float, *, retry: bool = False,
                affinity: str | None = None, tenant: Tenant | None = None,
                cores: float = 0.0) -> list[Action]:
        """An invocation wants a container; a retry goes to the head of the line.

        ``affinity`` names state a warm container may hold for this caller (a training job's
        actor slot and its envs): the key's home serves it when it can, so that state is
        reused instead of rebuilt (see the module docstring for when it waits for the home).
        ``cores``: the cores it may use in all, where they are free (lent cores, up to its
        manifest's ``cpu_max``); 0: its function's ``cpu``.
        """
        spec = self.spec(function)
        tenant = tenant or Tenant.of_function(function)
        w = Waiter(waiter, function, now, tenant, affinity=affinity, retry=retry, cores=cores)
        if self._quotas.active and (why := self._quotas.beyond(w.namespace, need_of(spec))):
            return [Reject(waiter, refused(why))]
        ahead = any(x.function == function and x.container is None and x.blocked is None
                    and not self._waits_for_home(x) and x.who.weight >= tenant.weight
                    for x in self._queue.values())
        self._enqueue(w)
        if retry:  # to the head of the line: of its tenant's, and past other tenants
            self._queue = {waiter: self._queue.pop(waiter), **self._queue}
        # Behind a waiter of its function that the last pass left waiting, a new waiter gets
        # nothing either, and nothing changed for the others: no pass (64 clients on 20
        # containers, 44 wait, and each answer brings a new request). A retry goes first. A
        # waiter held for its busy home does not count: others may take what it leaves; nor
        # does one of a lower weight: a higher one may preempt what that one could not.
        actions = self._dispatch(now) if retry or not ahead else []
        w = self._queue.get(waiter)
        if (w is not None and w.container is None and not retry
                and len(self._queue) > self.max_queue  # else no function can have too many
                and self._queued(function) > self.max_queue):
            self._dequeue(waiter)
            msg = f"{function!r} has {self.max_queue} invocations queued already"
            actions.append(Reject(waiter, QueueFull(msg)))
        return actions

    def cancel(self, waiter: str, now: float) -> list[Action]:
        """The caller stopped waiting (it gave up or was cancelled)."""
        w = self._dequeue(waiter)
        if w is not None and w.container in self._containers:
            c = self._containers[w.container]
            if waiter in c.claims:
                c.claims.remove(waiter)
        return self._dispatch(now)

    def ready(self, cid: str, now: float) -> list[Action]:
        """A container finished starting: its handler is loaded."""
        c = self._containers.get(cid)
        if c is None or c.state is State.STOPPING:  # preempted while it started
            return []
        self._failures.pop(c.function, None)
        self._move(c, State.IDLE)
        c.idle_since, c.last_used = now, now
        actions: list[Action] = []
        for i, waiter in enumerate(c.claims):
            w = self._queue.get(waiter)
            if w is not None:
                actions.append(self._assign(w, c, now, cold=True,
                                            bills_init=i == 0 and not c.prewarmed))
        c.claims.clear()
        return actions + self._stop_if_retired(c) + self._dispatch(now)

    def start_failed(self, cid: str, error: StartFailed, now: float) -> list[Action]:
        """A container could not be started; it is already gone."""
        c = self._containers[cid]
        n = self._failures[c.function] = self._failures.get(c.function, 0) + 1
        self._backoff_until[c.function] = now + min(60.0, 0.5 * 2**n)
        actions: list[Action] = []
        for waiter in c.claims:
            if self._dequeue(waiter) is not None:
                actions.append(Reject(waiter, error))
        self._remove(c, now)
        return actions + self._dispatch(now)

    def release(self, cid: str, now: float) -> list[Action]:
        """An invocation on this container finished and the container is still healthy."""
        c = self._containers[cid]
        c.inflight -= 1
        c.last_used = now
        if c.running:  # with several in flight, which one ended is not known: the first
            self._fair.stop(c.running.pop(0), c.share + c.lent_share, now)
        if c.state is State.STOPPING:
            return []
        if c.inflight == 0:
            self._move(c, State.IDLE)  # an idle container holds no cores: lent ones go back
            c.idle_since, c.lent, c.lent_share = now, 0.0, 0.0
        actions = self._stop_if_retired(c)
        if not actions:
            w = self._next_for(c, now)
            if w is not None:  # the container's cores change hands: nothing else fits now
                handed = [self._assign(w, c, now, cold=False, bills_init=False)]
                # ... but its charge may have left a namespace that others of it wait for
                return handed + self._dispatch(now) if self._quotas.active else handed
        return actions + self._dispatch(now)

    def resize(self, capacity: Resources, gpu_ids: Iterable[int], now: float) -> list[Action]:
        """The node's capacity changed (a cluster's nodes joined or left): what waits may fit
        now. GPUs held by containers stay theirs; the rest of ``gpu_ids`` is free."""
        self.capacity = capacity
        self._gpu_free = {g: MICRO for g in gpu_ids}
        for c in self._containers.values():
            self._hold_gpus(c.gpus, c.need, -1)
        return self._top_up(now) + self._dispatch(now)

    def lost(self, cid: str, reason: str, now: float) -> list[Action]:
        """A started container died, timed out or must go: stop it (idempotent)."""
        c = self._containers.get(cid)
        if c is None or c.state in (State.STOPPING, State.STARTING):
            return []  # a starting container's failure is reported through start_failed()
        return [self._stop(c, reason)]

    def stopped(self, cid: str, now: float) -> list[Action]:
        """A container's process is gone: its capacity is free again."""
        c = self._containers.get(cid)
        if c is None:
            return []
        self._remove(c, now)
        return self._dispatch(now)

    # --------------------------------------------------------------- stem cells
    def stem_ready(self, sid: str, memory_mb: float, now: float) -> list[Action]:
        """A stem cell's runtime answers; it uses ``memory_mb`` before any function."""
        stem = self._stems[sid]
        self._stem_failures.pop(stem.image, None)
        stem.state, stem.memory_mb = State.IDLE, memory_mb
        return self._stop_surplus_stems()

    def stem_failed(self, sid: str, now: float) -> list[Action]:
        """A stem cell could not be started; it is already gone. Its image backs off."""
        stem = self._stems.pop(sid)
        n = self._stem_failures[stem.image] = self._stem_failures.get(stem.image, 0) + 1
        self._stem_backoff_until[stem.image] = now + min(60.0, 0.5 * 2**n)
        return self._dispatch(now)

    def stem_lost(self, sid: str, reason: str) -> list[Action]:
        """A ready stem cell died or must go: stop it (idempotent)."""
        stem = self._stems.get(sid)
        if stem is None or stem.state is not State.IDLE:
            return []
        return [self._stop_stem(stem, reason)]

    def stem_stopped(self, sid: str, now: float) -> list[Action]:
        """A stem cell is gone: its memory is free again."""
        if self._stems.pop(sid, None) is None:
            return []
        return self._dispatch(now)

    def stems(self) -> list[StemCell]:
        return list(self._stems.values())

    def stem_counts(self) -> dict[str, dict[str, int]]:
        """Stem cells per image ("": the backend's default) and state (starting, ready), those
        on their way out left out."""
        counts: dict[str, dict[str, int]] = {}
        for stem in self._stems.values():
            if stem.state is not State.STOPPING:
                tally = counts.setdefault(stem.image, {"starting": 0, "ready": 0})
                tally["ready" if stem.state is State.IDLE else "starting"] += 1
        return counts

    # ------------------------------------------------------------ warm capacity
    def prewarm(self, function: str, n: int, now: float, *, tenant: Tenant | None = None
                ) -> tuple[int, list[Action]]:
        """Start containers until ``n`` of this function exist; returns how many were started.
        ``tenant``: who asked (a waiter of a higher weight may preempt what it started)."""
        spec = self.spec(function)
        budget = self._unclaimed_budget()
        actions: list[Action] = []
        for _ in range(max(0, n - self._warm(function))):
            if not self._can_start(spec, budget) or self._owner_refuses(spec):
                break
            budget = budget - need_of(spec)
            actions.append(self._start(spec, now, prewarmed=True, tenant=tenant))
        return len(actions), actions + self._dispatch(now)

    def tick(self, now: float) -> list[Action]:
        """Periodic upkeep: queue timeouts, keep-alive expiry, min_warm."""
        actions: list[Action] = []
        for w in list(self._queue.values()):
            if w.container is None and now - w.since > self.queue_timeout_s:
                self._dequeue(w.id)
                msg = f"no container for {w.function!r} within {self.queue_timeout_s:g} s"
                actions.append(Reject(w.id, refused(w.blocked, self.queue_timeout_s)
                                      if w.blocked is not None else QueueTimeout(msg)))
        for name, spec in self._specs.items():
            idle = sorted((c for c in self._live(name) if c.state is State.IDLE
                           and now - (c.idle_since or now) >= spec.keep_alive_s),
                          key=lambda c: c.idle_since or 0.0)
            surplus = self._warm(name) - spec.min_warm
            actions += [self._stop(c, "keep-alive expired") for c in idle[:max(0, surplus)]]
        actions += self._stop_surplus_stems()
        self._fair.forget_idle(now)
        return actions + self._top_up(now) + self._dispatch(now) + self._refill_stems(now)

    # ------------------------------------------------------------------- views
    def container(self, cid: str) -> Container | None:
        return self._containers.get(cid)

    def containers(self) -> list[Container]:
        return list(self._containers.values())

    def queued(self, function: str) -> int:
        return self._queued(function)

    def share(self, tenant: Tenant, now: float) -> Share:
        """``tenant``'s part of the node's recent usage against its fair share (the tenants
        waiting now count as contending)."""
        return self._fair.share(tenant, now, (w.who for w in self._queue.values()))

    def set_quota(self, namespace: str, quota: Quota, now: float) -> list[Action]:
        """A namespace's quota changed: what waits for it may fit now."""
        if not self._quotas.active:  # the sums were not kept while nothing read them
            self._quotas.clear()
            for c in self._containers.values():
                self._quotas.count(self._charges(c), c.need, self._holds_cores(c), +1)
        self._quotas.set(namespace, quota)
        return self._dispatch(now)

    def quota(self, namespace: str) -> Quota:
        return self._quotas.quota(namespace)

    def usage(self, namespace: str) -> Usage:
        """What the namespace's tenants hold now (``quota.py`` says what counts for whom)."""
        if self._quotas.active:
            return self._quotas.usage(namespace)
        tally = Quotas()  # no quota anywhere: the running sums are not kept, count now
        for c in self._containers.values():
            if namespace in self._charges(c):
                tally.count((namespace,), c.need, self._holds_cores(c), +1)
        return tally.usage(namespace)

    @property
    def reserved(self) -> Resources:
        """What the containers hold now (see the module docstring for what holds what)."""
        return self._plus_stems(self._sums()[0])

    # ---------------------------------------------------------------- internals
    def _queued(self, function: str) -> int:
        return sum(1 for w in self._queue.values()
                   if w.function == function and w.container is None)

    def _enqueue(self, w: Waiter) -> None:
        self._queue[w.id] = w
        counts = self._queued_by.setdefault(w.function, {})
        counts[w.who.key] = counts.get(w.who.key, 0) + 1

    def _dequeue(self, waiter: str) -> Waiter | None:
        w = self._queue.pop(waiter, None)
        if w is not None:
            counts = self._queued_by[w.function]
            counts[w.who.key] -= 1
            if not counts[w.who.key]:
                del counts[w.who.key]
        return w

    def _live(self, function: str) -> list[Container]:
        """Current-version containers of a function that are not on their way out."""
        gen = self._generation.get(function)
        return [c for c in self._containers.values()
                if c.function == function and c.generation == gen and not c.retire
                and c.state is not State.STOPPING]

    def _warm(self, function: str) -> int:
        return len(self._live(function)) if function in self._specs else 0

    def _stale(self, c: Container) -> bool:
        return (c.retire or c.function not in self._specs
                or c.generation != self._generation[c.function])

    def _retire_stale(self, function: str) -> list[Action]:
        actions: list[Action] = []
        for c in [c for c in self._containers.values() if c.function == function]:
            if self._stale(c):
                c.retire = True
                actions += self._stop_if_retired(c)
        return actions

    def _stop_if_retired(self, c: Container) -> list[Action]:
        if c.state is State.IDLE and self._stale(c):
            return [self._stop(c, "function updated or deleted")]
        return []

    def _stop(self, c: Container, reason: str) -> Stop:
        self._move(c, State.STOPPING)
        c.stop_reason = reason
        return Stop(c.id, reason)

    def _remove(self, c: Container, now: float) -> None:
        del self._containers[c.id]
        for tenant in c.running:  # invocations that ended with it
            self._fair.stop(tenant, c.share + c.lent_share, now)
        for key in c.keys:
            del self._homes[key]
            del self._key_owners[key]
        self._count(c, -1)
        self._hold_gpus(c.gpus, c.need, +1)

    def _assign(self, w: Waiter, c: Container, now: float, *, cold: bool, bills_init: bool,
                lent: float = 0.0) -> Assign:
        """``lent``: cores its run holds beyond its container's own (``c`` is idle)."""
        self._dequeue(w.id)
        if lent:  # set while idle, so the move below counts them with the container's cores
            c.lent = lent
            c.lent_share = max(0.0, (c.need.cpu + lent) / self.capacity.cpu - c.share)
        self._charge(c, w.namespace)
        c.inflight += 1
        c.served += 1
        self._move(c, State.BUSY)
        c.last_used, c.idle_since = now, None
        tenant = w.who
        c.running.append(tenant)
        self._fair.start(tenant, c.share + c.lent_share, now)
        if w.affinity is not None and self._homes.get(w.affinity) != c.id:
            if (old := self._homes.get(w.affinity)) is not None:
                self._containers[old].keys.discard(w.affinity)
            self._homes[w.affinity] = c.id
            self._key_owners[w.affinity] = w.who.key
            c.keys.add(w.affinity)
        spec = self._specs.get(c.function)
        cores = c.need.cpu + c.lent if spec is not None and spec.cpu_max is not None else 0.0
        return Assign(w.id, c.id, cold, bills_init, cores)

    def _start(self, spec: FunctionSpec, now: float, *, prewarmed: bool,
               tenant: Tenant | None = None, charge: str | None = None) -> Start:
        """``tenant``: who pre-warms it; ``charge``: the namespace of the waiter it is started
        for (None: pre-warmed)."""
        need = need_of(spec)
        gpus = self._place_gpus(need) or ()
        self._hold_gpus(gpus, need, -1)
        stem = self._stem_for(spec)
        if stem is not None:  # it becomes this container, id and memory: they are the same
            del self._stems[stem.id]  # container's now (so are its labels, which cannot change)
        c = Container(stem.id if stem is not None else self._new_id(), spec.name,
                      self._generation[spec.name], need, gpus, prewarmed, now, last_used=now,
                      prewarmed_for=tenant, share=self._share_of(spec),
                      charged={charge} if charge is not None else set())
        self._containers[c.id] = c
        self._count(c, +1)
        return Start(c.id, spec, gpus, stem.id if stem is not None else None)

    def _place_gpus(self, need: Resources) -> tuple[int, ...] | None:
        """The devices a container of ``need`` would get (None: none fit now): whole ones that
        nothing holds any of, or for a fraction the fullest device it still fits on."""
        if need.gpus <= 0:
            return ()
        share = gpu_share(need)
        if share == MICRO:
            whole = [g for g, free in sorted(self._gpu_free.items()) if free == MICRO]
            n = round(need.gpus)
            return tuple(whole[:n]) if len(whole) >= n else None
        fits = [(free, g) for g, free in self._gpu_free.items() if free >= share]
        return (min(fits)[1],) if fits else None

    def _hold_gpus(self, gpus: Iterable[int], need: Resources, sign: int) -> None:
        """Give (``sign`` +1) back or take (-1) a container's share of its devices (a device
        that left the node is not counted)."""
        share = gpu_share(need)
        for g in gpus:
            if g in self._gpu_free:
                self._gpu_free[g] += sign * share

    def _share_of(self, spec: FunctionSpec) -> float:
        """What one invocation of ``spec`` holds of the node: its container's dominant share
        (the largest fraction of the node's cores, memory or GPUs), split among its slots."""
        need, cap = need_of(spec), self.capacity
        fractions = [need.cpu / cap.cpu if cap.cpu else 0.0,
                     need.memory_mb / cap.memory_mb if cap.memory_mb else 0.0,
                     need.gpus / cap.gpus if cap.gpus else 0.0]
        return max(fractions) / max(1, spec.max_concurrency)

    @staticmethod
    def _holds_cores(c: Container) -> bool:
        """Memory and GPUs are held for a container's whole life; cores only while it starts
        or runs."""
        return c.state in _HOLDS_CORES

    def _held(self, c: Container) -> Resources:
        if self._holds_cores(c):
            return _holding(c)
        return Resources(0.0, c.need.memory_mb, c.need.gpus)

    def _move(self, c: Container, state: State) -> None:
        """Every container state change goes through here, so the held sums follow it."""
        if c.state is not state:
            self._count(c, -1)
            c.state = state
            if state is State.IDLE:  # it counts for its function's namespace again
                c.charged.clear()
            self._count(c, +1)

    def _charge(self, c: Container, namespace: str) -> None:
        """An invocation of ``namespace`` takes ``c``: it counts for that namespace too."""
        if namespace not in c.charged:
            if not self._quotas.active:
                c.charged.add(namespace)
                return
            self._quotas.count(self._charges(c), _holding(c), self._holds_cores(c), -1)
            c.charged.add(namespace)
            self._quotas.count(c.charged, _holding(c), self._holds_cores(c), +1)

    @staticmethod
    def _charges(c: Container) -> Iterable[str]:
        """The namespaces ``c`` counts for (see quota.py)."""
        return c.charged or (namespace_of(c.function),)

    def _count(self, c: Container, sign: int) -> None:
        """Add (``sign`` +1) or take out (-1) what ``c`` holds in its state to the sums."""
        need = _holding(c)
        cores = round(need.cpu * MICRO) if c.state in _HOLDS_CORES else 0  # exact, unlike floats
        held = self._held_sum
        held[0] += sign * cores
        held[1] += sign * need.memory_mb
        held[2] += sign * round(need.gpus * MICRO)
        if self._quotas.active:  # else nothing reads the sums (set_quota recounts them)
            self._quotas.count(self._charges(c), need, cores != 0, sign)
        if c.state is State.STOPPING:
            stopping = self._stopping_sum
            stopping[0] += sign * cores
            stopping[1] += sign * need.memory_mb
            stopping[2] += sign * round(need.gpus * MICRO)

    def _sums(self) -> tuple[Resources, Resources]:
        """What the containers hold, and what the stopping ones among them hold. Kept as
        running sums (``_count``) rather than summed over every container: the pool needs them
        on each event, thousands a second on the warm path."""
        cpu, memory_mb, gpus = self._held_sum
        stop_cpu, stop_memory_mb, stop_gpus = self._stopping_sum
        return (Resources(cpu / MICRO, memory_mb, gpus / MICRO),
                Resources(stop_cpu / MICRO, stop_memory_mb, stop_gpus / MICRO))

    def _plus_stems(self, held: Resources) -> Resources:
        """``held`` and what the stem cells hold."""
        for stem in self._stems.values():
            held = held + stem.need
        return held

    def _free(self) -> Resources:
        return self.capacity - self.reserved

    def _can_start(self, spec: FunctionSpec, budget: Resources) -> bool:
        """Whether ``budget`` and the node's free capacity cover a start of ``spec`` (the
        callers' budgets count the memory of the stem cell it would take as free already)."""
        need = need_of(spec)
        return (budget.covers(need) and (self._free() + self._stem_credit(spec)).covers(need)
                and self._place_gpus(need) is not None)

    # ---------------------------------------------------------------- stem cells
    def _stem_for(self, spec: FunctionSpec) -> StemCell | None:
        """A ready stem cell that can become this function's container."""
        image = stem_image(spec)
        return next((s for s in self._stems.values() if s.image == image
                     and s.state is State.IDLE
                     and spec.memory_mb >= s.memory_mb + STEM_HEADROOM_MB), None)

    def _stem_credit(self, spec: FunctionSpec) -> Resources:
        """What a start of ``spec`` frees by taking a stem cell's place."""
        stem = self._stem_for(spec)
        return stem.need if stem is not None else Resources()

    def _stem_images(self) -> set[str]:
        """The images registered functions could take stem cells of."""
        if not self.stem_cells:
            return set()
        return {image for spec in self._specs.values()
                if (image := stem_image(spec)) is not None}

    def _stop_stem(self, stem: StemCell, reason: str) -> StopStem:
        stem.state = State.STOPPING
        return StopStem(stem.id, reason)

    def _stop_surplus_stems(self) -> list[Action]:
        """Stop ready stem cells beyond ``stem_cells`` per image, or of images no registered
        function runs any more."""
        wanted = self._stem_images()
        actions: list[Action] = []
        kept: dict[str, int] = {}
        for stem in self._stems.values():
            if stem.state is State.STOPPING:
                continue
            kept[stem.image] = kept.get(stem.image, 0) + 1
            if stem.state is State.IDLE and (stem.image not in wanted
                                             or kept[stem.image] > self.stem_cells):
                kept[stem.image] -= 1
                actions.append(self._stop_stem(stem, "no longer needed"))
        return actions

    def _refill_stems(self, now: float) -> list[Action]:
        """Start stem cells up to ``stem_cells`` per image, from memory nobody waits for."""
        actions: list[Action] = []
        budget = self._unclaimed_budget()
        need = Resources(0.0, self.stem_memory_mb, 0)
        for image in sorted(self._stem_images()):
            if now < self._stem_backoff_until.get(image, 0.0):
                continue
            have = sum(1 for s in self._stems.values()
                       if s.image == image and s.state is not State.STOPPING)
            for _ in range(self.stem_cells - have):
                if not (budget.covers(need) and self._free().covers(need)):
                    return actions
                budget = budget - need
                stem = StemCell(self._new_id(), image, need)
                self._stems[stem.id] = stem
                actions.append(StartStem(stem.id, image, self.stem_memory_mb))
        return actions

    def _unclaimed_budget(self) -> Resources:
        """Free capacity less what waiting invocations are owed."""
        budget = self._free()
        for w in self._queue.values():
            if w.container is None:
                budget = (budget - need_of(self._specs[w.function])).floor_zero()
        return budget

    def _top_up(self, now: float) -> list[Action]:
        actions: list[Action] = []
        budget = self._unclaimed_budget()
        for name, spec in self._specs.items():
            if now < self._backoff_until.get(name, 0.0):
                continue
            for _ in range(max(0, spec.min_warm - self._warm(name))):
                if not self._can_start(spec, budget) or self._owner_refuses(spec):
                    break
                budget = budget - need_of(spec)
                actions.append(self._start(spec, now, prewarmed=True))
        return actions

    def _home(self, w: Waiter) -> Container | None:
        """The live container that last served the waiter's affinity key, if any."""
        cid = self._homes.get(w.affinity) if w.affinity is not None else None
        c = self._containers.get(cid) if cid is not None else None
        if c is None or c.function != w.function or self._stale(c) or c.state is State.STOPPING:
            return None
        return c

    def _waits_for_home(self, w: Waiter) -> bool:
        """Whether the waiter may only have its key's home (``affinity: wait``) and has one."""
        return (w.affinity is not None and self._specs[w.function].affinity == "wait"
                and self._home(w) is not None)

    def _in_order(self, waiters: list[Waiter], now: float) -> list[Waiter]:
        """Waiters in the order they are served: retries first, then by fair share
        (``FairShare.order``: namespaces, then tenants by weight), then arrival."""
        if len(waiters) == 1:  # one waits: the warm path's usual pass
            return waiters
        retries = [w for w in waiters if w.retry]
        others = [w for w in waiters if not w.retry] if retries else waiters
        first = others[0].who.key if others else None
        if all(w.who.key == first for w in others):  # one tenant waits: arrival order
            return retries + others
        shares = {name: self._share_of(self._specs[name]) for name in {w.function for w in others}}
        return retries + self._fair.order(((w, w.who, shares[w.function]) for w in others), now)

    def _first(self, waiters: Iterable[Waiter], now: float) -> Waiter | None:
        """The first in line (``_in_order``) of ``waiters``, found in one pass: a retry, else
        the earliest of the tenant whose usage is least (one look-up per tenant)."""
        best, best_key, seen = None, None, set()
        for w in waiters:
            if w.retry:
                return w
            tenant = w.who
            if tenant.key in seen:
                continue
            seen.add(tenant.key)
            key = self._fair.key(tenant, now)
            if best_key is None or key < best_key:
                best, best_key = w, key
        return best

    def _next_for(self, c: Container, now: float) -> Waiter | None:
        """Who a released container goes to: the first in line of the waiters of its function
        it is the home of, else of those that have no other home to wait for."""
        if not self._queued_by.get(c.function):  # none of its waiters waits: the warm path
            return None

        def waiting() -> Iterator[Waiter]:
            return (w for w in self._queue.values()
                    if w.function == c.function and w.container is None
                    and self._refusal(w, c) is None)

        if len(self._queued_by.get(c.function, ())) <= 1:  # one tenant: arrival order
            def first(waiters: Iterator[Waiter], now: float) -> Waiter | None:
                return next(waiters, None)
        else:
            first = self._first
        if c.keys and (own := first((w for w in waiting() if w.affinity in c.keys), now)):
            return own
        return first((w for w in waiting() if not self._waits_for_home(w)), now)

    def _assignable(self, w: Waiter) -> Container | None:
        """A busy container with a free slot (its cores are held already), else an idle one;
        the most recently used, unless the waiter has an affinity key: then its key's home,
        else (the home is busy, for a function that does not wait for it, or there is none)
        one that is home to no queued waiter's key, preferably to no key at all (so a new key
        does not take another key's state). None where a waiter must wait for its home."""
        spec = self._specs[w.function]
        live = self._live(w.function)
        busy = [c for c in live if c.state is State.BUSY and c.inflight < spec.max_concurrency]
        idle = [c for c in live if c.state is State.IDLE]
        candidates = busy or idle
        if w.affinity is None:
            return max(candidates, key=lambda c: c.last_used, default=None)
        if (home := self._home(w)) is not None:
            if home in busy or home in idle:
                return home
            if spec.affinity == "wait":
                return None
        wanted = {x.affinity for x in self._queue.values() if x is not w and x.affinity}
        return max(candidates, key=lambda c: (not c.keys & wanted, not c.keys, c.last_used),
                   default=None)

    def _siblings_home(self, w: Waiter, c: Container) -> bool:
        """Whether ``c`` is the home of another key of ``w``'s tenant, for a function whose
        keys wait for their homes (taking it, the two keys would wait for each other)."""
        return (w.affinity is not None and self._specs[w.function].affinity == "wait"
                and any(self._key_owners[k] == w.who.key for k in c.keys if k != w.affinity))

    def _keeps_state(self, c: Container) -> bool:
        """Whether the container is the home of keys whose state waits for it."""
        spec = self._specs.get(c.function)
        return bool(c.keys) and spec is not None and spec.affinity == "wait"

    def _claimable(self, function: str) -> Container | None:
        spec = self._specs[function]
        return next((c for c in self._live(function) if c.state is State.STARTING
                     and len(c.claims) < spec.max_concurrency), None)

    def _evict(self, function: str, short: Resources) -> tuple[Resources, list[Action]]:
        """Stop least recently used idle containers of other functions if that covers the memory
        and GPUs in ``short`` (idle containers hold no cores, so evicting frees none)."""
        short = Resources(0.0, short.memory_mb, short.gpus)
        if short.memory_mb <= 0 and short.gpus <= 0:
            return Resources(), []
        freed = Resources()
        stems: list[StemCell] = []  # ready stem cells go first: nothing of a function is lost
        own = self._stem_for(self._specs[function])  # counted in the budget already
        for stem in self._stems.values():
            if stem.state is State.IDLE and stem is not own and not freed.covers(short):
                stems.append(stem)
                freed = freed + stem.need
        candidates = sorted(  # homes of state that waits for them go last
            (c for c in self._containers.values() if c.state is State.IDLE
             and (c.function != function or self._stale(c))
             and (c.function == function or c.function not in self._reserving)),
            key=lambda c: (self._keeps_state(c), c.last_used))
        freed, chosen = self._enough(candidates, short, freed)
        if not freed.covers(short):
            return Resources(), []
        reason = f"evicted for {function!r}"
        return freed, ([self._stop_stem(s, reason) for s in stems]
                       + [self._stop(c, reason) for c in chosen])

    def _enough(self, candidates: Iterable[Container], short: Resources,
                freed: Resources | None = None) -> tuple[Resources, list[Container]]:
        """The first ``candidates`` whose stop, with ``freed``, covers ``short``, and what they
        free with it; (nothing, none) where all of them would not."""
        freed = freed or Resources()
        chosen: list[Container] = []
        for c in candidates:
            if freed.covers(short):
                break
            chosen.append(c)
            freed = freed + self._held(c)
        return (freed, chosen) if freed.covers(short) else (Resources(), [])

    def _preempt(self, w: Waiter, short: Resources) -> tuple[Resources, list[Action]]:
        """Stop containers that tenants of a lower weight than ``w``'s started ahead and that
        serve nobody (starting with no claim, or idle and never used), newest first, if that
        covers ``short``; a container that runs an invocation is never taken."""
        weight = w.who.weight

        def lower(c: Container) -> bool:
            owner = c.prewarmed_for or Tenant.of_function(c.function)
            return c.prewarmed and owner.weight < weight and (
                (c.state is State.STARTING and not c.claims)
                or (c.state is State.IDLE and c.served == 0))

        freed, chosen = self._enough(
            sorted(filter(lower, self._containers.values()), key=lambda c: -c.created_at), short)
        if not freed.covers(short):
            return Resources(), []
        reason = f"preempted for {w.function!r} of a higher priority"
        return freed, [self._stop(c, reason) for c in chosen]

    def _dispatch(self, now: float) -> list[Action]:
        waiting = [w for w in self._queue.values() if w.container is None]
        if not waiting:  # nobody waits for a container: the common case on the warm path
            return []
        waiters = self._in_order(waiting, now)
        # Per function, its last waiter's place (a waiter's container is set only when the
        # pass reaches it, so this holds for the whole pass).
        last = {w.function: i for i, w in enumerate(waiters)}
        actions: list[Action] = []
        budget = self._free() + self._sums()[1]  # what is free once stopping containers are gone
        blocked: set[str] = set()  # functions whose earlier waiter found nothing in this pass
        aside = self._set_aside() if self._reserving else {}
        for i, w in enumerate(waiters):
            if w.container is not None:
                continue
            w.blocked = None
            if w.function in blocked:
                # Only what later waiters of other functions may take: when none is left, the
                # rest of the pass would only lower this local budget (64 clients of one
                # function queue 44 waiters here, a pass over them per event otherwise).
                if not any(j > i for f, j in last.items() if f not in blocked):
                    break
                budget = _hold(budget, need_of(self._specs[w.function]), self._others(aside, w))
                continue
            c = self._assignable(w)
            if c is None and self._waits_for_home(w):
                continue  # its busy home goes to it when released; it holds nothing back
            if c is not None and w.retry and self._siblings_home(w, c):
                # Its container died: a replacement, if one is starting or fits, rather than
                # the home of its job's other key (the two would run in turn from then on).
                spec = self._specs[w.function]
                fresh = _less(budget + self._stem_credit(spec),
                              self._others(aside, w) if aside else NOTHING)
                new = self._can_start(spec, fresh) and self._refusal(w, None) is None
                c = self._claimable(w.function) or (None if new else c)
            elif c is None:
                c = self._claimable(w.function)
            if (why := self._refusal(w, c)) is not None:
                w.blocked = why  # it holds nothing back: its quota is its own
                continue
            if c is not None and c.state is State.STARTING:
                self._charge(c, w.namespace)
                c.claims.append(w.id)
                w.container = c.id
                continue
            # what others' reservations keep from this waiter's function
            others = self._others(aside, w) if aside else NOTHING
            if c is not None:
                lent = 0.0
                if c.state is State.IDLE:  # it needs its cores back
                    cpu = Resources(need_of(self._specs[w.function]).cpu)
                    if not (_less(budget, others).covers(cpu) and self._free().covers(cpu)):
                        budget = _hold(budget, cpu, others)
                        blocked.add(w.function)
                        continue
                    budget = budget - cpu
                    if w.cores and len(waiting) == 1:  # cores nothing else waits for
                        lent = self._lendable(w, _less(budget, others).cpu)
                        budget = budget - Resources(lent)
                actions.append(self._assign(w, c, now, cold=False, bills_init=False,
                                            lent=lent))
                continue
            spec = self._specs[w.function]
            need = need_of(spec)
            budget = budget + self._stem_credit(spec)
            if not (budget - others).covers(need):
                freed, stops = self._evict(w.function, need - (budget - others))
                budget, actions = budget + freed, actions + stops
            if not (budget - others).covers(need):
                freed, stops = self._preempt(w, need - (budget - others))
                budget, actions = budget + freed, actions + stops
            if not (budget - others).covers(need):
                budget = _hold(budget, need, others)  # hold it for this waiter
                blocked.add(w.function)
                continue
            budget = budget - need
            if self._can_start(spec, need):
                start = self._start(spec, now, prewarmed=False, charge=w.namespace)
                self._containers[start.container].claims.append(w.id)
                w.container = start.container
                actions.append(start)
            # else: the capacity it needs is being freed; stopped() dispatches again
        return actions

    def _lendable(self, w: Waiter, spare: float) -> float:
        """The whole cores ``w`` may hold beyond its function's ``cpu``: what it asks for, up
        to its ``cpu_max``, of the ``spare`` cores the pass leaves (and the node has free),
        within its tenant's part of the node's cores among the tenants that run something now,
        and its namespace's quota."""
        spec = self._specs[w.function]
        if spec.cpu_max is None:
            return 0.0
        fair = self._fair.entitled_now(w.who) * self.capacity.cpu
        room = min(w.cores, spec.cpu_max, fair) - spec.cpu
        lent = whole_cores(min(room, spare, self._free().cpu))
        while lent > 0 and self._quotas.active and self._quotas.refusal(
                w.namespace, Resources(spec.cpu + lent), 0) is not None:
            lent -= 1.0
        return max(0.0, lent)

    # ------------------------------------------------------------------- quotas
    def _refusal(self, w: Waiter, c: Container | None) -> str | None:
        """Which quota keeps ``w`` from taking ``c`` (None: a new container), as a sentence;
        None where none does."""
        if w.function in self._capped:
            cap = function_cap(self._specs[w.function])
            if cap is not None and self._in_flight(w.function) >= cap[1]:
                return f"function {w.function!r} is at its {cap[0]} of {cap[1]}"
        if not self._quotas.active:
            return None
        spec = self._specs[w.function]
        ns = w.namespace
        if c is None:
            return self._quotas.refusal(ns, need_of(spec), 1)
        if ns in c.charged:
            return None  # it counts for the namespace already
        if c.state is State.IDLE and ns == namespace_of(c.function):
            return self._quotas.refusal(ns, Resources(c.need.cpu), 0)  # only its cores are new
        return self._quotas.refusal(ns, c.need, 1)

    def _owner_refuses(self, spec: FunctionSpec) -> bool:
        """Whether a pre-warmed container of ``spec`` would take its function's namespace
        beyond its quota (it counts for that namespace: see quota.py)."""
        return self._quotas.active and self._quotas.refusal(
            namespace_of(spec.name), need_of(spec), 1) is not None

    @staticmethod
    def _others(aside: dict[str, Resources], w: Waiter) -> Resources:
        """What other functions' reservations keep from ``w``'s function."""
        if not aside:
            return NOTHING
        return sum((r for f, r in aside.items() if f != w.function), NOTHING)

    def _in_flight(self, function: str) -> int:
        """The function's invocations running or waiting for a container that is starting."""
        return sum(c.inflight + len(c.claims) for c in self._containers.values()
                   if c.function == function)

    def _set_aside(self) -> dict[str, Resources]:
        """Per function with a ``reserved_concurrency``: the capacity its reservation keeps
        from other functions — its reserved containers' worth, less what its containers hold
        (an idle one holds its memory: its cores stay set aside)."""
        aside: dict[str, Resources] = {}
        for name in self._reserving:
            spec = self._specs[name]
            n, need = reserved_containers(spec), need_of(spec)
            want = Resources(need.cpu * n, need.memory_mb * n, need.gpus * n)
            for c in self._containers.values():
                if c.function == name and c.state is not State.STOPPING:
                    want = want - self._held(c)
            aside[name] = want.floor_zero()
        return aside
