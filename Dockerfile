# One image for every kopfka process: broker, controller (`kopfka serve`), storage tooling
# (`kopfka storage ...`, the format-storage init container) and the operator (`kopfka operator`).
# BASE is overridable so the image builds without a registry (e2e/build_image.sh).
ARG BASE=python:3.12-slim
FROM ${BASE}

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VIRTUAL_ENV=/opt/kopfka \
    PATH=/opt/kopfka/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

# Optional build-time pip settings (a mirror, or a CA bundle for a TLS-intercepting proxy);
# as ARGs they reach the RUN steps' environment but are not kept in the image.
ARG PIP_INDEX_URL
ARG PIP_EXTRA_INDEX_URL
ARG PIP_CERT

# A virtualenv keeps the install independent of the base's system Python policy (PEP 668).
RUN python3 -m venv /opt/kopfka

WORKDIR /src
# README.m[d]: copied when present (the glob keeps COPY valid while it is not).
COPY pyproject.toml README.m[d] ./
COPY broker ./broker
COPY operator ./operator
# The last step starts one embedded node on loopback and stops it: the compiled dataclass methods
# it writes (kopfka.dataclass_cache) make every node's start in the image ~60 ms shorter (an image
# without them only starts slower).
RUN test -f README.md || echo "kopfka" > README.md \
 && pip install ".[operator]" \
 && cd / && rm -rf /src \
 && kopfka --help > /dev/null \
 && (python -m kopfka.dataclass_cache || echo "kopfka: dataclass method cache not warmed")

# Non-root; uid/gid 1000 match the pods' securityContext and fsGroup.
RUN groupadd --gid 1000 kopfka \
 && useradd --uid 1000 --gid 1000 --home-dir /var/lib/kopfka --no-create-home --shell /usr/sbin/nologin kopfka \
 && mkdir -p /var/lib/kopfka /etc/kopfka \
 && chown kopfka:kopfka /var/lib/kopfka
USER 1000:1000
WORKDIR /var/lib/kopfka

EXPOSE 9092 9093 8080
ENTRYPOINT ["kopfka"]
CMD ["serve"]
