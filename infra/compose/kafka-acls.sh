#!/usr/bin/env bash
# One shot (compose service acls-init): the ACLs of topics/acls.py for topic prefix "" and app id
# hindsight-worker, created as the super user. tests/unit/test_kafka_acls.py checks that these
# lines are exactly what acl_rules() renders, so the two cannot drift apart.
set -euo pipefail
: "${KAFKA_ADMIN_PASSWORD:?}"
umask 077
CONF=$(mktemp)
cat >"$CONF" <<PROPERTIES
security.protocol=SASL_PLAINTEXT
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="hindsight-admin" password="${KAFKA_ADMIN_PASSWORD}";
PROPERTIES
ACLS=(/opt/kafka/bin/kafka-acls.sh --bootstrap-server kafka:9092 --command-config "$CONF")
"${ACLS[@]}" --add --force --allow-principal User:hindsight-service --operation Read --operation Write --operation Describe --operation DescribeConfigs --topic hindsight. --resource-pattern-type prefixed
"${ACLS[@]}" --add --force --allow-principal User:hindsight-service --operation All --topic hindsight-worker --group hindsight-worker --transactional-id hindsight-worker --resource-pattern-type prefixed
"${ACLS[@]}" --add --force --deny-principal User:hindsight-service --operation Write --topic hindsight.keys.v1 --resource-pattern-type literal
"${ACLS[@]}" --add --force --allow-principal User:hindsight-client --operation Write --operation Describe --topic hindsight.events.v1 --topic hindsight.data-keys.v1 --resource-pattern-type literal
