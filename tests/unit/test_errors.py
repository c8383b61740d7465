from __future__ import annotations

import pytest

import bunq.errors as e


def test_every_error_has_a_unique_stable_code() -> None:
    codes = [cls.code for cls in e.BunqError._by_code.values()]
    assert len(codes) == len(set(codes))
    assert e.BunqError._by_code["duplicate_job"] is e.DuplicateJob
    assert e.BunqError._by_code["backend_unavailable"] is e.BackendUnavailable


def test_a_subclass_without_its_own_code_is_refused_at_import() -> None:
    with pytest.raises(TypeError, match="duplicate error code"):

        class Oops(e.ConfigError):  # inherits "config"
            pass


def test_wire_roundtrip_rebuilds_the_same_class_and_data() -> None:
    err = e.PayloadTooLarge("too big", size=10, limit=5)
    back = e.BunqError.from_wire(err.to_wire())
    assert type(back) is e.PayloadTooLarge and str(back) == "too big"
    assert back.data == {"size": 10, "limit": 5}
    assert isinstance(back, ValueError)  # builtin mix-in survives
    assert type(e.BunqError.from_wire({"code": "no_such", "message": "m"})) is e.BunqError
    assert str(e.BunqError.from_wire("plain text")) == "plain text"


def test_builtin_mixins_match_meaning() -> None:
    assert issubclass(e.ConfigError, ValueError)
    assert issubclass(e.JobNotFound, LookupError)
    assert issubclass(e.UnsupportedError, NotImplementedError)
    err = e.UnsupportedError("sqs", "priority")
    assert err.data == {"backend": "sqs", "feature": "priority"} and "sqs" in str(err)


def test_handler_signals_are_not_bunq_errors() -> None:
    for signal in (e.Retry, e.DelayedError, e.UnrecoverableError):
        assert not issubclass(signal, e.BunqError)
