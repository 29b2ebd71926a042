/*
 * streamer's notification listener for the Hive 2.3 metastore in PySpark's jars.
 *
 * PySpark ships Hive's metastore without hive-hcatalog-server-extensions, so an embedded metastore
 * has no listener that writes NOTIFICATION_LOG. This one does: for every metastore change it builds
 * the message with the metastore's own MessageFactory (JSON, format "json-0.2" on Hive 2.3) and
 * stores a NotificationEvent through the handler's RawStore, which assigns the next event id from
 * NOTIFICATION_SEQUENCE. Registered in hive.metastore.transactional.event.listeners it runs inside
 * the metastore transaction of the change: the change and its event commit (or roll back) together.
 *
 * Files: CREATE_TABLE and ADD_PARTITION list the data files already under the new location
 * (non-recursive, hidden "_"/"." names skipped); INSERT carries the files of the
 * fire_listener_event request, each as "uri" or "uri#checksum" when the writer sent a checksum.
 * Hive 2.3 has no ALTER_DATABASE event: its listener interface has no such callback.
 *
 * Built by streamer.embedded_metastore.listener (javac against PySpark's jars) when a metastore is started with
 * notifications on.
 */
package streamer.hms;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Iterator;
import java.util.List;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hive.metastore.HiveMetaStore.HMSHandler;
import org.apache.hadoop.hive.metastore.MetaStoreEventListener;
import org.apache.hadoop.hive.metastore.RawStore;
import org.apache.hadoop.hive.metastore.Warehouse;
import org.apache.hadoop.hive.metastore.api.MetaException;
import org.apache.hadoop.hive.metastore.api.NotificationEvent;
import org.apache.hadoop.hive.metastore.api.Partition;
import org.apache.hadoop.hive.metastore.api.Table;
import org.apache.hadoop.hive.metastore.events.AddIndexEvent;
import org.apache.hadoop.hive.metastore.events.AddPartitionEvent;
import org.apache.hadoop.hive.metastore.events.AlterIndexEvent;
import org.apache.hadoop.hive.metastore.events.AlterPartitionEvent;
import org.apache.hadoop.hive.metastore.events.AlterTableEvent;
import org.apache.hadoop.hive.metastore.events.CreateDatabaseEvent;
import org.apache.hadoop.hive.metastore.events.CreateFunctionEvent;
import org.apache.hadoop.hive.metastore.events.CreateTableEvent;
import org.apache.hadoop.hive.metastore.events.DropDatabaseEvent;
import org.apache.hadoop.hive.metastore.events.DropFunctionEvent;
import org.apache.hadoop.hive.metastore.events.DropIndexEvent;
import org.apache.hadoop.hive.metastore.events.DropPartitionEvent;
import org.apache.hadoop.hive.metastore.events.DropTableEvent;
import org.apache.hadoop.hive.metastore.events.InsertEvent;
import org.apache.hadoop.hive.metastore.events.ListenerEvent;
import org.apache.hadoop.hive.metastore.messaging.EventMessage;
import org.apache.hadoop.hive.metastore.messaging.MessageFactory;
import org.apache.hadoop.hive.metastore.messaging.PartitionFiles;

public class StreamerNotificationListener extends MetaStoreEventListener {

  private final MessageFactory messages = MessageFactory.getInstance();

  public StreamerNotificationListener(Configuration conf) {
    super(conf);
  }

  // --- databases -------------------------------------------------------------------------------

  @Override
  public void onCreateDatabase(CreateDatabaseEvent event) throws MetaException {
    if (!event.getStatus()) return;
    log(event, MessageFactory.CREATE_DATABASE_EVENT, event.getDatabase().getName(), null,
        messages.buildCreateDatabaseMessage(event.getDatabase()));
  }

  @Override
  public void onDropDatabase(DropDatabaseEvent event) throws MetaException {
    if (!event.getStatus()) return;
    log(event, MessageFactory.DROP_DATABASE_EVENT, event.getDatabase().getName(), null,
        messages.buildDropDatabaseMessage(event.getDatabase()));
  }

  // --- tables ----------------------------------------------------------------------------------

  @Override
  public void onCreateTable(CreateTableEvent event) throws MetaException {
    if (!event.getStatus()) return;
    Table table = event.getTable();
    log(event, MessageFactory.CREATE_TABLE_EVENT, table.getDbName(), table.getTableName(),
        messages.buildCreateTableMessage(table, filesUnder(table.getSd().getLocation()).iterator()));
  }

  @Override
  public void onAlterTable(AlterTableEvent event) throws MetaException {
    if (!event.getStatus()) return;
    Table after = event.getNewTable();
    // the row names the table after the change (a rename's new name); the message has both
    log(event, MessageFactory.ALTER_TABLE_EVENT, after.getDbName(), after.getTableName(),
        messages.buildAlterTableMessage(event.getOldTable(), after));
  }

  @Override
  public void onDropTable(DropTableEvent event) throws MetaException {
    if (!event.getStatus()) return;
    Table table = event.getTable();
    log(event, MessageFactory.DROP_TABLE_EVENT, table.getDbName(), table.getTableName(),
        messages.buildDropTableMessage(table));
  }

  // --- partitions ------------------------------------------------------------------------------

  @Override
  public void onAddPartition(AddPartitionEvent event) throws MetaException {
    if (!event.getStatus()) return;
    Table table = event.getTable();
    List<Partition> partitions = new ArrayList<>();
    List<PartitionFiles> files = new ArrayList<>();
    Iterator<Partition> it = event.getPartitionIterator();
    while (it.hasNext()) {
      Partition p = it.next();
      partitions.add(p);
      String name = Warehouse.makePartName(table.getPartitionKeys(), p.getValues());
      files.add(new PartitionFiles(name, filesUnder(p.getSd().getLocation()).iterator()));
    }
    log(event, MessageFactory.ADD_PARTITION_EVENT, table.getDbName(), table.getTableName(),
        messages.buildAddPartitionMessage(table, partitions.iterator(), files.iterator()));
  }

  @Override
  public void onAlterPartition(AlterPartitionEvent event) throws MetaException {
    if (!event.getStatus()) return;
    Table table = event.getTable();
    log(event, MessageFactory.ALTER_PARTITION_EVENT, table.getDbName(), table.getTableName(),
        messages.buildAlterPartitionMessage(table, event.getOldPartition(), event.getNewPartition()));
  }

  @Override
  public void onDropPartition(DropPartitionEvent event) throws MetaException {
    if (!event.getStatus()) return;
    Table table = event.getTable();
    log(event, MessageFactory.DROP_PARTITION_EVENT, table.getDbName(), table.getTableName(),
        messages.buildDropPartitionMessage(table, event.getPartitionIterator()));
  }

  // --- data written by a client (fire_listener_event) ------------------------------------------

  @Override
  public void onInsert(InsertEvent event) throws MetaException {
    if (!event.getStatus()) return;
    List<String> files = event.getFiles();
    List<String> sums = event.getFileChecksums();
    List<String> encoded = new ArrayList<>();
    for (int i = 0; i < files.size(); i++) {
      String sum = sums != null && i < sums.size() ? sums.get(i) : null;
      encoded.add(sum == null || sum.isEmpty() ? files.get(i) : files.get(i) + "#" + sum);
    }
    log(event, MessageFactory.INSERT_EVENT, event.getDb(), event.getTable(),
        messages.buildInsertMessage(event.getDb(), event.getTable(), event.getPartitionKeyValues(),
            encoded.iterator()));
  }

  // --- functions and indexes -------------------------------------------------------------------

  @Override
  public void onCreateFunction(CreateFunctionEvent event) throws MetaException {
    if (!event.getStatus()) return;
    log(event, MessageFactory.CREATE_FUNCTION_EVENT, event.getFunction().getDbName(), null,
        messages.buildCreateFunctionMessage(event.getFunction()));
  }

  @Override
  public void onDropFunction(DropFunctionEvent event) throws MetaException {
    if (!event.getStatus()) return;
    log(event, MessageFactory.DROP_FUNCTION_EVENT, event.getFunction().getDbName(), null,
        messages.buildDropFunctionMessage(event.getFunction()));
  }

  @Override
  public void onAddIndex(AddIndexEvent event) throws MetaException {
    if (!event.getStatus()) return;
    log(event, MessageFactory.CREATE_INDEX_EVENT, event.getIndex().getDbName(), null,
        messages.buildCreateIndexMessage(event.getIndex()));
  }

  @Override
  public void onAlterIndex(AlterIndexEvent event) throws MetaException {
    if (!event.getStatus()) return;
    log(event, MessageFactory.ALTER_INDEX_EVENT, event.getNewIndex().getDbName(), null,
        messages.buildAlterIndexMessage(event.getOldIndex(), event.getNewIndex()));
  }

  @Override
  public void onDropIndex(DropIndexEvent event) throws MetaException {
    if (!event.getStatus()) return;
    log(event, MessageFactory.DROP_INDEX_EVENT, event.getIndex().getDbName(), null,
        messages.buildDropIndexMessage(event.getIndex()));
  }

  // --- the log ---------------------------------------------------------------------------------

  private void log(ListenerEvent event, String type, String db, String table, EventMessage message)
      throws MetaException {
    NotificationEvent row = new NotificationEvent(0L, (int) (System.currentTimeMillis() / 1000L),
        type, message.toString());
    row.setMessageFormat(messages.getMessageFormat());
    row.setDbName(db);
    if (table != null) row.setTableName(table);
    RawStore store = ((HMSHandler) event.getHandler()).getMS();
    store.addNotificationEvent(row);  // the store assigns the event id, in the change's transaction
  }

  /** The data files directly under {@code location}; none when it is unset or does not exist. */
  private List<String> filesUnder(String location) throws MetaException {
    if (location == null || location.isEmpty()) return Collections.emptyList();
    Path dir = new Path(location);
    List<String> out = new ArrayList<>();
    try {
      FileSystem fs = dir.getFileSystem(getConf());
      for (FileStatus st : fs.listStatus(dir)) {
        String name = st.getPath().getName();
        if (st.isFile() && !name.startsWith("_") && !name.startsWith(".")) {
          out.add(st.getPath().toUri().toString());
        }
      }
    } catch (FileNotFoundException e) {
      return Collections.emptyList();
    } catch (IOException e) {
      throw new MetaException("cannot list the files of " + location + ": " + e);
    }
    Collections.sort(out);
    return out;
  }
}
