"""The embedded Hive Metastore: Hive 2.3's server from PySpark's jars, run as a Java subprocess."""
