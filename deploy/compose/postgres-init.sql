-- One PostgreSQL server for the compose stack: the source metastore database (the bundled
-- warehouse, whose NOTIFICATION_LOG the agent reads) and one metastore database per target.
CREATE DATABASE source;
CREATE DATABASE hms_dr;
CREATE DATABASE hms_replica;
