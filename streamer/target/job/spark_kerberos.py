"""Kerberos for Spark's own metastore client in the target job's driver: the Spark settings and the
JVM's login (the job's Thrift clients authenticate through ``streamer.metastore.transport``)."""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any

from streamer.metastore.transport import HmsAuth

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


def spark_kerberos_conf(auth: HmsAuth) -> dict[str, str]:
    """Spark settings for a Kerberos metastore (Hive's own client keys).

    Not ``spark.kerberos.keytab``: in local mode it makes Spark's token manager log in before the
    JVM knows ``KRB5_CONFIG`` (a failed login logged at start); ``jvm_kerberos_login`` logs in.
    Under spark-submit on a cluster manager, pass ``--principal``/``--keytab`` as Spark documents.
    """
    if not auth.kerberos:
        return {}
    assert auth.principal is not None  # checked by HmsAuth
    return {
        "spark.hadoop.hive.metastore.sasl.enabled": "true",
        "spark.hadoop.hive.metastore.kerberos.principal": auth.principal,
        # Hadoop's UserGroupInformation hands Kerberos credentials to the metastore client only
        # when security is on; it then reads the ticket cache or logs in from the keytab, and
        # renews a keytab login before its ticket expires.
        "spark.hadoop.hadoop.security.authentication": "kerberos",
        "spark.hadoop.hadoop.kerberos.keytab.login.autorenewal.enabled": "true",
    }


def jvm_kerberos_login(spark: SparkSession, auth: HmsAuth) -> None:
    """Log the driver's JVM in before its Hive client first connects.

    Hadoop's ``UserGroupInformation`` reads its own configuration (core-site.xml), not Spark's
    ``spark.hadoop.*``, so in a driver PySpark started itself security stays off and spark-submit's
    keytab login is skipped silently: the metastore client then has no Kerberos credentials. Java
    also ignores ``KRB5_CONFIG``; it is handed over as ``java.security.krb5.conf``.
    """
    jvm: Any = spark.sparkContext._jvm
    system = jvm.java.lang.System
    krb5_config = os.environ.get("KRB5_CONFIG")
    if krb5_config and system.getProperty("java.security.krb5.conf") is None:
        system.setProperty("java.security.krb5.conf", krb5_config)
        # Spark has read the default krb5.conf already; Spark opens this package to reflection
        jvm.sun.security.krb5.Config.refresh()
    ugi = jvm.org.apache.hadoop.security.UserGroupInformation
    ugi.setConfiguration(spark.sparkContext._jsc.hadoopConfiguration())
    if auth.client_keytab and auth.client_principal:
        ugi.loginUserFromKeytab(auth.client_principal, os.path.abspath(auth.client_keytab))
    log.info("Spark's metastore client authenticates as %s", ugi.getLoginUser().getUserName())
