"""Per-queue settings (QueueLimits, DlqConfig) are stored one way by every backend:
``bunq.codec.setting_blob``, a msgpack map of fields by name."""

from __future__ import annotations

import msgpack

from bunq.codec import setting_blob, setting_from_blob
from bunq.queueconfig import DlqConfig, QueueLimits

LIMITS = QueueLimits(rate_max=5, rate_duration=2_000, concurrency=3, group_concurrency=1,
                     group_rate_max=7, group_rate_duration=500)  # fmt: skip
DLQ = DlqConfig(auto_retry=True, auto_retry_interval=5_000, max_auto_retries=2, max_age=None,
                max_entries=50)  # fmt: skip


def test_settings_round_trip_as_a_map_of_their_fields() -> None:
    for value in (LIMITS, DLQ):
        blob = setting_blob(value)
        assert set(msgpack.unpackb(blob)) == set(type(value).__dataclass_fields__)
        assert setting_from_blob(type(value), blob) == value


def test_the_memory_engines_earlier_list_form_still_reads() -> None:
    old_limits = msgpack.packb([5, 2_000, 3, 1, 7, 500])
    old_dlq = msgpack.packb([True, 5_000, 2, None, 50])
    assert setting_from_blob(QueueLimits, old_limits) == LIMITS
    assert setting_from_blob(DlqConfig, old_dlq) == DLQ


def test_a_field_missing_from_an_older_row_reads_as_its_default() -> None:
    blob = msgpack.packb({"concurrency": 4})
    assert setting_from_blob(QueueLimits, blob) == QueueLimits(concurrency=4)


def test_a_stored_value_now_out_of_bounds_reads_as_the_defaults() -> None:
    blob = msgpack.packb({"max_entries": -1})
    assert setting_from_blob(DlqConfig, blob) == DlqConfig()
