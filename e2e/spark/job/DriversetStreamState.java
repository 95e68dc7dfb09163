/**
 * DriversetStream's stateful query, with the same arguments and lines: a running count and sum
 * of the values per value % 3, output mode update, written by foreachBatch as out/batch-ID (one
 * JSON object a line: key, count, sum, sorted by key), each batch's file replacing an earlier
 * attempt's. Its state lives in the checkpoint's state/ dir: a restart that lost it, or that
 * applied a batch twice, writes totals that a run without losses does not.
 */
public final class DriversetStreamState {
  private DriversetStreamState() {}

  public static void main(String[] args) throws Exception {
    DriversetStream.run(args, true);
  }
}
