"""The pending questions, in memory: what listings and secondsLeft are served from.

Pending questions are few and hot; every listing of them used to be a read of the store and a
splice of secondsLeft into each row, on the event loop. The index holds each pending question's
filter columns and its stored document, encoded once (the JSON object's bytes without its closing
brace), so a listing is a scan and a join, and secondsLeft is appended at send time.

A listing of every pending question reads two arrays side by side, in listing order: the documents'
bytes and the deadlines, not one object per question. 10,000 questions opened among a daemon's other
work lie all over its heap, and a walk that visits each one's entry, its deadline and its bytes waits
on memory more than it computes (docs/bench.md: 10,000 pending listed, 2026-12-07). Deadlines that
never go down along the listing (questions of one ttl, oldest first) give their secondsLeft in runs
of the same whole second, found by bisection: the listing's pieces are put by slices, not one by one.

It is kept in step with the store by the store alone: the broker hands it the rows of the
questions each committed batch touched (broker/store.py, Follower), its own daemon's and, for a
shared store, the other daemons' too. A row that is no longer pending leaves it. Nothing is put in
before it has committed, so a listing never shows what a kill -9 could take back.
"""

from __future__ import annotations

import sys
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence, ValuesView
from functools import partial
from itertools import compress, islice
from operator import attrgetter, eq, le

from mcpx.broker.models import Elicitation, seconds_left
from mcpx.broker.store import QuestionFilter, QuestionRow


class PendingEntry:
    """One pending question: what a listing filters on, and its document's bytes up to the closing brace."""

    __slots__ = ("approvals", "audience", "created", "expires", "head", "id", "order", "server", "session", "task",
                 "trace")

    def __init__(self, row: QuestionRow, order: int) -> None:
        self.id = row.id
        # a few sessions, servers and audiences among many questions: one string each, not one per question
        self.session = sys.intern(row.session)
        self.server = sys.intern(row.server)
        self.audience = sys.intern(row.audience)
        self.trace = row.trace
        self.task = row.task
        self.created = row.created
        self.expires = row.expires
        self.order = order  # the store's tie-break after `created`: the order rows were inserted
        self.head = row.doc.encode()[:-1]  # the document without its closing brace: secondsLeft goes there
        self.approvals = bool(row.approvals)  # named people's approvals decide it: it has a schedule

    def question(self) -> Elicitation:
        return Elicitation.model_validate_json(self.head + b"}")

    def json(self, now: float) -> bytes:
        """Its document as the API shows it, with its secondsLeft of `now` (as a listing splices it in)."""
        return self.head + b',"secondsLeft":%d}' % seconds_left(self.expires, now, "pending")


# a run of secondsLeft is put by bisection and a slice, a few µs: worth it while runs are this long on average, and a
# question at a time (~0.2 µs each) is cheaper below it
RUN = 32

# questions opened through this daemon lately, kept parsed beside their entries: the answer that follows a moment
# later (a lifecycle's accept, its /wait) is checked against this copy, not a parse of the stored document (nor a read
# of the store). Few, so that 10,000 pending cost no more memory than their documents
KEPT = 64


class PendingIndex:
    """Every pending question of the store, oldest first (as the store orders them: created, then insertion)."""

    def __init__(self) -> None:
        self._by_id: dict[str, PendingEntry] = {}
        self._kept: dict[str, tuple[PendingEntry, Elicitation]] = {}  # KEPT questions as parsed, with their entries
        self._inserted = 0
        self._in_order = True  # the dict's order is (created, order): a question created earlier may arrive later
        self._filling: set[str] | None = None  # while the fill is read: the questions the store moved meanwhile
        self._view: ListingView | None = ListingView([])  # None: built again by the next listing of them all

    def __len__(self) -> int:
        return len(self._by_id)

    def begin_fill(self) -> None:
        """The pending questions are about to be read from the store (at start): rows the store hands on while
        that read is under way are newer than what it may return for the same questions."""
        self._filling = set()

    def fill(self, rows: Iterable[QuestionRow]) -> None:
        """The pending questions as read from the store, but those it moved while they were read."""
        moved, self._filling = self._filling or set(), None
        self.apply(row for row in rows if row.id not in moved)

    def apply(self, rows: Iterable[QuestionRow]) -> None:
        """Committed rows, in the order they were written: a pending one is put (over its earlier row, in its
        place), one that ended leaves."""
        batch = rows if isinstance(rows, list) else list(rows)
        # each question's last row in the batch: one opened and ended in it (a legacy round trip's question commits
        # with its answer) was pending to no reader of the index, and is not put in to be taken out again
        last = {row.id: row for row in batch} if len(batch) > 1 else None
        for row in batch:
            if self._filling is not None:
                self._filling.add(row.id)
            old = self._by_id.get(row.id)
            if last is not None and old is None and (end := last[row.id]) is not row and end.state != "pending":
                self._inserted += 1  # its place in the order, as if it had been put
                continue
            if old is not None:
                self._kept.pop(row.id, None)  # its row moved on: the copy kept of the old one is not it
            if row.state != "pending":
                if old is not None:
                    del self._by_id[row.id]
                    if self._view is not None:
                        self._view.drop(old)
                continue
            if old is not None:
                entry = self._by_id[row.id] = PendingEntry(row, old.order)
                if self._view is not None:
                    self._view.put(entry)
                continue
            self._inserted += 1
            if self._by_id and row.created < next(reversed(self._by_id.values())).created:
                self._in_order = False
                self._view = None  # its place is not the end
            entry = self._by_id[row.id] = PendingEntry(row, self._inserted)
            if self._view is not None:
                self._view.append(entry)

    def get(self, eid: str) -> PendingEntry | None:
        return self._by_id.get(eid)

    def keep(self, q: Elicitation) -> None:
        """`q` is the question its commit stored, which made its entry here: kept parsed (the latest KEPT), so that
        reading it back is no parse of its document."""
        entry = self._by_id.get(q.id)
        if entry is None:
            return
        self._kept[q.id] = (entry, q)
        if len(self._kept) > KEPT:
            del self._kept[next(iter(self._kept))]

    def question(self, eid: str) -> Elicitation | None:
        """A pending question as stored: the copy kept of it while its row is the one kept, else its document
        parsed; None if it is not pending."""
        entry = self._by_id.get(eid)
        if entry is None:
            return None
        kept = self._kept.get(eid)
        return kept[1] if kept is not None and kept[0] is entry else entry.question()

    def deadlines(self) -> list[tuple[float, str]]:
        return [(p.expires, p.id) for p in self._by_id.values()]

    def _ordered(self) -> ValuesView[PendingEntry]:
        if not self._in_order:
            self._by_id = {p.id: p for p in sorted(self._by_id.values(), key=lambda p: (p.created, p.order))}
            self._in_order = True
        return self._by_id.values()

    def select(self, where: QuestionFilter, limit: int) -> list[PendingEntry]:
        """The pending questions `where` names (its state is taken as pending), oldest first, at most `limit`."""
        wanted = [(name, value) for name in FILTERS if (value := getattr(where, name)) is not None]
        entries = self._ordered()
        if not wanted:
            return list(islice(entries, max(0, limit)))
        # compared in C, a question at a time (attrgetter, eq, compress): a loop of Python over 10,000 questions
        # cost 10-20x this (docs/bench.md: 10,000 pending listed)
        names, values = zip(*wanted, strict=True)
        same = partial(eq, values[0] if len(values) == 1 else values)  # attrgetter gives one name's value bare
        return list(islice(compress(entries, map(same, map(attrgetter(*names), entries))), max(0, limit)))

    def listing(self, where: QuestionFilter, limit: int, now: float) -> tuple[list[bytes], int]:
        """The pending questions `where` names, oldest first, at most `limit`: their documents, each with its
        secondsLeft of `now`, comma-separated, as pieces to be joined once inside whatever holds them (10,000 of
        them are 5 MB: copied once, into the reply's body); and how many they are."""
        if any(getattr(where, name) is not None for name in FILTERS):
            chosen = self.select(where, limit)
            deadlines = [p.expires for p in chosen]
            return _pieces([p.head for p in chosen], deadlines, now, _ascending(deadlines)), len(chosen)
        if self._view is None:
            entries = list(self._ordered())
            if not _ascending([p.order for p in entries]):
                # questions created out of turn: numbered again in listing order, which is what the view finds by
                for i, p in enumerate(entries, 1):
                    p.order = i
                self._inserted = len(entries)
            self._view = ListingView(entries)
        heads, expires, ascending = self._view.first(max(0, limit))
        return _pieces(heads, expires, now, ascending), len(heads)


class ListingView:
    """Every pending question's document bytes and deadline, in listing order, in two arrays side by side (and each
    one's `order`, by which its place is found): what a listing of them all reads. A question that leaves is taken
    out of its place at once: a move of 8 bytes a question behind it in each array (~5 µs for 10,000), where closing
    up places marked gone at the next listing costs that listing ~2 ms of building arrays again."""

    def __init__(self, entries: list[PendingEntry]) -> None:
        self._heads = [p.head for p in entries]
        self._expires = array("d", [p.expires for p in entries])
        self._orders = array("q", [p.order for p in entries])  # rising: a place is found by bisection
        # no deadline earlier than the one before it (a question leaving keeps it so; one put or moved may not)
        self._ascending = _ascending(self._expires)

    def append(self, p: PendingEntry) -> None:
        if self._expires and p.expires < self._expires[-1]:
            self._ascending = False
        self._heads.append(p.head)
        self._expires.append(p.expires)
        self._orders.append(p.order)

    def put(self, p: PendingEntry) -> None:
        """`p` is the question in its place, as its row is now."""
        i = bisect_left(self._orders, p.order)
        self._heads[i] = p.head
        if self._expires[i] != p.expires:
            self._expires[i] = p.expires
            if (i > 0 and self._expires[i - 1] > p.expires) or (i + 1 < len(self._expires)
                                                                 and p.expires > self._expires[i + 1]):
                self._ascending = False

    def drop(self, p: PendingEntry) -> None:
        i = bisect_left(self._orders, p.order)
        del self._heads[i], self._expires[i], self._orders[i]

    def first(self, limit: int) -> tuple[list[bytes], array[float], bool]:
        """The first `limit` questions' documents and deadlines, and whether those deadlines never go down."""
        return self._heads[:limit], self._expires[:limit], self._ascending


FILTERS = ("session", "server", "audience", "trace", "task")  # what a listing may be narrowed by, but its state
TAIL = b',"secondsLeft":%d},'  # what follows a question's document in a listing: its secondsLeft, its brace, a comma


def _pieces(heads: Sequence[bytes], expires: Sequence[float], now: float, ascending: bool) -> list[bytes]:
    """Each document in `heads` with the secondsLeft of `now` its deadline in `expires` gives, comma-separated."""
    n = len(heads)
    if not n:
        return []
    base = now - 0.999  # seconds_left's rule (rounded up, never negative), inlined: this runs 10,000 times

    def left_of(expiry: float) -> int:
        return int(expiry - base)

    pieces: list[bytes]
    if ascending and (left_of(expires[-1]) - left_of(expires[0]) + 1) * RUN <= n:
        # left_of never goes down along `expires`: each run of one secondsLeft ends where bisection says
        pieces = [b""] * (2 * n)
        pieces[::2] = heads
        i = 0
        while i < n:
            left = left_of(expires[i])
            j = bisect_right(expires, left, i, n, key=left_of)
            pieces[2 * i + 1:2 * j:2] = [TAIL % max(0, left)] * (j - i)
            i = j
    else:
        pieces = []
        add = pieces.append
        tails: dict[int, bytes] = {}  # the same few secondsLeft over and over: each end encoded once
        for head, expiry in zip(heads, expires, strict=True):
            left = int(expiry - base)
            tail = tails.get(left)
            if tail is None:
                tail = tails[left] = TAIL % max(0, left)
            add(head)
            add(tail)
    pieces[-1] = pieces[-1][:-1]  # no comma after the last
    return pieces


def _ascending(values: Sequence[float]) -> bool:
    """No value is less than the one before it (compared in C: 10,000 in ~0.2 ms)."""
    return all(map(le, values, islice(values, 1, None)))
