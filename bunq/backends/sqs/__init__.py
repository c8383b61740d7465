"""The Amazon SQS backend (``sqs://``; extra ``sqs``). See docs/sqs.md.

- :class:`SQSBackend`: the Backend contract over SQS queues.
- :func:`translate_errors`: botocore errors to bunq errors, once.
- :func:`decode_record`, :func:`prepare_record`, :func:`apply_decision`: the SQS side
  of a Lambda SQS event source (the driver is :mod:`bunq.sqs_events`).
"""

from __future__ import annotations

from .backend import CAPABILITIES, SQSBackend
from .client import translate_errors
from .codec import decode_body, decode_record, encode_body
from .config import SqsConfig, parse_url
from .events import Prepared, apply_decision, prepare_record, url_for_arn

__all__ = ["CAPABILITIES", "Prepared", "SQSBackend", "SqsConfig", "apply_decision", "decode_body",
           "decode_record", "encode_body", "parse_url", "prepare_record", "translate_errors",
           "url_for_arn"]  # fmt: skip
