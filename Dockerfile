# syntax=docker/dockerfile:1
# bunq's image: `bunq serve` by default; `bunq worker`/`bunq tick` with other args.
# Multi-stage: the wheel (compiled core) is built in the first stage, the runtime image
# installs only the wheel and its dependencies and runs as a non-root user.
#   docker build -t bunq:latest .
#   docker run -p 6789:6789 -p 6790:6790 -v bunq-data:/data bunq:latest
# Your own jobs: FROM this image, COPY your package, and run `bunq worker QUEUE --handler`.

ARG PYTHON=3.12

FROM python:${PYTHON}-slim AS build
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc libc6-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml setup.py MANIFEST.in README.md LICENSE CHANGELOG.md ./
COPY bunq ./bunq
RUN BUNQ_REQUIRE_COMPILED=1 pip wheel --no-cache-dir --wheel-dir /wheels ".[postgres,sqs]"

FROM python:${PYTHON}-slim
LABEL org.opencontainers.image.title="bunq" \
      org.opencontainers.image.description="A durable job queue for Python" \
      org.opencontainers.image.licenses="MIT"
RUN useradd --uid 10001 --user-group --no-create-home --home-dir /data bunq \
 && mkdir -p /data && chown 10001:10001 /data
COPY --from=build /wheels /wheels
# --no-index: only the wheels built above, so the versions are those of this build
# hadolint ignore=DL3013
RUN pip install --no-cache-dir --no-index --find-links /wheels "bunq-queue[postgres,sqs]" \
 && rm -rf /wheels \
 && python -c "import bunq._core as c; assert c.IMPLEMENTATION == 'cython'"
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    BUNQ_HOST=0.0.0.0 \
    BUNQ_DATA_PATH=/data/bunq-data.db \
    BUNQ_LOG_FORMAT=json
USER 10001:10001
WORKDIR /data
VOLUME ["/data"]
EXPOSE 6789 6790
ENTRYPOINT ["bunq"]
CMD ["serve"]
