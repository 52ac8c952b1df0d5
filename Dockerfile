# StreamApp image: the runtime (`streamapp`) and the operator (`streamapp-operator`, i.e. `kopf run -m
# streamapp_operator.main`) in one Python 3.11 venv on a Debian bookworm base.
#
# Build it with hack/image/build.sh, not from the repo root: nothing can be pulled and pip cannot reach the
# package index inside the build, so the script
#   - makes the base image locally (debootstrap --variant=minbase + podman import) and passes it as BASE_IMAGE;
#   - builds a wheelhouse outside the build and lays out the build context (.cache/image-context/):
#       requirements.txt   third-party pins with hashes, exported from uv.lock
#       wheels/deps/       their cp311 manylinux / pure-Python wheels
#       wheels/project/    streamapp-runtime, streamapp-operator, streamapp-example-flights
#       bin/               entrypoint scripts (hack/image/bin/)
#   - runs `podman build --isolation=chroot --pull=never --build-arg BASE_IMAGE=... -f Dockerfile <context>`.
# All stages share the base, so the venv's interpreter symlinks stay valid when the venv is copied.
# Layers: the third-party venv changes only with uv.lock; a change of our sources rewrites a few hundred KiB.

ARG BASE_IMAGE=localhost/streamapp-base:bookworm
# the replay target's base: BASE_IMAGE plus a Java runtime (hack/image/replay-base.sh)
ARG REPLAY_BASE_IMAGE=localhost/streamapp-replay-base:bookworm

# --- deps: a venv with the pinned third-party packages only -------------------------------------------------
FROM ${BASE_IMAGE} AS deps
ENV PIP_NO_INDEX=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python3 -m venv /opt/streamapp/venv
COPY requirements.txt /tmp/build/requirements.txt
COPY wheels/deps/ /tmp/build/wheels/deps/
RUN /opt/streamapp/venv/bin/pip install --quiet --no-index --no-cache-dir --require-hashes \
        --find-links /tmp/build/wheels/deps -r /tmp/build/requirements.txt

# --- app: our three distributions, as a tree to lay over the deps venv -----------------------------------------
FROM deps AS app
COPY wheels/project/ /tmp/build/wheels/project/
# 1. the overlay: only our files (packages, dist-info, console scripts) under /tmp/build/app/opt/streamapp/venv;
# 2. a normal install resolved against the wheelhouse, so that `pip check` fails the build on a missing dependency.
RUN /opt/streamapp/venv/bin/pip install --quiet --no-index --no-cache-dir --no-deps --ignore-installed \
        --no-warn-script-location --root /tmp/build/app /tmp/build/wheels/project/*.whl \
    && /opt/streamapp/venv/bin/pip install --quiet --no-index --no-cache-dir \
        --find-links /tmp/build/wheels/deps --find-links /tmp/build/wheels/project \
        /tmp/build/wheels/project/*.whl \
    && /opt/streamapp/venv/bin/pip check

# --- replay: the StreamReplay Jobs' image (hack/image/build-replay.sh, `--target replay`) -----------------------
# The streaming image plus the runtime's `replay` extra (pyspark) and a Java runtime
# (openjdk-17-jre-headless, installed into REPLAY_BASE_IMAGE by hack/image/replay-base.sh outside the build). A
# separate target, so the streaming image stays without Java and Spark. Its stages are built only for this target.
FROM ${REPLAY_BASE_IMAGE} AS replay-deps
ENV PIP_NO_INDEX=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python3 -m venv /opt/streamapp/venv
COPY requirements-replay.txt /tmp/build/requirements.txt
COPY wheels/deps/ /tmp/build/wheels/deps/
COPY wheels/replay/ /tmp/build/wheels/deps/
RUN /opt/streamapp/venv/bin/pip install --quiet --no-index --no-cache-dir --require-hashes \
        --find-links /tmp/build/wheels/deps -r /tmp/build/requirements.txt

FROM ${REPLAY_BASE_IMAGE} AS replay
RUN groupadd --gid 10001 streamapp \
    && useradd --uid 10001 --gid 10001 --no-log-init --home-dir /var/lib/streamapp --no-create-home \
        --shell /usr/sbin/nologin streamapp \
    && install -d -o 10001 -g 10001 -m 0750 /var/lib/streamapp \
    && find / -xdev -perm /6000 -type f -exec chmod a-s {} +
COPY --from=replay-deps /opt/streamapp/venv /opt/streamapp/venv
COPY --from=app /tmp/build/app/ /
COPY --chmod=0755 bin/ /opt/streamapp/venv/bin/
ENV VIRTUAL_ENV=/opt/streamapp/venv \
    PATH=/opt/streamapp/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    LANG=C.UTF-8 \
    JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64
WORKDIR /var/lib/streamapp
USER 10001:10001
ENTRYPOINT ["streamapp"]
CMD ["replay", "run", "--help"]

# --- final ----------------------------------------------------------------------------------------------------
FROM ${BASE_IMAGE}
# uid/gid 10001, and a numeric USER below so that Kubernetes' runAsNonRoot can verify it. No setuid or setgid
# file stays (su, mount, passwd, ...): nothing in the image can gain privileges, whatever the pod allows.
RUN groupadd --gid 10001 streamapp \
    && useradd --uid 10001 --gid 10001 --no-log-init --home-dir /var/lib/streamapp --no-create-home \
        --shell /usr/sbin/nologin streamapp \
    && install -d -o 10001 -g 10001 -m 0750 /var/lib/streamapp \
    && find / -xdev -perm /6000 -type f -exec chmod a-s {} +
COPY --from=deps /opt/streamapp/venv /opt/streamapp/venv
COPY --from=app /tmp/build/app/ /
COPY --chmod=0755 bin/ /opt/streamapp/venv/bin/
ENV VIRTUAL_ENV=/opt/streamapp/venv \
    PATH=/opt/streamapp/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    LANG=C.UTF-8
WORKDIR /var/lib/streamapp
USER 10001:10001
# 8080: /healthz, /readyz, /metrics, /status of the runtime.
EXPOSE 8080
ENTRYPOINT ["streamapp"]
CMD ["--help"]

# Last, so that a new revision rewrites only metadata.
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG BASE_IMAGE
LABEL org.opencontainers.image.title="streamapp" \
      org.opencontainers.image.description="StreamApp runtime (streamapp) and Kubernetes operator (streamapp-operator)" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.base.name="${BASE_IMAGE}" \
      io.streamapp.entrypoints="streamapp streamapp-operator"
