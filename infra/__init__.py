"""The local Kafka runtime: Maven-resolved broker jars and KRaft brokers started from Python."""
