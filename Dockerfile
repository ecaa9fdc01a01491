# The evaluation image named by competition.yaml's docker_image: Python, uv, the
# challenge-welding package and its pinned dependencies (challenge-welding/requirements.lock),
# and the system libraries of opencv-python (libGL, glib), which submissions often pin
# instead of the headless build. The Codabench programs mount at /app/program and also
# carry their own copy of the package (vendor/), so this image only has to provide the
# dependencies and Python.
#
#   docker build -t challengewelding/evaluator:1.1.0 .                         # for Codabench (root)
#   docker build --build-arg APP_USER=welder -t challenge-welding-eval .       # local, non-root
#
# Why root by default: Codabench's compute worker creates /app/output (and the other
# mounted folders) as the worker's user with mode 0755 and starts the container with
# the image's user, so a non-root user cannot write there and every submission fails
# (`challenge-welding dry-run` shows it). The worker drops 14 capabilities (CHOWN,
# DAC_OVERRIDE, FOWNER, SETUID, ...) and sets no-new-privileges; the submission itself
# runs in a child process in its own virtual environment.
ARG BASE_IMAGE=python:3.12-slim
FROM ${BASE_IMAGE}

ARG APP_USER=root
ARG APP_UID=1000

# SSL_CERT_FILE: pip (PIP_CERT) and uv read the system bundle, so a CA mounted over it
# at build or run time (a proxy's) is trusted. XDG_CACHE_HOME / UV_CACHE_DIR: the
# per-submission environment cache, writable by any user the container runs as.
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
    PIP_CERT=/etc/ssl/certs/ca-certificates.crt \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    XDG_CACHE_HOME=/var/cache/challenge-welding \
    UV_CACHE_DIR=/var/cache/challenge-welding/uv \
    UV_LINK_MODE=copy \
    MPLCONFIGDIR=/tmp/matplotlib

# opencv-python (not headless) needs libGL.so.1 and libgthread/glib at import time.
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libgl1 libglib2.0-0 \
 && rm -rf /var/lib/apt/lists/*

# python3 -m venv must work: it builds /opt/venv here, and it is ingestion's fallback
# when uv is missing (the Debian base images need python3-venv for that).
COPY challenge-welding/requirements.lock /tmp/requirements.lock
RUN python3 -m venv /opt/venv \
 && /opt/venv/bin/pip install --quiet "$(grep '^uv==' /tmp/requirements.lock)" \
 && uv pip install --quiet --no-cache --python /opt/venv/bin/python -r /tmp/requirements.lock

COPY challenge-welding /src/challenge-welding
RUN uv pip install --quiet --no-cache --no-deps --python /opt/venv/bin/python /src/challenge-welding \
 && rm -rf /src/challenge-welding /tmp/requirements.lock \
 && challenge-welding --version \
 && python -c "import cv2, numpy, pandas, pyarrow, scipy, sklearn, matplotlib, jinja2, yaml"

RUN mkdir -p /var/cache/challenge-welding/uv /app/program /app/output \
 && chmod 1777 /var/cache/challenge-welding /var/cache/challenge-welding/uv \
 && if [ "${APP_USER}" != "root" ]; then \
        useradd --create-home --uid "${APP_UID}" --shell /bin/sh "${APP_USER}" \
     && chown -R "${APP_USER}" /app; \
    fi

USER ${APP_USER}
WORKDIR /app/program
CMD ["challenge-welding", "--help"]
