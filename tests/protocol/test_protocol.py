"""bunq.protocol and the wire shapes: pure encode/decode, no sockets."""

from __future__ import annotations

import math
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bunq.errors import (
    BunqError,
    LeaseLost,
    PayloadTooLarge,
    ProtocolError,
    ValidationError,
)
from bunq.job import Attempt, DlqEntry, FailureReason, Job, JobOptions, JobState
from bunq.protocol import (
    FrameDecoder,
    encode,
    error_from_reply,
    error_reply,
    js_safe,
    parse_token,
    wire_token,
)
from bunq.server.fields import as_bool, as_int, opt_int, str_list
from bunq.wire_shapes import dlq_from_bq, dlq_to_bq, job_from_bq, job_to_bq, job_to_wire


def frame(obj: Any) -> bytes:
    body = msgpack.packb(obj, use_bin_type=True)
    return len(body).to_bytes(4, "big") + body


def test_encode_then_decode_round_trips() -> None:
    msg = {"cmd": "PUSH", "reqId": "1", "queue": "q", "data": {"a": [1, 2.5, None, "x"]}}
    assert list(FrameDecoder().feed(encode(msg))) == [msg]


def test_partial_frames_complete_byte_by_byte() -> None:
    dec = FrameDecoder()
    data = encode({"cmd": "Ping", "reqId": "7"})
    got: list[Any] = []
    for i in range(len(data)):
        got += list(dec.feed(data[i : i + 1]))
        assert dec.pending_frame == (i < len(data) - 1)
    assert got == [{"cmd": "Ping", "reqId": "7"}] and dec.buffered == 0


def test_several_frames_in_one_chunk_and_a_tail() -> None:
    msgs = [{"cmd": "Ping", "reqId": str(i)} for i in range(5)]
    chunk = b"".join(encode(m) for m in msgs)
    dec = FrameDecoder()
    assert list(dec.feed(chunk + chunk[:6])) == msgs
    assert dec.buffered == 6
    assert list(dec.feed(chunk[6:])) == msgs and dec.buffered == 0  # the tail was a 2nd copy


def test_oversized_length_is_refused_before_the_body() -> None:
    dec = FrameDecoder(max_frame=1024)
    with pytest.raises(ProtocolError) as err:
        list(dec.feed((1025).to_bytes(4, "big")))
    assert err.value.code == "protocol" and err.value.data["limit"] == 1024
    with pytest.raises(ProtocolError):  # the stream stays broken
        list(dec.feed(b"x"))


def test_frames_before_a_bad_one_are_yielded_first() -> None:
    good = encode({"cmd": "Ping", "reqId": "1"})
    bad = (3).to_bytes(4, "big") + b"\xc1\xc1\xc1"  # 0xc1 is never valid msgpack
    it = FrameDecoder().feed(good + bad + good)
    assert next(it) == {"cmd": "Ping", "reqId": "1"}
    with pytest.raises(ProtocolError):
        next(it)


@pytest.mark.parametrize("body", [b"\x92\x01", b"\x01\x02", b"\x81\x01\x02"])
def test_truncated_trailing_or_int_keyed_bodies_are_protocol_errors(body: bytes) -> None:
    with pytest.raises(ProtocolError):
        list(FrameDecoder().feed(len(body).to_bytes(4, "big") + body))


def test_ext_zero_is_undefined_other_ext_types_are_refused() -> None:
    undefined = frame({"cmd": "ACKB", "results": [msgpack.ExtType(0, b"\x00")]})
    assert list(FrameDecoder().feed(undefined)) == [{"cmd": "ACKB", "results": [None]}]
    with pytest.raises(ProtocolError):
        list(FrameDecoder().feed(frame({"reqId": msgpack.ExtType(5, b"\x01")})))


def test_deep_nesting_is_a_protocol_error_not_a_crash() -> None:
    body = b"\x91" * 100_000 + b"\xc0"
    with pytest.raises(ProtocolError):
        list(FrameDecoder().feed(len(body).to_bytes(4, "big") + body))


def test_int64_rule_big_integers_go_out_as_float64() -> None:
    msg = {"ts": 1_800_000_000_000, "small": 7, "neg": -(2**40), "deep": [{"x": 2**63}]}
    got = msgpack.unpackb(encode(msg)[4:])
    assert got == {"ts": 1.8e12, "small": 7, "neg": float(-(2**40)), "deep": [{"x": 2.0**63}]}
    assert isinstance(got["ts"], float) and isinstance(got["small"], int)
    exact = msgpack.unpackb(encode(msg, exact_ints=True)[4:])
    assert exact["ts"] == 1_800_000_000_000 and isinstance(exact["ts"], int)
    assert js_safe(2**2000) == str(2**2000)  # beyond float64: a string, never a crash


def test_strict_encoding_refuses_objects_lenient_encodes_their_repr() -> None:
    with pytest.raises(ValidationError):
        encode({"data": object()}, strict=True)
    assert "object" in msgpack.unpackb(encode({"data": object()})[4:])["data"]


def test_error_replies_carry_bunqueue_text_and_bunq_types() -> None:
    err = PayloadTooLarge("job data is 5 bytes", size=5, limit=4)
    reply = error_reply("9", err)
    assert reply["ok"] is False and reply["reqId"] == "9" and reply["error"] == str(err)
    back = error_from_reply(msgpack.unpackb(encode(reply)[4:]))
    assert isinstance(back, PayloadTooLarge) and back.data == {"size": 5, "limit": 4}
    plain = error_from_reply({"ok": False, "error": "Job not found"})  # a bunqueue server
    assert type(plain) is BunqError and str(plain) == "Job not found"
    assert isinstance(error_from_reply(error_reply(1, LeaseLost("x"))), LeaseLost)


def test_lock_tokens_carry_the_attempt() -> None:
    assert parse_token(wire_token("abc.def", 3)) == ("abc.def", 3)
    for bad in (None, 5, "", "abc", "abc.", "abc.x", "a." + "9" * 12):
        assert parse_token(bad) is None


def _job(**kw: Any) -> Job:
    base: dict[str, Any] = dict(
        id="j1",
        queue="q",
        name="n",
        data={"k": [1, 2]},
        state=JobState.FAILED,
        opts=JobOptions.parse(
            {"priority": 3, "job_id": "c1", "backoff": {"type": "fixed", "delay": 5}}
        ),
        attempts=2,
        created_at=1_800_000_000_000,
        run_at=1_800_000_000_001,
        started_at=1_800_000_000_002,
        finished_at=1_800_000_000_003,
        progress=40,
        result=None,
        error="boom",
        reason=FailureReason.MAX_ATTEMPTS_EXCEEDED,
        history=(Attempt(1, "boom", 5, 1_800_000_000_002, FailureReason.EXPLICIT_FAIL),),
        stalls=1,
    )
    base.update(kw)
    return Job(**base)


def test_bq_job_shape_is_lossless() -> None:
    job = _job()
    wire = msgpack.unpackb(encode({"j": job_to_bq(job)}, exact_ints=True)[4:])["j"]
    assert job_from_bq(wire) == job
    entry = DlqEntry(job, FailureReason.MAX_ATTEMPTS_EXCEEDED, "boom", job.history, 12, 1)
    assert dlq_from_bq(dlq_to_bq(entry)) == entry
    with pytest.raises(ProtocolError):
        job_from_bq(["too", "short"])


def test_bunqueue_job_shape() -> None:
    w = job_to_wire(_job(), "failed", with_result=True)
    assert w["customId"] == "c1" and w["priority"] == 3 and w["maxAttempts"] == 3
    assert w["createdAt"] == 1.8e12 and isinstance(w["createdAt"], float)
    assert w["state"] == "failed" and w["failedReason"] == "boom"
    assert w["timeline"][0]["error"] == "boom" and w["tags"] == [] and w["repeat"] is None
    assert w["backoffConfig"] == {"type": "fixed", "delay": 5, "maxDelay": None}


def test_field_validation_accepts_float64_integers_only() -> None:
    assert as_int(5.0, "n") == 5 and opt_int({}, "n", 7) == 7 and opt_int({"n": None}, "n", 7) == 7
    for bad in (5.5, True, math.nan, math.inf, "5", None, -1, 2**60):
        with pytest.raises(ValidationError):
            as_int(bad, "n")
    assert as_bool(None, "b", True) is True
    with pytest.raises(ValidationError):
        as_bool(1, "b")
    with pytest.raises(ValidationError):
        str_list(["a", 1], "ids")


_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=20)
    | st.binary(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(
    msgs=st.lists(st.dictionaries(st.text(max_size=8), _values, max_size=5), max_size=6),
    cuts=st.lists(st.integers(1, 64), max_size=20),
)
def test_any_chunking_yields_the_same_messages(msgs: list[dict[str, Any]], cuts: list[int]) -> None:
    stream = b"".join(encode(m, exact_ints=True) for m in msgs)
    dec, got, at = FrameDecoder(), [], 0
    for cut in cuts:
        got += list(dec.feed(stream[at : at + cut]))
        at += cut
    got += list(dec.feed(stream[at:]))
    assert got == msgs


# -- bounded decode cost (issue 12, item 2) -----------------------------------------------


def _empty_arrays_body(n_inner: int) -> bytes:
    """An array of ``n_inner`` arrays of 65,535 empty arrays: the costliest bytes to decode."""
    inner = b"\xdc" + (65535).to_bytes(2, "big") + b"\x90" * 65535
    return b"\xdd" + n_inner.to_bytes(4, "big") + inner * n_inner


def test_a_large_frame_decodes_one_slice_per_step() -> None:
    from bunq.protocol import DECODE_SLICE, MORE, NEED_DATA

    msg = {
        "cmd": "PUSHB",
        "queue": "q",
        "jobs": [{"data": {"i": i, "s": "x" * 40}} for i in range(5000)],
    }
    frame = encode(msg)
    dec = FrameDecoder()
    dec.push(frame)
    steps, got = 0, MORE
    while got is MORE:
        got = dec.step()
        steps += 1
    assert got == msg and dec.step() is NEED_DATA
    assert steps >= len(frame) // DECODE_SLICE  # never the whole body in one step


def test_empty_arrays_are_refused_past_the_container_bound_in_bounded_steps() -> None:
    from bunq.protocol import DECODE_SLICE, MAX_CONTAINERS, MORE

    body = _empty_arrays_body(64)  # 4 MiB, 4 million lists if decoded
    dec = FrameDecoder()
    dec.push(len(body).to_bytes(4, "big") + body)
    steps = 0
    with pytest.raises(ProtocolError, match="arrays and maps"):
        while dec.step() is MORE:
            steps += 1
    assert steps <= MAX_CONTAINERS // DECODE_SLICE + 2  # stopped near the bound, not at 4M


def test_only_a_body_past_the_container_bound_is_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    """A body of at most MAX_CONTAINERS bytes cannot hold more containers than that, so
    it is decoded without the counting hook; a larger one is counted (and refused)."""
    from bunq import protocol

    calls = [0]
    real = protocol._Counted.__call__

    def counted(self: Any, obj: Any) -> Any:
        calls[0] += 1
        return real(self, obj)

    monkeypatch.setattr(protocol._Counted, "__call__", counted)
    jobs = [{"name": "j", "data": {"n": i, "pad": "x" * 90}} for i in range(1000)]
    small = msgpack.packb({"cmd": "PUSHB", "queue": "q", "jobs": jobs})
    assert protocol.DECODE_SLICE < len(small) <= protocol.MAX_CONTAINERS
    got = list(FrameDecoder().feed(len(small).to_bytes(4, "big") + small))
    assert got[0]["jobs"] == jobs and calls[0] == 0
    big = _empty_arrays_body(4)  # 256 KiB: over the bound in bytes and in arrays
    with pytest.raises(ProtocolError, match="arrays and maps"):
        list(FrameDecoder().feed(len(big).to_bytes(4, "big") + big))
    assert calls[0] > protocol.MAX_CONTAINERS


def test_the_buffer_grows_only_as_bytes_arrive() -> None:
    from bunq.protocol import NEED_DATA

    dec = FrameDecoder(max_frame=16 << 20)
    dec.push((16 << 20).to_bytes(4, "big") + b"\x91")  # declares 16 MiB, sends 5 bytes
    assert dec.step() is NEED_DATA and dec.pending_frame
    assert dec.buffered <= 5


def test_max_frame_can_be_raised_between_frames() -> None:
    big = encode({"cmd": "PUSH", "data": "x" * 10_000})
    dec = FrameDecoder(max_frame=4096)
    assert list(dec.feed(encode({"cmd": "Auth", "token": "t"}))) == [{"cmd": "Auth", "token": "t"}]
    dec.max_frame = 1 << 20
    assert list(dec.feed(big))[0]["data"] == "x" * 10_000
    with pytest.raises(ProtocolError):
        list(FrameDecoder(max_frame=4096).feed(big))


def test_a_large_frame_with_trailing_bytes_or_cut_short_is_a_protocol_error() -> None:
    body = msgpack.packb({"data": "x" * 50_000}) + b"\x00"
    with pytest.raises(ProtocolError, match="ExtraData"):
        list(FrameDecoder().feed(len(body).to_bytes(4, "big") + body))
    body = b"\x92" + msgpack.packb("x" * 50_000)  # an array of 2 with one element
    with pytest.raises(ProtocolError, match="truncated"):
        list(FrameDecoder().feed(len(body).to_bytes(4, "big") + body))


def test_packed_values_are_spliced_into_the_reply() -> None:
    from bunq.protocol import pack_value

    jobs = [{"id": str(i), "n": 2**40} for i in range(3)]
    frame = encode({"ok": True, "jobs": pack_value(jobs), "reqId": 2**40})
    assert list(FrameDecoder().feed(frame)) == [{"ok": True, "jobs": jobs, "reqId": float(2**40)}]
