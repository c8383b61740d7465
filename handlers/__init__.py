"""Platform adapters around :func:`bunq.tick.tick`: AWS Lambda and Google Cloud.

Deployed beside the ``bunq`` package (``template.yaml``: ``CodeUri: .``); the
handler names are ``handlers.aws_lambda.handler``,
``handlers.aws_lambda.sqs_handler``, ``handlers.gcp.tick_http``,
``handlers.gcp.tick_event`` and ``handlers.gcp.main``.
"""

from __future__ import annotations
