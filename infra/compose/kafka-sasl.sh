#!/usr/bin/env bash
# Entry point of the compose Kafka: one KRaft node with SASL/SCRAM-SHA-512 and ACLs, the same
# set-up as infra/broker.py's LocalKafka(security="scram") (see docs/SECURITY.md).
#
# Users are created when the storage is formatted (first start only); their passwords come from
# the environment (.env next to docker-compose.yml). The controller listener uses SASL/PLAIN with
# a static user: a KRaft controller cannot use SCRAM, whose credentials live in the metadata it
# serves. Inside the compose network the listeners are SASL_PLAINTEXT; see docs/SECURITY.md for
# SASL_SSL when brokers and clients are on different machines.
set -euo pipefail

: "${CLUSTER_ID:?}" "${KAFKA_ADMIN_PASSWORD:?}" "${KAFKA_SERVICE_PASSWORD:?}"
: "${KAFKA_CLIENT_PASSWORD:?}" "${KAFKA_BROKER_PASSWORD:?}" "${KAFKA_CONTROLLER_PASSWORD:?}"

DATA=/var/lib/kafka/data
CONF=/var/lib/kafka/server.properties
ADMIN_CONF=/var/lib/kafka/admin.properties
umask 077

cat >"$CONF" <<PROPERTIES
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@kafka:9093
controller.listener.names=CONTROLLER
listeners=SASL://:9092,CONTROLLER://:9093,HOST://:29092
advertised.listeners=SASL://kafka:9092,HOST://127.0.0.1:29092
listener.security.protocol.map=SASL:SASL_PLAINTEXT,HOST:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT
inter.broker.listener.name=SASL
sasl.enabled.mechanisms=SCRAM-SHA-512
sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512
listener.name.sasl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="hindsight-broker" password="${KAFKA_BROKER_PASSWORD}";
listener.name.host.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
sasl.mechanism.controller.protocol=PLAIN
listener.name.controller.sasl.enabled.mechanisms=PLAIN
listener.name.controller.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="hindsight-controller" password="${KAFKA_CONTROLLER_PASSWORD}" user_hindsight-controller="${KAFKA_CONTROLLER_PASSWORD}";
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:hindsight-admin;User:hindsight-broker;User:hindsight-controller
allow.everyone.if.no.acl.found=false
log.dirs=${DATA}
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=false
# An erase's destroyed data keys leave the segment files soon after they roll (docs/ERASURE.md):
# the cleaner looks every second, not every 15.
log.cleaner.backoff.ms=1000
PROPERTIES

cat >"$ADMIN_CONF" <<PROPERTIES
security.protocol=SASL_PLAINTEXT
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="hindsight-admin" password="${KAFKA_ADMIN_PASSWORD}";
PROPERTIES

if [[ ! -f "$DATA/meta.properties" ]]; then
    /opt/kafka/bin/kafka-storage.sh format --cluster-id "$CLUSTER_ID" --config "$CONF" \
        --add-scram "SCRAM-SHA-512=[name=hindsight-admin,password=${KAFKA_ADMIN_PASSWORD}]" \
        --add-scram "SCRAM-SHA-512=[name=hindsight-service,password=${KAFKA_SERVICE_PASSWORD}]" \
        --add-scram "SCRAM-SHA-512=[name=hindsight-client,password=${KAFKA_CLIENT_PASSWORD}]" \
        --add-scram "SCRAM-SHA-512=[name=hindsight-broker,password=${KAFKA_BROKER_PASSWORD}]"
fi
exec /opt/kafka/bin/kafka-server-start.sh "$CONF"
