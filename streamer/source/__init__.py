"""The source agent: reads a metastore's notification log and publishes it to Kafka, in order, once."""
