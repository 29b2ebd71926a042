# streamer: the source agent, the target job (Spark in local mode or the driver of a spark-submit),
# the embedded metastore and the bundled warehouse, in one image.
# Install steps are the README's (scripts/setup.sh): a Java 17 JDK (`streamer hms run --notifications`
# compiles its listener with javac) and the PostgreSQL JDBC driver from
# Debian (plus libkrb5-dev and gcc to build the Kerberos module for --hms-auth kerberos), then
# `pip install -e '.[kerberos]'` of the repository into a virtualenv.
FROM python:3.11-slim-bookworm

RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jdk-headless libpostgresql-jdbc-java libkrb5-dev gcc \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/streamer
COPY . /opt/streamer
RUN python3 -m venv /opt/venv \
    && /opt/venv/bin/python -m pip install --no-cache-dir --upgrade pip \
    && /opt/venv/bin/python -m pip install --no-cache-dir -e '.[kerberos]'

# PYSPARK_PYTHON: Spark's Python workers must use the interpreter that has streamer installed.
ENV PATH=/opt/venv/bin:$PATH \
    PYSPARK_PYTHON=/opt/venv/bin/python \
    PYTHONUNBUFFERED=1

# Named volumes mounted on these directories start out owned by the streamer user.
RUN useradd --system --uid 10001 --home-dir /var/lib/streamer --create-home streamer \
    && mkdir -p /data/source /data/dr /data/replica /var/lib/streamer/state /var/lib/streamer/hms \
    && chown -R streamer /data /var/lib/streamer
USER 10001

# 9401: source agent /metrics; 9402: target job /metrics; 9083: an embedded metastore's Thrift port.
EXPOSE 9401 9402 9083
ENTRYPOINT ["streamer"]
CMD ["--help"]
