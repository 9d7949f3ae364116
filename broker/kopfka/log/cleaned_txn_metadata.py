"""CleanedTransactionMetadata (seed 001, "Interaction with transactions / markers"): what the
cleaner knows about transactions while it recopies a log from its start.

Records of aborted transactions are dropped whatever their keys. A transaction marker stays
until every record of its transaction is gone from the log: an ABORT marker whose data the
cleaner still saw in this pass is kept, with its entry in the cleaned transaction index; a
COMMIT marker is kept while records of the transaction were read in this pass. A marker whose
transaction is empty is then retained like a tombstone: stamped with a delete horizon
(delete.retention.ms) on the first clean that finds it empty, removed once the horizon passed.
One instance spans all the segment groups of one clean, so committed data in an earlier group
keeps its marker in a later one.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from kopfka.protocol.record_codec import CONTROL_ABORT, CONTROL_COMMIT
from kopfka.protocol.records import BatchHeader
from kopfka.storage.transaction_index import AbortedTxn


@dataclass
class _AbortedTxnState:
    """An aborted transaction the cleaner has reached, with the last offset of its data it has read in this pass."""

    txn: AbortedTxn
    last_observed_batch_offset: int | None = None


@dataclass
class CleanedTransactionMetadata:
    """The cleaner's transaction state for one clean: which batches to drop, which markers to keep (module doc)."""

    _aborted: list[tuple[int, int, AbortedTxn]] = field(default_factory=list)  # heap by first offset
    _ongoing_committed: set[int] = field(default_factory=set)
    _ongoing_aborted: dict[int, _AbortedTxnState] = field(default_factory=dict)
    _seq: int = 0
    _seen: set[tuple[int, int]] = field(default_factory=set)
    retained_aborted: list[AbortedTxn] = field(default_factory=list)  # for the cleaned txn index

    def add_aborted_transactions(self, txns: list[AbortedTxn]) -> None:
        """The aborted transactions of the next group's range (each taken once: a transaction
        spanning two groups is collected for both)."""
        for t in txns:
            if (t.producer_id, t.first_offset) in self._seen:
                continue
            self._seen.add((t.producer_id, t.first_offset))
            self._seq += 1
            heapq.heappush(self._aborted, (t.first_offset, self._seq, t))

    def _consume_aborted_up_to(self, offset: int) -> None:
        while self._aborted and self._aborted[0][0] <= offset:
            _first, _seq, txn = heapq.heappop(self._aborted)
            self._ongoing_aborted.setdefault(txn.producer_id, _AbortedTxnState(txn))

    def on_batch_read(self, header: BatchHeader) -> bool:
        """A data batch: True if it belongs to an aborted transaction (discardable)."""
        self._consume_aborted_up_to(header.last_offset)
        if not header.is_transactional:
            return False
        state = self._ongoing_aborted.get(header.producer_id)
        if state is not None:
            state.last_observed_batch_offset = header.last_offset
            return True
        self._ongoing_committed.add(header.producer_id)
        return False

    def on_control_batch_read(self, header: BatchHeader, control_type: int | None) -> bool:
        """A control batch (`control_type` None when it is empty): True if its transaction has
        no record left in the log, so the marker may go once its delete horizon passed."""
        self._consume_aborted_up_to(header.last_offset)
        if control_type is None:
            return True  # an empty control batch was already cleaned
        pid = header.producer_id
        if control_type == CONTROL_ABORT:
            state = self._ongoing_aborted.pop(pid, None)
            if state is not None and state.last_observed_batch_offset is not None:
                self.retained_aborted.append(state.txn)
                return False
            return True
        if control_type == CONTROL_COMMIT:
            if pid in self._ongoing_committed:
                self._ongoing_committed.discard(pid)
                return False
            return True
        return False
