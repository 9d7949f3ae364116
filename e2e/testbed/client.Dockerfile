# The test bed's client pods: the kopfka image plus the Kafka clients the e2e tests run inside
# the cluster network (confluent-kafka and its kafkatest verifiable producer/consumer,
# kafka-python, kcat). Built by e2e/testbed/images.py on top of the kopfka image, from the
# repository root (for the kafkatest runner the replication tests use too).
ARG BASE
FROM ${BASE}
USER 0
ARG PIP_CERT
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends kcat \
 && rm -rf /var/lib/apt/lists/* \
 && pip install "confluent-kafka==2.16.1" "kafka-python==3.0.12"
COPY tests/replication/kafkatest_run.py /opt/kafkatest/kafkatest_run.py
USER 1000:1000
ENTRYPOINT []
CMD ["sleep", "infinity"]
