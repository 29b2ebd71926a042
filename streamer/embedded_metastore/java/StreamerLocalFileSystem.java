package streamer.hms;

import java.io.DataInput;
import java.io.DataOutput;
import java.io.File;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.attribute.PosixFileAttributes;
import java.nio.file.attribute.PosixFilePermission;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileChecksum;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Hadoop's local filesystem without subprocesses, for the embedded metastore's {@code file://}.
 *
 * <p>Without Hadoop's native library (PySpark's jars have none) the local filesystem runs
 * {@code chmod} for every permission it sets and {@code ls -ld} for every permission it reads:
 * a CREATE TABLE or ADD PARTITION starts several processes, which on a small machine cost more
 * than the metastore call itself (and a production metastore, with the native library or on
 * HDFS, never pays them). Permissions go through {@code java.nio} here instead; everything else,
 * checksums included, is Hadoop's. The sticky bit is not set ({@code java.nio} has no call for it).
 *
 * <p>With {@code streamer.fs.file.checksum=MD5} a file's {@code getFileChecksum} is the MD5 of its
 * bytes (Hadoop's local filesystem has none): Hive's change manager names each file it keeps in
 * cmroot by that checksum and fails on a file without one.
 */
public class StreamerLocalFileSystem extends LocalFileSystem {

  public StreamerLocalFileSystem() {
    super(new Raw());
  }

  /** The raw (checksum-less) part, which the checksummed {@link LocalFileSystem} wraps. */
  public static class Raw extends RawLocalFileSystem {

    /** Configuration key; {@code MD5} turns on {@link #getFileChecksum(Path, long)}. */
    public static final String CHECKSUM_KEY = "streamer.fs.file.checksum";

    private static final PosixFilePermission[] BITS = {
      PosixFilePermission.OTHERS_EXECUTE, PosixFilePermission.OTHERS_WRITE,
      PosixFilePermission.OTHERS_READ, PosixFilePermission.GROUP_EXECUTE,
      PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_READ,
      PosixFilePermission.OWNER_EXECUTE, PosixFilePermission.OWNER_WRITE,
      PosixFilePermission.OWNER_READ,
    };

    static Set<PosixFilePermission> toPosix(FsPermission permission) {
      short mode = permission.toShort();
      Set<PosixFilePermission> out = EnumSet.noneOf(PosixFilePermission.class);
      for (int i = 0; i < BITS.length; i++) {
        if ((mode & (1 << i)) != 0) {
          out.add(BITS[i]);
        }
      }
      return out;
    }

    static FsPermission fromPosix(Set<PosixFilePermission> permissions) {
      int mode = 0;
      for (int i = 0; i < BITS.length; i++) {
        if (permissions.contains(BITS[i])) {
          mode |= 1 << i;
        }
      }
      return new FsPermission((short) mode);
    }

    @Override
    public void setPermission(Path p, FsPermission permission) throws IOException {
      try {
        Files.setPosixFilePermissions(pathToFile(p).toPath(), toPosix(permission));
      } catch (NoSuchFileException e) {
        throw new FileNotFoundException("File " + p + " does not exist");
      }
    }

    @Override
    public FileStatus getFileStatus(Path f) throws IOException {
      return status(f, pathToFile(f), true);
    }

    @Override
    public FileStatus getFileLinkStatus(Path f) throws IOException {
      File file = pathToFile(f);
      if (Files.isSymbolicLink(file.toPath())) {
        return super.getFileLinkStatus(f);  // Hadoop's own, with the link target
      }
      return status(f, file, false);
    }

    @Override
    public FileStatus[] listStatus(Path f) throws IOException {
      FileStatus[] listed = super.listStatus(f);  // lazy statuses: reading a permission forks
      if (listed == null) {
        return null;
      }
      List<FileStatus> out = new ArrayList<>(listed.length);
      for (FileStatus entry : listed) {
        try {
          out.add(getFileStatus(entry.getPath()));
        } catch (FileNotFoundException gone) {
          // deleted since it was listed, as Hadoop's own listing skips it
        }
      }
      return out.toArray(new FileStatus[0]);
    }

    @Override
    public FileChecksum getFileChecksum(Path f, long length) throws IOException {
      Configuration conf = getConf();
      File file = pathToFile(f);
      if (conf == null || !"MD5".equalsIgnoreCase(conf.getTrimmed(CHECKSUM_KEY, "")) || file.isDirectory()) {
        return super.getFileChecksum(f, length);
      }
      MessageDigest md5;
      try {
        md5 = MessageDigest.getInstance("MD5");
      } catch (NoSuchAlgorithmException e) {
        throw new IOException(e);
      }
      byte[] buffer = new byte[64 * 1024];
      long left = length;
      try (InputStream in = Files.newInputStream(file.toPath())) {
        int n;
        while (left > 0 && (n = in.read(buffer, 0, (int) Math.min(buffer.length, left))) > 0) {
          md5.update(buffer, 0, n);
          left -= n;
        }
      } catch (NoSuchFileException e) {
        throw new FileNotFoundException("File " + f + " does not exist");
      }
      return new Md5Checksum(md5.digest());
    }

    private FileStatus status(Path f, File file, boolean follow) throws IOException {
      PosixFileAttributes attributes;
      try {
        attributes = follow
            ? Files.readAttributes(file.toPath(), PosixFileAttributes.class)
            : Files.readAttributes(file.toPath(), PosixFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
      } catch (NoSuchFileException e) {
        throw new FileNotFoundException("File " + f + " does not exist");
      }
      boolean dir = attributes.isDirectory();
      return new FileStatus(
          dir ? 0 : attributes.size(),
          dir,
          1,
          dir ? 0 : getDefaultBlockSize(f),
          attributes.lastModifiedTime().toMillis(),
          attributes.lastAccessTime().toMillis(),
          fromPosix(attributes.permissions()),
          attributes.owner().getName(),
          attributes.group().getName(),
          f.makeQualified(getUri(), getWorkingDirectory()));
    }
  }

  /** The MD5 of a file's bytes, as {@code FileChecksum} (hex of {@link #getBytes()}: md5sum's value). */
  public static class Md5Checksum extends FileChecksum {
    private byte[] digest;

    public Md5Checksum() {
      this(new byte[16]);
    }

    public Md5Checksum(byte[] digest) {
      this.digest = digest;
    }

    @Override
    public String getAlgorithmName() {
      return "MD5";
    }

    @Override
    public int getLength() {
      return digest.length;
    }

    @Override
    public byte[] getBytes() {
      return digest.clone();
    }

    @Override
    public void write(DataOutput out) throws IOException {
      out.write(digest);
    }

    @Override
    public void readFields(DataInput in) throws IOException {
      digest = new byte[16];
      in.readFully(digest);
    }
  }
}
