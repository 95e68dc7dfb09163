import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.OptionalLong;
import java.util.UUID;
import java.util.stream.Stream;

import org.apache.spark.api.java.function.VoidFunction2;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.api.java.UDF1;
import org.apache.spark.sql.streaming.StreamingQuery;
import org.apache.spark.sql.streaming.Trigger;
import org.apache.spark.sql.types.DataTypes;

/**
 * The streaming scenarios' Structured Streaming job: batch b of the rate-micro-batch source is
 * exactly the values [b·R, (b+1)·R), so what a run with losses wrote can be checked against what
 * a run without gives (e2e/spark's stream checker).
 *
 * <p>Arguments: checkpoint dir, output dir, rows per batch R, batches N, milliseconds per batch,
 * and optionally "fail-once". The query triggers every given milliseconds and the first row of
 * each batch sleeps half of that, so that a driver can be lost both in a batch and between two.
 * It stops by itself once batch N-1 is committed, in the wait before batch N, so that a run ends
 * and every run on the same checkpoint writes the same batches (rows past batch N-1 are filtered
 * out, for the batches that a slow batch lets start before the stop). With "fail-once", the first
 * driver on a checkpoint (no marker file next to it yet) writes the marker and throws once batch
 * (N-1)/2 is committed, as a job with a bug that a retry gets past would, with the query still
 * running.
 *
 * <p>This class is the stateless query: a text file sink, one value a line, its log in the
 * output's _spark_metadata. DriversetStreamState runs the stateful one through the same code.
 * Each prints lines that the tests read, prefixed "driverset-stream: ":
 *
 * <pre>
 *   app APP-ID started: QUERY query, Spark VERSION
 *   resume batch=B            the first batch this driver runs (0: a new checkpoint)
 *   committed batch=B         each batch committed since, in order (with two drivers on one
 *                             checkpoint, by either: the loser's query fails, and so its job)
 *   failing once after batch=B, as asked
 *   done batches=N
 * </pre>
 */
public final class DriversetStream {
  static final String PREFIX = "driverset-stream: ";
  /** The stateful query's groups: value % GROUPS (e2e/spark's StateGroups). */
  static final int GROUPS = 3;

  private DriversetStream() {}

  public static void main(String[] args) throws Exception {
    run(args, false);
  }

  static void run(String[] args, boolean stateful) throws Exception {
    String checkpoint = args[0];
    String out = args[1];
    long rows = Long.parseLong(args[2]);
    long batches = Long.parseLong(args[3]);
    long millis = Long.parseLong(args[4]);
    boolean failOnce = args.length > 5 && args[5].equals("fail-once");
    // Two cores: the shuffle of the stateful query in two partitions (pinned in the checkpoint).
    SparkSession spark = SparkSession.builder().appName("driverset-stream")
        .config("spark.sql.shuffle.partitions", "2").getOrCreate();
    say("app " + spark.sparkContext().applicationId() + " started: "
        + (stateful ? "stateful" : "stateless") + " query, Spark " + spark.version());
    Path commits = Paths.get(checkpoint, "commits");
    long next = resumeBatch(Paths.get(checkpoint));
    say("resume batch=" + next);
    if (next >= batches) {
      // Killed after the last commit: starting the query would run batch N.
      say("done batches=" + batches);
      spark.stop();
      return;
    }

    spark.udf().register("driverset_slow", (UDF1<Long, Long>) v -> {
      if (v % rows == 0) {
        Thread.sleep(millis / 2);
      }
      return v;
    }, DataTypes.LongType);
    Dataset<Row> values = spark.readStream().format("rate-micro-batch")
        .option("rowsPerBatch", rows).option("numPartitions", 2).load()
        // A batch slower than the trigger lets batch N start before the stop: it gets no rows.
        .where("value < " + rows * batches)
        .selectExpr("driverset_slow(value) AS value");
    StreamingQuery query;
    if (stateful) {
      query = values.selectExpr("value % " + GROUPS + " AS key", "value").groupBy("key")
          .agg(org.apache.spark.sql.functions.count("value").as("count"),
              org.apache.spark.sql.functions.sum("value").as("sum"))
          .writeStream().outputMode("update").option("checkpointLocation", checkpoint)
          .trigger(Trigger.ProcessingTime(millis))
          .foreachBatch((VoidFunction2<Dataset<Row>, Long>) (df, id) -> {
            if (id < batches) {
              writeBatch(out, df, id);
            }
          })
          .start();
    } else {
      query = values.selectExpr("CAST(value AS STRING) AS value").writeStream().format("text")
          .option("checkpointLocation", checkpoint).option("path", out)
          .trigger(Trigger.ProcessingTime(millis)).start();
    }

    long failAt = (batches - 1) / 2;
    Path marker = Paths.get(checkpoint).toAbsolutePath().resolveSibling(
        Paths.get(checkpoint).getFileName() + ".failed-once");
    // The commit log, not the listener bus, says when a batch is done: its file is written
    // (atomically) after the sink's, and before the next batch is planned.
    while (next < batches) {
      // First, so that a query that failed (another driver on the checkpoint won a batch)
      // fails the job even when the other driver commits every batch.
      if (!query.isActive()) {
        query.awaitTermination(); // throws the query's failure
        throw new IllegalStateException(PREFIX + "the query stopped before batch " + next);
      }
      if (Files.exists(commits.resolve(Long.toString(next)))) {
        say("committed batch=" + next);
        if (failOnce && next >= failAt && !Files.exists(marker)) {
          Files.createFile(marker);
          say("failing once after batch=" + next + ", as asked");
          throw new IllegalStateException(PREFIX + "failing the first run after batch " + next + ", as asked");
        }
        next++;
        continue;
      }
      Thread.sleep(20);
    }
    // The commit file is there before the stream thread is done with the batch (its checksum,
    // the progress report): stopping at once interrupts it in the middle of that.
    for (int i = 0; i < 500 && query.isActive() && (query.lastProgress() == null || query.lastProgress().batchId() < batches - 1); i++) {
      Thread.sleep(20);
    }
    if (!query.isActive()) {
      query.awaitTermination();
    }
    query.stop();
    say("done batches=" + batches);
    spark.stop();
  }

  static void say(String line) {
    System.out.println(PREFIX + line);
    System.out.flush();
  }

  /**
   * The batch a query on checkpoint runs first, as MicroBatchExecution decides it: the latest
   * offsets/B is run again unless commits/B exists; 0 without offsets.
   */
  static long resumeBatch(Path checkpoint) throws IOException {
    OptionalLong last = latest(checkpoint.resolve("offsets"));
    if (last.isEmpty()) {
      return 0;
    }
    long b = last.getAsLong();
    return Files.exists(checkpoint.resolve("commits").resolve(Long.toString(b))) ? b + 1 : b;
  }

  private static OptionalLong latest(Path log) throws IOException {
    if (!Files.isDirectory(log)) {
      return OptionalLong.empty();
    }
    try (Stream<Path> files = Files.list(log)) {
      return files.map(p -> p.getFileName().toString()).filter(n -> n.matches("[0-9]+"))
          .mapToLong(Long::parseLong).max();
    }
  }

  /**
   * Writes the stateful query's batch id as out/batch-ID, one JSON object a line sorted by key,
   * replacing what an earlier attempt at the same batch wrote: foreachBatch gets a batch id
   * again when the batch is run again after a loss.
   */
  static void writeBatch(String out, Dataset<Row> df, long id) throws IOException {
    List<Row> rows = new ArrayList<>(df.collectAsList());
    rows.sort(Comparator.comparingLong(r -> r.getLong(0)));
    StringBuilder b = new StringBuilder();
    for (Row r : rows) {
      b.append(String.format("{\"key\":%d,\"count\":%d,\"sum\":%d}\n", r.getLong(0), r.getLong(1), r.getLong(2)));
    }
    Path dir = Paths.get(out);
    Files.createDirectories(dir);
    Path tmp = dir.resolve(".batch-" + id + "." + UUID.randomUUID() + ".tmp");
    Files.write(tmp, b.toString().getBytes(StandardCharsets.UTF_8));
    Files.move(tmp, dir.resolve("batch-" + id), StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
  }
}
