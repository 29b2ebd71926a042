// Test-only: file checksums exactly as HDFS computes them, built from Hadoop's own classes.
// The writer's chunk CRCs (DataChecksum), the datanode's per-block digest (MD5 of the block's CRCs,
// or the block's CRCs composed), the client's combination (block MD5s into a DataOutputBuffer then
// MD5Hash.digest(getData()), or CrcComposer) and the FileChecksum classes' getBytes(), hex-encoded
// as Hive's change manager records them.
//
// usage: HdfsChecksum MD5MD5CRC|COMPOSITE_CRC CRC32|CRC32C bytesPerCRC blockSize file...
import java.io.ByteArrayInputStream;
import java.io.DataInputStream;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import org.apache.hadoop.fs.CompositeCrcFileChecksum;
import org.apache.hadoop.fs.FileChecksum;
import org.apache.hadoop.fs.MD5MD5CRC32CastagnoliFileChecksum;
import org.apache.hadoop.fs.MD5MD5CRC32GzipFileChecksum;
import org.apache.hadoop.io.DataOutputBuffer;
import org.apache.hadoop.io.MD5Hash;
import org.apache.hadoop.util.CrcComposer;
import org.apache.hadoop.util.CrcUtil;
import org.apache.hadoop.util.DataChecksum;
import org.apache.hadoop.util.StringUtils;

public class HdfsChecksum {
  public static void main(String[] args) throws Exception {
    String mode = args[0];
    DataChecksum.Type type = DataChecksum.Type.valueOf(args[1]);
    int bytesPerCrc = Integer.parseInt(args[2]);
    int blockSize = Integer.parseInt(args[3]);
    for (int i = 4; i < args.length; i++) {
      byte[] data = Files.readAllBytes(Paths.get(args[i]));
      FileChecksum sum = checksum(mode, type, bytesPerCrc, blockSize, data);
      System.out.println(StringUtils.byteToHexString(sum.getBytes(), 0, sum.getLength()));
    }
  }

  static FileChecksum checksum(String mode, DataChecksum.Type type, int bytesPerCrc, int blockSize,
                               byte[] data) throws Exception {
    if (data.length == 0) {  // a file without blocks
      return new MD5MD5CRC32GzipFileChecksum(0, 0, MD5Hash.digest(new byte[32]));
    }
    List<byte[]> blocks = new ArrayList<>();
    for (int off = 0; off < data.length; off += blockSize) {
      blocks.add(Arrays.copyOfRange(data, off, Math.min(data.length, off + blockSize)));
    }
    DataOutputBuffer blockChecksums = new DataOutputBuffer();
    long crcPerBlock = 0;
    for (int b = 0; b < blocks.size(); b++) {
      byte[] block = blocks.get(b);
      // the block's metadata file: one CRC per chunk, as the writer computes them
      DataChecksum writer = DataChecksum.newDataChecksum(type, bytesPerCrc);
      int chunks = (block.length + bytesPerCrc - 1) / bytesPerCrc;
      byte[] meta = new byte[chunks * writer.getChecksumSize()];
      writer.calculateChunkedSums(block, 0, block.length, meta, 0);
      if (blocks.size() > 1 && b == 0) {
        crcPerBlock = meta.length / writer.getChecksumSize();
      }
      if (mode.equals("MD5MD5CRC")) {
        MD5Hash.digest(new ByteArrayInputStream(meta)).write(blockChecksums);
      } else {
        CrcComposer composer = CrcComposer.newStripedCrcComposer(type, bytesPerCrc, block.length);
        DataInputStream in = new DataInputStream(new ByteArrayInputStream(meta));
        composer.update(in, block.length / bytesPerCrc, bytesPerCrc);
        if (block.length % bytesPerCrc > 0) {
          composer.update(in.readInt(), block.length % bytesPerCrc);
        }
        blockChecksums.write(composer.digest());
      }
    }
    if (mode.equals("MD5MD5CRC")) {
      MD5Hash fileMd5 = MD5Hash.digest(blockChecksums.getData());
      return type == DataChecksum.Type.CRC32
          ? new MD5MD5CRC32GzipFileChecksum(bytesPerCrc, crcPerBlock, fileMd5)
          : new MD5MD5CRC32CastagnoliFileChecksum(bytesPerCrc, crcPerBlock, fileMd5);
    }
    CrcComposer composer = CrcComposer.newCrcComposer(type, blocks.get(0).length);
    byte[] blockCrcs = blockChecksums.getData();
    for (int b = 0; b < blocks.size(); b++) {
      composer.update(CrcUtil.readInt(blockCrcs, 4 * b), blocks.get(b).length);
    }
    return new CompositeCrcFileChecksum(CrcUtil.readInt(composer.digest(), 0), type, bytesPerCrc);
  }
}
