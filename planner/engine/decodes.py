"""The running plain decodes of one engine in aggregate, so a step costs O(changes), not O(running).

A running request that decodes one token a step (past its first token, computed up to its
last, its prompt blocks published) is a member of `Decodes` while the steps schedule it with
every other member (planner.engine.running, `RunningPhase.schedule`). Each such step adds
one token to every member, so the aggregate keeps only: the steps taken (`steps`), the
number of members, the sum of their computed tokens less the steps at which each joined (so
the batch's context tokens are one multiplication away), a heap of the steps in which
members finish, and, per residue of a step modulo the block size, how many members need a
fresh KV block in such a step (a member needs one whenever its computed tokens reach the
blocks it holds, every `block_tokens` steps; a member whose first need lies further ahead,
under request or static reservation, waits in a second heap). A member's own fields (tokens,
computed tokens, timeline, blocks held) are those of the step it joined or was last brought
up to date (`sync`); the pool counts the blocks members grow into as the steps take them.

The steps, their times and every request's timeline are those of scheduling each request
on its own, to the bit (tests/planner/engine/test_decodes.py, test_golden.py).
"""

from __future__ import annotations

import heapq

from planner.engine.batch import LiveRequest


class Decodes:
    """The aggregate of one engine's member decodes (see the module); `bt` is the block size."""

    def __init__(self, bt: int, clip: int = 0) -> None:
        self._bt = bt
        # `remaining_tokens`: the members' tokens still to come, each counted up to `clip`
        # (0: not asked); the sum of their targets and the members that may pass the clip.
        self._clip = clip
        self._target = 0
        self._long: dict[LiveRequest, None] = {}
        self.steps = 0  # steps the members have taken together
        self.count = 0  # members
        self.end_s = 0.0  # the end of the last of those steps
        self._base = 0  # sum over members of computed tokens less `steps` when last synced
        self._finish: list[tuple[int, int, LiveRequest]] = []  # (step it finishes in, seq, r)
        self._phase = [0] * bt  # members needing a block in steps of each residue mod bt
        self._later: list[tuple[int, int, LiveRequest]] = []  # (first need, seq, r) not counted yet

    @staticmethod
    def qualifies(r: LiveRequest) -> bool:
        """Whether running `r`, after a step, is a plain decode (a member's state)."""
        return r.tokens - r.computed == 1 and r.tokens > r.prompt and not r.registering

    def context_tokens(self) -> int:
        """The members' computed tokens now."""
        return self._base + self.count * self.steps

    def remaining_tokens(self) -> int:
        """The members' tokens still to come (target less tokens now), each at most `clip`."""
        total = self._target - self.context_tokens() - self.count
        clip = self._clip
        for r in self._long:
            over = r.target - (r.tokens + self.steps - r.joined) - clip
            if over > 0:
                total -= over
        return total

    def join(self, r: LiveRequest) -> None:
        """Make `r` (a plain decode, `qualifies`, its fields up to date) a member."""
        d = self.steps
        r.joined = d
        self.count += 1
        self._target += r.target
        if self._clip and r.target - r.tokens > self._clip:
            self._long[r] = None
        self._base += r.computed - d
        heapq.heappush(self._finish, (d + r.target - r.tokens - 1, r.seq, r))
        first = d + r.cap - r.computed  # the step whose tokens first need a fresh block
        if first < d + self._bt:
            self._phase[first % self._bt] += 1
        else:
            r.later = True
            heapq.heappush(self._later, (first, r.seq, r))

    def sync(self, r: LiveRequest) -> None:
        """Bring member `r`'s fields up to the steps taken: its tokens, its timeline and the
        blocks it grew into (the pool counted them already)."""
        k = self.steps - r.joined
        if not k:
            return
        r.joined = self.steps
        c = r.computed + k
        r.computed = c
        r.tokens += k
        tl = r.tl
        tl.output_tokens += k
        tl.last_token_s = self.end_s
        if c > r.cap:
            bt = self._bt
            holding = r.holding
            holding.unhashed += -(-c // bt) - holding.blocks
            r.cap = holding.blocks * bt

    def leave(self, r: LiveRequest) -> None:
        """Bring member `r` up to date and take it out (it finishes)."""
        self.sync(r)
        self.count -= 1
        self._target -= r.target
        self._long.pop(r, None)
        self._base -= r.computed - r.joined
        if r.later:
            r.later = False  # its heap entry is skipped when met
        else:
            self._phase[(r.joined - r.computed) % self._bt] -= 1
        r.joined = -1

    def dissolve(self, running: dict[LiveRequest, None]) -> None:
        """Bring every member (all in `running`) up to date and end the aggregate."""
        for r in running:
            if r.joined >= 0:
                self.sync(r)
                r.joined = -1
                r.later = False
        self.count = 0
        self._base = 0
        self._target = 0
        self._long.clear()
        self._finish.clear()
        self._later.clear()
        self._phase = [0] * self._bt

    def _activate(self, step: int) -> None:
        """Count the members waiting in `_later` whose first need falls within a block of
        steps from `step` in their residue."""
        later = self._later
        bt = self._bt
        while later and later[0][0] < step + bt:
            first, _, r = heapq.heappop(later)
            if r.later:
                r.later = False
                self._phase[first % bt] += 1

    def step_needs(self) -> int:
        """Fresh blocks the members need in the next step."""
        step = self.steps
        if self._later:
            self._activate(step)
        return self._phase[step % self._bt]

    def needs_over(self, steps: int) -> int:
        """Fresh blocks the members need in the next `steps` steps (nothing changes)."""
        bt = self._bt
        d = self.steps
        full, part = divmod(steps, bt)
        need = full * sum(self._phase)
        for i in range(part):
            need += self._phase[(d + i) % bt]
        end = d + steps
        for first, _, r in self._later:
            if r.later and first < end:
                need += (end - 1 - first) // bt + 1
        return need

    def take_steps(self, steps: int, end_s: float) -> int:
        """Count `steps` steps taken by every member (none finishing before the last), the
        last ending at `end_s`; the fresh blocks they needed."""
        need = 0
        phase = self._phase
        bt = self._bt
        d = self.steps
        for step in range(d, d + steps):
            if self._later:
                self._activate(step)
            need += phase[step % bt]
        self.steps = d + steps
        self.end_s = end_s
        return need

    def rewind(self, steps: int, end_s: float, running: dict[LiveRequest, None]) -> None:
        """Take back the last `steps` steps counted, now ending at `end_s` (a decode run cut
        after it was applied, planner.engine.decode_run): the members' tokens go back, the
        blocks they grew into stay theirs (so they need the next fresh block later), as
        when a run applied to each request is taken back."""
        members = [r for r in running if r.joined >= 0]
        for r in members:
            self.sync(r)  # the blocks they grew into, up to the last step counted
        self.steps -= steps
        self.end_s = end_s
        self.dissolve(running)
        for r in members:
            self.join(r)

    def next_finish(self) -> int:
        """The step in which the next member finishes (members exist)."""
        return self._finish[0][0]

    def step_taken(self, end_s: float) -> list[LiveRequest]:
        """Count one step taken by every member, ending at `end_s` (its blocks were taken
        with `step_needs`); the members finishing in it, brought up to date and taken out."""
        step = self.steps
        self.steps = step + 1
        self.end_s = end_s
        done: list[LiveRequest] = []
        heap = self._finish
        while heap and heap[0][0] == step:
            r = heapq.heappop(heap)[2]
            self.leave(r)
            done.append(r)
        return done
